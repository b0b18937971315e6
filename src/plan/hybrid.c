/* hybrid.c — plans with replicated stages: for each replica layout (which ranks form
 * each stage, in pipeline order) the exact partition and recompute; over layouts, every
 * one for few ranks, candidates from the cluster's structure and local moves for many.
 *
 * 1. One layout (replicas in ppdl_sort_replicas order, n_sq and f_sq from replica.h). A
 *    stage takes the options of least extra time that fit every replica (one query of
 *    engine.c's Pareto frontier), and then, with W = fwd + bwd ms:
 *       fill_s = (W + extra) / min_q speed    pace_s = (W + extra) max_q (n_sq - 1) / speed
 *       ar_s = the all-reduce among R_s      link_s = max lam, lpace_s = max (m_ab - 1) lam
 *    (over the pairs carrying m_ab >= 1 micro-batches across the cut after stage s), so
 *    T = sum fill + 2 sum link + max(pace, lpace) + max ar (costmodel.h). Two maxima:
 *    the stage DP finds, for bounds B on every pace and A on every ar, the least sum;
 *    for each A a staircase of B gives the least sum + pace V(A) (as in solver.c), and
 *    the next A is "ar < the largest ar of V(A)'s plan", until no plan is left or a
 *    lower bound cannot beat the best T. Exact, one or two A steps in practice; the
 *    heuristic search (many ranks) stops a layout within 0.1% of its best T.
 * 2. Layouts. Up to opts.exact_hybrid_ranks ranks: every ordered set partition of the
 *    ranks into S < N stages of at most M replicas, each solved under the incumbent T.
 *    Above: candidates from the groups of fast-linked ranks (placement.c): data
 *    parallelism, pipeline between groups with data parallelism inside, and the reverse;
 *    then first-improvement local moves (merge, split, exchange and move stages and
 *    ranks) and kicks with descents (iterated local search, fixed seed), within
 *    opts.hybrid_evals layout solves. Without an incumbent, the layouts are first solved
 *    from prefix sums with every layer on option 0, then on its smallest stash.
 * Deterministic: budgets count solves, never seconds. */
#include "core/error.h"
#include "core/util.h"
#include "plan/costmodel.h"
#include "plan/engine.h"
#include "plan/hybrid.h"
#include "plan/placement.h"
#include "plan/replica.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hyb {
    plan_ctx x;                /* prefix sums; frontiers for stages of any length */
    layout ly;                 /* the layout being solved */
    stage_tables tb;           /* its tables and DP (engine.c) */
    int mode;
    double tol;                /* relative: a layout's search stops this close to the best T
                                  (0: exact) */
    long solves;
} hyb;

static void hyb_init(hyb *h, const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int shard)
{
    memset(h, 0, sizeof *h);
    ctx_init(&h->x, c, cl, M, schedule, 1); /* S = 1: frontiers for stages of up to L layers */
    h->x.shard = shard;
    layout_init(&h->ly, &h->x);
}

static void hyb_free(hyb *h)
{
    tables_free(&h->tb);
    layout_free(&h->ly);
    ctx_free(&h->x);
    memset(h, 0, sizeof *h);
}

// ----------------------------------------------------------------------------
// one layout: the staircase over the engine's stage DP

typedef struct track {
    double best;               /* best T found (starts at the incumbent) */
    int found;
    double vbest, var;         /* least sum + pace under the current ar bound, and its ar */
} track;

static void consider(const hyb *h, track *tk, const int *arg, int *cur, int *first_out)
{
    double sum, pm, am;
    stage_walk(&h->x, &h->tb, arg, cur, &sum, &pm, &am);
    double T = sum + pm + am;
    if (T < tk->best) {
        tk->best = T;
        tk->found = 1;
        memcpy(first_out, cur, (size_t)h->ly.S * sizeof(int));
    }
    if (sum + pm < tk->vbest || (sum + pm == tk->vbest && am < tk->var)) {
        tk->vbest = sum + pm;
        tk->var = am;
    }
}

/* The exact optimum of the current layout below T_inc: its T and cut, or INFINITY,
 * without the tie's exchange (solve_layout adds it). */
static double solve_layout_cut(hyb *h, double T_inc, int *first_out)
{
    tables_fill_layout(&h->x, &h->tb, &h->ly, h->mode, T_inc);
    int S = h->ly.S, L = h->x.L;
    int *cur = ppdl_xmalloc((size_t)S * sizeof(int));
    track tk = {T_inc, 0, INFINITY, 0};
    double A = INFINITY;
    int sA = 0;
    for (;;) {
        /* V(A) = least sum + pace over the plans with every ar under A */
        if (!stage_dp(&h->x, &h->tb, INFINITY, 0, A, sA, 1)) break;
        double sum_min = h->tb.f[(size_t)(S - 1) * L + L - 1], pmin = h->tb.g[(size_t)(S - 1) * L + L - 1];
        double lb = fmax(sum_min + pmin, h->tb.av[(size_t)(S - 1) * L + L - 1]); /* <= sum + pace of any plan under A */
        double amin = h->tb.h[(size_t)(S - 1) * L + L - 1]; /* <= the largest tail of any plan under A */
        double keep = 1 - h->tol;
        if (lb + amin >= tk.best * keep) break;
        tk.vbest = INFINITY;
        consider(h, &tk, h->tb.arg, cur, first_out);
        consider(h, &tk, h->tb.argg, cur, first_out);
        /* the cheapest plan of the least pace, then down the staircase of B from
         * "pace < what could still beat the best" */
        if (stage_dp(&h->x, &h->tb, pmin, 0, A, sA, 0)) consider(h, &tk, h->tb.arg, cur, first_out);
        double B = fmin(tk.vbest, tk.best) - sum_min;
        int done = 0; /* no plan under A beats the best: nor under a smaller A */
        for (;;) {
            if ((done = lb + amin >= tk.best * keep) || lb >= tk.vbest * keep) break;
            if (!stage_dp(&h->x, &h->tb, B, 1, A, sA, 0)) break;
            double sum, pm, am;
            stage_walk(&h->x, &h->tb, h->tb.arg, cur, &sum, &pm, &am);
            consider(h, &tk, h->tb.arg, cur, first_out);
            if (sum + pmin >= tk.vbest * keep || sum + pmin + amin >= tk.best * keep) break;
            B = fmin(pm, fmin(tk.vbest, tk.best) - sum);
        }
        /* every plan with its largest ar in [var, A] is no better than the one found;
         * those under a smaller bound have sum + pace >= V(A) >= min(vbest, best), so
         * none of them beats the best once vbest does not */
        if (done || !(tk.vbest < tk.best * keep) || tk.var <= 0) break;
        A = tk.var;
        sA = 1;
    }
    free(cur);
    return tk.found ? tk.best : INFINITY;
}

/* ... with a tied weight's exchange, a constant of the layout (costmodel.h) */
static double solve_layout(hyb *h, double T_inc, int *first_out)
{
    h->solves++;
    double X = layout_tie_ms(&h->x, &h->ly);
    return solve_layout_cut(h, T_inc - X, first_out) + X;
}

// ----------------------------------------------------------------------------
// layouts

typedef struct layouts {
    int N, n, cap;
    int *g;                    /* [cap][N] */
} layouts;

/* add a layout (stage of each rank, stages 0..S-1 in pipeline order) unless it is
 * there already */
static void add_layout(layouts *ls, const int *grp)
{
    for (int k = 0; k < ls->n; k++)
        if (!memcmp(&ls->g[(size_t)k * ls->N], grp, (size_t)ls->N * sizeof(int))) return;
    if (ls->n == ls->cap) {
        ls->cap = ls->cap ? 2 * ls->cap : 64;
        ls->g = realloc(ls->g, (size_t)ls->cap * ls->N * sizeof(int));
        PPDL_CHECK(ls->g, "out of host memory for replica layouts");
    }
    memcpy(&ls->g[(size_t)ls->n++ * ls->N], grp, (size_t)ls->N * sizeof(int));
}

/* every assignment of ranks r..N-1 to S stages (all used, at most M ranks each) */
static void enum_rec(layouts *ls, int *grp, int *cnt, int r, int S, int used, int M)
{
    int N = ls->N;
    if (N - r < S - used) return; /* not enough ranks left for the empty stages */
    if (r == N) {
        add_layout(ls, grp);
        return;
    }
    for (int s = 0; s < S; s++) {
        if (cnt[s] >= M) continue;
        grp[r] = s;
        cnt[s]++;
        enum_rec(ls, grp, cnt, r + 1, S, used + (cnt[s] == 1), M);
        cnt[s]--;
    }
}

/* Compact the stage labels of grp (any values in 0..2N) to 0..S-1, keeping their
 * order (labels are pipeline positions); returns S. */
static int renumber(int N, int *grp)
{
    int *m = ppdl_xmalloc((2 * (size_t)N + 2) * sizeof(int)), S = 0;
    for (int v = 0; v < 2 * N + 2; v++) m[v] = -1;
    for (int r = 0; r < N; r++) m[grp[r]] = 0;
    for (int v = 0; v < 2 * N + 2; v++)
        if (m[v] == 0) m[v] = ++S;
    for (int r = 0; r < N; r++) grp[r] = m[grp[r]] - 1;
    free(m);
    return S;
}

/* candidates from the groups of fast-linked ranks (nodes) */
static void structured_layouts(hyb *h, layouts *ls)
{
    int N = h->x.N;
    int *group = ppdl_xmalloc((size_t)N * sizeof(int)), *grp = ppdl_xmalloc((size_t)N * sizeof(int));
    int G = rank_groups(&h->x, group);
    int *gorder = ppdl_xmalloc((size_t)G * sizeof(int)), *seq = ppdl_xmalloc((size_t)N * sizeof(int));
    int *gsize = ppdl_xcalloc((size_t)G, sizeof(int)), *gstart = ppdl_xmalloc(((size_t)G + 1) * sizeof(int));
    order_groups(h->x.cl, group, G, gorder);
    for (int r = 0; r < N; r++) gsize[group[r]]++;
    for (int dir = 0; dir < 2; dir++) {
        /* the ranks node by node along the groups' path (or its reverse), by index inside */
        int n = 0;
        for (int gi = 0; gi < G; gi++) {
            int gg = gorder[dir ? G - 1 - gi : gi];
            gstart[gi] = n;
            for (int r = 0; r < N; r++)
                if (group[r] == gg) seq[n++] = r;
        }
        gstart[G] = N;
        /* data parallelism */
        for (int r = 0; r < N; r++) grp[r] = 0;
        add_layout(ls, grp);
        /* each node in parts of (about) k ranks */
        int maxg = 0;
        for (int gg = 0; gg < G; gg++) maxg = gsize[gg] > maxg ? gsize[gg] : maxg;
        for (int k = 2; k <= maxg; k++) {
            int s = 0;
            for (int gi = 0; gi < G; gi++) {
                int sz = gstart[gi + 1] - gstart[gi], parts = (sz + k - 1) / k;
                for (int p = 0; p < sz; p++) grp[seq[gstart[gi] + p]] = s + p * parts / sz;
                s += parts;
            }
            add_layout(ls, grp);
        }
        /* equal nodes: the i-th ranks of c consecutive nodes form a stage */
        int equal = G >= 2;
        for (int gi = 1; gi < G; gi++) equal &= gstart[gi + 1] - gstart[gi] == gstart[1] - gstart[0];
        int sz = gstart[1] - gstart[0];
        for (int cc = 2; equal && cc <= G; cc++) {
            if (G % cc) continue;
            for (int gi = 0; gi < G; gi++)
                for (int p = 0; p < sz; p++) grp[seq[gstart[gi] + p]] = (gi / cc) * sz + p;
            add_layout(ls, grp);
        }
        /* runs of k ranks along the sequence, across node boundaries */
        for (int k = 2; k < N; k++) {
            if (N % k) continue;
            for (int p = 0; p < N; p++) grp[seq[p]] = p / k;
            add_layout(ls, grp);
        }
    }
    free(group);
    free(grp);
    free(gorder);
    free(seq);
    free(gsize);
    free(gstart);
}

// ----------------------------------------------------------------------------
// search

typedef struct incumbent {
    double T;
    int mode;
    int *grp, *first;          /* [N], [N] */
} incumbent;

/* solve layout grp under the incumbent; keep it when better */
static int try_layout(hyb *h, incumbent *in, const int *grp, int *first)
{
    if (!layout_from_groups(&h->ly, &h->x, grp)) return 0;
    double T = solve_layout(h, in->T, first);
    if (!(T < in->T)) return 0;
    in->T = T;
    in->mode = h->mode;
    memcpy(in->grp, grp, (size_t)h->x.N * sizeof(int));
    memcpy(in->first, first, (size_t)h->ly.S * sizeof(int));
    return 1;
}

/* One pass of first-improvement moves from the incumbent's layout. 1 when improved. */
static int descend(hyb *h, incumbent *in, long budget, int *first)
{
    int N = h->x.N, improved = 0;
    int *g = ppdl_xmalloc((size_t)N * sizeof(int)), *R = ppdl_xmalloc((size_t)N * sizeof(int));
    int S = 0;
    for (int r = 0; r < N; r++) S = in->grp[r] + 1 > S ? in->grp[r] + 1 : S;
#define TRY()                                                                          \
    do {                                                                               \
        renumber(N, g);                                                                \
        if (h->solves < budget && try_layout(h, in, g, first)) { improved = 1; goto out; } \
    } while (0)
    /* merge adjacent stages */
    for (int s = 0; s + 1 < S; s++) {
        for (int r = 0; r < N; r++) g[r] = in->grp[r] > s ? in->grp[r] - 1 : in->grp[r];
        TRY();
    }
    /* split a stage in halves of its replica order, either half first */
    for (int s = 0; s < S; s++) {
        layout_from_groups(&h->ly, &h->x, in->grp);
        int k = h->ly.start[s + 1] - h->ly.start[s];
        if (k < 2) continue;
        memcpy(R, &h->ly.ranks[h->ly.start[s]], (size_t)k * sizeof(int));
        for (int side = 0; side < 2; side++) {
            for (int r = 0; r < N; r++) g[r] = 2 * in->grp[r] + (in->grp[r] > s ? 1 : 0);
            for (int q = 0; q < k; q++) g[R[q]] = 2 * s + ((q < (k + 1) / 2) == side);
            TRY();
        }
    }
    /* exchange adjacent stages; with few ranks, finer moves */
    for (int s = 0; s + 1 < S; s++) {
        for (int r = 0; r < N; r++) g[r] = in->grp[r] == s ? s + 1 : in->grp[r] == s + 1 ? s : in->grp[r];
        TRY();
    }
    if (N <= 16) {
        /* move a stage elsewhere in the pipeline (distance 1 was the exchange above) */
        for (int s = 0; s < S; s++)
            for (int t = 0; t < S; t++) {
                if (t == s || t == s + 1 || t == s - 1) continue;
                for (int r = 0; r < N; r++) {
                    int v = in->grp[r];
                    /* positions: stage s goes to just before t's old place (after it if t > s) */
                    g[r] = v == s ? 2 * t + (t > s) : 2 * v + (v > t || (v == t && t < s));
                }
                TRY();
            }
        /* one rank out of its stage into a stage of its own, at any place */
        for (int r = 0; r < N; r++) {
            int k = 0;
            for (int q = 0; q < N; q++) k += in->grp[q] == in->grp[r];
            if (k == 1) continue; /* alone already: moving its stage is above */
            for (int t = 0; t <= S; t++) {
                for (int q = 0; q < N; q++) g[q] = 2 * in->grp[q] + 1;
                g[r] = 2 * t;
                TRY();
            }
        }
        /* move one rank to another stage (its own may vanish) */
        for (int r = 0; r < N; r++)
            for (int s = 0; s < S; s++) {
                if (s == in->grp[r]) continue;
                memcpy(g, in->grp, (size_t)N * sizeof(int));
                g[r] = s;
                TRY();
            }
        /* exchange two ranks of different stages */
        for (int a = 0; a < N; a++)
            for (int b = a + 1; b < N; b++) {
                if (in->grp[a] == in->grp[b]) continue;
                memcpy(g, in->grp, (size_t)N * sizeof(int));
                g[a] = in->grp[b];
                g[b] = in->grp[a];
                TRY();
            }
    }
#undef TRY
out:
    free(g);
    free(R);
    return improved;
}

static void make_plan(hyb *h, const incumbent *in, ppdl_plan *p)
{
    h->mode = in->mode;
    layout_from_groups(&h->ly, &h->x, in->grp);
    plan_from_layout(&h->x, &h->ly, in->mode, in->first, "ppdl", p);
}

int solve_hybrid(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                 const ppdl_solve_opts *opts, double T_inc, const int *pipe_order, ppdl_plan *out,
                 ppdl_solve_info *info)
{
    memset(out, 0, sizeof *out);
    int N = cl->N;
    if (N < 2 || M < 2) { /* no stage can have two replicas */
        info->hybrid_exact = 1;
        snprintf(info->hybrid, sizeof info->hybrid, "none possible (%s)", N < 2 ? "one rank" : "one micro-batch");
        return 1;
    }
    hyb h;
    hyb_init(&h, c, cl, M, schedule, opts->shard_optimizer);
    layouts ls = {N, 0, 0, NULL};
    int exhaustive = N <= opts->exact_hybrid_ranks;
    /* the layouts of the heuristic search are solved to 0.1%: the staircase's last
     * steps trade a few hundredths of a percent of T, one DP each */
    h.tol = exhaustive ? 0 : 1e-3;
    int *grp = ppdl_xcalloc((size_t)N, sizeof(int)), *cnt = ppdl_xcalloc((size_t)N, sizeof(int));
    if (exhaustive) {
        for (int S = 1; S < N && S <= c->L; S++) enum_rec(&ls, grp, cnt, 0, S, 0, M);
        snprintf(info->hybrid, sizeof info->hybrid, "every layout of replicated stages (%d)", ls.n);
    } else {
        structured_layouts(&h, &ls);
    }
    /* exhaustive: only plans below T_inc matter. Candidates: the best of them starts
     * the local search even when it is somewhat worse than T_inc (up to 1.5x) */
    incumbent in = {exhaustive ? T_inc : 1.5 * T_inc, MODE_BEST, ppdl_xcalloc((size_t)N, sizeof(int)),
                    ppdl_xcalloc((size_t)N, sizeof(int))};
    int *first = ppdl_xmalloc((size_t)N * sizeof(int));
    int have = 0;
    /* without a bound: a first T from fixed options (no frontiers needed) */
    if (!(in.T < INFINITY))
        for (int mode = MODE_KEEP; mode >= MODE_MINSTASH; mode--) {
            h.mode = mode;
            for (int k = 0; k < ls.n; k++) have |= try_layout(&h, &in, &ls.g[(size_t)k * N], first);
        }
    double tcap = in.T; /* no stage of a plan worth finding fills longer */
    if (tcap < INFINITY) {
        build_frontiers(&h.x, tcap);
        h.mode = MODE_BEST;
        for (int k = 0; k < ls.n; k++) have |= try_layout(&h, &in, &ls.g[(size_t)k * N], first);
        if (!exhaustive && (have || pipe_order)) {
            /* local moves from the best candidate, then from the one-rank-per-stage plan
             * (merging or widening its stages), half the budget each */
            long half = (opts->hybrid_evals > 0 ? opts->hybrid_evals : N <= 16 ? 400 : 40) / 2;
            if (have && in.mode != MODE_BEST) { /* moves work on frontier plans: re-solve the start's layout */
                layout_from_groups(&h.ly, &h.x, in.grp);
                double T = solve_layout(&h, INFINITY, first);
                if (T <= in.T) {
                    in.T = T;
                    in.mode = MODE_BEST;
                    memcpy(in.first, first, (size_t)h.ly.S * sizeof(int));
                }
            }
            long budget = h.solves + half;
            while (have && h.solves < budget && descend(&h, &in, budget, first)) {}
            if (pipe_order) {
                incumbent in2 = {INFINITY, MODE_BEST, ppdl_xmalloc((size_t)N * sizeof(int)),
                                 ppdl_xmalloc((size_t)N * sizeof(int))};
                for (int s = 0; s < N; s++) grp[pipe_order[s]] = s;
                try_layout(&h, &in2, grp, first);
                budget = h.solves + half;
                while (in2.T < INFINITY && h.solves < budget && descend(&h, &in2, budget, first)) {}
                if (in2.T < in.T) {
                    have = 1;
                    in.T = in2.T;
                    memcpy(in.grp, in2.grp, (size_t)N * sizeof(int));
                    memcpy(in.first, in2.first, (size_t)N * sizeof(int));
                    in.mode = MODE_BEST;
                }
                free(in2.grp);
                free(in2.first);
            }
            /* iterated local search: kick the best layout (two ranks moved to random
             * stages or stages of their own), descend, keep what is better; the kicks
             * come from a fixed seed, so the result is deterministic */
            long rest = (opts->hybrid_evals > 0 ? opts->hybrid_evals : N <= 16 ? 400 : 40) - 2 * half;
            budget = h.solves + (N <= 16 ? half + rest : rest);
            ppdl_rng rg;
            ppdl_rng_seed(&rg, 0x5deece66dULL);
            incumbent kk = {INFINITY, MODE_BEST, ppdl_xmalloc((size_t)N * sizeof(int)),
                            ppdl_xmalloc((size_t)N * sizeof(int))};
            for (int stale = 0; have && h.solves < budget && stale < 30;) {
                memcpy(grp, in.grp, (size_t)N * sizeof(int));
                int S0 = 0;
                for (int r = 0; r < N; r++) S0 = grp[r] + 1 > S0 ? grp[r] + 1 : S0;
                for (int m = 0; m < 2; m++) {
                    int r = (int)(ppdl_rng_u64(&rg) % (uint64_t)N), t = (int)(ppdl_rng_u64(&rg) % (uint64_t)(2 * S0 + 1));
                    for (int q = 0; q < N; q++) grp[q] = 2 * grp[q] + 1;
                    grp[r] = t; /* odd: into stage t/2; even: a new stage before it */
                    S0 = renumber(N, grp);
                }
                kk.T = INFINITY;
                if (!try_layout(&h, &kk, grp, first)) { stale++; continue; }
                while (h.solves < budget && descend(&h, &kk, budget, first)) {}
                if (kk.T < in.T) {
                    in.T = kk.T;
                    in.mode = MODE_BEST;
                    memcpy(in.grp, kk.grp, (size_t)N * sizeof(int));
                    memcpy(in.first, kk.first, (size_t)N * sizeof(int));
                    stale = 0;
                } else {
                    stale++;
                }
            }
            free(kk.grp);
            free(kk.first);
            snprintf(info->hybrid, sizeof info->hybrid, "%d candidate layouts from the groups of fast-linked "
                     "ranks, then local moves", ls.n);
        }
    }
    if (!exhaustive && !have)
        snprintf(info->hybrid, sizeof info->hybrid, "%d candidate layouts from the groups of fast-linked ranks", ls.n);
    int found = have && in.T < T_inc;
    info->layouts_solved = h.solves;
    info->dp_runs += h.x.n_dp;
    info->hybrid_exact = exhaustive && !h.x.inexact;
    if (found) make_plan(&h, &in, out);
    free(grp);
    free(cnt);
    free(first);
    free(in.grp);
    free(in.first);
    free(ls.g);
    hyb_free(&h);
    return found ? 0 : 1;
}


int solve_layouts(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, const int *grps, int n,
                  int shard, ppdl_plan *outs)
{
    int N = cl->N, n_found = 0;
    hyb h;
    hyb_init(&h, c, cl, M, schedule, shard);
    /* per layout: its best plan with fixed options (no frontiers needed), whose T caps
     * the stages worth a frontier */
    incumbent *in = ppdl_xcalloc((size_t)n, sizeof *in);
    int *first = ppdl_xmalloc((size_t)N * sizeof(int));
    double tcap = 0;
    for (int k = 0; k < n; k++) {
        const int *grp = &grps[(size_t)k * N];
        memset(&outs[k], 0, sizeof outs[k]);
        in[k] = (incumbent){INFINITY, MODE_KEEP, ppdl_xmalloc((size_t)N * sizeof(int)),
                            ppdl_xmalloc((size_t)N * sizeof(int))};
        for (int mode = MODE_KEEP; mode >= MODE_MINSTASH; mode--) {
            h.mode = mode;
            try_layout(&h, &in[k], grp, first);
        }
        if (in[k].T < INFINITY) tcap = fmax(tcap, in[k].T);
    }
    if (tcap > 0) build_frontiers(&h.x, tcap);
    h.mode = MODE_BEST;
    for (int k = 0; k < n; k++) {
        if (!(in[k].T < INFINITY)) continue;
        try_layout(&h, &in[k], &grps[(size_t)k * N], first); /* the least extra time that fits */
        make_plan(&h, &in[k], &outs[k]);
        ppdl_cost_eval ev;
        char err[PPDL_ERR_LEN];
        if (ppdl_cost_evaluate(c, cl, M, schedule, &outs[k], &ev, err, sizeof err) == 0) {
            ppdl_cost_annotate(&outs[k], &ev);
            ppdl_cost_eval_free(&ev);
            n_found++;
        } else {
            ppdl_plan_free(&outs[k]);
        }
    }
    for (int k = 0; k < n; k++) {
        free(in[k].grp);
        free(in[k].first);
    }
    free(in);
    free(first);
    hyb_free(&h);
    return n_found;
}
