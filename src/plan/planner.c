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

/* vocab_parallel auto or on (planner.h): the vocabulary-parallel layout against its own
 * reserve (zb-v's, on the derived costs whose largest slice is the whole head: a bound
 * for every slice), taken by rq's rule; returns the request's status after the choice */
static int consider_vocab(const ppdl_plan_request *rq, ppdl_plan_result *res, int rc, char *err, size_t errlen)
{
    const ppdl_costs *c = rq->costs;
    const ppdl_cluster_model *cl = rq->cluster;
    int on = rq->vocab_parallel == PPDL_VOCAB_ON;
    if (c->vocab_size < 1 && !on) return rc; /* no head to cut (not a gpt): nothing to say */
    if (rq->schedule != PPDL_SCHED_AUTO && rq->schedule != PPDL_SCHED_ZB_V) {
        snprintf(res->vocab_why, sizeof res->vocab_why, "not planned: the layout runs under zb-v (a V of the blocks "
                 "and the head's slices), and --schedule is %s", ppdl_schedule_name(rq->schedule));
        return on ? ppdl_errf(err, errlen, "--vocab-parallel on: %s; use --schedule zb-v or auto", res->vocab_why) : rc;
    }
    double reserve = 0;
    ppdl_cluster_model mine = *cl;
    double *mem = NULL;
    if (rq->reserve && c->vocab_size > 0 && cl->N >= 1 && c->L >= 2) {
        ppdl_costs dc;
        ppdl_plan one;
        memset(&one, 0, sizeof one);
        one.S = one.n_vocab = 1;
        ppdl_plan_stage st = {0};
        ppdl_vocab_slice sl = {0, 0, c->vocab_size - 1};
        st.last = c->L - 2;
        one.stages = &st;
        one.vocab = &sl;
        one.vocab_layer = c->L - 1;
        one.vocab_size = c->vocab_size;
        ppdl_plan dp;
        if (ppdl_vocab_expand(c, &one, &dc, &dp, err, errlen) == 0) {
            reserve = ppdl_runtime_reserve_chunked(&dc, ppdl_reserve_slots_chunked(PPDL_SCHED_ZB_V, cl->N, 2, rq->M), 2);
            ppdl_plan_free(&dp);
            ppdl_costs_free(&dc);
        }
        mine.mem = mem = ppdl_memory_less_reserve(cl->mem, cl->N, reserve);
    }
    ppdl_plan vp;
    char verr[PPDL_ERR_LEN] = "";
    int vrc = ppdl_vocab_plan(c, &mine, rq->M, &vp, verr, sizeof verr);
    if (vp.S > 0) {
        res->vocab_T = vp.predicted_iter_ms;
        double ms = ppdl_simulated_ms(c, &mine, &vp, rq->M, PPDL_SCHED_ZB_V);
        res->vocab_sim = isfinite(ms) ? ms : 0;
    }
    if (res->plan.S > 0) {
        res->novocab_T = res->plan.predicted_iter_ms;
        ppdl_cluster_model theirs = *cl;
        double *m2 = rq->reserve ? ppdl_memory_less_reserve(cl->mem, cl->N, res->reserve) : NULL;
        if (m2) theirs.mem = m2;
        double ms = ppdl_simulated_ms(c, &theirs, &res->plan, rq->M, res->schedule);
        res->novocab_sim = isfinite(ms) ? ms : 0;
        free(m2);
    }
    int take;
    if (vrc) {
        snprintf(res->vocab_why, sizeof res->vocab_why, "not taken: %s", verr);
        take = 0;
    } else if (on) {
        snprintf(res->vocab_why, sizeof res->vocab_why, "taken (--vocab-parallel on)");
        take = 1;
    } else if (rc || res->plan.S == 0) {
        snprintf(res->vocab_why, sizeof res->vocab_why, "taken: no plan without it fits");
        take = 1;
    } else {
        take = res->vocab_T < res->novocab_T && res->vocab_sim > 0 && res->vocab_sim < res->novocab_sim;
        snprintf(res->vocab_why, sizeof res->vocab_why, "%s: T %.3f against %.3f ms without, simulated %.3f against "
                 "%.3f ms (auto takes it only where both are shorter)", take ? "taken" : "not taken", res->vocab_T,
                 res->novocab_T, res->vocab_sim, res->novocab_sim);
    }
    if (take) {
        res->novocab_plan = res->plan;
        res->plan = vp;
        res->schedule = PPDL_SCHED_ZB_V;
        res->reserve = reserve;
        res->vocab_taken = 1;
        res->n_others = 0;
        memset(&res->info, 0, sizeof res->info);
        rc = 0;
    } else {
        ppdl_plan_free(&vp);
        if (on) rc = ppdl_errf(err, errlen, "--vocab-parallel on: %s", verr);
    }
    free(mem);
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
    if (rq->vocab_parallel != PPDL_VOCAB_OFF) {
        rc = consider_vocab(rq, res, rc, err, errlen);
        if (res->vocab_taken && rq->reserve) {
            free(mem);
            mine.mem = mem = ppdl_memory_less_reserve(cl->mem, cl->N, res->reserve);
        }
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
    ppdl_plan_free(&res->novocab_plan);
    for (int i = 0; i < res->n_others; i++) ppdl_plan_free(&res->others[i]);
    res->n_others = 0;
    if (res->is_auto) ppdl_schedule_choice_free(&res->choice);
    res->is_auto = 0;
}
