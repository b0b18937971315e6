/* run_plan.c — the plan every rank runs: solved on rank 0 (--plan auto), uniform,
 * data parallel, or read from a file; then the --recompute override, this rank's
 * stages and their op lists, the replicas' communicators and each stage's memory
 * predicted before anything is allocated. */
#include "config.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/xfer.h"
#include "cmd/run.h"
#include "core/error.h"
#include "core/util.h"
#include "pipe/p2p_choice.h"
#include "plan/costmodel.h"
#include "plan/pass_times.h"
#include "plan/planner.h"
#include "plan/schedule_choice.h"
#include "plan/simulate.h"
#include "sched/schedule.h"

/* where the replicas cannot shard their optimizer state (decide_sharding): the weights
 * are gathered by MPI's all-gather in host memory, so not under --netem (the ring
 * carries the replicas' sums through the emulated links), with NCCL, or on a backend
 * whose memory is not MPI's; NULL where they can */
static const char *sharding_refused(const run *r)
{
    return r->o.netem ? "--netem" : r->p2p == PPDL_P2P_NCCL ? "--p2p nccl" : ppdl_xfer_staged(r->be) ? "this backend" : NULL;
}

/* ---- --plan auto: rank 0 solves, every rank gets the same plan ---- */

/* Rank 0 (which holds the probed cluster and the profiled costs) solves for the plan
 * with --method and simulates its step; the plan travels to every rank as JSON text
 * and is read back there like a plan file, so every rank runs exactly what rank 0
 * printed. With K > 1, where ranks share cores (or in a close call), the chosen plan's
 * runners-up (ppdl_plan_make's, up to K-1) travel the same way into tc, with their
 * simulated steps and labels on rank 0 (--plan-trials measures them all).
 * Returns 0 on every rank, or -1 with the same message on every rank. */
static int plan_auto(const options *o, const ppdl_model *m, const ppdl_costs *costs, const ppdl_cluster_model *cl,
                     const int *n_options, int can_chunk, int shard, int K, ppdl_plan *plan, double *simulated_ms,
                     ppdl_shared_choice *sc, trial_candidates *tc, char *why, size_t whylen, char *err,
                     size_t errlen)
{
    int rank, n_ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    char *text = NULL;
    long len = 0;
    double sim_ms = 0;
    int n_others = 0;
    memset(tc, 0, sizeof *tc);
    ppdl_plan_result res;
    memset(&res, 0, sizeof res);
    if (rank == 0) {
        /* The cost model counts parameters, optimizer state and stashes; the runtime
         * also needs its buffers. The planner plans with each rank's memory less a
         * bound on those (plan/reserve.h, the same as ppdl-plan's), so that a plan that
         * fits the model fits the device. The simulator shares a host's cores among its
         * ranks, and where a host has more ranks than cores the plan is chosen by it
         * (plan/shared_cores.h). */
        ppdl_solve_opts so;
        ppdl_solve_opts_default(&so);
        /* the chunked schedules: --virtual-stages v; auto: candidates where this run can
         * hold several stages per rank */
        so.chunks = o->virtual_stages;
        so.auto_chunked = can_chunk;
        /* the replicas' AdamW state sharded where the run will shard it (decide_sharding) */
        so.shard_optimizer = shard;
        /* the head stays whole: vocabulary parallelism has no runtime yet (plan/vocab.h) */
        ppdl_plan_request rq = {costs, cl, (int)o->micro_batches, o->schedule, o->method, &so, 1, K, PPDL_VOCAB_OFF};
        int rc = ppdl_plan_make(&rq, &res, err, errlen);
        if (rc == 0) {
            *sc = res.sc;
            if (res.is_auto) ppdl_schedule_choice_line(&res.choice, why, whylen);
            sim_ms = res.simulated_ms;
            n_others = res.n_others;
            memcpy(tc->label, res.others_label, sizeof res.others_label);
            text = ppdl_plan_to_json(&res.plan);
            len = (long)strlen(text) + 1;
        } else {
            /* --schedule auto: the reserve of the message is 1F1B's, the smallest */
            double reserve = res.reserve;
            char msg[2 * PPDL_ERR_LEN], rb[32], lim[PPDL_ERR_LEN / 2] = "the probe's";
            if (o->mem_limit) snprintf(lim, sizeof lim, "--mem-limit %s", o->mem_limit);
            /* a rank whose memory the reserve takes whole: that is the news, not the stages */
            int starved = -1;
            for (int q = 0; q < cl->N && starved < 0; q++)
                if (cl->mem[q] <= reserve) starved = q;
            char mb[32];
            if (starved >= 0)
                snprintf(msg, sizeof msg, "--plan auto: no plan fits in memory: rank %d has %s (%s), and the runtime's own buffers "
                         "(messages in flight, recompute scratch, work space) may take up to %s of it before any "
                         "layer's weights or activations; give --mem-limit well above %s (or fewer micro-batches, "
                         "which shrink the buffers)", starved, ppdl_fmt_bytes((size_t)cl->mem[starved], mb, sizeof mb),
                         lim, ppdl_fmt_bytes((size_t)reserve, rb, sizeof rb), rb);
            else
                snprintf(msg, sizeof msg, "--plan auto: %s (planned with each rank's memory, %s, less the runtime's "
                         "buffer reserve of %s: messages in flight, recompute scratch, work space)", err, lim,
                         ppdl_fmt_bytes((size_t)reserve, rb, sizeof rb));
            text = strdup(msg);
            PPDL_CHECK(text, "out of host memory");
            len = -(long)strlen(text) - 1; /* a failure: the message travels instead */
        }
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
    /* the runners-up, each as the plan above */
    PPDL_CHECK_MPI(MPI_Bcast(&n_others, 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int i = 0; i < n_others && rc == 0; i++) {
        char *t = rank == 0 ? ppdl_plan_to_json(&res.others[i]) : NULL;
        long tl = rank == 0 ? (long)strlen(t) + 1 : 0;
        PPDL_CHECK_MPI(MPI_Bcast(&tl, 1, MPI_LONG, 0, MPI_COMM_WORLD));
        if (rank != 0) t = ppdl_xmalloc((size_t)tl);
        PPDL_CHECK_MPI(MPI_Bcast(t, (int)tl, MPI_CHAR, 0, MPI_COMM_WORLD));
        char perr[PPDL_ERR_LEN];
        /* rank 0's own plans: a parse failure is this program's bug, on every rank alike */
        PPDL_CHECK(ppdl_plan_parse(t, "--plan-trials", m->L, n_ranks, n_options, &tc->plan[tc->n], perr,
                                   sizeof perr) == 0, "a runner-up plan does not read back: %s", perr);
        snprintf(tc->plan[tc->n].method, sizeof tc->plan[tc->n].method, "auto (%s)", o->method);
        tc->sim_ms[tc->n] = rank == 0 ? res.others_ms[i] : 0; /* label: rank 0's, as written */
        tc->n++;
        free(t);
    }
    ppdl_plan_result_free(&res);
    return rc;
}

/* --plan F1,F2,...: the first file is the run's plan, the others the trials' other
 * candidates, each labelled by its file's name; no simulated step (-1). Every rank
 * reads every file, as one plan file is read. Returns 0, -1 with the message of the
 * first file that does not read, or -2 (a usage error, status 2) where a file has a
 * stage with more replicas than --micro-batches: said here with the file's name, not
 * halfway through the trials. Nothing is left allocated on failure. */
/* a plan whose head is cut by vocabulary (plan JSON "vocab_parallel", ppdl-plan
 * --vocab-parallel): planned, not yet run */
static int refuse_vocab(const ppdl_plan *p, const char *file, char *err, size_t errlen)
{
    if (p->n_vocab == 0) return 0;
    return ppdl_errf(err, errlen, "--plan %s: vocabulary parallelism is planned but not yet run by ppdl (the plan's "
                                  "\"vocab_parallel\"); plan without it: ppdl-plan --vocab-parallel off", file);
}

static int read_plan_files(const options *o, const ppdl_model *m, int n_ranks, const int *n_options, ppdl_plan *plan,
                           trial_candidates *tc, char *err, size_t errlen)
{
    size_t len = strlen(o->plan) + 1;
    char *list = ppdl_xmalloc(len), *save = NULL;
    memcpy(list, o->plan, len);
    int rc = 0, k = 0;
    for (char *f = strtok_r(list, ",", &save); f && rc == 0; f = strtok_r(NULL, ",", &save), k++) {
        ppdl_plan *p = k == 0 ? plan : &tc->plan[tc->n];
        rc = ppdl_plan_read(f, m->L, n_ranks, n_options, p, err, errlen);
        if (rc == 0) rc = refuse_vocab(p, f, err, errlen);
        if (rc) break;
        const char *base = strrchr(f, '/') ? strrchr(f, '/') + 1 : f;
        snprintf(k == 0 ? tc->label0 : tc->label[tc->n], sizeof tc->label0, "%s", base);
        if (k > 0) tc->sim_ms[tc->n++] = -1;
        for (int s = 0; s < p->S; s++)
            if (p->stages[s].n_replicas > o->micro_batches) {
                ppdl_errf(err, errlen, "--plan: %s: stage %d has %d replicas, and --micro-batches %ld gives each "
                          "fewer than one micro-batch (give at least %d)", f, s, p->stages[s].n_replicas,
                          o->micro_batches, p->stages[s].n_replicas);
                rc = -2;
                break;
            }
    }
    if (rc == 0 && k != o->plan_files) /* an empty name: "a.json,,b.json" */
        rc = ppdl_errf(err, errlen, "--plan %s: expected %d plan files separated by commas", o->plan, o->plan_files);
    if (rc) {
        for (int i = 0; i < tc->n; i++) ppdl_plan_free(&tc->plan[i]);
        tc->n = 0;
        ppdl_plan_free(plan);
    }
    free(list);
    return rc;
}

/* A plan the planner did not make here (--plan FILE, uniform or dp): rank 0 predicts it
 * for this run where it knows this run's costs and network (--costs or a profile,
 * --cluster or a probe): the cost model's T and the simulator's step, chunked plans
 * (interleaved, zb-v) included. A plan file's own prediction was made for the costs,
 * cluster and micro-batch size of whoever wrote it: without this run's, no prediction
 * is shown as this run's; the header says why and what would give one. */
static void predict_plan(run *r)
{
    const options *o = &r->o;
    ppdl_plan *p = &r->plan;
    r->file_predicted_ms = p->predicted_iter_ms;
    p->predicted_iter_ms = p->bottleneck_ms = 0;
    if (r->rank != 0 || !r->have_costs || !r->have_cluster) return;
    if (!isfinite(ppdl_cost_apply(&r->costs, &r->cluster, (int)o->micro_batches, o->schedule, p))) {
        p->predicted_iter_ms = p->bottleneck_ms = 0;
        return;
    }
    ppdl_sim sim;
    char err[PPDL_ERR_LEN];
    if (ppdl_simulate(&r->costs, &r->cluster, p, (int)o->micro_batches, o->schedule, 0, &sim, err, sizeof err) == 0) {
        r->simulated_ms = sim.step_ms;
        ppdl_sim_free(&sim);
    }
    r->file_predicted_ms = -1;
}

/* --schedule auto with a plan that the planner did not make here: the schedule the
 * plan file records; 1f1b for one stage or replicated stages; else (rank 0, knowing the
 * costs and the network) the one of least T for this plan among those that can run its
 * layout, or refused. Every rank gets it. */
static void schedule_for_given_plan(run *r)
{
    char err[PPDL_ERR_LEN] = "";
    int k = -1;
    if (r->plan.schedule[0]) {
        k = ppdl_schedule_parse(r->plan.schedule);
        snprintf(r->schedule_why, sizeof r->schedule_why, "the schedule %s records", r->o.plan);
    } else if (r->plan.S == 1) {
        /* no choice to make: one stage runs every schedule alike (replicated or not) */
        k = PPDL_SCHED_1F1B;
        snprintf(r->schedule_why, sizeof r->schedule_why, "one stage: every schedule runs alike");
    } else if (r->rank == 0 && r->have_costs && r->have_cluster) {
        double T = 0;
        k = ppdl_schedule_for_plan(&r->costs, &r->cluster, (int)r->o.micro_batches, &r->plan, &T, err, sizeof err);
        if (k >= 0)
            snprintf(r->schedule_why, sizeof r->schedule_why, "the least T for this plan by the cost model, %.2f ms", T);
    } else if (r->rank == 0) {
        snprintf(err, sizeof err, "--schedule auto with --plan %s: choosing a schedule for a given plan needs its costs "
                 "and the network (--costs FILE or --costs-out, and --cluster FILE or --report), or a plan file that "
                 "records its \"schedule\" (ppdl-plan --schedule auto --json writes one); or name the schedule, "
                 "e.g. --schedule 1f1b", r->o.plan);
    }
    agree_or_end_job(r->rank == 0 && k < 0, err, 2);
    PPDL_CHECK_MPI(MPI_Bcast(&k, 1, MPI_INT, 0, MPI_COMM_WORLD));
    r->o.schedule = k;
}

/* A zero-bubble schedule (zb-v included) orders its passes by their times
 * (plan/pass_times.h): rank 0 computes them from the costs (and the cluster, where it
 * knows one) and every rank gets its numbers, so that all build the same lists. Without
 * costs (no --costs, and rank 0 did not profile) the lists are the unit play's. */
static void share_pass_times(run *r)
{
    const ppdl_plan *p = &r->plan;
    int S = p->S, timed = r->rank == 0 && r->have_costs;
    if (S < 2 || !ppdl_schedule_splits_backward(r->o.schedule)) return;
    PPDL_CHECK_MPI(MPI_Bcast(&timed, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (!timed) return;
    r->pass_ticks = ppdl_xcalloc(4 * (size_t)S, sizeof(long));
    if (r->rank == 0) {
        ppdl_pass_times_of_plan(&r->costs, r->have_cluster ? &r->cluster : NULL, p, r->pass_ticks);
    }
    PPDL_CHECK_MPI(MPI_Bcast(r->pass_ticks, 4 * S, MPI_LONG, 0, MPI_COMM_WORLD));
    r->pass_times = ppdl_pass_times_view(r->pass_ticks, S);
    /* every rank decides alike (the same numbers): orders the checker refuses, or that
     * hold more than the unit play's (the planner's count), are not run, the unit
     * play's are */
    char why[PPDL_ERR_LEN];
    int ok = ppdl_pass_times_accepted(p, r->o.schedule, (int)r->o.micro_batches, &r->pass_times, why, sizeof why);
    if (!ok) {
        if (r->rank == 0) printf("note: the timed orders of %s were refused (%s); the unit play's run\n",
                                 ppdl_schedule_name(r->o.schedule), why);
        free(r->pass_ticks);
        r->pass_ticks = NULL;
    }
}

/* ---- a chunked plan: every rank holds v virtual stages (--schedule interleaved or
 * zb-v; plan/plan.h: or k copies of such a pipeline, each stage with k replicas), each
 * with its own op list from the rank's schedule (sched/schedule.h ppdl_rank_schedule) ---- */

/* the ranks of a stage's replicas in replica order (a stage a planner built without
 * replicas names its one rank only) */
const int *run_ranks_of(const ppdl_plan_stage *ps)
{
    PPDL_CHECK(ps->n_replicas <= 1 || ps->ranks, "a stage of %d replicas names no ranks", ps->n_replicas);
    return ps->n_replicas > 0 && ps->ranks ? ps->ranks : &ps->rank;
}

/* What the first version leaves out (NULL: nothing here): each of these keeps a
 * per-stage rule the several stages of a rank would break. */
static const char *chunks_unsupported(const run *r)
{
    return r->p2p == PPDL_P2P_NCCL ? "--p2p nccl (the stages' messages go through MPI)" : NULL;
}

static int can_hold_chunks(const run *r) { return chunks_unsupported(r) == NULL; }

/* ... refused before anything runs, with the reason; where --p2p auto took NCCL, the
 * messages go through MPI instead (every rank alike: the plan is the same on all) */
static void refuse_unsupported(run *r)
{
    const options *o = &r->o;
    char err[PPDL_ERR_LEN] = "";
    if (r->p2p == PPDL_P2P_NCCL && o->p2p == PPDL_P2P_AUTO) {
        r->p2p = PPDL_P2P_MPI;
        snprintf(r->p2p_why, sizeof r->p2p_why, "--p2p auto: several stages per rank (--schedule %s) send through MPI",
                 ppdl_schedule_name(o->schedule));
    }
    const char *what = chunks_unsupported(r);
    if (what)
        snprintf(err, sizeof err, "--schedule %s (several stages per rank) does not run with %s yet",
                 ppdl_schedule_name(o->schedule), what);
    agree_or_end_job(what != NULL, err, 2);
}

/* micro-batches of copy q of k: j < M with j mod k == q (copy 0 has the most) */
static int copy_micro_batches(int M, int k, int q) { return q < M ? (M - q + k - 1) / k : 0; }

/* every position's lists of copy q (M_q micro-batches), built and proven; 0, or -1
 * with the reason in err */
static int build_copy(run *r, int N, int v, int Mq, ppdl_rank_schedule *all, char *err, size_t errlen)
{
    const options *o = &r->o;
    /* zb-v: ordered by the passes' times where rank 0 knew them (share_pass_times) */
    ppdl_schedule_spec sp = {o->schedule, v * N, Mq, v, NULL, r->pass_ticks ? &r->pass_times : NULL};
    if (ppdl_schedule_make_all(&sp, all, err, errlen)) return -1;
    if (ppdl_schedule_check_ranks(N, v, Mq, all, err, errlen)) {
        char why[PPDL_ERR_LEN];
        snprintf(why, sizeof why, "schedule %s with %d ranks, %d stages each, %d micro-batches failed its check: %s",
                 ppdl_schedule_name(o->schedule), N, v, Mq, err);
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    return 0;
}

/* copy q runs micro-batches q, q+k, ..: its lists' micro-batch i is q + i*k */
static void map_copy_micro_batches(ppdl_rank_schedule *rs, int k, int q)
{
    for (int c = 0; c < rs->n_stages; c++)
        for (int i = 0; i < rs->lists[c].n; i++)
            if (rs->lists[c].ops[i].mb >= 0) rs->lists[c].ops[i].mb = q + rs->lists[c].ops[i].mb * k;
}

int run_stage_replicas(const run *r, int s)
{
    return ppdl_plan_chunks(&r->plan) > 1 ? ppdl_plan_chunk_replicas(&r->plan) : r->plan.stages[s].n_replicas;
}

const double *run_slice_weights(const run *r, int s)
{
    return ppdl_plan_chunks(&r->plan) > 1 ? NULL : r->plan.stages[s].slice_weights;
}

/* --shard-optimizer (nn/stage.h): on wherever a stage has replicas, unless off or
 * refused (sharding_refused). Every rank decides the same (the plan, the options, the
 * backend's kind). */
static void decide_sharding(run *r)
{
    int k = 1;
    for (int s = 0; s < r->plan.S; s++)
        if (run_stage_replicas(r, s) > k) k = run_stage_replicas(r, s);
    const char *why = sharding_refused(r);
    char err[PPDL_ERR_LEN] = "";
    snprintf(err, sizeof err, "--shard-optimizer on: not with %s (the replicas gather the weights with MPI, in host "
             "memory)", why ? why : "");
    agree_or_end_job(r->o.shard_optimizer == 1 && why != NULL && k > 1, err, 2);
    r->shard_optimizer = k > 1 && r->o.shard_optimizer != 0 && why == NULL;
}

/* With the optimizer state sharded, a stage's AdamW moments are replica `replica`'s
 * slice of them (ppdl_optimizer_slices, the runtime's own cut): the prediction of the
 * whole moments less the rest */
static void shard_prediction(const run *r, int s, int replica, ppdl_mem_prediction *p)
{
    const ppdl_plan_stage *ps = &r->plan.stages[s];
    int k = run_stage_replicas(r, s);
    if (!r->shard_optimizer || k <= 1) return;
    size_t *b = ppdl_xmalloc(((size_t)k + 1) * sizeof *b);
    ppdl_optimizer_slices(&r->model, ps->first, ps->last, k, run_slice_weights(r, s), b);
    double rest = 2.0 * sizeof(float) * (double)(b[k] - (b[replica + 1] - b[replica]));
    free(b);
    p->params_optimizer -= rest;
    p->cost_model -= rest;
    p->total -= rest;
}

double run_slice_extra_bytes(const run *r, int s, int replica)
{
    int k = run_stage_replicas(r, s);
    if (!r->shard_optimizer || k <= 1 || replica <= 0 || replica >= k) return 0;
    const ppdl_plan_stage *ps = &r->plan.stages[s];
    size_t *b = ppdl_xmalloc(((size_t)k + 1) * sizeof *b);
    ppdl_optimizer_slices(&r->model, ps->first, ps->last, k, run_slice_weights(r, s), b);
    double d = 2.0 * sizeof(float) * ((double)(b[replica + 1] - b[replica]) - (double)(b[1] - b[0]));
    free(b);
    return d;
}

/* stage s's memory on its replica `replica`, predicted from its op list */
static ppdl_mem_prediction predict_stage(const run *r, int s, int replica, const ppdl_op_list *ol)
{
    const ppdl_plan_stage *ps = &r->plan.stages[s];
    ppdl_mem_prediction p = ppdl_runtime_predict_memory(&r->model, ps->first, ps->last, r->o.micro_batch_size,
                                                        ppdl_schedule_max_in_flight(ol), ppdl_runtime_inbox_size(ol),
                                                        ppdl_schedule_max_pending_weight(ol), ps->recompute, s == 0,
                                                        s == r->plan.S - 1, r->o.precision == PPDL_PREC_BF16);
    shard_prediction(r, s, replica, &p);
    return p;
}

/* A chunked plan: this rank's stages (r->local) and its lists and order (r->rs), every
 * rank's schedule built and proven (each rank checks all of them, as for the other
 * schedules), and each stage's memory predicted from its own list. A plan of k copies
 * (plan/plan.h) runs the chunked schedule on each copy's N ranks with its share of the
 * micro-batches. */
static void adopt_virtual_stages(run *r)
{
    const options *o = &r->o;
    const ppdl_plan *plan = &r->plan;
    int v = ppdl_plan_chunks(plan), k = ppdl_plan_chunk_replicas(plan), N = r->n_ranks / k, M = (int)o->micro_batches;
    int q = r->replica;
    char err[PPDL_ERR_LEN] = "";
    const char *from = o->plan_mode == PLAN_FILE ? o->plan : "the plan";
    snprintf(err, sizeof err, "%s holds %d stages per rank: it runs with --schedule interleaved or zb-v, not %s",
             from, v, ppdl_schedule_name(o->schedule));
    agree_or_end_job(!ppdl_schedule_chunked(o->schedule), err, 2);
    snprintf(err, sizeof err, "the plan uses %d of the %d ranks: a plan with several stages per rank must use "
             "every rank", ppdl_plan_ranks_used(plan), r->n_ranks);
    agree_or_end_job(ppdl_plan_ranks_used(plan) != r->n_ranks, err, 2);
    PPDL_CHECK(v <= PPDL_MAX_CHUNKS, "%d stages per rank: at most %d", v, PPDL_MAX_CHUNKS);
    /* the schedule's order (whatever the ranks' numbers): round-robin, or the V */
    int v_order = o->schedule == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN;
    snprintf(err, sizeof err, "%s: its stages do not follow --schedule %s's order (%s)", from,
             ppdl_schedule_name(o->schedule), v_order == PPDL_CHUNKS_V ? "stage 2N-1-s on the rank of stage s"
                                                                       : "stage s on the rank of stage s mod N");
    agree_or_end_job(plan->S != v * N || !ppdl_plan_chunk_order_is(plan, v_order), err, 2);
    /* this rank's position in the schedule: the stage among the first N it runs (in its copy) */
    int pos = 0;
    while (pos < N && run_ranks_of(&plan->stages[pos])[q] != r->rank) pos++;
    PPDL_CHECK(pos < N, "rank %d runs none of the plan's first %d stages", r->rank, N);
    refuse_unsupported(r);
    /* every copy's lists are proven (they differ in their micro-batch counts only);
     * the memory is predicted from copy 0's, which holds the most, and this rank's from
     * its own copy's */
    ppdl_rank_schedule *copy0 = ppdl_xcalloc((size_t)N, sizeof *copy0);
    ppdl_rank_schedule *mine = q == 0 ? copy0 : ppdl_xcalloc((size_t)N, sizeof *mine);
    ppdl_rank_schedule *other = ppdl_xcalloc((size_t)N, sizeof *other);
    int bad = 0;
    for (int c = 0; c < k && !bad; c++) {
        ppdl_rank_schedule *to = c == 0 ? copy0 : c == q ? mine : other;
        bad = build_copy(r, N, v, copy_micro_batches(M, k, c), to, err, sizeof err) != 0;
        for (int p = 0; p < N && to == other; p++) ppdl_rank_schedule_free(&other[p]);
    }
    free(other);
    agree_or_end_job(bad, err, 2);
    int stages[PPDL_MAX_CHUNKS];
    r->n_local = ppdl_plan_stages_of_rank(plan, r->rank, stages, PPDL_MAX_CHUNKS);
    PPDL_CHECK(r->n_local == v && stages[0] == r->local[0].stage, "rank %d holds %d stages of the plan, expected %d",
               r->rank, r->n_local, v);
    for (int c = 1; c < r->n_local; c++) r->local[c].stage = stages[c];
    for (int p = 0; p < N; p++)
        for (int j = 0; j < copy0[p].n_stages; j++) {
            int s = copy0[p].stages[j];
            r->pred[s] = predict_stage(r, s, 0, &copy0[p].lists[j]);
            r->plan.stages[s].mem_bytes = r->pred[s].cost_model;
        }
    /* this rank's: the sum over its stages */
    memset(&r->pred_own, 0, sizeof r->pred_own);
    for (int j = 0; j < mine[pos].n_stages; j++) {
        ppdl_mem_prediction pr = predict_stage(r, mine[pos].stages[j], r->replica, &mine[pos].lists[j]);
        r->pred_own.params_optimizer += pr.params_optimizer;
        r->pred_own.stash += pr.stash;
        r->pred_own.weight_keep += pr.weight_keep;
        r->pred_own.buffers += pr.buffers;
        r->pred_own.cost_model += pr.cost_model;
        r->pred_own.total += pr.total;
    }
    r->pred_own_full = r->pred_own; /* no advice to recompute: the limit is the plan's */
    r->rs = mine[pos];
    map_copy_micro_batches(&r->rs, k, q);
    for (int p = 0; p < N; p++) {
        if (p != pos) ppdl_rank_schedule_free(&mine[p]);
        if (q != 0) ppdl_rank_schedule_free(&copy0[p]);
    }
    if (q != 0) free(copy0);
    free(mine);
}


void run_choose_plan(run *r)
{
    const options *o = &r->o;
    const ppdl_model *m = &r->model;
    char err[PPDL_ERR_LEN] = "";
    int rc;
    r->n_options = ppdl_xcalloc((size_t)m->L, sizeof(int));
    for (int l = 0; l < m->L; l++) r->n_options[l] = m->layers[l].kind->n_options;
    double t0 = ppdl_now_s();
    r->solve_s = r->trials_s = -1;
    r->trial_chosen = -1;
    trial_candidates tc;
    memset(&tc, 0, sizeof tc);
    switch (o->plan_mode) {
    case PLAN_AUTO:
        rc = plan_auto(o, m, &r->costs, &r->cluster, r->n_options, can_hold_chunks(r),
                       o->shard_optimizer != 0 && !sharding_refused(r), run_trial_count(r),
                       &r->plan, &r->simulated_ms, &r->shared, &tc, r->schedule_why, sizeof r->schedule_why, err,
                       sizeof err);
        r->solve_s = ppdl_now_s() - t0;
        break;
    case PLAN_UNIFORM:
        /* interleaved, zb-v: v stages per rank, round-robin or in a V */
        /* --replicas k: k copies of it, on N/k ranks each */
        rc = ppdl_plan_uniform_replicated(m->L, r->n_ranks, ppdl_schedule_chunked(o->schedule) ? o->virtual_stages : 1,
                                          o->schedule == PPDL_SCHED_ZB_V, o->copies, &r->plan, err, sizeof err);
        break;
    case PLAN_DP: rc = ppdl_plan_data_parallel(m->L, r->n_ranks, &r->plan, err, sizeof err); break;
    default:
        rc = o->plan_files ? read_plan_files(o, m, r->n_ranks, r->n_options, &r->plan, &tc, err, sizeof err)
                           : ppdl_plan_read(o->plan, m->L, r->n_ranks, r->n_options, &r->plan, err, sizeof err);
        if (rc == 0 && !o->plan_files) rc = refuse_vocab(&r->plan, o->plan, err, sizeof err);
        break;
    }
    /* a plan that cannot fit the memory limits is the memory-limit status (3), as a stage
     * over its limit is; any other failure is a file's or the planner's (1) */
    agree_or_end_job(rc != 0, err, rc == -2 ? 2 : strstr(err, "no plan fits") ? 3 : 1);
    agree_or_end_job(o->plan_files && r->p2p == PPDL_P2P_NCCL,
                     "--plan F1,F2,...: the trials measure plan files with MPI's messages, not --p2p nccl", 2);
    if (o->schedule == PPDL_SCHED_AUTO) {
        if (o->plan_mode == PLAN_AUTO) r->o.schedule = ppdl_schedule_parse(r->plan.schedule); /* rank 0's choice */
        else schedule_for_given_plan(r);
        PPDL_CHECK(r->o.schedule >= 0 && r->o.schedule < PPDL_SCHED_N_KINDS, "--schedule auto: no schedule chosen "
                   "(the plan says \"%s\")", r->plan.schedule);
    }
    /* where ranks share cores, or a close call: the plan and its runners-up tried for a
     * few steps each (run_trials.c) */
    if (tc.n) run_plan_trials(r, &tc);
    ppdl_plan *plan = &r->plan;
    run_apply_recompute(r);
    if (o->plan_mode != PLAN_AUTO) predict_plan(r); /* the plan that runs, --recompute included */
    /* --plan-out: the plan that runs, for --plan FILE another time */
    rc = r->rank == 0 && o->plan_out ? ppdl_plan_write(o->plan_out, plan, err, sizeof err) : 0;
    agree_or_end_job(rc != 0, err, 1);
    run_adopt_plan(r);
}

void run_apply_recompute(run *r)
{
    const options *o = &r->o;
    if (!o->recompute) return;
    int option = !strcmp(o->recompute, "full")        ? PPDL_RC_FULL
                 : !strcmp(o->recompute, "selective") ? PPDL_RC_SELECTIVE
                                                      : PPDL_RC_NONE;
    ppdl_plan_set_recompute(&r->plan, option, r->n_options);
}

/* A plan of one stage per rank (layout: each stage's replicas): every stage's memory
 * predicted from its first replica's list, this rank's from its own replica's (and
 * with full recompute, for the advice when it does not fit), and that list kept as the
 * rank's one list */
static void adopt_one_stage(run *r, const int *layout)
{
    const options *o = &r->o;
    const ppdl_model *m = &r->model;
    ppdl_plan *plan = &r->plan;
    int stage = r->local[0].stage;
    ppdl_schedule_spec sp = {o->schedule, plan->S, (int)o->micro_batches, 1, layout,
                             r->pass_ticks ? &r->pass_times : NULL};
    char err[PPDL_ERR_LEN];
    for (int s = 0; s < plan->S; s++) {
        ppdl_op_list ol;
        ppdl_rank_schedule rs;
        const ppdl_plan_stage *p = &plan->stages[s];
        PPDL_CHECK(ppdl_schedule_make(&sp, ppdl_schedule_device(&sp, s, 0), &rs, err, sizeof err) == 0, "%s", err);
        ol = ppdl_rank_schedule_take(&rs, 0);
        r->pred[s] = ppdl_runtime_predict_memory(m, p->first, p->last, o->micro_batch_size,
                                                 ppdl_schedule_max_in_flight(&ol), ppdl_runtime_inbox_size(&ol),
                                                 ppdl_schedule_max_pending_weight(&ol), p->recompute, s == 0,
                                                 s == plan->S - 1, o->precision == PPDL_PREC_BF16);
        shard_prediction(r, s, 0, &r->pred[s]);
        plan->stages[s].mem_bytes = r->pred[s].cost_model;
        ppdl_op_list_free(&ol);
        if (s != stage) continue;
        /* this rank's own replica (replica 0 holds the most micro-batches) */
        PPDL_CHECK(ppdl_schedule_make(&sp, ppdl_schedule_device(&sp, s, r->replica), &rs, err, sizeof err) == 0, "%s",
                   err);
        ol = ppdl_rank_schedule_take(&rs, 0);
        r->pred_own = ppdl_runtime_predict_memory(m, p->first, p->last, o->micro_batch_size,
                                                  ppdl_schedule_max_in_flight(&ol), ppdl_runtime_inbox_size(&ol),
                                                  ppdl_schedule_max_pending_weight(&ol), p->recompute, s == 0,
                                                  s == plan->S - 1, o->precision == PPDL_PREC_BF16);
        shard_prediction(r, s, r->replica, &r->pred_own);
        /* ... and with full recompute, for the advice when it does not fit */
        int *full = ppdl_xcalloc((size_t)(p->last - p->first + 1), sizeof(int));
        for (int l = p->first; l <= p->last; l++) full[l - p->first] = r->n_options[l] > 1 ? PPDL_RC_FULL : 0;
        r->pred_own_full = ppdl_runtime_predict_memory(m, p->first, p->last, o->micro_batch_size,
                                                       ppdl_schedule_max_in_flight(&ol), ppdl_runtime_inbox_size(&ol),
                                                       ppdl_schedule_max_pending_weight(&ol), full, s == 0,
                                                       s == plan->S - 1, o->precision == PPDL_PREC_BF16);
        shard_prediction(r, s, r->replica, &r->pred_own_full);
        free(full);
        /* the rank's one list, run in its own order */
        r->rs = (ppdl_rank_schedule){.rank = r->rank, .n_stages = 1, .n = ol.n};
        r->rs.stages = ppdl_xmalloc(sizeof *r->rs.stages);
        r->rs.stages[0] = s;
        r->rs.lists = ppdl_xmalloc(sizeof *r->rs.lists);
        r->rs.lists[0] = ol;
        r->rs.order = ppdl_xcalloc((size_t)(ol.n > 0 ? ol.n : 1), sizeof *r->rs.order);
    }
}

void run_adopt_plan(run *r)
{
    const options *o = &r->o;
    ppdl_plan *plan = &r->plan;
    char err[PPDL_ERR_LEN] = "";
    int stage = ppdl_plan_stage_of_rank(plan, r->rank, &r->replica);
    PPDL_CHECK(stage >= 0, "rank %d has no stage in the plan", r->rank);
    r->n_local = 1;
    r->local[0].stage = stage;
    int chunked = ppdl_plan_chunks(plan) > 1;
    snprintf(err, sizeof err, "--schedule %s runs several stages per rank: its plan is --plan auto or uniform "
             "(--virtual-stages v) or a plan file with several stages per rank", ppdl_schedule_name(o->schedule));
    agree_or_end_job(!chunked && ppdl_schedule_chunked(o->schedule), err, 2);
    int max_replicas = 1, *layout = ppdl_xcalloc((size_t)plan->S, sizeof(int)); /* replicas per stage */
    for (int s = 0; s < plan->S; s++)
        if ((layout[s] = plan->stages[s].n_replicas) > max_replicas) max_replicas = plan->stages[s].n_replicas;
    snprintf(err, sizeof err, "--micro-batches %ld: a stage has %d replicas, each needs at least one "
                              "micro-batch (give at least %d)", o->micro_batches, max_replicas, max_replicas);
    agree_or_end_job(o->micro_batches < max_replicas, err, 2);
    /* every schedule runs every layout today; the check stays for a future one that does not */
    int unsupported = !chunked && ppdl_schedule_supports(o->schedule, plan->S, layout, err, sizeof err);
    agree_or_end_job(unsupported, err, 2);
    /* after the checks above (the lists' builders stop on what they refuse) */
    share_pass_times(r);
    /* each stage's memory, predicted from the layers' sizes before anything is allocated */
    r->pred = ppdl_xcalloc((size_t)plan->S, sizeof *r->pred);
    decide_sharding(r);
    if (chunked)
        adopt_virtual_stages(r);
    else
        adopt_one_stage(r, layout);
    free(layout);
    /* the replicas of each of this rank's stages sum their gradients among themselves, on
     * a communicator per stage (collective over the job: every rank holds as many) */
    for (int c = 0; c < r->n_local; c++)
        PPDL_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, r->local[c].stage, r->replica, &r->local[c].replica_comm));
}
