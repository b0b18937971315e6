/* solve_chunked.c — the cut and the recompute options of a chunked plan
 * (solve_chunked.h): two starting cuts, a local search over the boundaries, a greedy
 * recompute choice per rank inside every evaluation. */
#include "plan/solve_chunked.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/costmodel.h"
#include "plan/simulate.h"
#include "sched/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Evaluate chunked plan p (in copies or not) and annotate it (cost model T, the stages'
 * times and memories): 0 when it fits; -1 with the rank over its memory and by how much
 * (info->infeasible set, p kept), or -1 with the reason when p cannot be evaluated (p
 * freed, S = 0). info may be NULL. */
static int chunked_annotate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, ppdl_plan *p,
                            ppdl_solve_info *info, char *err, size_t errlen);
/* Where cl's ranks share a host's cores (shared_cores.h): sc says so and holds chunked
 * plan p's simulated step (the step that compares); else sc is zeroed. */
static void chunked_shared_choice(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                                  const ppdl_plan *p, ppdl_shared_choice *sc);

/* the search's state: one cut (first[0..S], stage s = layers first[s]..first[s+1]-1)
 * and one option per layer, and what the evaluation of it found */
typedef struct chunk_ctx {
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    int N, S, L, M, v, split;
    double phi;
    int *rank_of;              /* [S] the schedule's rank of each stage */
    int *own;                  /* [N*v] the stages of each rank, ascending */
    int *infl, *pend;          /* [S] micro-batches held, and held between B and W */
    int *first;                /* [S+1] the cut */
    int *opt;                  /* [L] recompute option of each layer */
    double *rank_time, *rank_mem, *rank_opt; /* [N] each */
    double *pair_ms;           /* [N*N] one micro-batch's messages per directed pair */
    int *touched;              /* [2S] pairs with messages (to clear pair_ms) */
    /* the evaluation's result */
    double over, T, spread;
    double spread_stages;      /* sum of the stages' times squared (part of spread) */
} chunk_ctx;

/* bytes a layer keeps on its stage with option o, for that stage's counts */
static double layer_keep(const chunk_ctx *x, int l, int o, int s)
{
    const ppdl_layer_cost *lc = &x->c->layers[l];
    return (double)x->infl[s] * lc->stash_bytes[o] + (double)x->pend[s] * lc->weight_keep_bytes[o];
}

/* Rank r's options: all 0, then while over its memory the upgrade that saves the most
 * bytes per extra ms (ties: the earlier stage and layer, the lower option). Returns
 * its memory. */
static double fit_rank(chunk_ctx *x, int r)
{
    const ppdl_costs *c = x->c;
    const int *own = x->own + (size_t)r * x->v;
    double mem = 0;
    for (int k = 0; k < x->v; k++) {
        for (int l = x->first[own[k]]; l < x->first[own[k] + 1]; l++) {
            x->opt[l] = 0;
            mem += c->state_multiplier * c->layers[l].param_bytes + layer_keep(x, l, 0, own[k]);
        }
        mem += ppdl_tie_mem(c, x->first[own[k]], x->first[own[k] + 1] - 1); /* a tied weight's other part */
    }
    double limit = x->cl->mem[r], speed = x->cl->speed[r];
    while (mem > limit) {
        int bl = -1, bo = 0;
        double best = -1, best_saved = 0;
        for (int k = 0; k < x->v; k++) {
            int s = own[k];
            for (int l = x->first[s]; l < x->first[s + 1]; l++) {
                int o0 = x->opt[l];
                double keep0 = layer_keep(x, l, o0, s), t0 = ppdl_layer_sched_ms(c, l, o0, x->split);
                for (int o = 1; o < c->layers[l].n_opts; o++) {
                    double saved = keep0 - layer_keep(x, l, o, s);
                    if (saved <= 0) continue;
                    double extra = (ppdl_layer_sched_ms(c, l, o, x->split) - t0) / speed;
                    double score = saved / (extra > 1e-9 ? extra : 1e-9);
                    if (score > best) {
                        best = score;
                        bl = l;
                        bo = o;
                        best_saved = saved;
                    }
                }
            }
        }
        if (bl < 0) break; /* nothing keeps less: over it stays */
        x->opt[bl] = bo;
        mem -= best_saved;
    }
    return mem;
}

/* The cost model's T of the current cut (solve_chunked_cost.c's formula, term by
 * term), the memory over the limits and the spread (the sums of squares of the ranks'
 * work and of the stages' times: among cuts of one T, the balanced one); the options
 * are chosen on the way. */
static void evaluate(chunk_ctx *x)
{
    const ppdl_costs *c = x->c;
    const ppdl_cluster_model *cl = x->cl;
    int N = x->N, S = x->S, M = x->M, n_touched = 0;
    for (int r = 0; r < N; r++) {
        x->rank_mem[r] = fit_rank(x, r);
        x->rank_time[r] = x->rank_opt[r] = 0;
    }
    double sum_time = 0, sum_link = 0;
    x->spread_stages = 0;
    for (int s = 0; s < S; s++) {
        int r = x->rank_of[s], i = x->first[s], j = x->first[s + 1] - 1;
        double t = ppdl_stage_time_split(c, i, j, x->opt + i, cl->speed[r], x->split);
        sum_time += t;
        x->rank_time[r] += t;
        x->spread_stages += t * t;
        x->rank_opt[r] += ppdl_stage_opt_ms(c, i, j, ppdl_opt_speed(cl, r));
        if (s + 1 < S && x->rank_of[s + 1] != r) {
            int r2 = x->rank_of[s + 1];
            sum_link += ppdl_link_ms(c, cl, j, r, r2);
            size_t ab[2] = {(size_t)r * N + r2, (size_t)r2 * N + r};
            for (int d = 0; d < 2; d++) {
                if (x->pair_ms[ab[d]] == 0) x->touched[n_touched++] = (int)ab[d];
                x->pair_ms[ab[d]] += ppdl_link_ms(c, cl, j, d ? r2 : r, d ? r : r2);
            }
        }
    }
    double work = 0, tail = 0, over = 0, spread = x->spread_stages;
    for (int r = 0; r < N; r++) {
        if (x->rank_time[r] > work) work = x->rank_time[r];
        if (x->rank_opt[r] > tail) tail = x->rank_opt[r];
        if (x->rank_mem[r] > cl->mem[r]) over += x->rank_mem[r] - cl->mem[r];
        spread += x->rank_time[r] * x->rank_time[r];
    }
    for (int k = 0; k < n_touched; k++) {
        if (x->pair_ms[x->touched[k]] > work) work = x->pair_ms[x->touched[k]];
        x->pair_ms[x->touched[k]] = 0;
    }
    x->over = over;
    /* a tied weight's exchange: the same for every cut, not for every order of ranks */
    x->T = x->phi * sum_time + 2 * sum_link + (M - 1) * work + tail +
           ppdl_tie_ms(c, cl, &x->rank_of[0], 1, &x->rank_of[S - 1], 1);
    x->spread = spread;
}

/* a strictly better key than (over, T, spread) (relative 1e-12 on T and the spread) */
static int better(const chunk_ctx *x, double over, double T, double spread)
{
    if (x->over != over) return x->over < over;
    if (x->T < T * (1 - 1e-12)) return 1;
    if (x->T > T * (1 + 1e-12)) return 0;
    return x->spread < spread * (1 - 1e-12);
}

/* the key of the current cut against a saved one: kept when better, else undone */
typedef struct saved_key {
    double over, T, spread;
} saved_key;

static saved_key key_of(const chunk_ctx *x) { return (saved_key){x->over, x->T, x->spread}; }

/* Chain moves: boundaries b..b+k-1 all shift by dir (one layer passed along k stages,
 * which moves work off a rank whose neighbours are as busy as it); k up to CHAIN_MAX */
#define CHAIN_MAX 8

static int try_chain(chunk_ctx *x, int b, int k, int dir, long *evals)
{
    for (int t = b; t < b + k; t++) x->first[t] += dir;
    int valid = 1; /* every stage keeps a layer */
    for (int s = b - 1; s < b + k && valid; s++) valid = x->first[s + 1] > x->first[s];
    saved_key k0 = key_of(x);
    if (valid) {
        evaluate(x);
        (*evals)++;
        if (better(x, k0.over, k0.T, k0.spread)) return 1;
    }
    for (int t = b; t < b + k; t++) x->first[t] -= dir;
    x->over = k0.over, x->T = k0.T, x->spread = k0.spread;
    return 0;
}

/* The local search from the current cut, in passes until one changes nothing:
 *  1. each boundary in turn to the best of all its positions between its neighbours;
 *  2. chain moves (above), the first that improves kept. */
static long local_search(chunk_ctx *x)
{
    long evals = 1;
    evaluate(x);
    for (int improved = 1; improved;) {
        improved = 0;
        for (int b = 1; b < x->S; b++) {
            saved_key best = key_of(x);
            int old = x->first[b], best_pos = old;
            for (int pos = x->first[b - 1] + 1; pos < x->first[b + 1]; pos++) {
                if (pos == old) continue;
                x->first[b] = pos;
                evaluate(x);
                evals++;
                if (better(x, best.over, best.T, best.spread)) {
                    best = key_of(x);
                    best_pos = pos;
                }
            }
            x->first[b] = best_pos;
            x->over = best.over, x->T = best.T, x->spread = best.spread;
            improved |= best_pos != old;
        }
        for (int b = 1; b < x->S; b++)
            for (int k = 2; k <= CHAIN_MAX && b + k - 1 < x->S; k++)
                for (int dir = -1; dir <= 1; dir += 2) improved |= try_chain(x, b, k, dir, &evals);
    }
    evaluate(x); /* the options of the cut kept */
    return evals;
}

/* the first start: the layers' work (option 0) cut in proportion to the speeds of the
 * stages' ranks, every stage at least one layer */
static void cut_by_speed(chunk_ctx *x)
{
    const ppdl_costs *c = x->c;
    int L = x->L, S = x->S;
    double *pre = ppdl_xcalloc((size_t)L + 1, sizeof(double)), total_speed = 0;
    for (int l = 0; l < L; l++) pre[l + 1] = pre[l] + ppdl_layer_sched_ms(c, l, 0, x->split);
    for (int s = 0; s < S; s++) total_speed += x->cl->speed[x->rank_of[s]];
    double acc = 0;
    x->first[0] = 0;
    for (int s = 0; s + 1 < S; s++) {
        acc += x->cl->speed[x->rank_of[s]];
        double target = pre[L] * acc / total_speed;
        int b = x->first[s] + 1; /* stage s gets at least one layer ... */
        while (b < L - (S - s - 1) && pre[b] < target) b++;
        /* ... and the boundary nearest the target */
        if (b - 1 > x->first[s] && target - pre[b - 1] < pre[b] - target) b--;
        x->first[s + 1] = b;
    }
    x->first[S] = L;
    free(pre);
}

/* the second start: equal layer counts, the first L mod S stages one more */
static void cut_equal(chunk_ctx *x)
{
    x->first[0] = 0;
    for (int s = 0; s < x->S; s++) x->first[s + 1] = x->first[s] + x->L / x->S + (s < x->L % x->S ? 1 : 0);
}

/* C(L-1, S-1), the number of cuts, or cap + 1 once above cap */
static double n_cuts(int L, int S, double cap)
{
    double n = 1;
    for (int k = 1; k <= S - 1 && n <= cap; k++) n = n * (L - S + k) / k;
    return n <= cap ? floor(n + 0.5) : cap + 1;
}

/* Every cut in turn (few layers per stage: C(L-1, S-1) <= PPDL_CHUNKED_EVERY_CUT); the
 * best into x->first */
static long every_cut(chunk_ctx *x)
{
    int S = x->S, L = x->L;
    int *best = ppdl_xmalloc(((size_t)S + 1) * sizeof(int));
    saved_key bk = {INFINITY, INFINITY, INFINITY};
    long evals = 0;
    for (int s = 0; s < S; s++) x->first[s] = s;
    x->first[S] = L;
    for (;;) {
        evaluate(x);
        evals++;
        if (better(x, bk.over, bk.T, bk.spread)) {
            bk = key_of(x);
            memcpy(best, x->first, ((size_t)S + 1) * sizeof(int));
        }
        /* the next cut: the last boundary that can move right does, the later ones
         * follow as far left as they can */
        int b = S - 1;
        while (b >= 1 && x->first[b] + 1 > L - (S - b)) b--;
        if (b < 1) break;
        x->first[b]++;
        for (int t = b + 1; t < S; t++) x->first[t] = x->first[t - 1] + 1;
    }
    memcpy(x->first, best, ((size_t)S + 1) * sizeof(int));
    free(best);
    evaluate(x);
    return evals;
}

/* A kick for a restart: KICK_MOVES boundaries, drawn by a fixed generator, each moved to
 * a random position between its neighbours */
#define KICK_MOVES 3
#define RESTARTS 6

static void kick(chunk_ctx *x, ppdl_rng *g)
{
    for (int m = 0; m < KICK_MOVES && x->S > 1; m++) {
        int b = 1 + (int)(ppdl_rng_u64(g) % (uint64_t)(x->S - 1));
        int lo = x->first[b - 1] + 1, hi = x->first[b + 1] - 1;
        if (hi >= lo) x->first[b] = lo + (int)(ppdl_rng_u64(g) % (uint64_t)(hi - lo + 1));
    }
}

/* the current cut and options into the plan's stages (the skeleton's ranks) */
static void write_cut(const chunk_ctx *x, ppdl_plan *out)
{
    for (int s = 0; s < x->S; s++) {
        ppdl_plan_stage *st = &out->stages[s];
        st->first = x->first[s];
        st->last = x->first[s + 1] - 1;
        free(st->recompute);
        st->recompute = ppdl_xmalloc((size_t)(st->last - st->first + 1) * sizeof(int));
        memcpy(st->recompute, x->opt + st->first, (size_t)(st->last - st->first + 1) * sizeof(int));
    }
}

/* what the search of one rank order found */
typedef struct order_result {
    double over, T, sim;       /* sim: the picked cut's simulated step (NAN: not played) */
    long evals;
    int every, picked;         /* every cut tried; the cut the simulator picked (0: the search's) */
} order_result;

/* The cut and the options for the skeleton `out` (its ranks: one order of the ranks
 * in the schedule's positions), written into out; ev0: the skeleton's evaluation (the
 * fill factor and each stage's counts, which depend on the positions alone). */
static void search_order(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v,
                         double every_max, int sim_pick, int restarts, const ppdl_cost_eval *ev0, ppdl_plan *out,
                         order_result *res)
{
    int N = cl->N, L = c->L;
    chunk_ctx x = {.c = c, .cl = cl, .N = N, .S = out->S, .L = L, .M = M, .v = v,
                   .split = ppdl_schedule_splits_backward(schedule), .phi = ev0->phi};
    int S = x.S;
    x.rank_of = ppdl_xmalloc((size_t)S * sizeof(int));
    x.infl = ppdl_xmalloc((size_t)S * sizeof(int));
    x.pend = ppdl_xmalloc((size_t)S * sizeof(int));
    for (int s = 0; s < S; s++) {
        x.rank_of[s] = out->stages[s].rank;
        x.infl[s] = ev0->in_flight[s];
        x.pend[s] = ev0->pending_weight[s];
    }
    x.own = ppdl_xmalloc((size_t)N * v * sizeof(int));
    for (int r = 0; r < N; r++)
        PPDL_CHECK(ppdl_plan_stages_of_rank(out, r, x.own + (size_t)r * v, v) == v, "rank %d: not %d stages", r, v);
    x.first = ppdl_xmalloc(((size_t)S + 1) * sizeof(int));
    x.opt = ppdl_xcalloc((size_t)L, sizeof(int));
    x.rank_time = ppdl_xcalloc(3 * (size_t)N, sizeof(double));
    x.rank_mem = x.rank_time + N;
    x.rank_opt = x.rank_mem + N;
    x.pair_ms = ppdl_xcalloc((size_t)N * N, sizeof(double));
    x.touched = ppdl_xmalloc(2 * (size_t)S * sizeof(int));

    /* few cuts: every one; else the two starts and RESTARTS kicks of the best so far,
     * each searched; the best kept (ties: the earliest) */
    int *best_first = ppdl_xmalloc(((size_t)S + 1) * sizeof(int));
    saved_key bk = {INFINITY, INFINITY, INFINITY};
    memset(res, 0, sizeof *res);
    res->every = n_cuts(L, S, every_max) <= every_max;
    if (res->every) {
        res->evals = every_cut(&x);
        memcpy(best_first, x.first, ((size_t)S + 1) * sizeof(int));
    } else {
        ppdl_rng g;
        ppdl_rng_seed(&g, 22);
        for (int start = 0; start < 2 + restarts; start++) {
            if (start == 0) cut_by_speed(&x);
            else if (start == 1) cut_equal(&x);
            else {
                memcpy(x.first, best_first, ((size_t)S + 1) * sizeof(int));
                kick(&x, &g);
            }
            res->evals += local_search(&x);
            if (better(&x, bk.over, bk.T, bk.spread)) {
                memcpy(best_first, x.first, ((size_t)S + 1) * sizeof(int));
                bk = key_of(&x);
            }
        }
    }
    memcpy(x.first, best_first, ((size_t)S + 1) * sizeof(int));
    evaluate(&x);
    write_cut(&x, out);
    /* T proposes, the simulator picks: the search's cut against the two starting cuts */
    res->sim = NAN;
    if (sim_pick) {
        double best_sim = ppdl_simulated_ms(c, cl, out, M, schedule), best_over = x.over;
        for (int k = 1; k <= 2 && isfinite(best_sim); k++) {
            if (k == 1) cut_by_speed(&x);
            else cut_equal(&x);
            evaluate(&x);
            if (x.over > best_over) continue;
            write_cut(&x, out);
            double sim = ppdl_simulated_ms(c, cl, out, M, schedule);
            if (x.over < best_over || sim < best_sim * (1 - 1e-9)) {
                best_sim = sim, best_over = x.over;
                memcpy(best_first, x.first, ((size_t)S + 1) * sizeof(int));
                res->picked = k;
            }
        }
        memcpy(x.first, best_first, ((size_t)S + 1) * sizeof(int));
        evaluate(&x);
        write_cut(&x, out);
        res->sim = best_sim;
    }
    res->over = x.over;
    res->T = x.T;
    free(best_first);
    free(x.rank_of);
    free(x.own);
    free(x.infl);
    free(x.pend);
    free(x.first);
    free(x.opt);
    free(x.rank_time);
    free(x.pair_ms);
    free(x.touched);
}

/* one message each way between ranks a and b, ms (a boundary's typical activation) */
static double pair_cost(const ppdl_cluster_model *cl, double bytes, int a, int b)
{
    size_t ab = (size_t)a * cl->N + b, ba = (size_t)b * cl->N + a;
    return 1e3 * (cl->lat[ab] + bytes / cl->bw[ab] + cl->lat[ba] + bytes / cl->bw[ba]);
}

/* another order of the ranks is searched only where its neighbours' links cost less
 * than this share of the ranks in order's (a probe's links differ by a few % anyway) */
#define ORDER_GAIN 0.9

/* the cost of the positions' neighbours in `order`: p and p+1, and N-1 with 0 on a ring */
static double order_cost(const ppdl_cluster_model *cl, double bytes, const int *order, int ring)
{
    int N = cl->N;
    double t = 0;
    for (int p = 0; p + 1 < N; p++) t += pair_cost(cl, bytes, order[p], order[p + 1]);
    if (ring && N > 2) t += pair_cost(cl, bytes, order[N - 1], order[0]);
    return t;
}

/* order[i..j] reversed in place (a 2-opt move) */
static void reverse(int *order, int i, int j)
{
    for (; i < j; i++, j--) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* The ranks in the schedule's positions whose neighbours talk fastest: from rank 0 the
 * fastest-linked rank not yet placed, then reversals of segments (2-opt) while they
 * lower order_cost. ring: interleaved (its last position sends to the first), else the
 * V (a path). Returns 1 when the order differs from 0..N-1 and its cost is below
 * ORDER_GAIN times theirs. */
static int choose_order(const ppdl_costs *c, const ppdl_cluster_model *cl, int ring, int *order)
{
    int N = cl->N;
    double bytes = 0;
    for (int l = 0; l < c->L; l++) bytes += c->layers[l].out_bytes / c->L; /* the mean activation */
    char *used = ppdl_xcalloc((size_t)N, 1);
    order[0] = 0;
    used[0] = 1;
    for (int p = 1; p < N; p++) {
        int best = -1;
        for (int r = 0; r < N; r++)
            if (!used[r] && (best < 0 || pair_cost(cl, bytes, order[p - 1], r) <
                                             pair_cost(cl, bytes, order[p - 1], best) * (1 - 1e-9)))
                best = r;
        order[p] = best;
        used[best] = 1;
    }
    free(used);
    double cost = order_cost(cl, bytes, order, ring);
    int *id = ppdl_xmalloc((size_t)N * sizeof(int));
    for (int p = 0; p < N; p++) id[p] = p;
    double cost_id = order_cost(cl, bytes, id, ring);
    free(id);
    for (int improved = 1, rounds = 0; improved && rounds < 50; rounds++) {
        improved = 0;
        for (int i = 1; i < N; i++)
            for (int j = i + 1; j < N; j++) {
                reverse(order, i, j);
                double c2 = order_cost(cl, bytes, order, ring);
                if (c2 < cost * (1 - 1e-9)) {
                    cost = c2;
                    improved = 1;
                } else {
                    reverse(order, i, j);
                }
            }
    }
    int moved = 0;
    for (int p = 0; p < N; p++) moved |= order[p] != p;
    /* worth a second search only where the links differ by more than their noise */
    return moved && cost < ORDER_GAIN * cost_id;
}

/* a new skeleton: L layers in v N equal stages, the position p's stages on order[p] */
static int skeleton(const ppdl_costs *c, int N, int v, int v_order, const int *order, ppdl_plan *out, char *err,
                    size_t errlen)
{
    if (ppdl_plan_uniform_chunked(c->L, N, v, v_order, out, err, errlen)) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    for (int s = 0; order && s < out->S; s++) out->stages[s].rank = out->stages[s].ranks[0] = order[out->stages[s].rank];
    return 0;
}

int ppdl_solve_chunked(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v,
                       const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, ppdl_shared_choice *sc,
                       char *err, size_t errlen)
{
    double every_max = opts ? opts->chunked_every_cut : PPDL_CHUNKED_EVERY_CUT;
    int sim_pick = opts ? opts->chunked_sim_pick : 1, placement = opts ? opts->placement : 1;
    int restarts = opts ? opts->chunked_restarts : RESTARTS;
    memset(out, 0, sizeof *out);
    if (info) memset(info, 0, sizeof *info);
    if (sc) memset(sc, 0, sizeof *sc);
    int N = cl->N, L = c->L;
    if (!ppdl_schedule_chunked(schedule))
        return ppdl_errf(err, errlen, "schedule %s holds one stage per rank: not a chunked plan",
                         ppdl_schedule_name(schedule));
    if (M < 1) return ppdl_errf(err, errlen, "--micro-batches %d: expected >= 1", M);
    if (schedule == PPDL_SCHED_ZB_V && v != 2)
        return ppdl_errf(err, errlen, "zb-v holds 2 stages per rank (its V), not %d", v);
    if (v < 2 || v > PPDL_MAX_CHUNKS)
        return ppdl_errf(err, errlen, "%d stages per rank: %s holds 2 to %d", v, ppdl_schedule_name(schedule),
                         PPDL_MAX_CHUNKS);
    if ((long long)v * N > L)
        return ppdl_errf(err, errlen, "%d stages per rank on %d ranks: %d stages of at least one layer each, and the "
                         "model has %d layers", v, N, v * N, L);
    /* the skeleton: the ranks in order, equal counts; its evaluation gives the fill
     * factor and each stage's counts, which depend on the positions alone */
    int v_order = schedule == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN;
    if (skeleton(c, N, v, v_order, NULL, out, err, errlen)) return -1;
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, out, &ev, err, errlen)) {
        ppdl_plan_free(out);
        memset(out, 0, sizeof *out);
        return -1;
    }
    order_result res;
    search_order(c, cl, M, schedule, v, every_max, sim_pick, restarts, &ev, out, &res);
    /* the placement: the ranks in order, or the order whose neighbours talk fastest
     * where it differs (a cyclic numbering of the nodes' ranks); the better plan by
     * the memory over, then the simulated step (T without the simulator), ties to the
     * ranks in order */
    int *order = ppdl_xmalloc((size_t)N * sizeof(int)), placed = 0;
    if (placement && N > 2 && choose_order(c, cl, v_order == PPDL_CHUNKS_ROUND_ROBIN, order)) {
        ppdl_plan alt;
        order_result ra;
        if (skeleton(c, N, v, v_order, order, &alt, err, errlen) == 0) {
            search_order(c, cl, M, schedule, v, every_max, sim_pick, restarts, &ev, &alt, &ra);
            double k0 = sim_pick && isfinite(res.sim) ? res.sim : res.T, k1 = sim_pick && isfinite(ra.sim) ? ra.sim : ra.T;
            if (ra.over < res.over || (ra.over == res.over && k1 < k0 * (1 - 1e-9))) {
                ppdl_plan_free(out);
                *out = alt;
                ra.evals += res.evals;
                res = ra;
                placed = 1;
            } else {
                res.evals += ra.evals;
                ppdl_plan_free(&alt);
            }
        }
    }
    free(order);
    ppdl_cost_eval_free(&ev);
    snprintf(out->method, sizeof out->method, "ppdl");
    if (info) {
        info->exact = 0; /* every cut tried is not optimal either: the options are greedy */
        snprintf(info->placement, sizeof info->placement, "%s order, %s; %s%s",
                 v_order == PPDL_CHUNKS_V ? "V" : "round-robin", placed ? "ranks by their links" : "ranks in order",
                 res.every ? "every cut" : "local search",
                 res.picked == 1 ? ", speed-proportional cut by simulation"
                 : res.picked == 2 ? ", equal cut by simulation" : "");
        info->orders_solved = res.evals;
        snprintf(info->hybrid, sizeof info->hybrid, "none (chunks and replicas do not mix)");
    }

    /* the cost model's own evaluation, as for every plan */
    int rc = chunked_annotate(c, cl, M, schedule, out, info, err, errlen);
    if (sc && rc == 0) chunked_shared_choice(c, cl, M, schedule, out, sc);
    return rc;
}

static int chunked_annotate(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, ppdl_plan *p,
                            ppdl_solve_info *info, char *err, size_t errlen)
{
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, errlen)) {
        ppdl_plan_free(p);
        memset(p, 0, sizeof *p);
        return -1;
    }
    ppdl_cost_annotate(p, &ev);
    int rc = 0, k = ppdl_plan_chunk_replicas(p);
    if (!ev.feasible) {
        char a[32], b[32], who[96];
        int s = ev.worst_stage;
        if (info) info->infeasible = 1;
        if (k > 1) /* the worst replica may be in any copy */
            snprintf(who, sizeof who, "in %d copies of %d ranks, a rank of stage %d", k, cl->N / k, s);
        else
            snprintf(who, sizeof who, "rank %d", p->stages[s].rank);
        rc = ppdl_errf(err, errlen, "no plan fits in memory: with %d stages per rank (%s), %s (its stages together, "
                       "stage %d among them) is over its %s by %s with the smallest-stash option where it helps; give "
                       "the ranks more memory or fewer micro-batches", ppdl_plan_chunks(p), ppdl_schedule_name(schedule),
                       who, s, ppdl_fmt_bytes((size_t)ev.mem_limit[s], a, sizeof a),
                       ppdl_fmt_bytes((size_t)ev.worst_over, b, sizeof b));
    }
    ppdl_cost_eval_free(&ev);
    return rc;
}

static void chunked_shared_choice(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                                  const ppdl_plan *p, ppdl_shared_choice *sc)
{
    memset(sc, 0, sizeof *sc);
    if (cl->N < 2 || !ppdl_hosts_oversubscribed(&cl->hosts, cl->N)) return;
    ppdl_shared_choice_host(cl, sc);
    sc->active = 1;
    sc->candidates = 1;
    snprintf(sc->chosen, sizeof sc->chosen, "the optimum of T");
    sc->chosen_sim_ms = sc->optimum_sim_ms = ppdl_simulated_ms(c, cl, p, M, schedule);
    ppdl_plan_kind(p, sc->optimum_kind, sizeof sc->optimum_kind);
}

// ----------------------------------------------------------------------------
// chunked plans in k copies (solve_chunked.h, "k copies")

static int copies_rank(int grouping, int n, int k, int q, int r)
{
    return grouping == PPDL_COPIES_STRIDED ? r * k + q : q * n + r;
}

/* copy 0's hosts, each host's cores in proportion to its ranks in copy 0 (at least one):
 * k copies sharing a host run about k times the ranks of one on its cores */
static void copy_hosts(const ppdl_hosts *h, int N, int k, int grouping, ppdl_hosts *out)
{
    int n = N / k;
    ppdl_hosts_copy(out, h, N); /* of_rank of all N; position r reads copy 0's rank */
    if (h->n <= 0) return;
    for (int r = 0; r < n; r++) out->of_rank[r] = h->of_rank[copies_rank(grouping, n, k, 0, r)];
    int *all = ppdl_xcalloc(2 * (size_t)h->n, sizeof(int)), *mine = all + h->n;
    for (int r = 0; r < N; r++) all[h->of_rank[r]]++;
    for (int r = 0; r < n; r++) mine[out->of_rank[r]]++;
    for (int i = 0; i < h->n; i++)
        if (mine[i] > 0) {
            int share = (int)((long long)h->cores[i] * mine[i] / all[i]);
            out->cores[i] = share > 0 ? share : 1;
        }
    free(all);
}

static void cluster_of_copy(const ppdl_cluster_model *cl, int k, int grouping, ppdl_cluster_model *out)
{
    int N = cl->N, n = N / k;
    ppdl_cluster_model_alloc(out, n);
    for (int a = 0; a < n; a++) {
        out->mem[a] = out->speed[a] = INFINITY;
        for (int b = 0; b < n; b++) {
            out->bw[a * n + b] = INFINITY;
            out->lat[a * n + b] = 0;
        }
        for (int q = 0; q < k; q++) {
            int ra = copies_rank(grouping, n, k, q, a);
            out->mem[a] = fmin(out->mem[a], cl->mem[ra]);
            out->speed[a] = fmin(out->speed[a], cl->speed[ra]);
            for (int b = 0; b < n; b++) {
                size_t ab = (size_t)ra * N + copies_rank(grouping, n, k, q, b);
                out->bw[a * n + b] = fmin(out->bw[a * n + b], cl->bw[ab]);
                out->lat[a * n + b] = fmax(out->lat[a * n + b], cl->lat[ab]);
            }
        }
    }
    copy_hosts(&cl->hosts, N, k, grouping, &out->hosts);
}

static void plan_copies(const ppdl_plan *one, int n, int k, int grouping, ppdl_plan *out)
{
    *out = *one;
    out->stages = ppdl_xcalloc((size_t)one->S, sizeof *out->stages);
    for (int s = 0; s < one->S; s++) {
        const ppdl_plan_stage *a = &one->stages[s];
        ppdl_plan_stage *b = &out->stages[s];
        *b = *a;
        b->slice_weights = b->opt_bytes = NULL; /* the copies' own, from their evaluation */
        size_t nl = (size_t)(a->last - a->first + 1);
        b->recompute = ppdl_xmalloc(nl * sizeof(int));
        memcpy(b->recompute, a->recompute, nl * sizeof(int));
        b->n_replicas = k;
        b->ranks = ppdl_xmalloc((size_t)k * sizeof(int));
        for (int q = 0; q < k; q++) b->ranks[q] = copies_rank(grouping, n, k, q, a->rank);
        b->rank = b->ranks[0];
    }
}

/* T of the plan of equal layer counts in k copies, grouped so (INFINITY when there is
 * none) */
static double uniform_T(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v, int k,
                        int grouping)
{
    ppdl_plan one, p;
    char err[PPDL_ERR_LEN];
    int order = schedule == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN, n = cl->N / k;
    if (ppdl_plan_uniform_chunked(c->L, n, v, order, &one, err, sizeof err)) return INFINITY;
    plan_copies(&one, n, k, grouping, &p);
    ppdl_plan_free(&one);
    ppdl_cost_eval ev;
    double T = INFINITY;
    if (ppdl_cost_evaluate(c, cl, M, schedule, &p, &ev, err, sizeof err) == 0) {
        T = ev.T;
        ppdl_cost_eval_free(&ev);
    }
    ppdl_plan_free(&p);
    return T;
}

int ppdl_copies_screen(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v, double *T_one,
                       double *T_k, int *grouping)
{
    int N = cl->N, best = 0;
    double best_T = INFINITY;
    if (grouping) *grouping = PPDL_COPIES_BLOCKS;
    for (int k = 2; k <= N / 2 && k <= M; k++) {
        if (N % k || (long long)v * (N / k) > c->L) continue;
        for (int g = PPDL_COPIES_BLOCKS; g <= PPDL_COPIES_STRIDED; g++) {
            double T = uniform_T(c, cl, M, schedule, v, k, g);
            if (T < best_T * (1 - 1e-9)) { /* ties: the fewer copies, then in blocks */
                best_T = T;
                best = k;
                if (grouping) *grouping = g;
            }
        }
    }
    if (T_one) *T_one = uniform_T(c, cl, M, schedule, v, 1, PPDL_COPIES_BLOCKS);
    if (T_k) *T_k = best_T;
    return best;
}

int ppdl_solve_chunked_copies(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int v, int k,
                              int grouping, const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info,
                              ppdl_shared_choice *sc, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (sc) memset(sc, 0, sizeof *sc);
    int N = cl->N;
    if (k < 2 || N % k || N / k < 2 || k > M)
        return ppdl_errf(err, errlen, "%d copies of a chunked pipeline on %d ranks for %d micro-batches: expected a "
                         "divisor k >= 2 of the ranks with at least 2 ranks a copy and k <= the micro-batches", k, N, M);
    int n = N / k, M0 = (M + k - 1) / k;
    ppdl_cluster_model one_cl;
    cluster_of_copy(cl, k, grouping, &one_cl);
    ppdl_plan one;
    ppdl_solve_chunked(c, &one_cl, M0, schedule, v, opts, &one, info, NULL, err, errlen);
    ppdl_cluster_model_free(&one_cl);
    if (one.S == 0) return -1; /* err says why */
    plan_copies(&one, n, k, grouping, out);
    ppdl_plan_free(&one);
    if (info) {
        info->replicated = 1;
        snprintf(info->hybrid, sizeof info->hybrid, "%d copies x %d ranks%s, copy 0 %d of %d micro-batches", k, n,
                 grouping == PPDL_COPIES_STRIDED ? " strided" : "", M0, M);
    }
    /* the whole plan: every copy's ranks and the sums of the gradients */
    int rc = chunked_annotate(c, cl, M, schedule, out, info, err, errlen);
    if (sc && rc == 0) chunked_shared_choice(c, cl, M, schedule, out, sc);
    return rc;
}
