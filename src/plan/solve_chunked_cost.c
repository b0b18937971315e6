/* solve_chunked_cost.c — the cost model's T for a chunked plan (a rank holds v >= 2
 * stages: interleaved, zb-v; costmodel.h "Chunked plans"), term by term from the
 * formula, as costmodel.c does for one stage per rank. solve_chunked.c searches with the
 * same formula, term by term, and its plans are annotated here. */
#include "plan/solve_chunked.h"
#include "plan/costmodel.h"
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"

#include <math.h>
#include <stdlib.h>

/* a stage built without replicas (n_replicas 0) runs on `rank` alone */
static int rep_rank(const ppdl_plan_stage *st, int q) { return st->n_replicas > 0 ? st->ranks[q] : st->rank; }

/* What the chunked rule needs of the plan and the schedule, or -1 with the reason. */
static int check_chunked(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const ppdl_plan *p,
                         char *err, size_t errlen)
{
    int v = ppdl_plan_chunks(p), k = ppdl_plan_chunk_replicas(p), N = cl->N / k; /* N: one copy's ranks */
    if (!ppdl_schedule_chunked(schedule))
        return ppdl_errf(err, errlen, "plan: it holds %d stages per rank, which run under interleaved or zb-v, not %s",
                         v, ppdl_schedule_name(schedule));
    if (v < 2)
        return ppdl_errf(err, errlen, "plan: schedule %s runs several stages per rank, and this plan has one per "
                         "rank (or replicas)", ppdl_schedule_name(schedule));
    if (schedule == PPDL_SCHED_ZB_V && v != 2)
        return ppdl_errf(err, errlen, "plan: it holds %d stages per rank; zb-v runs 2 (a V)", v);
    if (k > M)
        return ppdl_errf(err, errlen, "plan: %d copies of the pipeline but a step has %d micro-batches: each copy "
                         "needs at least one", k, M);
    if (cl->N % k != 0 || ppdl_plan_ranks_used(p) != cl->N)
        return ppdl_errf(err, errlen, "plan: %d copies of a pipeline of %d ranks use %d ranks, the cluster has %d", k,
                         p->S / v, ppdl_plan_ranks_used(p), cl->N);
    /* the schedule's order, whatever the ranks' numbers: stage s on the rank of the
     * stage at s's position among the first N (round-robin: s mod N; the V: its mirror),
     * in every copy */
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
 * term and the bottleneck (its work per micro-batch of the step's M) */
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

/* What each stage's list holds in one copy's schedule (N ranks, M micro-batches) and
 * the fill factor phi, into ev (allocated here). -1 with the reason. */
static int chunk_lists(int schedule, int N, int v, int M, int S, ppdl_cost_eval *ev, char *err, size_t errlen)
{
    ppdl_rank_schedule *rs = ppdl_xcalloc((size_t)N, sizeof *rs);
    ppdl_schedule_spec sp = {schedule, v * N, M, v, NULL, NULL};
    int rc = ppdl_schedule_make_all(&sp, rs, err, errlen);
    if (!rc) {
        ppdl_cost_eval_alloc(ev, S, schedule);
        for (int r = 0; r < N; r++)
            for (int i = 0; i < rs[r].n_stages; i++) {
                int s = rs[r].stages[i];
                ev->in_flight[s] = ppdl_schedule_max_in_flight(&rs[r].lists[i]);
                ev->pending_weight[s] = ppdl_schedule_max_pending_weight(&rs[r].lists[i]);
            }
        /* the fill: exact on equal stages with free links (costmodel.h) */
        long unit = ppdl_schedule_unit_step_chunked(schedule, N, v, M);
        ev->phi = (double)(unit - 3L * v * (M - 1)) / (3.0 * S);
    }
    for (int r = 0; r < N; r++) ppdl_rank_schedule_free(&rs[r]);
    free(rs);
    return rc;
}

/* per rank of the cluster: its stages' time, memory, optimizer steps and all-reduces
 * summed; per directed rank pair: the ms of one micro-batch's messages on it and its
 * first boundary (-1: none) */
typedef struct chunk_sums {
    double *time, *mem, *opt, *ar;
    double *pair_ms;
    int *pair_first;
} chunk_sums;

static void chunk_sums_alloc(chunk_sums *x, int N)
{
    x->time = ppdl_xcalloc(4 * (size_t)N, sizeof(double));
    x->mem = x->time + N;
    x->opt = x->mem + N;
    x->ar = x->opt + N;
    x->pair_ms = ppdl_xcalloc((size_t)N * N, sizeof(double));
    x->pair_first = ppdl_xmalloc((size_t)N * N * sizeof(int));
    for (size_t i = 0; i < (size_t)N * N; i++) x->pair_first[i] = -1;
}

static void chunk_sums_free(chunk_sums *x)
{
    free(x->time);
    free(x->pair_ms);
    free(x->pair_first);
}

/* Stage s in every copy: its time, memory and optimizer step on each replica's rank
 * (ev keeps the slowest replica's time and the replica furthest over its memory), and
 * the boundary after it in each copy (ev keeps the slowest link). */
static void chunk_stage(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int s, int k, int split,
                        ppdl_cost_eval *ev, chunk_sums *x)
{
    const ppdl_plan_stage *st = &p->stages[s];
    int N = cl->N;
    double mem = ppdl_stage_mem_split(c, st->first, st->last, st->recompute, ev->in_flight[s], ev->pending_weight[s]);
    double over = -INFINITY;
    ev->replicas[s] = k;
    ev->mem_bytes[s] = mem;
    ev->allreduce_ms[s] = ppdl_stage_allreduce_ms(c, cl, st);
    for (int q = 0; q < k; q++) {
        int r = rep_rank(st, q);
        double t = ppdl_stage_time_split(c, st->first, st->last, st->recompute, cl->speed[r], split);
        double u = ppdl_stage_opt_ms(c, st->first, st->last, ppdl_opt_speed(cl, r));
        ev->time_ms[s] = fmax(ev->time_ms[s], t);
        ev->optimizer_ms[s] = fmax(ev->optimizer_ms[s], u);
        if (mem - cl->mem[r] > over) {
            over = mem - cl->mem[r];
            ev->mem_limit[s] = cl->mem[r];
        }
        x->time[r] += t;
        x->mem[r] += mem;
        x->opt[r] += u;
        x->ar[r] += ev->allreduce_ms[s];
        if (s + 1 < p->S && rep_rank(&p->stages[s + 1], q) != r) {
            /* the boundary's activations go r -> r2, its gradients r2 -> r: M messages each way */
            int r2 = rep_rank(&p->stages[s + 1], q);
            ev->link_ms[s] = fmax(ev->link_ms[s], ppdl_link_ms(c, cl, st->last, r, r2));
            size_t ab[2] = {(size_t)r * N + r2, (size_t)r2 * N + r};
            for (int d = 0; d < 2; d++) {
                x->pair_ms[ab[d]] += ppdl_link_ms(c, cl, st->last, d ? r2 : r, d ? r : r2);
                if (x->pair_first[ab[d]] < 0) x->pair_first[ab[d]] = s;
            }
        }
    }
    ev->sum_time += ev->time_ms[s];
    ev->sum_link += ev->link_ms[s];
}

int ppdl_cost_evaluate_chunked(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                               const ppdl_plan *p, ppdl_cost_eval *ev, char *err, size_t errlen)
{
    if (check_chunked(c, cl, M, schedule, p, err, errlen)) return -1;
    int S = p->S, N = cl->N, v = ppdl_plan_chunks(p), k = ppdl_plan_chunk_replicas(p);
    int M0 = (M + k - 1) / k; /* copy 0's micro-batches, the most of any copy */
    int split = ppdl_schedule_splits_backward(schedule);
    /* one copy's lists, the runtime's: what each stage holds */
    if (chunk_lists(schedule, N / k, v, M0, S, ev, err, errlen)) return -1;
    chunk_sums x;
    chunk_sums_alloc(&x, N);
    for (int s = 0; s < S; s++) chunk_stage(c, cl, p, s, k, split, ev, &x);
    /* the resources: each rank works through the M0 micro-batches of all its stages,
     * each directed pair through all the messages it carries; after the flush each rank
     * sums its stages' gradients with their replicas (one after another on the same
     * ranks' links), then updates them */
    double busiest = -1;
    ev->bottleneck = -1;
    ev->feasible = 1;
    ev->worst_over = -INFINITY;
    for (int s = 0; s < S; s++)
        for (int q = 0; q < k; q++) { /* a rank's first stage stands for it */
            int r = rep_rank(&p->stages[s], q), first = 1;
            for (int t = 0; t < s; t++) first &= rep_rank(&p->stages[t], q) != r;
            if (!first) continue;
            chunk_resource(ev, M, M0 * x.time[r], (M0 - 1) * x.time[r], s, 0, &busiest);
            if (x.mem[r] > cl->mem[r]) ev->feasible = 0;
            if (x.mem[r] - cl->mem[r] > ev->worst_over) {
                ev->worst_over = x.mem[r] - cl->mem[r];
                ev->worst_stage = s;
            }
            ev->allreduce = fmax(ev->allreduce, x.ar[r]);
            ev->tail = fmax(ev->tail, x.ar[r] + x.opt[r]);
        }
    for (size_t i = 0; i < (size_t)N * N; i++)
        if (x.pair_first[i] >= 0)
            chunk_resource(ev, M, M0 * x.pair_ms[i], (M0 - 1) * x.pair_ms[i], x.pair_first[i], 1, &busiest);
    chunk_sums_free(&x);
    /* a tied weight's exchange between the ranks of the first and the last stage, in
     * each copy (on one rank, zb-v's rank 0: a copy in memory, free) */
    const ppdl_plan_stage *a = &p->stages[0], *b = &p->stages[S - 1];
    int *ra = ppdl_xmalloc(2 * (size_t)k * sizeof(int)), *rb = ra + k;
    for (int q = 0; q < k; q++) {
        ra[q] = rep_rank(a, q);
        rb[q] = rep_rank(b, q);
    }
    ev->tie = ppdl_tie_ms(c, cl, ra, k, rb, k);
    free(ra);
    ev->T = ev->phi * ev->sum_time + 2 * ev->sum_link + ev->pace + ev->tail + ev->tie;
    return 0;
}
