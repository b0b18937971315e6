/* solver.c — the public entry points (solver.h): exact placement over rank orders, the
 * one-rank-per-stage search, its combination with the replica layouts (hybrid.c), and
 * the report when nothing fits. The engine (engine.c) solves one rank order exactly;
 * placement.c chooses orders when there are too many ranks to try them all.
 *
 * The problem (costmodel.h): cut L layers into S = N contiguous non-empty stages, give
 * stage s a distinct rank r_s and every layer an option c_l, to minimise
 *     T = sum_s time_s + 2 sum_s link_s + (M-1) max(max_s time_s, max_s link_s)
 * subject to mem_s <= mem[r_s].
 *
 * 1. Placement. The objective sees the order only through consecutive pairs, and stage
 *    s's in-flight count depends on s alone, so a DP over (set U of ranks used by
 *    stages 0..|U|-1, rank r of the last of them, its last layer j) is exact:
 *    O(2^N N L) states, O(N len) moves each, down the same staircase of B as one order
 *    (engine.c). Ranks that are interchangeable (a swap leaves speeds, memories and
 *    both matrices unchanged, and, with a memory contention, the host and the memcpy
 *    rate) are used in index order only, which shrinks the search on regular clusters. Larger N: placement.c (groups of fast-linked ranks, orders,
 *    local search).
 *
 * 2. Upper bounds first. Before the frontiers exist, the same order DP with fixed
 *    options (all option 0; all smallest-stash) on the candidate orders gives a plan
 *    and T_ub cheaply (stage costs from prefix sums). No smallest-stash plan on any order
 *    tried fits means no plan fits there: the report then names the stage that is over
 *    by the least, from a DP minimising the largest overflow.
 */
#include "plan/solver.h"
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"
#include "plan/costmodel.h"
#include "plan/engine.h"
#include "plan/hybrid.h"
#include "plan/placement.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TT_MAX 16000000L          /* tabulated stage times at most (exact placement) */

void ppdl_solve_opts_default(ppdl_solve_opts *o)
{
    o->placement = 1;
    o->exact_max_ranks = 10;
    o->exact_max_states = 20000000L;
    o->local_search_evals = 0;
    o->replicate = 1;
    o->exact_hybrid_ranks = 6;
    o->hybrid_evals = 0;
    o->fit_search = 1;
    o->seed_order = NULL;
    o->chunks = 2;
    o->auto_chunked = 1;
    o->chunked_every_cut = 20000; /* PPDL_CHUNKED_EVERY_CUT */
    o->chunked_sim_pick = 1;
    o->chunked_restarts = 6; /* solve_chunked.c RESTARTS */
    o->shard_optimizer = 0;
}


// ----------------------------------------------------------------------------
// exact placement: DP over subsets of ranks

#define FITS(v) ((v) < INFINITY && (strict ? (v) < B : (v) <= B))

/* Returns the best T below T_inc and its order and cut, or INFINITY. mode: how the
 * stages' options are chosen (MODE_BEST needs the frontiers). */
static double solve_subsets(plan_ctx *x, void *arg, double T_inc, int *order_out, int *first_out)
{
    int mode = *(const int *)arg;
    int N = x->N, S = x->S, L = x->L, ML = mode == MODE_BEST ? x->ML : x->MLmax, M = x->M;
    if (ML < 1 || (double)S * N * L * ML > TT_MAX) return INFINITY;
    size_t rowsz = (size_t)L * ML;
    double *tab = ppdl_xmalloc((size_t)S * N * rowsz * sizeof(double));
    for (int s = 0; s < S; s++) {
        int n = x->infl[s];
        for (int r = 0; r < N; r++) {
            double *rows = &tab[((size_t)s * N + r) * rowsz];
            for (int i = 0; i < L; i++)
                for (int len = 1; len <= ML; len++) {
                    int j = i + len - 1;
                    rows[(size_t)i * ML + len - 1] = (i < s || j > L - S + s) ? INFINITY : rank_stage_time(x, mode, i, j, r, n);
                }
        }
    }
    double *lkr = ppdl_xmalloc((size_t)L * N * N * sizeof(double));
    for (int j = 0; j < L; j++)
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                lkr[((size_t)j * N + a) * N + b] = a == b ? INFINITY : ppdl_link_ms(x->c, x->cl, j, a, b);
    double *restlb = ppdl_xmalloc((size_t)L * sizeof(double));
    for (int j = 0; j < L; j++) restlb[j] = x->phi * ((x->W[L] - x->W[j + 1]) / x->vmax);
    double *tie_x = ppdl_xcalloc((size_t)N * N, sizeof(double)); /* X(first rank, last rank) */
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++)
            if (a != b) tie_x[(size_t)a * N + b] = ppdl_tie_ms(x->c, x->cl, &a, 1, &b, 1);
    unsigned *lower = ppdl_xcalloc((size_t)N, sizeof(unsigned)); /* interchangeable ranks below r */
    for (int r = 0; r < N; r++)
        for (int q = 0; q < r; q++)
            if (x->eq[q] == x->eq[r]) lower[r] |= 1u << q;

    size_t nU = (size_t)1 << N, nst = nU * N * L;
    double *val = ppdl_xmalloc(nst * sizeof(double));
    int *back = ppdl_xmalloc(nst * sizeof(int));
    unsigned full = (unsigned)(nU - 1);
#define ST(U, r, j) ((((size_t)(U)) * N + (size_t)(r)) * L + (size_t)(j))
#define TAB(s, r, i, len) tab[(((size_t)(s) * N + (r)) * L + (i)) * ML + (len) - 1]

    double best = T_inc, B;
    int strict, found = 0;
    int *ord = ppdl_xmalloc((size_t)S * sizeof(int)), *fst = ppdl_xmalloc((size_t)S * sizeof(int));
    /* A tied weight's exchange X (costmodel.h) depends on the first and the last rank of
     * the order: with a tie, one staircase per first rank r0 (X(r0, last) is then a term
     * of the last stage, added at the end); without, one staircase over every start */
    int tie = x->c->tied_bytes > 0 && S > 1;
    for (int r0 = tie ? 0 : -1; r0 < (tie ? N : 0); r0++) {
        if (r0 >= 0 && lower[r0]) continue;
        B = first_bound(x, best);
        strict = 0;
        for (;;) {
            x->n_solved++;
            for (size_t k = 0; k < nst; k++) val[k] = INFINITY;
            for (int r = 0; r < N; r++) {
                if (lower[r] || (r0 >= 0 && r != r0)) continue;
                for (int j = 0; j <= L - S && j < ML; j++) {
                    double t = TAB(0, r, 0, j + 1);
                    if (!FITS(t)) break;
                    val[ST(1u << r, r, j)] = x->phi * t; /* the fill; phi = 1 but for zero bubble */
                    back[ST(1u << r, r, j)] = -1;
                }
            }
            for (unsigned U = 1; U < full; U++) {
                int s2 = __builtin_popcount(U); /* index of the next stage */
                for (int r = 0; r < N; r++) {
                    if (!(U >> r & 1)) continue;
                    for (int j = s2 - 1; j <= L - S + s2 - 1; j++) {
                        double v = val[ST(U, r, j)];
                        if (!(v < INFINITY) || v + restlb[j] + (M - 1) * x->lb >= best) continue;
                        for (int r2 = 0; r2 < N; r2++) {
                            if ((U >> r2 & 1) || (U & lower[r2]) != lower[r2]) continue;
                            double l = lkr[((size_t)j * N + r) * N + r2];
                            if (!FITS(l)) continue;
                            double v2 = v + 2 * l;
                            unsigned U2 = U | 1u << r2;
                            for (int len = 1; len <= ML && j + len <= L - S + s2; len++) {
                                double t = TAB(s2, r2, j + 1, len);
                                if (!FITS(t)) break;
                                size_t k = ST(U2, r2, j + len);
                                if (v2 + x->phi * t < val[k]) {
                                    val[k] = v2 + x->phi * t;
                                    back[k] = (j + 1) * 32 + r;
                                }
                            }
                        }
                    }
                }
            }
            int rb = -1;
            double total = INFINITY;
            for (int r = 0; r < N; r++) {
                double v = val[ST(full, r, L - 1)] + (r0 >= 0 ? tie_x[(size_t)r0 * N + r] : 0);
                if (v < total) {
                    total = v;
                    rb = r;
                }
            }
            if (rb < 0) break;
            /* walk back: the order, the cut and the largest term */
            unsigned U = full;
            int r = rb, j = L - 1;
            double mx = 0;
            for (int s = S - 1; s >= 0; s--) {
                int b = back[ST(U, r, j)];
                int i = s == 0 ? 0 : b / 32;
                ord[s] = r;
                fst[s] = i;
                mx = fmax(mx, TAB(s, r, i, j - i + 1));
                if (s + 1 < S) mx = fmax(mx, lkr[((size_t)j * N + r) * N + ord[s + 1]]);
                U &= ~(1u << r);
                if (s > 0) r = b % 32;
                j = i - 1;
            }
            double T = total + (M - 1) * mx;
            if (T < best) {
                best = T;
                found = 1;
                memcpy(order_out, ord, (size_t)S * sizeof(int));
                memcpy(first_out, fst, (size_t)S * sizeof(int));
            }
            if (M == 1 || total + (M - 1) * x->lb >= best) break;
            /* every plan under the last bound has a sum >= total: one that beats `best`
             * has its largest term below (best - total) / (M-1) */
            B = fmin(mx, (best - total) / (M - 1));
            strict = 1;
        }
    }
#undef ST
#undef TAB
    free(tab);
    free(lkr);
    free(restlb);
    free(tie_x);
    free(lower);
    free(val);
    free(back);
    free(ord);
    free(fst);
    return found ? best : INFINITY;
}


#undef FITS

/* the exact optimum over all rank orders (with the optimizer step's staircase) */
static double solve_all_orders(plan_ctx *x, int mode, double T_inc, int *order_out, int *first)
{
    return opt_staircase(x, solve_subsets, &mode, NULL, NULL, T_inc, order_out, first);
}

// ----------------------------------------------------------------------------
// plans out of (order, cut, mode)

static void order_plan(const plan_ctx *x, int mode, const int *order, const int *first, const char *method,
                       ppdl_plan *p)
{
    layout ly;
    layout_init(&ly, x);
    layout_from_order(&ly, x, order);
    plan_from_layout(x, &ly, mode, first, method, p);
    layout_free(&ly);
}

// ----------------------------------------------------------------------------
// nothing fits: the least-over plan and a message


static void report_infeasible(const plan_ctx *x, const int *orders, int n_orders, ppdl_plan *out, char *err,
                              size_t errlen)
{
    int S = x->S;
    int *first = ppdl_xmalloc((size_t)S * sizeof(int)), *bf = ppdl_xmalloc((size_t)S * sizeof(int));
    double best = INFINITY;
    int bo = 0;
    for (int k = 0; k < n_orders; k++) {
        double v = least_over(x, &orders[(size_t)k * S], first);
        if (v < best) {
            best = v;
            bo = k;
            memcpy(bf, first, (size_t)S * sizeof(int));
        }
    }
    order_plan(x, MODE_MINSTASH, &orders[(size_t)bo * S], bf, "ppdl", out);
    ppdl_cost_eval ev;
    char e2[PPDL_ERR_LEN];
    if (ppdl_cost_evaluate(x->c, x->cl, x->M, x->schedule, out, &ev, e2, sizeof e2) == 0) {
        ppdl_cost_annotate(out, &ev);
        int s = ev.worst_stage;
        const ppdl_plan_stage *st = &out->stages[s];
        char a[32], b[32], d[32];
        double total_mem = 0;
        for (int r = 0; r < x->N; r++) total_mem += x->cl->mem[r];
        double need_params = x->c->state_multiplier * x->P[x->L];
        int n = ev.in_flight[s];
        size_t len = (size_t)snprintf(err, errlen,
            "no plan fits in memory: even with full recompute (every layer on its smallest-stash option), the best "
            "split leaves stage %d (layers %d-%d on rank %d, %d micro-batch%s in flight) %s over its limit: it needs "
            "%s, the rank has %s", s, st->first, st->last, st->rank, n, n == 1 ? "" : "es",
            ppdl_fmt_bytes((size_t)ev.worst_over, a, sizeof a), ppdl_fmt_bytes((size_t)ev.mem_bytes[s], b, sizeof b),
            ppdl_fmt_bytes((size_t)ev.mem_limit[s], d, sizeof d));
        if (len < errlen && need_params > total_mem)
            snprintf(err + len, errlen - len, ". Parameters and optimizer state alone need %s (%g x parameter bytes), "
                     "the %d ranks have %s together", ppdl_fmt_bytes((size_t)need_params, a, sizeof a),
                     x->c->state_multiplier, x->N, ppdl_fmt_bytes((size_t)total_mem, b, sizeof b));
        else if (len < errlen)
            snprintf(err + len, errlen - len, ". Give the ranks more memory, use fewer micro-batches in flight "
                     "(1f1b, smaller M) or a smaller micro-batch");
        ppdl_cost_eval_free(&ev);
    } else {
        ppdl_errf(err, errlen, "no plan fits in memory (%s)", e2);
    }
    free(first);
    free(bf);
}

// ----------------------------------------------------------------------------
// the entry points

static int check_input(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, char *err,
                       size_t errlen)
{
    if (M < 1) return ppdl_errf(err, errlen, "--micro-batches %d: expected >= 1", M);
    if (schedule < 0 || schedule >= PPDL_SCHED_N_KINDS) return ppdl_errf(err, errlen, "unknown schedule %d", schedule);
    if (ppdl_schedule_chunked(schedule))
        return ppdl_errf(err, errlen, "schedule %s holds several stages per rank: ppdl_solve_chunked plans it, not ppdl_solve",
                         ppdl_schedule_name(schedule));
    if (c->L < cl->N)
        return ppdl_errf(err, errlen, "the model has %d layers but the cluster has %d ranks: every rank "
                                      "runs one stage of at least one layer", c->L, cl->N);
    return 0;
}

/* Solve over the given candidate orders (and placement when asked). */
static int solve_impl(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                      const ppdl_solve_opts *opts, const int *fixed_order, ppdl_plan *out,
                      ppdl_solve_info *info, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    ppdl_solve_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    if (check_input(c, cl, M, schedule, err, errlen)) return -1;
    plan_ctx x;
    ctx_init(&x, c, cl, M, schedule, cl->N);
    layout ly; /* the order being solved, one rank per stage */
    layout_init(&ly, &x);
    int N = x.N, S = x.S;
    const char *method = fixed_order ? "ppdl-order" : !opts->placement ? "ppdl-inorder"
                                                    : opts->replicate ? "ppdl" : "ppdl-pipeline";

    /* candidate orders */
    int max_cand = 16, n_cand;
    int *cand = ppdl_xmalloc((size_t)max_cand * N * sizeof(int));
    if (fixed_order) {
        memcpy(cand, fixed_order, (size_t)N * sizeof(int));
        n_cand = 1;
    } else if (!opts->placement) {
        for (int r = 0; r < N; r++) cand[r] = r;
        n_cand = 1;
    } else {
        n_cand = candidate_orders(&x, cand, max_cand, &info->n_groups);
        if (opts->seed_order) n_cand = add_candidate_order(cand, n_cand, max_cand, N, opts->seed_order);
    }

    /* best plan so far: its order, cut and option mode */
    int *b_order = ppdl_xmalloc((size_t)N * sizeof(int)), *b_first = ppdl_xmalloc((size_t)S * sizeof(int));
    int *first = ppdl_xmalloc((size_t)S * sizeof(int));
    double bT = INFINITY;
    int b_mode = MODE_KEEP;
    for (int mode = MODE_KEEP; mode >= MODE_MINSTASH; mode--) {
        stage_tables w;
        tables_init_order(&w, &x, mode);
        for (int k = 0; k < n_cand; k++) {
            double T = solve_order(&x, &w, &ly, &cand[(size_t)k * N], bT, first);
            if (T < bT) {
                bT = T;
                b_mode = mode;
                memcpy(b_order, &cand[(size_t)k * N], (size_t)N * sizeof(int));
                memcpy(b_first, first, (size_t)S * sizeof(int));
            }
        }
        tables_free(&w);
    }
    int rc = 0;
    int exact_ok = !fixed_order && opts->placement && N <= opts->exact_max_ranks && N <= 20 &&
                   ldexp((double)N * x.L, N) <= (double)opts->exact_max_states;
    if (!(bT < INFINITY) && exact_ok) {
        /* no candidate order fits: is there any order that does? */
        int *o2 = ppdl_xmalloc((size_t)N * sizeof(int));
        double T = solve_all_orders(&x, MODE_MINSTASH, INFINITY, o2, first);
        if (T < bT) {
            bT = T;
            b_mode = MODE_MINSTASH;
            memcpy(b_order, o2, (size_t)N * sizeof(int));
            memcpy(b_first, first, (size_t)S * sizeof(int));
        }
        free(o2);
    }
    if (!(bT < INFINITY) && !exact_ok && !fixed_order && opts->placement && opts->fit_search) {
        /* too many ranks for the exact check: search for an order that fits, from every
         * candidate in turn */
        int *o2 = ppdl_xmalloc((size_t)N * sizeof(int));
        for (int k = 0; k < n_cand && !(bT < INFINITY); k++) {
            memcpy(o2, &cand[(size_t)k * N], (size_t)N * sizeof(int));
            if (!feasible_search(&x, o2, 4L * N * N)) continue;
            stage_tables w2;
            tables_init_order(&w2, &x, MODE_MINSTASH);
            double T = solve_order(&x, &w2, &ly, o2, INFINITY, first);
            tables_free(&w2);
            if (T < bT) {
                bT = T;
                b_mode = MODE_MINSTASH;
                memcpy(b_order, o2, (size_t)N * sizeof(int));
                memcpy(b_first, first, (size_t)S * sizeof(int));
                if (n_cand < max_cand) memcpy(&cand[(size_t)n_cand++ * N], o2, (size_t)N * sizeof(int));
            }
        }
        free(o2);
    }
    if (!(bT < INFINITY)) {
        report_infeasible(&x, cand, n_cand, out, err, errlen);
        info->infeasible = 1;
        snprintf(out->method, sizeof out->method, "%s", method);
        rc = -1;
        goto done;
    }

    /* the recompute frontiers, then the exact per-order optimum on every candidate */
    build_frontiers(&x, bT / x.mt); /* T >= mt x any stage's time */
    info->frontier_points = x.n_pts;
    stage_tables w;
    tables_init_order(&w, &x, MODE_BEST);
    for (int k = 0; k < n_cand; k++) {
        double T = solve_order(&x, &w, &ly, &cand[(size_t)k * N], bT, first);
        if (T < bT) {
            bT = T;
            b_mode = MODE_BEST;
            memcpy(b_order, &cand[(size_t)k * N], (size_t)N * sizeof(int));
            memcpy(b_first, first, (size_t)S * sizeof(int));
        }
    }
    int exact = fixed_order || !opts->placement;
    if (fixed_order) snprintf(info->placement, sizeof info->placement, "the given order");
    else if (!opts->placement) snprintf(info->placement, sizeof info->placement, "ranks in order");
    if (!fixed_order && opts->placement) {
        if (exact_ok && (double)S * N * x.L * x.ML <= TT_MAX) {
            int *o2 = ppdl_xmalloc((size_t)N * sizeof(int));
            double T = solve_all_orders(&x, MODE_BEST, bT, o2, first);
            if (T < bT) {
                bT = T;
                b_mode = MODE_BEST;
                memcpy(b_order, o2, (size_t)N * sizeof(int));
                memcpy(b_first, first, (size_t)S * sizeof(int));
            }
            free(o2);
            exact = 1;
            snprintf(info->placement, sizeof info->placement, "exact over all %d! rank orders", N);
        } else {
            if (b_mode != MODE_BEST) {
                /* the local search works on frontier plans: re-solve the incumbent's order */
                double T = solve_order(&x, &w, &ly, b_order, INFINITY, first);
                if (T <= bT) {
                    bT = T;
                    b_mode = MODE_BEST;
                    memcpy(b_first, first, (size_t)S * sizeof(int));
                }
            }
            if (b_mode == MODE_BEST) {
                long budget = opts->local_search_evals > 0 ? opts->local_search_evals : N < 25 ? 200 : 8L * N;
                local_search(&x, &w, &ly, b_order, b_first, &bT, budget);
            }
            snprintf(info->placement, sizeof info->placement, "heuristic: %d group%s of fast-linked ranks, "
                     "then swaps", info->n_groups, info->n_groups == 1 ? "" : "s");
        }
    }
    tables_free(&w);
    info->exact = exact && !x.inexact;

    order_plan(&x, b_mode, b_order, b_first, method, out);
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, out, &ev, err, errlen)) {
        ppdl_plan_free(out);
        rc = -1;
        goto done;
    }
    ppdl_cost_annotate(out, &ev);
    PPDL_CHECK(ev.feasible, "planner bug: the plan it chose does not fit (stage %d over by %g bytes)",
               ev.worst_stage, ev.worst_over);
    ppdl_cost_eval_free(&ev);

done:
    info->orders_solved = x.n_solved;
    info->dp_runs = x.n_dp;
    free(cand);
    free(b_order);
    free(b_first);
    free(first);
    layout_free(&ly);
    ctx_free(&x);
    return rc;
}

/* The search found no plan and the model has fewer layers than ranks (so every plan
 * replicates stages). *out: data parallelism with the smallest-stash options (the plan
 * that holds the fewest micro-batches), annotated where the cost model can play it.
 * The message says which bound shows that no plan fits, where one does:
 *   - a layer whose parameters, optimizer state and smallest stash for one micro-batch
 *     exceed the largest rank's memory (every plan holds it somewhere; with `shard`,
 *     m and v as if split among the most replicas a stage can have, min(M, N));
 *   - a rank whose memory is under what any layer needs (every rank holds a replica);
 *   - the ranks' memory together under every layer's parameters, optimizer state and
 *     smallest stash (every plan holds each layer at least once);
 *   - more ranks than replicas can exist (a replica needs a micro-batch and a stage a
 *     layer: at most L x M);
 * and otherwise that the search found none though no bound rules a plan out. */
static void report_infeasible_replicated(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                                         int shard, ppdl_plan *out, char *err, size_t errlen)
{
    char e2[PPDL_ERR_LEN];
    /* bytes per parameter byte a replica holds at least: sharded, m and v split among
     * as many replicas as a stage can have, min(M, N) */
    int kmax = M < cl->N ? M : cl->N;
    double sm = c->state_multiplier, mult = shard ? sm - fmin(2.0, sm) * (1 - 1.0 / kmax) : sm;
    if (ppdl_plan_data_parallel(c->L, cl->N, out, e2, sizeof e2) == 0) {
        snprintf(out->method, sizeof out->method, "ppdl");
        out->shard_optimizer = shard;
        for (int l = 0; l < c->L; l++) {
            const ppdl_layer_cost *lc = &c->layers[l];
            int o = 0;
            for (int k = 1; k < lc->n_opts; k++)
                if (lc->stash_bytes[k] < lc->stash_bytes[o]) o = k;
            out->stages[0].recompute[l] = o;
        }
        ppdl_cost_eval ev;
        if (ppdl_cost_evaluate(c, cl, M, schedule, out, &ev, e2, sizeof e2) == 0) {
            ppdl_cost_annotate(out, &ev);
            ppdl_cost_eval_free(&ev);
        }
    }
    double most = 0, total = 0, need_all = 0, need_l = 0, least = INFINITY, need_min = INFINITY;
    int worst = 0, small = 0;
    for (int r = 0; r < cl->N; r++) {
        most = fmax(most, cl->mem[r]);
        total += cl->mem[r];
        if (cl->mem[r] < least) least = cl->mem[r], small = r;
    }
    for (int l = 0; l < c->L; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        double smin = lc->stash_bytes[0];
        for (int k = 1; k < lc->n_opts; k++) smin = fmin(smin, lc->stash_bytes[k]);
        double need = mult * lc->param_bytes + smin;
        need_all += sm * lc->param_bytes + smin; /* sharded or not, m and v exist once in all */
        need_min = fmin(need_min, need);
        if (need > need_l) need_l = need, worst = l;
    }
    char a[32], b[32], d[32], f[32];
    const char *head = "no plan fits in memory: the model has fewer layers than ranks, so every plan replicates stages";
    if (need_l > most)
        ppdl_errf(err, errlen, "%s, and layer %d (%s) alone needs %s (%g x its parameter bytes and its smallest stash "
                  "for one micro-batch), more than the largest rank's %s. Give the ranks more memory or use a smaller "
                  "micro-batch", head, worst, c->layers[worst].name, ppdl_fmt_bytes((size_t)need_l, a, sizeof a),
                  mult, ppdl_fmt_bytes((size_t)most, b, sizeof b));
    else if (need_min > least)
        ppdl_errf(err, errlen, "%s, and every rank holds a replica of some stage, but rank %d's %s is less than any "
                  "layer needs (at least %s: %g x its parameter bytes and its smallest stash for one micro-batch). "
                  "Give that rank more memory or leave it out", head, small, ppdl_fmt_bytes((size_t)least, a, sizeof a),
                  ppdl_fmt_bytes((size_t)need_min, b, sizeof b), mult);
    else if (need_all > total)
        ppdl_errf(err, errlen, "%s, and every layer held once needs %s (%g x parameter bytes and the smallest stash "
                  "of one micro-batch), more than the %d ranks' %s together. Give the ranks more memory", head,
                  ppdl_fmt_bytes((size_t)need_all, a, sizeof a), sm, cl->N,
                  ppdl_fmt_bytes((size_t)total, b, sizeof b));
    else if ((double)cl->N > (double)c->L * M)
        ppdl_errf(err, errlen, "%s, and %d ranks are more replicas than %d layers x %d micro-batches allow (each "
                  "replica needs a micro-batch of its stage). Use more micro-batches (--micro-batches) or fewer ranks",
                  head, cl->N, c->L, M);
    else
        ppdl_errf(err, errlen, "%s, and the search found none that fits; no bound rules one out (the largest layer "
                  "needs %s of a rank's %s, all layers %s of the ranks' %s together): the search is not exhaustive at "
                  "%d ranks. Give the ranks more memory or use fewer micro-batches in flight", head,
                  ppdl_fmt_bytes((size_t)need_l, a, sizeof a), ppdl_fmt_bytes((size_t)most, b, sizeof b),
                  ppdl_fmt_bytes((size_t)need_all, d, sizeof d), ppdl_fmt_bytes((size_t)total, f, sizeof f), cl->N);
}

int ppdl_solve(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
               const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, char *err, size_t errlen)
{
    ppdl_solve_opts def;
    if (!opts) {
        ppdl_solve_opts_default(&def);
        opts = &def;
    }
    if (!opts->replicate || !opts->placement)
        return solve_impl(c, cl, M, schedule, opts, NULL, out, info, err, errlen);
    ppdl_solve_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    memset(out, 0, sizeof *out);
    if (M < 1) return ppdl_errf(err, errlen, "--micro-batches %d: expected >= 1", M);
    if (schedule < 0 || schedule >= PPDL_SCHED_N_KINDS) return ppdl_errf(err, errlen, "unknown schedule %d", schedule);
    /* 1. one rank per stage (needs L >= N), exact or heuristic placement */
    ppdl_plan pipe;
    memset(&pipe, 0, sizeof pipe);
    char perr[PPDL_ERR_LEN] = "";
    int rc = -1, pipe_exact = 1;
    if (c->L >= cl->N) {
        rc = solve_impl(c, cl, M, schedule, opts, NULL, &pipe, info, perr, sizeof perr);
        pipe_exact = info->exact;
    }
    double T_inc = rc == 0 ? pipe.predicted_iter_ms : INFINITY;
    /* 2. replicated stages, under that plan's T */
    ppdl_plan hyb;
    int *order = NULL;
    if (rc == 0) {
        order = ppdl_xmalloc((size_t)cl->N * sizeof(int));
        for (int s = 0; s < pipe.S; s++) order[s] = pipe.stages[s].rank;
    }
    int hrc = solve_hybrid(c, cl, M, schedule, opts, T_inc, order, &hyb, info);
    free(order);
    info->exact = pipe_exact && info->hybrid_exact;
    if (hrc == 0) {
        ppdl_cost_eval ev;
        if (ppdl_cost_evaluate(c, cl, M, schedule, &hyb, &ev, err, errlen)) {
            ppdl_plan_free(&hyb);
            ppdl_plan_free(&pipe);
            return -1;
        }
        ppdl_cost_annotate(&hyb, &ev);
        PPDL_CHECK(ev.feasible, "planner bug: the replicated plan it chose does not fit (stage %d over by %g bytes)",
                   ev.worst_stage, ev.worst_over);
        ppdl_cost_eval_free(&ev);
        if (hyb.predicted_iter_ms < T_inc) {
            ppdl_plan_free(&pipe);
            *out = hyb;
            info->replicated = 1;
            info->infeasible = 0;
            return 0;
        }
        ppdl_plan_free(&hyb);
    }
    if (rc == 0) {
        *out = pipe;
        return 0;
    }
    info->infeasible = 1;
    if (c->L >= cl->N) {
        *out = pipe; /* the least-over plan, and the message of step 1 */
        snprintf(err, errlen, "%s", perr);
    } else {
        report_infeasible_replicated(c, cl, M, schedule, opts->shard_optimizer, out, err, errlen);
    }
    return -1;
}

int ppdl_solve_order(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                     const int *order, ppdl_plan *out, char *err, size_t errlen)
{
    ppdl_solve_opts o;
    ppdl_solve_opts_default(&o);
    o.placement = 0;
    int *seen = ppdl_xcalloc((size_t)cl->N, sizeof(int));
    for (int s = 0; s < cl->N; s++) {
        if (order[s] < 0 || order[s] >= cl->N || seen[order[s]]++) {
            free(seen);
            memset(out, 0, sizeof *out);
            return ppdl_errf(err, errlen, "rank order: entry %d (%d) is not a new rank in 0..%d", s, order[s], cl->N - 1);
        }
    }
    free(seen);
    return solve_impl(c, cl, M, schedule, &o, order, out, NULL, err, errlen);
}

