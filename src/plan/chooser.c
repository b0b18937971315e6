/* chooser.c — one schedule's plan: the method's search, then (ranks sharing cores, or
 * a close call) candidates ranked by the simulated step (chooser.h). */
#include "plan/chooser.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/baselines.h"
#include "plan/costmodel.h"
#include "plan/hybrid.h"
#include "plan/ranking.h"
#include "plan/simulate.h"
#include "plan/solve_chunked.h"
#include "plan/solver.h"
#include "sched/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ppdl_plan_methods[] = {"ppdl", "ppdl-pipeline", "ppdl-inorder", "dp", "dp-rc", "uniform",
                                         "uniform-rc", "params", "params-rc", "time", "time-rc", "pipedream",
                                         "pipedream-rc", NULL};

/* A core per rank: the plan is the optimum of T, and where another family's best
 * candidate simulates within this fraction of it, the call is close enough to try both
 * (--plan-trials): two plans that simulate alike can run far apart, as data parallelism
 * and the pipeline on 2 ranks of the mlp preset do (the all-reduce between the two ranks
 * of one host slows data parallelism; perf/bench-default-plan). Up to
 * CLOSE_CALL_MAX_RANKS ranks, whose candidates solve in milliseconds. */
#define CLOSE_CALL 0.10
#define CLOSE_CALL_MAX_RANKS 8

/* a baseline's plan with the AdamW state sharded as o says, evaluated so */
static void shard_baseline(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                           const ppdl_solve_opts *o, ppdl_plan *p)
{
    if (!o || !o->shard_optimizer || ppdl_schedule_chunked(schedule) || ppdl_plan_chunks(p) > 1) return;
    p->shard_optimizer = 1;
    ppdl_cost_apply(c, cl, M, schedule, p);
}

/* The candidates besides the method's optimum of T (solved with o), offered to r in
 * this order (ties keep the earlier): for method ppdl the one-rank-per-stage optimum of
 * T and the optimum of T of every layout kind, its ranks in that pipeline's order (else
 * the optimum's); every baseline (ppdl-pipeline and ppdl-inorder: those with one rank
 * per stage). */
static void offer_candidates(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                             const char *method, const ppdl_solve_opts *o, ppdl_ranking *r)
{
    int N = cl->N;
    /* replicated candidates for every schedule (zero bubble plays replicas too) */
    int pipeline_only = strcmp(method, "ppdl") != 0;
    if (!pipeline_only) {
        /* the one-rank-per-stage optimum of T: a candidate, and its order (its
         * placement follows the links) the one the layout kinds take */
        ppdl_solve_opts po = *o;
        po.replicate = 0;
        ppdl_plan p;
        memset(&p, 0, sizeof p);
        char err[PPDL_ERR_LEN];
        int have_pipeline = c->L >= N && ppdl_solve(c, cl, M, schedule, &po, &p, NULL, err, sizeof err) == 0;
        int *grps;
        char *labels;
        int nk = ppdl_ranking_layout_kinds(r, have_pipeline ? &p : NULL, &grps, &labels);
        if (have_pipeline) ppdl_ranking_offer(r, &p, "the pipeline optimum of T");
        else ppdl_plan_free(&p);
        /* the optimum of T of every layout kind */
        ppdl_plan *outs = ppdl_xcalloc((size_t)(nk ? nk : 1), sizeof *outs);
        solve_layouts(c, cl, M, schedule, grps, nk, o->shard_optimizer, outs);
        for (int k = 0; k < nk; k++) ppdl_ranking_offer(r, &outs[k], &labels[(size_t)k * 48]);
        free(outs);
        free(grps);
        free(labels);
    }
    /* the baselines */
    for (int k = 0; ppdl_plan_methods[k]; k++) {
        const char *b = ppdl_plan_methods[k];
        if (!ppdl_is_baseline(b) || (pipeline_only && !strncmp(b, "dp", 2))) continue;
        ppdl_plan p;
        memset(&p, 0, sizeof p);
        char err[PPDL_ERR_LEN];
        if (ppdl_baseline(c, cl, M, schedule, b, &p, err, sizeof err) == 0) {
            shard_baseline(c, cl, M, schedule, o, &p);
            ppdl_ranking_offer(r, &p, b);
        }
        else ppdl_plan_free(&p);
    }
}

/* *plan, the method's optimum of T solved with o, which fits, on 2 or more ranks. Ranks
 * sharing a host's cores: *plan becomes the candidate of least simulated step
 * (shared_cores.h). A core per rank, K > 1 and up to CLOSE_CALL_MAX_RANKS ranks: the
 * plan stays, and the runners-up are the best candidate of each other family that
 * simulates within CLOSE_CALL of it (a close call, which --plan-trials measures). */
static void choose(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const char *method,
                   const ppdl_solve_opts *o, ppdl_plan *plan, ppdl_shared_choice *sc, int K, ppdl_plan *others,
                   double *others_ms, char (*others_label)[48])
{
    if (ppdl_hosts_oversubscribed(&cl->hosts, cl->N)) {
        ppdl_ranking *r = ppdl_shared_begin(c, cl, M, schedule, plan, sc, K);
        if (!r) return;
        offer_candidates(c, cl, M, schedule, method, o, r);
        ppdl_shared_finish(r, plan, sc, K, others, others_ms, others_label);
        return;
    }
    if (K < 2 || cl->N > CLOSE_CALL_MAX_RANKS) return;
    double opt_ms = ppdl_simulated_ms(c, cl, plan, M, schedule);
    if (!(opt_ms < INFINITY)) return;
    ppdl_ranking *r = ppdl_ranking_new(c, cl, M, schedule, PPDL_RANKING_KEEP, plan);
    offer_candidates(c, cl, M, schedule, method, o, r);
    sc->n_others = ppdl_ranking_runners_up(r, plan, opt_ms * (1 + CLOSE_CALL), 0, K - 1, others, others_ms,
                                           others_label);
    ppdl_ranking_free(r);
}

int ppdl_choose_plan(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const char *method,
                     const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, ppdl_shared_choice *sc,
                     int K, ppdl_plan *others, double *others_ms, char (*others_label)[48], char *err,
                     size_t errlen)
{
    memset(out, 0, sizeof *out);
    ppdl_shared_choice dummy;
    memset(&dummy, 0, sizeof dummy);
    if (sc) memset(sc, 0, sizeof *sc);
    if (!strcmp(method, "ppdl") || !strcmp(method, "ppdl-pipeline") || !strcmp(method, "ppdl-inorder")) {
        ppdl_solve_opts o;
        if (opts) o = *opts;
        else ppdl_solve_opts_default(&o);
        o.placement = strcmp(method, "ppdl-inorder") != 0;
        o.replicate = o.replicate && !strcmp(method, "ppdl"); /* opts may say no replicas (schedule_choice.c) */
        /* several stages per rank: their own search (the placement is the schedule's) */
        if (ppdl_schedule_chunked(schedule))
            return ppdl_solve_chunked(c, cl, M, schedule, o.chunks, &o, out, info, sc, err, errlen);
        int rc = ppdl_solve(c, cl, M, schedule, &o, out, info, err, errlen);
        /* ranks sharing cores, or a close call: candidates ranked by the simulated step */
        if (rc == 0 && cl->N >= 2 && out->S > 0 && out->feasible)
            choose(c, cl, M, schedule, method, &o, out, sc ? sc : &dummy, K < 1 ? 1 : K > PPDL_PLAN_MAX_CANDIDATES
                   ? PPDL_PLAN_MAX_CANDIDATES : K, others, others_ms, others_label);
        return rc;
    }
    if (!ppdl_is_baseline(method)) {
        char list[256] = "";
        size_t n = 0;
        for (int k = 0; ppdl_plan_methods[k] && n < sizeof list - 20; k++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", ppdl_plan_methods[k]);
        return ppdl_errf(err, errlen, "--method %s: unknown; expected one of %s", method, list);
    }
    if (ppdl_baseline(c, cl, M, schedule, method, out, err, errlen)) return -1;
    shard_baseline(c, cl, M, schedule, opts, out);
    if (out->feasible) return 0;
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, out, &ev, err, errlen)) return -1;
    int s = ev.worst_stage;
    char a[32], b[32], d[32];
    ppdl_errf(err, errlen, "the %s plan does not fit in memory: stage %d (layers %d-%d on rank%s %d) needs %s, "
                           "%s over the rank's %s",
              method, s, out->stages[s].first, out->stages[s].last,
              out->stages[s].n_replicas > 1 ? "s including" : "", out->stages[s].rank,
              ppdl_fmt_bytes((size_t)ev.mem_bytes[s], a, sizeof a), ppdl_fmt_bytes((size_t)ev.worst_over, b, sizeof b),
              ppdl_fmt_bytes((size_t)ev.mem_limit[s], d, sizeof d));
    ppdl_cost_eval_free(&ev);
    return -1;
}
