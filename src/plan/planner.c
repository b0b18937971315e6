/* planner.c — ppdl_plan_make: the reserve off each rank's memory, the schedule (one, or
 * auto's candidates), then the plan's simulated step (planner.h). */
#include "plan/planner.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/costmodel.h"
#include "plan/reserve.h"
#include "plan/simulate.h"
#include "sched/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the reserve (reserve.h) taken off each rank's memory for a schedule that is not
 * auto, with v stages per rank where it is chunked */
static double schedule_reserve(const ppdl_costs *c, int n_ranks, int M, int schedule, int v)
{
    return ppdl_schedule_chunked(schedule)
               ? ppdl_runtime_reserve_chunked(c, ppdl_reserve_slots_chunked(schedule, n_ranks, v, M), v)
               : ppdl_runtime_reserve(c, ppdl_reserve_slots(schedule, n_ranks, M));
}

/* --method uniform under a chunked schedule: v equal stages per rank (round-robin for
 * interleaved, in a V for zb-v), evaluated by the cost model; -1 with the reason when it
 * cannot be cut (p empty) or does not fit (p kept, feasible = 0) */
static int uniform_chunked(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v,
                           ppdl_plan *p, char *err, size_t errlen)
{
    int order = schedule == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN;
    if (ppdl_plan_uniform_chunked(c->L, cl->N, v, order, p, err, errlen)) {
        memset(p, 0, sizeof *p);
        return -1;
    }
    snprintf(p->method, sizeof p->method, "uniform");
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, errlen)) {
        ppdl_plan_free(p);
        memset(p, 0, sizeof *p);
        return -1;
    }
    ppdl_cost_annotate(p, &ev);
    int rc = 0;
    if (!ev.feasible) {
        char a[32];
        rc = ppdl_errf(err, errlen, "the uniform plan does not fit in memory: rank %d (stage %d's) is over by %s",
                       p->stages[ev.worst_stage].rank, ev.worst_stage, ppdl_fmt_bytes((size_t)ev.worst_over, a, sizeof a));
    }
    ppdl_cost_eval_free(&ev);
    return rc;
}

/* auto: one solve per candidate schedule, each against its own reserve; the chosen
 * one's plan taken (where none fits, 1F1B's, for its message) */
static int make_auto(const ppdl_plan_request *rq, const ppdl_solve_opts *so, ppdl_plan_result *res, char *err,
                     size_t errlen)
{
    ppdl_schedule_choice *ch = &res->choice;
    res->is_auto = 1;
    int rc = ppdl_choose_schedule(rq->costs, rq->cluster, rq->M, rq->method, so, rq->reserve, ch, err, errlen);
    int k = ch->chosen >= 0 ? ch->chosen : 0;
    ppdl_schedule_option *w = &ch->opt[k];
    res->schedule = w->schedule;
    res->reserve = w->reserve;
    res->plan = w->plan;
    res->info = w->info;
    res->sc = w->sc;
    memset(&w->plan, 0, sizeof w->plan); /* owned by res->plan from here on */
    if (ch->chosen >= 0) ppdl_schedule_choice_line(ch, res->why, sizeof res->why);
    return rc;
}

int ppdl_plan_make(const ppdl_plan_request *rq, ppdl_plan_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    res->choice.chosen = -1;
    const ppdl_costs *c = rq->costs;
    const ppdl_cluster_model *cl = rq->cluster;
    ppdl_solve_opts so;
    if (rq->opts) so = *rq->opts;
    else ppdl_solve_opts_default(&so);
    int M = rq->M, rc;
    ppdl_cluster_model mine = *cl; /* cl with the memory planned against */
    double *mem = NULL;
    if (rq->schedule == PPDL_SCHED_AUTO) {
        rc = make_auto(rq, &so, res, err, errlen);
        if (rq->reserve) mine.mem = mem = ppdl_memory_less_reserve(cl->mem, cl->N, res->reserve);
    } else {
        res->schedule = rq->schedule;
        if (rq->reserve) {
            res->reserve = schedule_reserve(c, cl->N, M, rq->schedule, so.chunks);
            mine.mem = mem = ppdl_memory_less_reserve(cl->mem, cl->N, res->reserve);
        }
        if (ppdl_schedule_chunked(rq->schedule) && !strcmp(rq->method, "uniform"))
            rc = uniform_chunked(c, &mine, M, rq->schedule, so.chunks, &res->plan, err, errlen);
        else
            rc = ppdl_choose_plan(c, &mine, M, rq->schedule, rq->method, &so, &res->plan, &res->info, &res->sc,
                                  rq->candidates, res->others, res->others_ms, res->others_label, err, errlen);
        res->n_others = rc == 0 ? res->sc.n_others : 0;
    }
    if (res->plan.S > 0) {
        res->predicted_ms = res->plan.predicted_iter_ms;
        res->plan.lower_bound_ms = res->lower_bound_ms =
            ppdl_lower_bound_shard_ms(c, &mine, M, res->schedule, so.shard_optimizer, res->bound_why,
                                      sizeof res->bound_why);
        double ms = ppdl_simulated_ms(c, &mine, &res->plan, M, res->schedule);
        res->simulated_ms = isfinite(ms) ? ms : 0;
    }
    free(mem);
    res->rc = rc;
    return rc;
}

void ppdl_plan_result_free(ppdl_plan_result *res)
{
    ppdl_plan_free(&res->plan);
    for (int i = 0; i < res->n_others; i++) ppdl_plan_free(&res->others[i]);
    res->n_others = 0;
    if (res->is_auto) ppdl_schedule_choice_free(&res->choice);
    res->is_auto = 0;
}
