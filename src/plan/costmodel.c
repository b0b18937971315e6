/* costmodel.c — evaluate the cost model (costmodel.h) for one plan, term by term,
 * straight from the formulas (no prefix sums, no caching): the reference the solver
 * and the tests are checked against. */
#include "plan/costmodel.h"
#include "plan/solve_chunked.h"
#include "plan/vocab.h"
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"
#include "plan/replica.h"
#include "core/slices.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double ppdl_fill_factor(int schedule, int S, int M)
{
    return ppdl_fill_factor_layout(schedule, S, M, NULL);
}

double ppdl_fill_factor_layout(int schedule, int S, int M, const int *k)
{
    if (!ppdl_schedule_splits_backward(schedule) || S < 2) return 1;
    return ppdl_fill_factor_step(schedule, S, M, k, ppdl_schedule_unit_step_layout(schedule, S, M, k));
}

double ppdl_fill_factor_step(int schedule, int S, int M, const int *k, long step)
{
    if (!ppdl_schedule_splits_backward(schedule) || S < 2) return 1;
    /* the layout's play has a pass of stage s take k_s units: time_s = 3 k_s, and the
     * pace term P = max_s (n_s - 1) 3 k_s, n_s = ceil(M / k_s) the busiest replica's */
    long pace = 0, sum = 0;
    for (int s = 0; s < S; s++) {
        int ks = k ? k[s] : 1;
        long p = 3L * ks * ((M + ks - 1) / ks - 1);
        if (p > pace) pace = p;
        sum += 3L * ks;
    }
    return (double)(step - pace) / (double)sum;
}

double ppdl_layer_sched_ms(const ppdl_costs *c, int l, int o, int split)
{
    const ppdl_layer_cost *lc = &c->layers[l];
    if (!split) return ppdl_layer_time(lc, o);
    return lc->fwd_ms + ppdl_layer_bwd_input_ms(c, lc, o) + ppdl_layer_bwd_weight_ms(c, lc, o);
}

/* the op list of stage s, one rank per stage: what it holds (weight: between B and W) */
static int list_count(int schedule, int S, int M, int s, int weight)
{
    ppdl_schedule_spec sp = {schedule, S, M, 1, NULL, NULL};
    ppdl_rank_schedule rs;
    char err[PPDL_ERR_LEN];
    PPDL_CHECK(ppdl_schedule_make(&sp, s, &rs, err, sizeof err) == 0, "%s", err);
    int n = weight ? ppdl_schedule_max_pending_weight(&rs.lists[0]) : ppdl_schedule_max_in_flight(&rs.lists[0]);
    ppdl_rank_schedule_free(&rs);
    return n;
}

int ppdl_in_flight(int schedule, int S, int M, int s)
{
    if (schedule == PPDL_SCHED_GPIPE) return M;
    if (ppdl_schedule_splits_backward(schedule)) return list_count(schedule, S, M, s, 0);
    return M < S - s ? M : S - s;
}

int ppdl_pending_weight(int schedule, int S, int M, int s)
{
    return ppdl_schedule_splits_backward(schedule) ? list_count(schedule, S, M, s, 1) : 0;
}

double ppdl_stage_time(const ppdl_costs *c, int i, int j, const int *recompute, double speed)
{
    return ppdl_stage_time_split(c, i, j, recompute, speed, 0);
}

double ppdl_stage_time_split(const ppdl_costs *c, int i, int j, const int *recompute, double speed, int split)
{
    double t = 0;
    for (int l = i; l <= j; l++) t += ppdl_layer_sched_ms(c, l, recompute ? recompute[l - i] : 0, split);
    if (i == 0) t += c->input_ms;         /* the first stage reads the inputs */
    if (j == c->L - 1) t += c->target_ms; /* the last stage the targets */
    return t / speed;
}

double ppdl_stage_opt_ms(const ppdl_costs *c, int i, int j, double speed)
{
    double t = 0;
    for (int l = i; l <= j; l++) t += c->layers[l].opt_ms;
    return t / speed;
}

double ppdl_stage_mem(const ppdl_costs *c, int i, int j, const int *recompute, int n)
{
    return ppdl_stage_mem_split(c, i, j, recompute, n, 0);
}

double ppdl_stage_mem_split(const ppdl_costs *c, int i, int j, const int *recompute, int n, int w)
{
    double params = 0, stash = 0, keep = 0;
    for (int l = i; l <= j; l++) {
        int o = recompute ? recompute[l - i] : 0;
        params += c->layers[l].param_bytes;
        stash += c->layers[l].stash_bytes[o];
        keep += c->layers[l].weight_keep_bytes[o];
    }
    /* w = 0 adds exactly 0: 1F1B's and GPipe's memory, bit for bit */
    return c->state_multiplier * params + (double)n * stash + (double)w * keep + ppdl_tie_mem(c, i, j);
}

double ppdl_opt_elem_bytes(const ppdl_costs *c)
{
    return 4.0 * fmin(2.0, c->state_multiplier);
}

size_t ppdl_stage_opt_elems(const ppdl_costs *c, int i, int j, double params)
{
    double t = c->tied_bytes > 0 && i == 0 && j == c->L - 1 ? c->tied_bytes : 0;
    double n = floor((params - t) / 4);
    return n > 0 ? (size_t)n : 0;
}

double ppdl_slice_opt_bytes(const ppdl_costs *c, size_t n, int k, const double *weights, int q)
{
    size_t small[65], *b = k < 65 ? small : ppdl_xmalloc(((size_t)k + 1) * sizeof(size_t)), most = 0;
    ppdl_slices(n, k, weights, PPDL_SLICE_ALIGN, b);
    if (weights) most = b[q + 1] - b[q];
    else
        for (int r = 0; r < k; r++) most = b[r + 1] - b[r] > most ? b[r + 1] - b[r] : most;
    if (b != small) free(b);
    return ppdl_opt_elem_bytes(c) * (double)most;
}

double ppdl_stage_mem_sharded(const ppdl_costs *c, int i, int j, const int *recompute, int n, int w, int k,
                              const double *weights, int q)
{
    double mem = ppdl_stage_mem_split(c, i, j, recompute, n, w);
    if (k < 2) return mem;
    double params = 0;
    for (int l = i; l <= j; l++) params += c->layers[l].param_bytes;
    size_t ne = ppdl_stage_opt_elems(c, i, j, params);
    return mem - ppdl_opt_elem_bytes(c) * (double)ne + ppdl_slice_opt_bytes(c, ne, k, weights, q);
}

int ppdl_opt_divisor(int shard, const ppdl_plan_stage *st)
{
    return shard && st->n_replicas > 1 && !st->slice_weights ? st->n_replicas : 1;
}

int ppdl_slices_sized(const ppdl_costs *c, size_t n, int k, const double *headroom, double *weights)
{
    double sum = 0;
    for (int q = 0; q < k; q++) {
        if (headroom[q] < 0) return 0;
        sum += weights[q] = headroom[q];
    }
    if (n == 0) return 1;
    if (!(sum > 0)) return 0;
    size_t small[65], *b = k < 65 ? small : ppdl_xmalloc(((size_t)k + 1) * sizeof(size_t));
    ppdl_slices(n, k, weights, PPDL_SLICE_ALIGN, b);
    int fits = 1;
    for (int q = 0; q < k && fits; q++) fits = ppdl_opt_elem_bytes(c) * (double)(b[q + 1] - b[q]) <= headroom[q];
    if (b != small) free(b);
    return fits;
}

double ppdl_tie_mem(const ppdl_costs *c, int i, int j)
{
    if (c->tied_bytes <= 0) return 0;
    int both = i == 0 && j == c->L - 1, one = i == 0 || j == c->L - 1;
    return both ? -(c->state_multiplier - 1) * c->tied_bytes : one ? c->tied_bytes : 0;
}

/* one message of the exchange, a -> b. A rank to itself (both stages on it: zb-v's
 * rank 0) copies in memory, counted as free like any message between two stages of one
 * rank (too small to show in a step: perf/results/runtime.md); the cluster
 * file's diagonal stays unread (docs/formats.md). */
static double tie_msg_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int a, int b)
{
    size_t ab = (size_t)a * cl->N + b;
    if (a == b) return 0;
    return 1000.0 * (cl->lat[ab] + c->tied_bytes / cl->bw[ab]);
}

double ppdl_tie_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, const int *r0, int k0, const int *rl, int kl)
{
    if (c->tied_bytes <= 0) return 0;
    double x = 0;
    for (int q = 0; q < k0; q++) x = fmax(x, tie_msg_ms(c, cl, rl[q % kl], r0[q])); /* what replica q of the first receives */
    for (int q = 0; q < kl; q++) x = fmax(x, tie_msg_ms(c, cl, r0[q % k0], rl[q])); /* ... of the last */
    return x;
}

double ppdl_link_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int j, int a, int b)
{
    size_t ab = (size_t)a * cl->N + b;
    return 1000.0 * (cl->lat[ab] + ppdl_msg_bytes(c, j) / cl->bw[ab]);
}

void ppdl_cost_eval_free(ppdl_cost_eval *ev)
{
    free(ev->time_ms);
    free(ev->mem_bytes);
    free(ev->mem_limit);
    free(ev->link_ms);
    free(ev->allreduce_ms);
    free(ev->optimizer_ms);
    free(ev->in_flight);
    free(ev->pending_weight);
    free(ev->replicas);
    free(ev->replica_opt_bytes);
    memset(ev, 0, sizeof *ev);
}

void ppdl_cost_eval_alloc(ppdl_cost_eval *ev, int S, int schedule)
{
    ev->S = S;
    ev->schedule = schedule;
    ev->time_ms = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->mem_bytes = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->mem_limit = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->link_ms = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->allreduce_ms = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->optimizer_ms = ppdl_xcalloc((size_t)S, sizeof(double));
    ev->in_flight = ppdl_xcalloc((size_t)S, sizeof(int));
    ev->pending_weight = ppdl_xcalloc((size_t)S, sizeof(int));
    ev->replicas = ppdl_xcalloc((size_t)S, sizeof(int));
}

/* a stage built without replicas (n_replicas 0) runs on `rank` alone */
static int n_rep(const ppdl_plan_stage *st) { return st->n_replicas > 0 ? st->n_replicas : 1; }
static int rep_rank(const ppdl_plan_stage *st, int q) { return st->n_replicas > 0 ? st->ranks[q] : st->rank; }

double ppdl_stage_allreduce_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan_stage *st)
{
    int k = n_rep(st);
    if (k < 2) return 0;
    double params = 0;
    int n_msgs = 0; /* one all-reduce per layer with parameters */
    for (int l = st->first; l <= st->last; l++) {
        params += c->layers[l].param_bytes;
        n_msgs += c->layers[l].param_bytes > 0;
    }
    int *ranks = ppdl_xmalloc((size_t)k * sizeof(int));
    for (int q = 0; q < k; q++) ranks[q] = rep_rank(st, q);
    double ms = ppdl_allreduce_ms(cl, ranks, k, params, n_msgs);
    free(ranks);
    return ms;
}

/* the AdamW state replica q of st holds, sharded among ks replicas (1: all of it) */
static double replica_opt_bytes(const ppdl_costs *c, const ppdl_plan_stage *st, int ks, int q)
{
    double params = 0;
    for (int l = st->first; l <= st->last; l++) params += c->layers[l].param_bytes;
    size_t n = ppdl_stage_opt_elems(c, st->first, st->last, params);
    return ks < 2 ? ppdl_opt_elem_bytes(c) * (double)n : ppdl_slice_opt_bytes(c, n, ks, st->slice_weights, q);
}

/* a resource with n micro-batches of t ms each: the pace term and the bottleneck */
static void resource(ppdl_cost_eval *ev, int M, int n, double t, int s, int is_link, double *busiest)
{
    if (n < 1) return;
    double p = (n - 1) * t;
    if (p > ev->pace) ev->pace = p;
    if (n * t > *busiest) {
        *busiest = n * t;
        ev->bottleneck = t * ((double)n / M); /* exactly t when n = M */
        ev->bottleneck_stage = s;
        ev->bottleneck_is_link = is_link;
    }
}

int ppdl_cost_evaluate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                       const ppdl_plan *p, ppdl_cost_eval *ev, char *err, size_t errlen)
{
    memset(ev, 0, sizeof *ev);
    if (M < 1) return ppdl_errf(err, errlen, "micro-batches is %d: expected >= 1", M);
    /* the head cut by vocabulary: the derived zb-v plan (vocab.h) */
    if (p->n_vocab > 0) return ppdl_vocab_evaluate(c, cl, M, schedule, p, ev, err, errlen);
    int *nopt = ppdl_xmalloc((size_t)c->L * sizeof(int));
    for (int l = 0; l < c->L; l++) nopt[l] = c->layers[l].n_opts;
    int rc = ppdl_plan_validate(p, c->L, cl->N, nopt, "plan", err, errlen);
    free(nopt);
    if (rc) return -1;
    /* several stages per rank (interleaved, zb-v): the chunked rule (solve_chunked_cost.c) */
    if (ppdl_schedule_chunked(schedule) || ppdl_plan_chunks(p) > 1)
        return ppdl_cost_evaluate_chunked(c, cl, M, schedule, p, ev, err, errlen);
    for (int s = 0; s < p->S; s++)
        if (n_rep(&p->stages[s]) > M)
            return ppdl_errf(err, errlen, "plan: stage %d has %d replicas but a step has %d micro-batches: each "
                                          "replica needs at least one", s, n_rep(&p->stages[s]), M);
    int S = p->S, split = ppdl_schedule_splits_backward(schedule);
    /* the layout, and what each replica's op list holds: one play for all of them */
    int D = 0, *layout_k = ppdl_xmalloc((size_t)S * sizeof(int));
    for (int s = 0; s < S; s++) D += layout_k[s] = n_rep(&p->stages[s]);
    rc = ppdl_schedule_supports(schedule, S, layout_k, err, errlen);
    if (rc) {
        free(layout_k);
        return -1;
    }
    int *held = ppdl_xmalloc(2 * (size_t)D * sizeof(int)), *pending = held + D;
    long step = ppdl_schedule_counts_layout(schedule, S, M, layout_k, held, pending);
    ppdl_cost_eval_alloc(ev, S, schedule);
    ev->phi = ppdl_fill_factor_step(schedule, S, M, layout_k, step);
    free(layout_k);
    ev->feasible = 1;
    ev->worst_over = -INFINITY;
    ev->bottleneck = -1;
    double busiest = -1;
    for (int s = 0; s < S; s++) ev->replicas[s] = n_rep(&p->stages[s]); /* the layout */
    ev->replica_opt_bytes = ppdl_xcalloc((size_t)D, sizeof(double));
    for (int s = 0, d0 = 0; s < S; d0 += ev->replicas[s++]) {
        const ppdl_plan_stage *st = &p->stages[s];
        int k = ev->replicas[s];
        /* every replica: its memory, and its micro-batches as a resource */
        double stage_over = -INFINITY;
        int ks = p->shard_optimizer ? k : 1; /* the replicas sharing the AdamW state */
        for (int q = 0; q < k; q++) {
            int r = rep_rank(st, q);
            int n = held[d0 + q], w = pending[d0 + q]; /* w: what waits for W (0 without a split) */
            double mem = ppdl_stage_mem_sharded(c, st->first, st->last, st->recompute, n, w, ks, st->slice_weights, q);
            ev->replica_opt_bytes[d0 + q] = replica_opt_bytes(c, st, ks, q);
            double t = ppdl_stage_time_split(c, st->first, st->last, st->recompute, cl->speed[r], split);
            if (mem > cl->mem[r]) ev->feasible = 0;
            if (mem - cl->mem[r] > stage_over) {
                stage_over = mem - cl->mem[r];
                ev->mem_bytes[s] = mem;
                ev->mem_limit[s] = cl->mem[r];
                ev->in_flight[s] = n;
                ev->pending_weight[s] = w;
            }
            /* the slowest replica: its first micro-batch is on the path of the step */
            if (t > ev->time_ms[s]) ev->time_ms[s] = t;
            double u = ppdl_stage_opt_ms(c, st->first, st->last, ppdl_opt_speed(cl, r)) /
                       ppdl_opt_divisor(p->shard_optimizer, st);
            if (u > ev->optimizer_ms[s]) ev->optimizer_ms[s] = u;
            resource(ev, M, ppdl_replica_mbs(M, k, q), t, s, 0, &busiest);
        }
        ev->sum_time += ev->time_ms[s];
        if (stage_over > ev->worst_over) {
            ev->worst_over = stage_over;
            ev->worst_stage = s;
        }
        ev->allreduce_ms[s] = ppdl_stage_allreduce_ms(c, cl, st);
        if (ev->allreduce_ms[s] > ev->allreduce) ev->allreduce = ev->allreduce_ms[s];
        /* after the flush: the stage's all-reduce, then its optimizer step */
        if (ev->allreduce_ms[s] + ev->optimizer_ms[s] > ev->tail) ev->tail = ev->allreduce_ms[s] + ev->optimizer_ms[s];
        if (s + 1 < S) {
            const ppdl_plan_stage *nx = &p->stages[s + 1];
            int k2 = n_rep(nx);
            /* the slowest pair of ranks that carries a micro-batch */
            for (int a = 0; a < k; a++)
                for (int b = 0; b < k2; b++) {
                    int m = ppdl_pair_mbs(M, k, a, k2, b);
                    if (m < 1) continue;
                    double lk = ppdl_link_ms(c, cl, st->last, rep_rank(st, a), rep_rank(nx, b));
                    if (lk > ev->link_ms[s]) ev->link_ms[s] = lk;
                    resource(ev, M, m, lk, s, 1, &busiest);
                }
            ev->sum_link += ev->link_ms[s];
        }
    }
    if (S > 1 && c->tied_bytes > 0) { /* the tie's exchange between the first and the last stage */
        const ppdl_plan_stage *a = &p->stages[0], *b = &p->stages[S - 1];
        int ka = n_rep(a), kb = n_rep(b);
        int *ra = ppdl_xmalloc((size_t)(ka + kb) * sizeof(int)), *rb = ra + ka;
        for (int q = 0; q < ka; q++) ra[q] = rep_rank(a, q);
        for (int q = 0; q < kb; q++) rb[q] = rep_rank(b, q);
        ev->tie = ppdl_tie_ms(c, cl, ra, ka, rb, kb);
        free(ra);
    }
    free(held);
    /* phi = 1 (all but the zero-bubble schedules) multiplies exactly */
    ev->T = ev->phi * ev->sum_time + 2 * ev->sum_link + ev->pace + ev->tail + ev->tie;
    return 0;
}

void ppdl_cost_annotate(ppdl_plan *p, const ppdl_cost_eval *ev)
{
    /* the plan JSON records the schedule it was solved (or evaluated) for */
    snprintf(p->schedule, sizeof p->schedule, "%s", ppdl_schedule_name(ev->schedule));
    p->feasible = ev->feasible;
    p->predicted_iter_ms = ev->T;
    p->bottleneck_ms = ev->bottleneck;
    for (int s = 0, d0 = 0; s < p->S && s < ev->S; s++) {
        ppdl_plan_stage *st = &p->stages[s];
        st->time_ms = ev->time_ms[s];
        st->mem_bytes = ev->mem_bytes[s];
        st->allreduce_ms = ev->allreduce_ms[s];
        if (p->n_vocab > 0 && ev->S == 2 * p->S) { /* the rank's slice of the head with its stage */
            st->time_ms += ev->time_ms[2 * p->S - 1 - s];
            st->mem_bytes += ev->mem_bytes[2 * p->S - 1 - s];
        }
        if (!ev->replica_opt_bytes) continue;
        int k = n_rep(st);
        free(st->opt_bytes);
        st->opt_bytes = ppdl_xmalloc((size_t)k * sizeof(double));
        memcpy(st->opt_bytes, &ev->replica_opt_bytes[d0], (size_t)k * sizeof(double));
        d0 += k;
    }
}

double ppdl_cost_apply(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, ppdl_plan *p)
{
    ppdl_cost_eval ev;
    char err[PPDL_ERR_LEN];
    if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, sizeof err)) return INFINITY;
    ppdl_cost_annotate(p, &ev);
    double T = ev.T;
    ppdl_cost_eval_free(&ev);
    return T;
}

/* a layer's work and parameters, for the bound's relaxations */
typedef struct {
    double w, p;
} lb_item;

static double bytes_per_ms(const lb_item *x)
{
    return x->w > 0 ? x->p / x->w : x->p > 0 ? INFINITY : 0;
}

static int by_bytes_per_ms(const void *a, const void *b)
{
    double u = bytes_per_ms(a), v = bytes_per_ms(b);
    return (u > v) - (u < v);
}

static int by_work_desc(const void *a, const void *b)
{
    const lb_item *x = a, *y = b;
    return (x->w < y->w) - (x->w > y->w);
}

double ppdl_lower_bound_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, char *why,
                           size_t len)
{
    return ppdl_lower_bound_shard_ms(c, cl, M, schedule, 0, why, len);
}

double ppdl_lower_bound_shard_ms(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int shard,
                                 char *why, size_t len)
{
    if (schedule != PPDL_SCHED_GPIPE && schedule != PPDL_SCHED_1F1B) {
        if (why) snprintf(why, len, "no bound for %s (its fill factor)", ppdl_schedule_name(schedule));
        return 0;
    }
    int L = c->L, N = cl->N, kmax = M < N ? M : N;
    lb_item *by_p = ppdl_xmalloc(2 * (size_t)L * sizeof *by_p), *by_w = by_p + L;
    double W = 0, opt = 0, vmax = 0, sumv = 0, omax = 0, free_w = 0;
    int nw = 0;
    for (int l = 0; l < L; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        double w = lc->fwd_ms + lc->bwd_ms + (l == 0 ? c->input_ms : 0) + (l == L - 1 ? c->target_ms : 0);
        W += w;
        opt = fmax(opt, lc->opt_ms);
        by_p[l] = (lb_item){w, lc->param_bytes};
        if (lc->param_bytes > 0) by_w[nw++] = by_p[l];
        else free_w += w;
    }
    for (int r = 0; r < N; r++) {
        vmax = fmax(vmax, cl->speed[r]);
        sumv += cl->speed[r];
        omax = fmax(omax, ppdl_opt_speed(cl, r));
    }
    /* sharded, a layer's update may be split among up to kmax replicas */
    double tail = opt > 0 ? opt / omax / (shard ? kmax : 1) : 0, work = M * W / sumv + tail;
    /* Some stage s has W_s / k_s >= W / N (the stages hold W on at most N ranks). Its
     * busiest replica runs ceil(M / k_s) micro-batches: a pace of at least
     * (ceil(M / k_s) - 1) W_s / vmax; its all-reduce is a ring among k_s ranks of the
     * parameters of layers holding W_s of work, at least the fewest bytes (layers by
     * bytes per ms, the last one in part) and the fewest layers with parameters (the
     * parameter-free ones first, then by work) that hold it, over the fastest link and
     * least latency any k_s ranks can have. The least over k of the pace and the tail
     * is on top of one micro-batch through every layer. */
    qsort(by_p, (size_t)L, sizeof *by_p, by_bytes_per_ms);
    qsort(by_w, (size_t)nw, sizeof *by_w, by_work_desc);
    double *gbw = ppdl_xmalloc(2 * ((size_t)kmax + 1) * sizeof(double)), *glat = gbw + kmax + 1;
    ppdl_group_link_bounds(cl, kmax, gbw, glat);
    double best = INFINITY, cw = 0, cp = 0, nwk = free_w;
    int kbest = 1, ip = 0, iw = 0;
    for (int k = 1; k <= kmax; k++) {
        double w0 = k * W / N * (1 - 1e-12), ar = 0; /* the slack: rounding at k = N */
        if (k >= 2 && W > 0) {
            while (ip < L && cw + by_p[ip].w < w0) cw += by_p[ip].w, cp += by_p[ip++].p;
            double bytes = cp + (ip < L && by_p[ip].w > 0 ? (w0 - cw) / by_p[ip].w * by_p[ip].p : 0);
            while (iw < nw && nwk < w0) nwk += by_w[iw++].w;
            ar = ppdl_allreduce_ms_bw(k, bytes, iw, gbw[k], glat[k]);
        }
        double v = ((M + k - 1) / k - 1) * w0 / vmax + fmax(ar, tail);
        if (v < best) best = v, kbest = k;
    }
    free(gbw);
    free(by_p);
    double spread = W / vmax + best;
    if (why) {
        if (work > spread)
            snprintf(why, len, "the micro-batches' work shared by every rank's speed");
        else if (kbest == 1)
            snprintf(why, len, "one micro-batch through every layer on the fastest rank, then %d more through "
                     "the stage with the most work", M - 1);
        else
            snprintf(why, len, "one micro-batch through every layer on the fastest rank, then the pace and "
                     "all-reduce of a stage of %d replicas holding %d/%d of the work", kbest, kbest, N);
    }
    return fmax(work, spread);
}
