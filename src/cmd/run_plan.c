/* run_plan.c — the plan every rank runs: solved on rank 0 (--plan auto), uniform,
 * data parallel, or read from a file; then the --recompute override, the replicas'
 * communicators and each stage's memory predicted before anything is allocated. */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/planner.h"
#include "plan/simulate.h"
#include "sched/schedule.h"

/* ---- --plan auto: rank 0 solves, every rank gets the same plan ---- */

/* An upper bound of any stage's runtime buffers (runtime.h: ppdl_mem_prediction's
 * buffers) for micro-batches of b samples and at most `slots` in flight: the largest
 * layer's saved tensors, work space and activations, as if every boundary were the
 * largest one. */
static double runtime_buffer_bound(const ppdl_model *m, int b, int slots)
{
    double max_act = 0, max_saved = 0, max_work = 0;
    for (int l = 0; l < m->L; l++) {
        const ppdl_layer *ly = &m->layers[l];
        double in = (double)b * ly->in_bytes, out = (double)b * ly->out_bytes;
        max_act = in > max_act ? in : max_act;
        max_act = out > max_act ? out : max_act;
        double sv = 4.0 * ly->kind->saved_floats(ly, b, 0), wk = 4.0 * ly->kind->work_floats(ly, b);
        max_saved = sv > max_saved ? sv : max_saved;
        max_work = wk > max_work ? wk : max_work;
    }
    /* per slot: send + receive + gradient-send buffers; shared: scratch, 3 activations,
     * work; plus 256 bytes of allocator rounding per buffer */
    return slots * 3.0 * max_act + max_saved + 3.0 * max_act + max_work + 256.0 * (4.0 * slots + 16);
}

/* Rank 0 (which holds the probed cluster and the profiled costs) solves for the plan
 * with --method and simulates its step; the plan travels to every rank as JSON text
 * and is read back there like a plan file, so every rank runs exactly what rank 0
 * printed. Returns 0 on every rank, or -1 with the same message on every rank. */
static int plan_auto(const options *o, const ppdl_model *m, const ppdl_costs *costs, const ppdl_cluster *cl,
                     const int *n_options, ppdl_plan *plan, double *simulated_ms, char *err, size_t errlen)
{
    int rank, n_ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    char *text = NULL;
    long len = 0;
    double sim_ms = 0;
    if (rank == 0) {
        /* The cost model counts parameters, optimizer state and stashes; the runtime
         * also needs its buffers (messages in flight, recompute scratch, work space).
         * Plan with each rank's memory less a bound on those, so that a plan that fits
         * the model fits the device. */
        double reserve = runtime_buffer_bound(m, o->micro_batch_size,
                                              o->schedule == PPDL_SCHED_1F1B ? n_ranks : (int)o->micro_batches);
        double *mem = ppdl_xmalloc((size_t)cl->n * sizeof(double));
        for (int r = 0; r < cl->n; r++) mem[r] = cl->mem[r] > reserve ? cl->mem[r] - reserve : 1;
        ppdl_cluster_model cm;
        ppdl_cluster_model_wrap(&cm, cl->n, cl->bw, cl->lat, mem, cl->speed);
        cm.hosts = cl->hosts; /* the simulator shares a host's cores among its ranks */
        ppdl_plan p;
        memset(&p, 0, sizeof p);
        if (ppdl_plan_solve(costs, &cm, (int)o->micro_batches, o->schedule, o->method, &p, err, errlen) == 0) {
            ppdl_sim sim;
            char serr[PPDL_ERR_LEN];
            if (ppdl_simulate(costs, &cm, &p, (int)o->micro_batches, o->schedule, 0, &sim, serr, sizeof serr) == 0) {
                sim_ms = sim.step_ms;
                ppdl_sim_free(&sim);
            }
            text = ppdl_plan_to_json(&p);
            len = (long)strlen(text) + 1;
        } else {
            char msg[PPDL_ERR_LEN + 16];
            snprintf(msg, sizeof msg, "--plan auto: %s", err);
            text = strdup(msg);
            PPDL_CHECK(text, "out of host memory");
            len = -(long)strlen(text) - 1; /* a failure: the message travels instead */
        }
        ppdl_plan_free(&p);
        free(mem);
    }
    PPDL_CHECK_MPI(MPI_Bcast(&len, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    PPDL_CHECK_MPI(MPI_Bcast(&sim_ms, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    long n = len < 0 ? -len : len;
    if (rank != 0) text = ppdl_xmalloc((size_t)n);
    PPDL_CHECK_MPI(MPI_Bcast(text, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD));
    int rc;
    if (len < 0) {
        snprintf(err, errlen, "%s", text);
        rc = -1;
    } else {
        rc = ppdl_plan_parse(text, "--plan auto", m->L, n_ranks, n_options, plan, err, errlen);
        if (!rc) snprintf(plan->method, sizeof plan->method, "auto (%s)", o->method);
    }
    free(text);
    *simulated_ms = sim_ms;
    return rc;
}

void run_choose_plan(run *r)
{
    const options *o = &r->o;
    const ppdl_model *m = &r->model;
    char err[PPDL_ERR_LEN] = "";
    int rc;
    r->n_options = ppdl_xcalloc((size_t)m->L, sizeof(int));
    for (int l = 0; l < m->L; l++) r->n_options[l] = m->layers[l].kind->n_options;
    switch (o->plan_mode) {
    case PLAN_AUTO:
        rc = plan_auto(o, m, &r->costs, &r->cluster, r->n_options, &r->plan, &r->simulated_ms, err, sizeof err);
        break;
    case PLAN_UNIFORM: rc = ppdl_plan_uniform(m->L, r->n_ranks, &r->plan, err, sizeof err); break;
    case PLAN_DP: rc = ppdl_plan_data_parallel(m->L, r->n_ranks, &r->plan, err, sizeof err); break;
    default: rc = ppdl_plan_read(o->plan, m->L, r->n_ranks, r->n_options, &r->plan, err, sizeof err); break;
    }
    agree_or_end_job(rc != 0, err, 1);
    ppdl_plan *plan = &r->plan;
    if (o->recompute) {
        int option = !strcmp(o->recompute, "full")        ? PPDL_RC_FULL
                     : !strcmp(o->recompute, "selective") ? PPDL_RC_SELECTIVE
                                                          : PPDL_RC_NONE;
        ppdl_plan_set_recompute(plan, option, r->n_options);
    }
    r->stage = ppdl_plan_stage_of_rank(plan, r->rank, &r->replica);
    PPDL_CHECK(r->stage >= 0, "rank %d has no stage in the plan", r->rank);
    int max_replicas = 1, *layout = ppdl_xcalloc((size_t)plan->S, sizeof(int)); /* replicas per stage */
    for (int s = 0; s < plan->S; s++)
        if ((layout[s] = plan->stages[s].n_replicas) > max_replicas) max_replicas = plan->stages[s].n_replicas;
    snprintf(err, sizeof err, "--micro-batches %ld: a stage has %d replicas, each needs at least one "
                              "micro-batch (give at least %d)", o->micro_batches, max_replicas, max_replicas);
    agree_or_end_job(o->micro_batches < max_replicas, err, 2);
    /* the replicas of this rank's stage sum their gradients among themselves */
    PPDL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, r->stage, r->replica, &r->replica_comm));
    /* each stage's memory, predicted from the layers' sizes before anything is allocated */
    r->pred = ppdl_xcalloc((size_t)plan->S, sizeof *r->pred);
    for (int s = 0; s < plan->S; s++) {
        ppdl_op_list ol;
        const ppdl_plan_stage *p = &plan->stages[s];
        ppdl_schedule_build_replica(o->schedule, plan->S, (int)o->micro_batches, layout, s, 0, &ol);
        r->pred[s] = ppdl_runtime_predict_memory(m, p->first, p->last, o->micro_batch_size,
                                                 ppdl_schedule_max_in_flight(&ol), ppdl_runtime_inbox_size(&ol),
                                                 p->recompute, s == 0, s == plan->S - 1);
        plan->stages[s].mem_bytes = r->pred[s].cost_model;
        ppdl_op_list_free(&ol);
    }
    free(layout);
}
