/* run_trials.c — --plan-trials: where a host's ranks outnumber its cores (or, with a
 * core per rank, where the best plan of another family simulates within 10% of the
 * plan: a close call, up to 8 ranks), the plan that runs is the fastest of the
 * planner's choice and a few others (other families first: data parallel, pipeline,
 * replicated stages; plan/shared_cores.h), each run for a few steps.
 *
 * Why: on shared cores the simulator is the planner's objective, and it leaves out what
 * the operating system does there (time slices, a woken rank waiting for a core, caches
 * shared by the ranks computing at once): its ranking of the top candidates is a guess
 * within its error, and a wrong guess costs every step (perf/bench-default-plan).
 *
 * How: --plan auto asks the planner for the chosen plan's runners-up (run_plan.c); every
 * rank builds its stage of each candidate in turn exactly as for training, runs
 * TRIAL_STEPS steps and frees it all, --trial-passes times over (default 2: A B C A B C).
 * A trial's step is the slowest rank's median over the steps after the first, a
 * candidate's the least of its trials' (shared cores' noise only adds time); the least
 * wins (ties: the simulator's order). --plan F1,F2,...: the candidates are the files,
 * the first the run's plan, all tried whatever they cost. The training then starts
 * from the files again, so the trials change no bit of it.
 *
 * When: the default (-1) tries 4 candidates, or the first k >= 2 whose trials fit a
 * budget (the larger of 1 s and 5% of the run's predicted time; the trials' time guessed
 * from twice the simulated steps, as the simulator falls short on shared cores);
 * --plan-trials K tries K whatever they cost; 0 none. Never with a chunked or an
 * automatic schedule, nor with NCCL messages. */
#include "config.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/util.h"
#include "net/comm.h"
#include "pipe/p2p_choice.h"

#define TRIAL_STEPS 6          /* a trial: the first warms up, the median of the other 5 */
#define DEFAULT_CANDIDATES 4

int run_trial_count(const run *r)
{
    const options *o = &r->o;
    if (o->plan_mode != PLAN_AUTO || o->plan_trials == 0 || o->schedule == PPDL_SCHED_AUTO ||
        ppdl_schedule_chunked(o->schedule) || r->p2p == PPDL_P2P_NCCL)
        return 1;
    return o->plan_trials < 0 ? DEFAULT_CANDIDATES : o->plan_trials;
}

/* MPI_Allreduce in place over the job, napping while it waits (run_agree.c says why) */
static void allreduce_idle(void *buf, MPI_Datatype type, MPI_Op op)
{
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, 1, type, op, MPI_COMM_WORLD, &req));
    ppdl_comm_waitall_idle(1, &req);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The plan in r->plan built, run TRIAL_STEPS steps and freed: the slowest rank's median
 * step after the first, in ms (every rank gets it), or INFINITY where a stage does not
 * fit its --mem-limit (no rank builds then). */
static double measure(run *r)
{
    run_apply_recompute(r);
    run_adopt_plan(r);
    size_t limit = 0;
    char err[PPDL_ERR_LEN];
    int fits = run_options_mem_limit(r->o.mem_limit, r->rank, &limit, err, sizeof err) == 0 &&
               (limit == 0 || r->pred_own.total <= (double)limit);
    allreduce_idle(&fits, MPI_INT, MPI_MIN);
    double med = INFINITY;
    if (fits) {
        run_build_stage(r);
        double ms[TRIAL_STEPS];
        for (int k = 0; k < TRIAL_STEPS; k++) {
            long step = r->start_step + k;
            ppdl_step_stats stats;
            double t0 = ppdl_now_s();
            run_step(r, step, &stats);
            ms[k] = 1e3 * (ppdl_now_s() - t0);
        }
        qsort(ms + 1, TRIAL_STEPS - 1, sizeof(double), cmp_double);
        med = TRIAL_STEPS % 2 ? 0.5 * (ms[TRIAL_STEPS / 2] + ms[TRIAL_STEPS / 2 + 1]) : ms[TRIAL_STEPS / 2];
        allreduce_idle(&med, MPI_DOUBLE, MPI_MAX);
    }
    run_free_stage(r);
    return med;
}

/* rank 0: how many of the n candidates the default's trials measure within its budget:
 * the first k (the planner's order: its choice, the other families, other cuts) for
 * the largest k whose trials fit, n where all do, or 0 where not even 2 do (why in
 * r->trials_note; a shortened list is said there too) */
static int within_budget(run *r, int n, const double *sim_ms)
{
    double budget_s = fmax(1.0, 0.05 * 2 * sim_ms[0] / 1e3 * (double)(r->o.steps - r->start_step));
    double worst = 0, est_s = 0; /* the estimate for the first i + 1, at the end all n */
    int k = 0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, sim_ms[i]);
        est_s = 2 * (i + 1) * r->o.trial_passes * TRIAL_STEPS * worst / 1e3;
        if (est_s <= budget_s) k = i + 1;
    }
    if (k >= 2 && k < n)
        snprintf(r->trials_note, sizeof r->trials_note, "plan trials: the first %d of %d candidates within the budget "
                 "of %.1f s (all %d: ~%.1f s; --plan-trials %d runs them anyway)", k, n, budget_s, n, est_s, n);
    if (k >= 2) return k;
    snprintf(r->trials_note, sizeof r->trials_note, "plan trials skipped: %d candidates x %d x %d steps would take "
             "~%.1f s, over the budget of %.1f s (--plan-trials %d runs them anyway)", n, r->o.trial_passes,
             TRIAL_STEPS, est_s, budget_s, n);
    return 0;
}

void run_plan_trials(run *r, trial_candidates *tc)
{
    int n = tc->n + 1;
    ppdl_plan *cand = ppdl_xcalloc((size_t)n, sizeof *cand);
    double *sim = ppdl_xcalloc((size_t)n, sizeof *sim);
    cand[0] = r->plan;
    sim[0] = r->o.plan_files ? -1 : r->simulated_ms; /* rank 0's: the plan's simulated step (files: none) */
    for (int i = 1; i < n; i++) cand[i] = tc->plan[i - 1], sim[i] = tc->sim_ms[i - 1];
    /* how many are tried: all where asked for, else those within the budget */
    int go = r->o.plan_trials > 0 || r->o.plan_files ? n : r->rank == 0 ? within_budget(r, n, sim) : 0;
    PPDL_CHECK_MPI(MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int i = go > 0 ? go : 1; i < n; i++) ppdl_plan_free(&cand[i]);
    if (!go) {
        free(cand);
        free(sim);
        return;
    }
    n = go;
    /* the trials write nothing and record nothing: no checkpoint, PAPI or events */
    options saved = r->o;
    r->o.checkpoint = NULL;
    r->o.papi = NULL;
    r->o.record_events = 0;
    size_t peak = ppdl_be_peak(r->be);
    double t0 = ppdl_now_s();
    for (int i = 0; i < n; i++) {
        trial_result *t = &r->trials[i];
        ppdl_plan_kind(&cand[i], t->kind, sizeof t->kind);
        snprintf(t->label, sizeof t->label, "%s",
                 i > 0             ? tc->label[i - 1]
                 : tc->label0[0]   ? tc->label0
                 : r->shared.active ? r->shared.chosen
                                    : "the optimum of T");
        t->sim_ms = sim[i];
        t->measured_ms = INFINITY;
    }
    /* A B C A B C: a drift of the machine's speed hits every candidate alike */
    for (int pass = 0; pass < r->o.trial_passes; pass++)
        for (int i = 0; i < n; i++) {
            r->plan = cand[i];
            r->trials[i].measured_ms = fmin(r->trials[i].measured_ms, measure(r));
            cand[i] = r->plan; /* --recompute applied */
        }
    int best = 0;
    for (int i = 1; i < n; i++)
        if (r->trials[i].measured_ms < r->trials[best].measured_ms) best = i;
    r->trials_s = ppdl_now_s() - t0;
    r->o = saved;
    ppdl_be_restore_peak(r->be, peak); /* the report's peak is the training's */
    r->n_trials = n;
    r->trial_chosen = best;
    r->plan = cand[best];
    for (int i = 0; i < n; i++)
        if (i != best) ppdl_plan_free(&cand[i]);
    /* the simulated step of the plan that runs (rank 0 knows them all) */
    if (r->rank == 0 && sim[best] >= 0) r->simulated_ms = sim[best];
    free(cand);
    free(sim);
    if (r->rank == 0) {
        printf("plan trials (%s: %d candidates, %d x %d steps each, in %.2f s):",
               r->o.plan_files      ? "plan files"
               : r->shared.active   ? "ranks share cores"
                                    : "a close call, another family simulated within 10%",
               n, r->o.trial_passes, TRIAL_STEPS, r->trials_s);
        for (int i = 0; i < n; i++) {
            const trial_result *t = &r->trials[i];
            char sim_txt[48] = "";
            if (t->sim_ms >= 0) snprintf(sim_txt, sizeof sim_txt, " simulated %.2f,", t->sim_ms);
            if (isfinite(t->measured_ms))
                printf("%s %s [%s]%s%s measured %.2f ms", i ? ";" : "", t->kind, t->label,
                       i == best ? " (taken)" : "", sim_txt, t->measured_ms);
            else
                printf("%s %s [%s]%s over its --mem-limit", i ? ";" : "", t->kind, t->label, sim_txt);
        }
        printf("\n");
        fflush(stdout);
    }
}
