/* run_finish.c — the end of a run: every rank's summary (time breakdown, memory,
 * checkpoint time, PAPI counts) gathered to rank 0; the last step's events on one time
 * axis for --trace and --timeline; the trained weights gathered for --save; then rank
 * 0's closing tables and --report (run_report.c). */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if HAVE_CUDA
#include "backend/cuda/nccl_p2p.h"
#endif
#include "cmd/run.h"
#include "core/error.h"
#include "core/stop.h"
#include "core/util.h"
#include "io/model_io.h"
#include "io/tokenizer.h"
#include "net/clock_sync.h"
#include "prof/timeline.h"
#include "sched/schedule.h"

/* every rank's summary to rank 0 (r->all), and its PAPI counts (r->papi_all) */
static void gather_summaries(run *r)
{
    rank_summary *s = &r->mine;
    ppdl_mem_breakdown mb = {0};
    for (int c = 0; c < r->n_local; c++) { /* all the stages the rank holds */
        ppdl_mem_breakdown x = ppdl_runtime_memory(r->local[c].rt);
        mb.params += x.params;
        mb.optimizer += x.optimizer;
        mb.stash += x.stash;
        mb.buffers += x.buffers;
        mb.weight_keep += x.weight_keep;
        mb.allocations += x.allocations;
    }
    s->checkpoint_ms = 1e3 * r->ctl.ckpt_total_s;
    s->peak_bytes = (double)ppdl_be_peak(r->be);
    s->params_bytes = (double)mb.params;
    s->optimizer_bytes = (double)mb.optimizer;
    s->stash_bytes = (double)mb.stash;
    s->buffer_bytes = (double)mb.buffers;
    s->weight_keep_bytes = (double)mb.weight_keep;
    s->allocations = (double)mb.allocations;
    s->stage = r->local[0].stage;
    const int n = (int)(sizeof *s / sizeof(double));
    r->all = r->rank == 0 ? ppdl_xmalloc((size_t)r->n_ranks * sizeof *s) : NULL;
    PPDL_CHECK_MPI(MPI_Gather(s, n, MPI_DOUBLE, r->all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (!r->o.papi) return;
    /* PAPI: per kind, the real time and each event's count (as doubles: exact to 2^53) */
    enum { PAPI_FIELDS = PPDL_PAPI_N_KINDS * (1 + PPDL_PAPI_MAX_EVENTS) };
    double mine[PAPI_FIELDS] = {0};
    for (int k = 0; k < PPDL_PAPI_N_KINDS; k++) {
        mine[k * (1 + PPDL_PAPI_MAX_EVENTS)] = (double)r->papi.real_ns[k];
        for (int e = 0; e < r->papi.n_events; e++)
            mine[k * (1 + PPDL_PAPI_MAX_EVENTS) + 1 + e] = (double)r->papi.counts[k][e];
    }
    r->papi_all = r->rank == 0 ? ppdl_xmalloc(PAPI_FIELDS * (size_t)r->n_ranks * sizeof(double)) : NULL;
    PPDL_CHECK_MPI(MPI_Gather(mine, PAPI_FIELDS, MPI_DOUBLE, r->papi_all, PAPI_FIELDS, MPI_DOUBLE, 0, MPI_COMM_WORLD));
}

/* The last step's events of every rank on one time axis, written by rank 0. Each
 * rank's events are relative to its own step start, which differ (each began after
 * its own optimizer), and ranks on other nodes have other clocks: shift all onto rank
 * 0's clock, origin the earliest start (net/clock_sync.h). */
static void write_trace_and_timeline(run *r)
{
    const options *o = &r->o;
    int rank = r->rank, n_ranks = r->n_ranks;
    double clk[2];
    ppdl_clock_offset(MPI_COMM_WORLD, &clk[0], &clk[1]);
    ppdl_runtime *rts[PPDL_MAX_CHUNKS];
    int n_rts = run_runtimes(r, rts);
    double start = ppdl_runtime_step_start(rts[0]) - clk[0], first_start;
    PPDL_CHECK_MPI(MPI_Allreduce(&start, &first_start, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD));
    r->clock_all = rank == 0 ? ppdl_xmalloc(2 * (size_t)n_ranks * sizeof(double)) : NULL;
    PPDL_CHECK_MPI(MPI_Gather(clk, 2, MPI_DOUBLE, r->clock_all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    /* the events of every stage this rank holds (one, or several: their runtimes'
     * steps start together) */
    int n_ev = 0, n_c;
    for (int c = 0; c < n_rts; c++) n_ev += (ppdl_runtime_events(rts[c], &n_c), n_c);
    ppdl_event_rec *ev = ppdl_xmalloc((size_t)n_ev * sizeof *ev + 1);
    double shift_ms = 1e3 * (start - first_start);
    for (int c = 0, i = 0; c < n_rts; c++) {
        const ppdl_event_rec *ev_own = ppdl_runtime_events(rts[c], &n_c);
        for (int j = 0; j < n_c; j++, i++) {
            ev[i] = ev_own[j];
            ev[i].t0_ms += shift_ms;
            ev[i].t1_ms += shift_ms;
        }
    }
    int nbytes = n_ev * (int)sizeof *ev, *counts = NULL, *displs = NULL, total = 0;
    if (rank == 0) {
        counts = ppdl_xmalloc((size_t)n_ranks * sizeof(int));
        displs = ppdl_xmalloc((size_t)n_ranks * sizeof(int));
    }
    PPDL_CHECK_MPI(MPI_Gather(&nbytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int q = 0; q < n_ranks; q++) { displs[q] = total; total += counts[q]; }
    ppdl_event_rec *all_ev = rank == 0 ? ppdl_xmalloc((size_t)total + 1) : NULL;
    PPDL_CHECK_MPI(MPI_Gatherv(ev, nbytes, MPI_BYTE, all_ev, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        char err[PPDL_ERR_LEN] = "";
        int n_all = total / (int)sizeof *ev;
        char title[256];
        snprintf(title, sizeof title, "ppdl: %s, %d ranks, %s, M=%ld, last step", r->model.family, n_ranks,
                 ppdl_schedule_name(o->schedule), o->micro_batches);
        if (o->trace && ppdl_trace_write_json(o->trace, all_ev, n_all, n_ranks, err, sizeof err)) {
            fprintf(stderr, "ppdl: --trace %s\n", err);
            r->output_failed = 1;
        }
        if (o->timeline && ppdl_timeline_write_svg(o->timeline, all_ev, n_all, n_ranks, title, err, sizeof err)) {
            fprintf(stderr, "ppdl: --timeline %s\n", err);
            r->output_failed = 1;
        }
    }
    free(all_ev);
    free(ev);
    free(counts);
    free(displs);
}

/* The model's weights on rank 0 in the held layout (nn/model.h), from each stage's
 * first replica (the replicas hold the same weights): one gather per local stage c,
 * each rank sending its c-th stage, placed at that stage's first float. The held layout
 * has a tied weight once, as wte: the head's stage leaves its copy (its arena's last
 * floats) out when it does not hold layer 0. */
float *run_gather_weights(run *r)
{
    const ppdl_plan *plan = &r->plan;
    int N = r->n_ranks;
    size_t total = ppdl_model_param_count(&r->model);
    float *all_p = r->rank == 0 ? ppdl_xmalloc(total * sizeof(float) + 1) : NULL;
    int *counts = r->rank == 0 ? ppdl_xcalloc((size_t)N, sizeof(int)) : NULL;
    int *displs = r->rank == 0 ? ppdl_xcalloc((size_t)N, sizeof(int)) : NULL;
    for (int c = 0; c < r->n_local; c++) {
        run_local *l = &r->local[c];
        ppdl_stage *st = &l->st;
        ppdl_be_copy_d2h(r->be, l->host, st->params, st->n_params * sizeof(float));
        size_t copy = st->first > 0 && st->last == r->model.L - 1 ? ppdl_model_tied_floats(&r->model) : 0;
        int n_mine = r->replica == 0 ? (int)(st->n_params - copy) : 0;
        PPDL_CHECK_MPI(MPI_Gather(&n_mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (r->rank == 0) {
            /* stage s's floats start after those of every stage before it */
            size_t off = 0;
            for (int s = 0; s < plan->S; s++) {
                int q = plan->stages[s].rank, cq = 0;
                for (int t = 0; t < s; t++) cq += plan->stages[t].rank == q;
                if (cq == c) displs[q] = (int)off;
                for (int i = plan->stages[s].first; i <= plan->stages[s].last; i++)
                    for (int j = 0; j < r->model.layers[i].n_params; j++) off += r->model.layers[i].params[j].numel;
            }
        }
        PPDL_CHECK_MPI(MPI_Gatherv(l->host, n_mine, MPI_FLOAT, all_p, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD));
    }
    free(counts);
    free(displs);
    return all_p;
}

static void save_model(run *r)
{
    char err[PPDL_ERR_LEN] = "";
    float *all_p = run_gather_weights(r);
    int failed = 0;
    if (r->rank == 0) failed = ppdl_model_save(r->o.save, &r->model, all_p, err, sizeof err) != 0;
    free(all_p);
    agree_or_end_job(failed, err, 1);
}

void run_finish(run *r)
{
    const options *o = &r->o;
    run_log_close(r);
    gather_summaries(r);
    if (o->record_events) write_trace_and_timeline(r);
    if (o->save && r->ctl.stopped && r->rank == 0)
        printf("--save %s skipped: the run stopped before step %ld (its state is in %s)\n", o->save, o->steps,
               o->checkpoint);
    if (o->save && !r->ctl.stopped && !r->totals.nonfinite_exit) save_model(r);
    if (r->rank == 0) {
        run_print_closing(r);
        run_write_loss_plot(r);
        if (o->report) run_write_report(r);
        fflush(stdout);
    }
}

int run_exit_status(const run *r)
{
    /* stopped early with a checkpoint: the job script resubmits on this status */
    return r->totals.nonfinite_exit ? r->totals.nonfinite_exit
           : r->ctl.stopped         ? ppdl_exit_stopped(r->ctl.stopped, r->ctl.ckpt != NULL)
           : r->output_failed       ? 1
                                    : 0;
}

void run_free(run *r)
{
    if (r->log) fclose(r->log);
    json_decref(r->totals.steps_json);
    run_free_stage(r); /* the stage, its runtime, buffers and checkpoint writer */
    if (r->data.file > 0) ppdl_data_close(&r->data);
    if (r->val_data.file > 0) ppdl_data_close(&r->val_data);
    ppdl_tokenizer_free(r->tok);
    r->tok = NULL;
    json_decref(r->totals.evals_json);
    loss_history_free(&r->totals.history);
    if (r->plan.stages) ppdl_plan_free(&r->plan);
    if (r->have_costs) ppdl_costs_free(&r->costs);
    ppdl_model_free(&r->model);
    if (r->be) ppdl_backend_destroy(r->be);
    ppdl_comm_free(&r->comm);
    if (r->have_cluster) ppdl_cluster_model_free(&r->cluster);
    ppdl_hosts_free(&r->own_hosts);
    free(r->all);
    free(r->clock_all);
    free(r->n_options);
    free(r->papi_all);
    if (r->o.papi) ppdl_papi_finish(&r->papi);
    ppdl_ckpt_info_free(&r->ck);
}
