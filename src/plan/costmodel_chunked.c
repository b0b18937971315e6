/* costmodel_chunked.c — the cost model's T for a chunked plan (a rank holds v >= 2
 * stages: interleaved, zb-v; costmodel.h "Chunked plans"), term by term from the
 * formula, as costmodel.c does for one stage per rank. solve_chunked.c searches with the
 * same formula, term by term, and its plans are annotated here. */
#include "plan/costmodel.h"
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"

#include <math.h>
#include <stdlib.h>

/* What the chunked rule needs of the plan and the schedule, or -1 with the reason. */
static int check_chunked(const ppdl_costs *c, const ppdl_cluster_model *cl, int schedule, const ppdl_plan *p,
                         char *err, size_t errlen)
{
    int v = ppdl_plan_chunks(p), N = cl->N;
    if (!ppdl_schedule_chunked(schedule))
        return ppdl_errf(err, errlen, "plan: it holds %d stages per rank, which run under interleaved or zb-v, not %s",
                         v, ppdl_schedule_name(schedule));
    if (v < 2)
        return ppdl_errf(err, errlen, "plan: schedule %s runs several stages per rank, and this plan has one per "
                         "rank (or replicas)", ppdl_schedule_name(schedule));
    if (schedule == PPDL_SCHED_ZB_V && v != 2)
        return ppdl_errf(err, errlen, "plan: it holds %d stages per rank; zb-v runs 2 (a V)", v);
    /* the schedule's order, whatever the ranks' numbers: stage s on the rank of the
     * stage at s's position among the first N (round-robin: s mod N; the V: its mirror) */
    int order = schedule == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN;
    if (p->S != v * N || !ppdl_plan_chunk_order_is(p, order))
        return ppdl_errf(err, errlen, "plan: its %d stages on %d ranks do not follow %s's order (%s)", p->S, N,
                         ppdl_schedule_name(schedule), order == PPDL_CHUNKS_V
                             ? "stage 2N-1-s on the rank of stage s"
                             : "stage s on the rank of stage s mod N");
    return 0;
}

/* a resource (a rank, or a directed rank pair) that has `work` ms to do in a step,
 * `pace` of it for the micro-batches after the first (whose way is the fill): the pace
 * term and the bottleneck (its work per micro-batch) */
static void chunk_resource(ppdl_cost_eval *ev, int M, double work, double pace, int s, int is_link,
                           double *busiest)
{
    if (pace > ev->pace) ev->pace = pace;
    if (work > *busiest) {
        *busiest = work;
        ev->bottleneck = work / M;
        ev->bottleneck_stage = s;
        ev->bottleneck_is_link = is_link;
    }
}

int ppdl_cost_evaluate_chunked(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                               const ppdl_plan *p, ppdl_cost_eval *ev, char *err, size_t errlen)
{
    if (check_chunked(c, cl, schedule, p, err, errlen)) return -1;
    int S = p->S, N = cl->N, v = ppdl_plan_chunks(p), split = ppdl_schedule_splits_backward(schedule), rc = 0;
    /* each stage's list, the runtime's: what it holds */
    ppdl_rank_schedule *rs = ppdl_xcalloc((size_t)N, sizeof *rs);
    rc = ppdl_schedule_build_ranks(schedule, N, v, M, rs, err, errlen);
    if (!rc) {
        ppdl_cost_eval_alloc(ev, S, schedule);
        for (int r = 0; r < N; r++)
            for (int k = 0; k < rs[r].n_stages; k++) {
                int s = rs[r].stages[k];
                ev->in_flight[s] = ppdl_schedule_max_in_flight(&rs[r].lists[k]);
                ev->pending_weight[s] = ppdl_schedule_max_pending_weight(&rs[r].lists[k]);
            }
        /* the fill: exact on equal stages with free links (costmodel.h) */
        long unit = ppdl_schedule_unit_step_chunked(schedule, N, v, M);
        ev->phi = (double)(unit - 3L * v * (M - 1)) / (3.0 * S);
    }
    for (int r = 0; r < N; r++) ppdl_rank_schedule_free(&rs[r]);
    free(rs);
    if (rc) return -1;

    /* per rank: its stages' time, memory and optimizer steps summed */
    double *rank_time = ppdl_xcalloc(3 * (size_t)N, sizeof(double)), *rank_mem = rank_time + N;
    double *rank_opt = rank_mem + N;
    /* per directed rank pair: the ms of one micro-batch's messages on it, its first boundary */
    double *pair_ms = ppdl_xcalloc((size_t)N * N, sizeof(double));
    int *pair_first = ppdl_xmalloc((size_t)N * N * sizeof(int));
    for (size_t i = 0; i < (size_t)N * N; i++) pair_first[i] = -1;
    for (int s = 0; s < S; s++) {
        const ppdl_plan_stage *st = &p->stages[s];
        int r = st->rank;
        ev->replicas[s] = 1;
        ev->time_ms[s] = ppdl_stage_time_split(c, st->first, st->last, st->recompute, cl->speed[r], split);
        ev->mem_bytes[s] = ppdl_stage_mem_split(c, st->first, st->last, st->recompute, ev->in_flight[s],
                                                ev->pending_weight[s]);
        ev->mem_limit[s] = cl->mem[r];
        ev->optimizer_ms[s] = ppdl_stage_opt_ms(c, st->first, st->last, ppdl_opt_speed(cl, r));
        ev->sum_time += ev->time_ms[s];
        rank_time[r] += ev->time_ms[s];
        rank_mem[r] += ev->mem_bytes[s];
        rank_opt[r] += ev->optimizer_ms[s];
        if (s + 1 < S && p->stages[s + 1].rank != r) {
            /* the boundary's activations go r -> r', its gradients r' -> r: M messages each way */
            int r2 = p->stages[s + 1].rank;
            ev->link_ms[s] = ppdl_link_ms(c, cl, st->last, r, r2);
            ev->sum_link += ev->link_ms[s];
            size_t ab[2] = {(size_t)r * N + r2, (size_t)r2 * N + r};
            for (int d = 0; d < 2; d++) {
                double lam = ppdl_link_ms(c, cl, st->last, d ? r2 : r, d ? r : r2);
                pair_ms[ab[d]] += lam;
                if (pair_first[ab[d]] < 0) pair_first[ab[d]] = s;
            }
        }
    }
    /* the resources: each rank works through the M micro-batches of all its stages,
     * each directed pair through all the messages it carries */
    double busiest = -1;
    ev->bottleneck = -1;
    ev->feasible = 1;
    ev->worst_over = -INFINITY;
    for (int s = 0; s < S; s++) { /* a rank's first stage stands for it */
        int r = p->stages[s].rank, first = 1;
        for (int t = 0; t < s; t++) first &= p->stages[t].rank != r;
        if (!first) continue;
        chunk_resource(ev, M, M * rank_time[r], (M - 1) * rank_time[r], s, 0, &busiest);
        if (rank_mem[r] > cl->mem[r]) ev->feasible = 0;
        if (rank_mem[r] - cl->mem[r] > ev->worst_over) {
            ev->worst_over = rank_mem[r] - cl->mem[r];
            ev->worst_stage = s;
        }
        if (rank_opt[r] > ev->tail) ev->tail = rank_opt[r];
    }
    for (size_t i = 0; i < (size_t)N * N; i++)
        if (pair_first[i] >= 0) chunk_resource(ev, M, M * pair_ms[i], (M - 1) * pair_ms[i], pair_first[i], 1, &busiest);
    free(rank_time);
    free(pair_ms);
    free(pair_first);
    /* a tied weight's exchange between the ranks of the first and the last stage (on
     * one rank, zb-v's rank 0: a copy in memory, free) */
    ev->tie = ppdl_tie_ms(c, cl, &p->stages[0].rank, 1, &p->stages[S - 1].rank, 1);
    ev->T = ev->phi * ev->sum_time + 2 * ev->sum_link + ev->pace + ev->tail + ev->tie;
    return 0;
}
