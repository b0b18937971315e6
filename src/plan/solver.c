/* solver.c — the exact planner for a rank order, exact placement over rank orders, and
 * the report when nothing fits.
 *
 * The problem (costmodel.h): cut L layers into S = N contiguous non-empty stages, give
 * stage s a distinct rank r_s and every layer an option c_l, to minimise
 *     T = sum_s time_s + 2 sum_s link_s + (M-1) max(max_s time_s, max_s link_s)
 * subject to mem_s <= mem[r_s].
 *
 * 1. Options inside one stage. T never decreases when one time_s grows, so every stage
 *    takes its fastest option assignment that fits: the least extra time with
 *    n_s * sum stash_l(c_l) <= mem[r_s] - state_multiplier * params. That is a
 *    multiple-choice knapsack, solved exactly by the Pareto frontier of (stash, extra)
 *    over the segment's assignments: frontier(i, j) comes from frontier(i, j-1) and the
 *    options of layer j by a k-way merge that keeps the points with strictly less extra
 *    than every point of smaller stash. Points with stash above the largest memory, or
 *    extra that would make the stage slower than T_ub/M on the fastest rank (no stage
 *    of a plan better than a known plan T_ub can be that slow, since T >= M time_s),
 *    can never serve a longer segment either and are dropped. A query (rank r, n in
 *    flight) is a binary search for the largest stash that fits.
 *    Cost: sum over segments of k |frontier|; for a run of identical layers with k
 *    options the frontier has at most O(len^(k-1)) points, in practice a few dozen.
 *
 * 2. One rank order. T is not a plain bottleneck, so: for a bound B, a DP over
 *    (stage s, last layer j) finds inner(B) = min sum_s time_s + 2 sum link_s over
 *    plans whose every time_s and link_s is <= B: O(S L len), len the longest stage
 *    under B, and only the last layers j that the ranks' capacity B x speed allows for
 *    stages 0..s. If that plan's largest term is B' <= B, inner is constant on [B', B],
 *    so the best T over plans with their largest term there is inner(B) + (M-1) B'.
 *    The optimum is min over B of inner(B) + (M-1) B, a finite staircase:
 *     - a first pass under B0 = T_inc/M (no plan better than T_inc can have a term above
 *       it) gives the least sum, the least bottleneck bmin and the least
 *       sum (1 + (M-1)/S) time_s + 2 sum link_s (<= T, the largest stage time being at
 *       least the average), with the three plans behind them as candidates;
 *     - then inner(bmin), the cheapest plan of the least bottleneck;
 *     - then down the staircase from (best - sum_min)/(M-1): "every term < the last
 *       plan's largest", until sum + (M-1) bmin >= best (inner only grows as B shrinks)
 *       or the average bound reaches best.
 *    Exact; a few DPs per order in practice (one or two to reject an order that cannot
 *    beat the incumbent).
 *
 * 3. Placement. The objective sees the order only through consecutive pairs, and stage
 *    s's in-flight count depends on s alone, so a DP over (set U of ranks used by
 *    stages 0..|U|-1, rank r of the last of them, its last layer j) is exact:
 *    O(2^N N L) states, O(N len) moves each, down the same staircase of B. Ranks that
 *    are interchangeable (a swap leaves speeds, memories and both matrices unchanged)
 *    are used in index order only, which shrinks the search on regular clusters.
 *    Larger N: placement.c (groups of fast-linked ranks, orders, local search).
 *
 * 4. Upper bounds first. Before the frontiers exist, the same order DP with fixed
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
#include "plan/solver_impl.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX 20000000L        /* frontier points kept at most (~0.4 GB) */
#define TT_MAX 16000000L          /* tabulated stage times at most, else computed on demand */

void ppdl_solve_opts_default(ppdl_solve_opts *o)
{
    o->placement = 1;
    o->exact_max_ranks = 10;
    o->exact_max_states = 20000000L;
    o->local_search_evals = 0;
    o->replicate = 1;
    o->exact_hybrid_ranks = 6;
    o->hybrid_evals = 0;
}

// ----------------------------------------------------------------------------
// context: prefix sums, bounds, interchangeable ranks

/* is swapping ranks a and b an automorphism of the cluster? */
static int swappable(const ppdl_cluster_model *cl, int a, int b)
{
    int N = cl->N;
    if (cl->speed[a] != cl->speed[b] || cl->mem[a] != cl->mem[b]) return 0;
    if (cl->bw[a * N + b] != cl->bw[b * N + a] || cl->lat[a * N + b] != cl->lat[b * N + a]) return 0;
    for (int x = 0; x < N; x++) {
        if (x == a || x == b) continue;
        if (cl->bw[a * N + x] != cl->bw[b * N + x] || cl->bw[x * N + a] != cl->bw[x * N + b]) return 0;
        if (cl->lat[a * N + x] != cl->lat[b * N + x] || cl->lat[x * N + a] != cl->lat[x * N + b]) return 0;
    }
    return 1;
}

void ctx_init(plan_ctx *x, const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int S)
{
    memset(x, 0, sizeof *x);
    x->c = c;
    x->cl = cl;
    x->L = c->L;
    x->N = cl->N;
    x->S = S;
    x->M = M;
    x->schedule = schedule;
    int L = c->L;
    x->W = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->P = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->S0 = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->Smin = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->Emin = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->omin = ppdl_xcalloc((size_t)L, sizeof(int));
    x->O = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    double maxlayer = 0, maxopt = 0;
    for (int l = 0; l < L; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        int o = 0;
        for (int k = 1; k < lc->n_opts; k++)
            if (lc->stash_bytes[k] < lc->stash_bytes[o] ||
                (lc->stash_bytes[k] == lc->stash_bytes[o] && lc->extra_ms[k] < lc->extra_ms[o]))
                o = k;
        x->omin[l] = o;
        double w = lc->fwd_ms + lc->bwd_ms;
        /* reading the data: part of the first and the last stage's time */
        if (l == 0) w += c->input_ms;
        if (l == L - 1) w += c->target_ms;
        if (w > maxlayer) maxlayer = w;
        x->O[l + 1] = x->O[l] + lc->opt_ms;
        if (lc->opt_ms > maxopt) maxopt = lc->opt_ms;
        if (lc->opt_ms > 0) x->has_opt = 1;
        x->W[l + 1] = x->W[l] + w;
        x->P[l + 1] = x->P[l] + lc->param_bytes;
        x->S0[l + 1] = x->S0[l] + lc->stash_bytes[0];
        x->Smin[l + 1] = x->Smin[l] + lc->stash_bytes[o];
        x->Emin[l + 1] = x->Emin[l] + lc->extra_ms[o];
    }
    double sumv = 0;
    for (int r = 0; r < x->N; r++) {
        sumv += cl->speed[r];
        if (cl->speed[r] > x->vmax) x->vmax = cl->speed[r];
        if (cl->mem[r] > x->maxmem) x->maxmem = cl->mem[r];
    }
    /* max_s time_s >= sum_s W_s / sum speeds, and >= the heaviest layer on the fastest rank */
    x->lb = fmax(x->W[L] / sumv, maxlayer / x->vmax);
    x->optlb = fmax(x->O[L] / sumv, maxopt / x->vmax);
    x->optcap = INFINITY;
    x->eq = ppdl_xmalloc((size_t)x->N * sizeof(int));
    for (int r = 0; r < x->N; r++) {
        x->eq[r] = r;
        for (int a = 0; a < r; a++)
            if (x->eq[a] == a && swappable(cl, a, r)) {
                x->eq[r] = a;
                break;
            }
    }
    x->MLmax = L - x->S + 1;
    x->tcap = INFINITY;
}

void ctx_free(plan_ctx *x)
{
    free(x->W);
    free(x->P);
    free(x->S0);
    free(x->Smin);
    free(x->Emin);
    free(x->omin);
    free(x->O);
    free(x->eq);
    free(x->jmax);
    free(x->fr_off);
    free(x->fr_n);
    free(x->pt_stash);
    free(x->pt_extra);
    free(x->pt_nrc);
    free(x->pt_parent);
    free(x->pt_opt);
    memset(x, 0, sizeof *x);
}

// ----------------------------------------------------------------------------
// Pareto frontiers of (stash, extra) per segment

static void pool_push(plan_ctx *x, double stash, double extra, int nrc, int parent, int opt)
{
    if (x->n_pts == x->cap_pts) {
        x->cap_pts = x->cap_pts ? 2 * x->cap_pts : 4096;
        x->pt_stash = realloc(x->pt_stash, (size_t)x->cap_pts * sizeof(double));
        x->pt_extra = realloc(x->pt_extra, (size_t)x->cap_pts * sizeof(double));
        x->pt_nrc = realloc(x->pt_nrc, (size_t)x->cap_pts * sizeof(int));
        x->pt_parent = realloc(x->pt_parent, (size_t)x->cap_pts * sizeof(int));
        x->pt_opt = realloc(x->pt_opt, (size_t)x->cap_pts);
        PPDL_CHECK(x->pt_stash && x->pt_extra && x->pt_nrc && x->pt_parent && x->pt_opt,
                   "out of host memory for the planner's frontiers (%ld points)", x->cap_pts);
    }
    x->pt_stash[x->n_pts] = stash;
    x->pt_extra[x->n_pts] = extra;
    x->pt_nrc[x->n_pts] = nrc;
    x->pt_parent[x->n_pts] = parent;
    x->pt_opt[x->n_pts] = (unsigned char)opt;
    x->n_pts++;
}

void build_frontiers(plan_ctx *x, double tcap)
{
    int L = x->L, MLmax = x->MLmax;
    const ppdl_costs *c = x->c;
    tcap *= 1 + 1e-9; /* slack: a stage exactly at the cap stays */
    x->tcap = tcap;
    x->jmax = ppdl_xmalloc((size_t)L * sizeof(int));
    x->fr_off = ppdl_xcalloc((size_t)L * MLmax, sizeof(long));
    x->fr_n = ppdl_xcalloc((size_t)L * MLmax, sizeof(int));
    x->ML = 0;
    for (int i = 0; i < L; i++) {
        x->jmax[i] = i - 1;
        long prev_off = -1; /* -1: the empty assignment (0, 0) before layer i */
        int prev_n = 1;
        for (int len = 1; len <= MLmax && i + len - 1 < L; len++) {
            int j = i + len - 1;
            double w = x->W[j + 1] - x->W[i];
            if (w / x->vmax > tcap) break;
            double hi = x->maxmem - c->state_multiplier * (x->P[j + 1] - x->P[i]);
            double ecap = tcap * x->vmax - w;
            if (hi < 0 || ecap < 0) break;
            if (x->n_pts > POOL_MAX) { x->inexact = 1; break; }
            const ppdl_layer_cost *lc = &c->layers[j];
            int k = lc->n_opts, pos[PPDL_MAX_RC_OPTS] = {0};
            long start = x->n_pts;
            double best_extra = INFINITY;
            int best_nrc = INT_MAX;
            /* k-way merge of the lists "prev + option o" by (stash, extra, recomputed
             * layers, o); a point stays when it beats every point of less stash in
             * (extra, recomputed layers): equal times prefer fewer recomputes */
            for (;;) {
                int pick = -1, pn = 0;
                double ps = 0, pe = 0;
                for (int o = 0; o < k; o++) {
                    if (pos[o] >= prev_n) continue;
                    double s0 = prev_off < 0 ? 0 : x->pt_stash[prev_off + pos[o]];
                    double e0 = prev_off < 0 ? 0 : x->pt_extra[prev_off + pos[o]];
                    int n0 = prev_off < 0 ? 0 : x->pt_nrc[prev_off + pos[o]];
                    double s = s0 + lc->stash_bytes[o], e = e0 + lc->extra_ms[o];
                    int n = n0 + (o != 0);
                    if (pick < 0 || s < ps || (s == ps && (e < pe || (e == pe && n < pn)))) {
                        pick = o;
                        ps = s;
                        pe = e;
                        pn = n;
                    }
                }
                if (pick < 0 || ps > hi) break; /* lists ascend in stash: nothing more fits */
                if ((pe < best_extra || (pe == best_extra && pn < best_nrc)) && pe <= ecap) {
                    pool_push(x, ps, pe, pn, prev_off < 0 ? -1 : (int)(prev_off + pos[pick]), pick);
                    best_extra = pe;
                    best_nrc = pn;
                }
                pos[pick]++;
            }
            int n = (int)(x->n_pts - start);
            if (n == 0) break; /* longer segments only get bigger and slower */
            x->fr_off[(size_t)i * MLmax + len - 1] = start;
            x->fr_n[(size_t)i * MLmax + len - 1] = n;
            x->jmax[i] = j;
            if (len > x->ML) x->ML = len;
            prev_off = start;
            prev_n = n;
        }
    }
    PPDL_CHECK(x->n_pts < 2147483647L, "planner frontier too large");
}

/* the frontier point with the least extra that fits (rank memory memr, n in flight), or -1 */
static long fr_query(const plan_ctx *x, int i, int j, double memr, int n)
{
    if (j > x->jmax[i]) return -1;
    size_t at = (size_t)i * x->MLmax + (size_t)(j - i);
    long off = x->fr_off[at];
    int cnt = x->fr_n[at];
    double base = x->c->state_multiplier * (x->P[j + 1] - x->P[i]);
    if (base + (double)n * x->pt_stash[off] > memr) return -1;
    int lo = 0, hi = cnt - 1; /* invariant: point lo fits */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (base + (double)n * x->pt_stash[off + mid] <= memr) lo = mid;
        else hi = mid - 1;
    }
    return off + lo;
}

double seg_time(const plan_ctx *x, int mode, int i, int j, int r, int n, long *pt)
{
    const ppdl_cluster_model *cl = x->cl;
    double sm = x->c->state_multiplier, w = x->W[j + 1] - x->W[i];
    if (pt) *pt = -1;
    if (x->optcap < INFINITY) { /* the bound on the optimizer step (opt_bounded) */
        double u = (x->O[j + 1] - x->O[i]) / cl->speed[r];
        if (x->optstrict ? u >= x->optcap : u > x->optcap) return INFINITY;
    }
    if (mode == MODE_BEST) {
        long k = fr_query(x, i, j, cl->mem[r], n);
        if (k < 0) return INFINITY;
        if (pt) *pt = k;
        return (w + x->pt_extra[k]) / cl->speed[r];
    }
    const double *pre = mode == MODE_KEEP ? x->S0 : x->Smin;
    if (sm * (x->P[j + 1] - x->P[i]) + (double)n * (pre[j + 1] - pre[i]) > cl->mem[r]) return INFINITY;
    return (w + (mode == MODE_KEEP ? 0 : x->Emin[j + 1] - x->Emin[i])) / cl->speed[r];
}

/* the options of layers i..j of a stage (opt[0..j-i]) */
static void seg_options(const plan_ctx *x, int mode, int i, int j, int r, int n, int *opt)
{
    if (mode != MODE_BEST) {
        for (int l = i; l <= j; l++) opt[l - i] = mode == MODE_KEEP ? 0 : x->omin[l];
        return;
    }
    long k;
    seg_time(x, MODE_BEST, i, j, r, n, &k);
    PPDL_CHECK(k >= 0, "planner: stage %d..%d on rank %d has no option that fits", i, j, r);
    for (int l = j; l >= i; l--) {
        opt[l - i] = x->pt_opt[k];
        k = x->pt_parent[k];
    }
}

// ----------------------------------------------------------------------------
// one rank order: tables and the bounded DP

static int in_flight(const plan_ctx *x, int s) { return ppdl_in_flight(x->schedule, x->S, x->M, s); }

void work_init(order_work *w, const plan_ctx *x, int mode)
{
    memset(w, 0, sizeof *w);
    int S = x->S, L = x->L;
    w->mode = mode;
    w->ML = mode == MODE_BEST ? x->ML : x->MLmax;
    w->row_rank = ppdl_xmalloc((size_t)S * sizeof(int));
    w->lk_a = ppdl_xmalloc((size_t)S * sizeof(int));
    w->lk_b = ppdl_xmalloc((size_t)S * sizeof(int));
    for (int s = 0; s < S; s++) w->row_rank[s] = w->lk_a[s] = w->lk_b[s] = -1;
    /* fixed modes cost O(1) per stage from prefix sums: no table */
    if (mode == MODE_BEST && (double)S * L * (w->ML ? w->ML : 1) <= TT_MAX)
        w->tt = ppdl_xmalloc((size_t)S * L * (w->ML ? w->ML : 1) * sizeof(double));
    w->lk = ppdl_xcalloc((size_t)S * L, sizeof(double));
    w->f = ppdl_xmalloc((size_t)S * L * sizeof(double));
    w->g = ppdl_xmalloc((size_t)S * L * sizeof(double));
    w->h = ppdl_xmalloc((size_t)S * L * sizeof(double));
    w->jlo = ppdl_xmalloc((size_t)S * sizeof(int));
    w->jhi = ppdl_xmalloc((size_t)S * sizeof(int));
    w->arg = ppdl_xmalloc((size_t)S * L * sizeof(int));
    w->argg = ppdl_xmalloc((size_t)S * L * sizeof(int));
    w->argh = ppdl_xmalloc((size_t)S * L * sizeof(int));
}

void work_free(order_work *w)
{
    free(w->row_rank);
    free(w->lk_a);
    free(w->lk_b);
    free(w->tt);
    free(w->lk);
    free(w->f);
    free(w->g);
    free(w->h);
    free(w->jlo);
    free(w->jhi);
    free(w->arg);
    free(w->argg);
    free(w->argh);
    memset(w, 0, sizeof *w);
}

/* refill the rows whose rank changed. The time table is indexed by the stage's last
 * layer j and its length, so the DP's scan over first layers reads memory in order. */
static void work_fill(const plan_ctx *x, order_work *w, const int *order)
{
    int S = x->S, L = x->L, ML = w->ML;
    for (int s = 0; s < S; s++) {
        int r = order[s];
        if (w->tt && w->row_rank[s] != r) {
            int n = in_flight(x, s);
            double *rows = &w->tt[(size_t)s * L * ML];
            for (size_t k = 0; k < (size_t)L * ML; k++) rows[k] = INFINITY;
            for (int i = s; i <= L - S + s; i++)
                for (int len = 1; len <= ML && i + len - 1 <= L - S + s; len++) {
                    double t = seg_time(x, w->mode, i, i + len - 1, r, n, NULL);
                    /* longer stages do not fit either, or are slower than any stage of a
                     * plan that beats the known one: T >= M time_s, and T >= M time_s +
                     * the other stages' work at the fastest speed (both grow with the
                     * stage, since time_s >= its work / vmax) */
                    if (!(t <= x->tcap) ||
                        x->M * t + (x->W[L] - (x->W[i + len] - x->W[i])) / x->vmax > x->M * x->tcap)
                        break;
                    rows[(size_t)(i + len - 1) * ML + len - 1] = t;
                }
        }
        w->row_rank[s] = r;
        if (s + 1 < S && (w->lk_a[s] != r || w->lk_b[s] != order[s + 1])) {
            for (int j = s; j <= L - S + s; j++) w->lk[(size_t)s * L + j] = ppdl_link_ms(x->c, x->cl, j, r, order[s + 1]);
            w->lk_a[s] = r;
            w->lk_b[s] = order[s + 1];
        }
    }
}

static inline double stage_t(const plan_ctx *x, const order_work *w, const int *order, int s, int i, int j)
{
    if (j - i + 1 > w->ML) return INFINITY;
    if (w->tt) return w->tt[((size_t)s * x->L + j) * w->ML + (j - i)];
    return seg_time(x, w->mode, i, j, order[s], in_flight(x, s), NULL);
}

#define FITS(v) ((v) < INFINITY && (strict ? (v) < B : (v) <= B))

/* inner(B): the least sum of times + 2 links over the plans whose every term is <= B
 * (strict: < B), into w->f, and the first layer of each stage's best predecessor into
 * w->arg. extras: from the same scan, over the same plans,
 *   w->g  the least possible largest term, and its choices in w->argg;
 *   w->h  the least possible sum_s (1 + (M-1)/S) time_s + 2 sum_s link_s, which is <= T
 *         (the largest stage time is at least their average) and close to T when the
 *         optimum is balanced, as it usually is; its choices in w->argh.
 * Returns 1 when some plan is under the bound. */
static int run_dp(const plan_ctx *x, order_work *w, const int *order, double B, int strict, int extras)
{
    ((plan_ctx *)x)->n_dp++;
    int S = x->S, L = x->L, ML = w->ML;
    double *f = w->f, *g = w->g, *h = w->h, avg = 1 + (double)(x->M - 1) / S;
    int *arg = w->arg, *argg = w->argg, *argh = w->argh;
    for (size_t k = 0; k < (size_t)S * L; k++) f[k] = g[k] = h[k] = INFINITY;
    /* Capacity: a stage on a rank of speed v with time <= B holds layers of at most
     * B v fwd+bwd ms, so stages 0..s end at a layer j with W[j+1] <= B (v_0 + ... + v_s)
     * and leave W[L] - W[j+1] <= B (v_s+1 + ... + v_S-1) for the rest: a window of j per
     * stage, narrow when B is near the optimum. */
    int *jlo = w->jlo, *jhi = w->jhi;
    double tot_v = 0, pre_v = 0, slack = 1 + 1e-12;
    for (int s = 0; s < S; s++) tot_v += x->cl->speed[order[s]];
    for (int s = 0, a = 0, b = 0; s < S; s++) {
        pre_v += x->cl->speed[order[s]];
        double head = B < INFINITY ? B * pre_v * slack : INFINITY;
        double rest = B < INFINITY ? B * (tot_v - pre_v) * slack : INFINITY;
        while (a < L - 1 && x->W[L] - x->W[a + 1] > rest) a++;
        while (b < L - 1 && x->W[b + 2] <= head) b++;
        jlo[s] = a > s ? a : s;
        jhi[s] = b < L - S + s ? b : L - S + s;
    }
    for (int j = 0; j <= jhi[0] && j < ML; j++) {
        double t = stage_t(x, w, order, 0, 0, j);
        if (!FITS(t)) break;
        f[j] = g[j] = t;
        h[j] = avg * t;
        arg[j] = argg[j] = argh[j] = 0;
    }
    for (int s = 1; s < S; s++) {
        double *fs = &f[(size_t)s * L], *fp = &f[(size_t)(s - 1) * L];
        double *gs = &g[(size_t)s * L], *gp = &g[(size_t)(s - 1) * L];
        double *hs = &h[(size_t)s * L], *hp = &h[(size_t)(s - 1) * L];
        const double *lk = &w->lk[(size_t)(s - 1) * L];
        int *as = &arg[(size_t)s * L], *ag = &argg[(size_t)s * L], *ah = &argh[(size_t)s * L];
        for (int j = jlo[s]; j <= jhi[s]; j++) {
            double best = INFINITY, gbest = INFINITY, hbest = INFINITY;
            int bi = -1, gi = -1, hi = -1;
            /* stage s-1 ends at i-1 inside its window: i in [jlo[s-1]+1, jhi[s-1]+1] */
            int ilo = j - ML + 1 > jlo[s - 1] + 1 ? j - ML + 1 : jlo[s - 1] + 1;
            for (int i = j < jhi[s - 1] + 1 ? j : jhi[s - 1] + 1; i >= ilo; i--) {
                double t = stage_t(x, w, order, s, i, j);
                if (!FITS(t)) break; /* stage times only grow as the stage grows */
                double prev = fp[i - 1], l = lk[i - 1];
                if (!(prev < INFINITY) || !FITS(l)) continue;
                double v = prev + 2 * l + t;
                if (v < best) {
                    best = v;
                    bi = i;
                }
                if (extras) {
                    double m = fmax(t, fmax(l, gp[i - 1])), a = hp[i - 1] + 2 * l + avg * t;
                    if (m < gbest) gbest = m, gi = i;
                    if (a < hbest) hbest = a, hi = i;
                }
            }
            fs[j] = best;
            gs[j] = gbest;
            hs[j] = hbest;
            as[j] = bi;
            ag[j] = gi;
            ah[j] = hi;
        }
    }
    return f[(size_t)(S - 1) * L + L - 1] < INFINITY;
}

/* the plan behind the choices arg (w->arg, w->argg or w->argh): its cut, the sum of
 * its terms (times + 2 links) and its largest term */
static void walk(const plan_ctx *x, const order_work *w, const int *order, const int *arg, int *first,
                 double *sum, double *mx)
{
    int S = x->S, L = x->L, j = L - 1;
    double m = 0, total = 0;
    for (int s = S - 1; s >= 0; s--) {
        int i = arg[(size_t)s * L + j];
        first[s] = i;
        double t = stage_t(x, w, order, s, i, j);
        total += t;
        if (t > m) m = t;
        if (s + 1 < S) {
            double l = w->lk[(size_t)s * L + j];
            total += 2 * l;
            if (l > m) m = l;
        }
        j = i - 1;
    }
    *sum = total;
    *mx = m;
}

/* No term of a plan that beats T_inc is above this: T >= M time_s, T >= (M+1) link_s,
 * and T >= sum_s time_s + (M-1) max >= W[L]/vmax + (M-1) max (every layer runs once,
 * at most at the fastest speed). The second is the tighter when M is small. */
static double first_bound(const plan_ctx *x, double T_inc)
{
    if (!(T_inc < INFINITY)) return INFINITY;
    double b = T_inc / x->M;
    if (x->M > 1) b = fmin(b, (T_inc - x->W[x->L] / x->vmax) / (x->M - 1));
    return b;
}

static double order_inner(plan_ctx *x, order_work *w, const int *order, double T_inc, int *first)
{
    x->n_solved++;
    work_fill(x, w, order);
    int S = x->S, L = x->L, M = x->M, found = 0;
    int *cur = ppdl_xmalloc((size_t)S * sizeof(int));
    double best = T_inc, sum, mx;
    /* first pass, over the plans that could beat T_inc (all terms <= T_inc/M, since
     * T >= M time_s and T >= (M+1) link_s): the least-sum, least-bottleneck and
     * least-average plans are candidates, and their values bound every plan */
    if (!run_dp(x, w, order, first_bound(x, T_inc), 0, 1)) goto out;
    const int *args[3] = {w->arg, w->argg, w->argh};
    for (int k = 0; k < (M > 1 ? 3 : 1); k++) {
        walk(x, w, order, args[k], cur, &sum, &mx);
        if (sum + (M - 1) * mx < best) {
            best = sum + (M - 1) * mx;
            found = 1;
            memcpy(first, cur, (size_t)S * sizeof(int));
        }
    }
    if (M == 1) goto out;
    /* Every plan of this order that could beat `best` has T >= sum_min + (M-1) bmin and
     * T >= lb_avg, and its largest term below (best - sum_min) / (M-1). First the least
     * sum among the plans of the least bottleneck (usually close to the optimum, which
     * narrows that window), then down the staircase from the window's top: the least
     * sum under "every term < the last plan's largest", until the bounds stop it. */
    double sum_min = w->f[(size_t)(S - 1) * L + L - 1];
    double bmin = fmax(w->g[(size_t)(S - 1) * L + L - 1], x->lb), lb_avg = w->h[(size_t)(S - 1) * L + L - 1];
    if (sum_min + (M - 1) * bmin < best && lb_avg < best && run_dp(x, w, order, bmin, 0, 0)) {
        walk(x, w, order, w->arg, cur, &sum, &mx);
        if (sum + (M - 1) * mx < best) {
            best = sum + (M - 1) * mx;
            found = 1;
            memcpy(first, cur, (size_t)S * sizeof(int));
        }
    }
    double B = (best - sum_min) / (M - 1);
    int strict = 0;
    while (sum_min + (M - 1) * bmin < best && lb_avg < best) {
        if (!run_dp(x, w, order, B, strict, 0)) break;
        walk(x, w, order, w->arg, cur, &sum, &mx);
        if (sum + (M - 1) * mx < best) {
            best = sum + (M - 1) * mx;
            found = 1;
            memcpy(first, cur, (size_t)S * sizeof(int));
        }
        if (sum + (M - 1) * bmin >= best) break;
        B = fmin(mx, (best - sum) / (M - 1));
        strict = 1;
    }
out:
    free(cur);
    return found ? best : INFINITY;
}

// ----------------------------------------------------------------------------
// the optimizer step: T + max_s OPT_s

/* the largest optimizer step of the plan (order, first) */
static double plan_opt(const plan_ctx *x, const int *order, const int *first)
{
    double m = 0;
    for (int s = 0; s < x->S; s++) {
        int i = first[s], j = s + 1 < x->S ? first[s + 1] - 1 : x->L - 1;
        m = fmax(m, (x->O[j + 1] - x->O[i]) / x->cl->speed[order[s]]);
    }
    return m;
}

static void set_optcap(plan_ctx *x, order_work *w, double cap, int strict)
{
    x->optcap = cap;
    x->optstrict = strict;
    if (w) /* the tabulated stage times depend on the bound */
        for (int s = 0; s < x->S; s++) w->row_rank[s] = -1;
}

/* With optimizer_ms, T = T' + max_s OPT_s, T' the form the DPs minimise: a staircase
 * on a bound A of every stage's optimizer step. inner(A) gives the least T' over the
 * plans whose every OPT_s <= A; its plan has some largest OPT a <= A, and every plan
 * whose largest OPT is in [a, A] has T >= T'(A) + a, that plan's T. So the next bound
 * is OPT < a, until no plan under it has T' < best - (least possible OPT). Without
 * optimizer_ms: one inner solve, as before. `subsets`: the exact placement's DP
 * (order_out gets the order), else the order `order` with work w. */
static double solve_subsets(plan_ctx *x, int mode, double T_inc, int *order_out, int *first_out);
static double opt_bounded(plan_ctx *x, order_work *w, int subsets, int mode, const int *order, double T_inc,
                          int *order_out, int *first)
{
    if (!x->has_opt)
        return subsets ? solve_subsets(x, mode, T_inc, order_out, first) : order_inner(x, w, order, T_inc, first);
    int N = x->N, S = x->S, found = 0;
    int *o2 = ppdl_xmalloc((size_t)N * sizeof(int)), *f2 = ppdl_xmalloc((size_t)S * sizeof(int));
    double best = T_inc;
    set_optcap(x, w, INFINITY, 0);
    for (;;) {
        double T = subsets ? solve_subsets(x, mode, best - x->optlb, o2, f2)
                           : order_inner(x, w, order, best - x->optlb, f2);
        if (!(T < INFINITY)) break;
        const int *ord = subsets ? o2 : order;
        double a = plan_opt(x, ord, f2);
        if (T + a < best) {
            best = T + a;
            found = 1;
            memcpy(first, f2, (size_t)S * sizeof(int));
            if (subsets) memcpy(order_out, o2, (size_t)N * sizeof(int));
        }
        if (a <= x->optlb) break; /* no plan has a shorter largest step */
        set_optcap(x, w, a, 1);
    }
    set_optcap(x, w, INFINITY, 0);
    free(o2);
    free(f2);
    return found ? best : INFINITY;
}

double solve_order_work(plan_ctx *x, order_work *w, const int *order, double T_inc, int *first)
{
    return opt_bounded(x, w, 0, w->mode, order, T_inc, NULL, first);
}

// ----------------------------------------------------------------------------
// exact placement: DP over subsets of ranks

/* Returns the best T below T_inc and its order and cut, or INFINITY. mode: how the
 * stages' options are chosen (MODE_BEST needs the frontiers). */
static double solve_subsets(plan_ctx *x, int mode, double T_inc, int *order_out, int *first_out)
{
    int N = x->N, S = x->S, L = x->L, ML = mode == MODE_BEST ? x->ML : x->MLmax, M = x->M;
    if (ML < 1 || (double)S * N * L * ML > TT_MAX) return INFINITY;
    size_t rowsz = (size_t)L * ML;
    double *tab = ppdl_xmalloc((size_t)S * N * rowsz * sizeof(double));
    for (int s = 0; s < S; s++) {
        int n = in_flight(x, s);
        for (int r = 0; r < N; r++) {
            double *rows = &tab[((size_t)s * N + r) * rowsz];
            for (int i = 0; i < L; i++)
                for (int len = 1; len <= ML; len++) {
                    int j = i + len - 1;
                    rows[(size_t)i * ML + len - 1] = (i < s || j > L - S + s) ? INFINITY : seg_time(x, mode, i, j, r, n, NULL);
                }
        }
    }
    double *lkr = ppdl_xmalloc((size_t)L * N * N * sizeof(double));
    for (int j = 0; j < L; j++)
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                lkr[((size_t)j * N + a) * N + b] = a == b ? INFINITY : ppdl_link_ms(x->c, x->cl, j, a, b);
    double *restlb = ppdl_xmalloc((size_t)L * sizeof(double));
    for (int j = 0; j < L; j++) restlb[j] = (x->W[L] - x->W[j + 1]) / x->vmax;
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

    double best = T_inc, B = first_bound(x, T_inc);
    int strict = 0, found = 0;
    int *ord = ppdl_xmalloc((size_t)S * sizeof(int)), *fst = ppdl_xmalloc((size_t)S * sizeof(int));
    for (;;) {
        x->n_solved++;
        for (size_t k = 0; k < nst; k++) val[k] = INFINITY;
        for (int r = 0; r < N; r++) {
            if (lower[r]) continue;
            for (int j = 0; j <= L - S && j < ML; j++) {
                double t = TAB(0, r, 0, j + 1);
                if (!FITS(t)) break;
                val[ST(1u << r, r, j)] = t;
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
                            if (v2 + t < val[k]) {
                                val[k] = v2 + t;
                                back[k] = (j + 1) * 32 + r;
                            }
                        }
                    }
                }
            }
        }
        int rb = -1;
        double total = INFINITY;
        for (int r = 0; r < N; r++)
            if (val[ST(full, r, L - 1)] < total) {
                total = val[ST(full, r, L - 1)];
                rb = r;
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
#undef ST
#undef TAB
    free(tab);
    free(lkr);
    free(restlb);
    free(lower);
    free(val);
    free(back);
    free(ord);
    free(fst);
    return found ? best : INFINITY;
}

// ----------------------------------------------------------------------------
// plans out of (order, cut, mode)

static void make_plan(const plan_ctx *x, int mode, const int *order, const int *first, const char *method,
                      ppdl_plan *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->method, sizeof p->method, "%s", method);
    p->S = x->S;
    p->stages = ppdl_xcalloc((size_t)x->S, sizeof *p->stages);
    for (int s = 0; s < x->S; s++) {
        ppdl_plan_stage *st = &p->stages[s];
        st->rank = order[s];
        st->first = first[s];
        st->last = s + 1 < x->S ? first[s + 1] - 1 : x->L - 1;
        st->recompute = ppdl_xcalloc((size_t)(st->last - st->first + 1), sizeof(int));
        seg_options(x, mode, st->first, st->last, st->rank, in_flight(x, s), st->recompute);
    }
}

// ----------------------------------------------------------------------------
// nothing fits: the least-over plan and a message

/* min over cuts of the largest (mem_s - limit) with smallest-stash options */
double least_over(const plan_ctx *x, const int *order, int *first)
{
    int S = x->S, L = x->L;
    double sm = x->c->state_multiplier;
    double *f = ppdl_xmalloc((size_t)S * L * sizeof(double));
    int *arg = ppdl_xmalloc((size_t)S * L * sizeof(int));
    for (int s = 0; s < S; s++) {
        int r = order[s], n = in_flight(x, s);
        for (int j = s; j <= L - S + s; j++) {
            double best = INFINITY;
            int bi = -1;
            for (int i = s == 0 ? 0 : j; i >= (s == 0 ? 0 : s); i--) {
                double over = sm * (x->P[j + 1] - x->P[i]) + (double)n * (x->Smin[j + 1] - x->Smin[i]) - x->cl->mem[r];
                double v = s == 0 ? over : fmax(over, f[(size_t)(s - 1) * L + i - 1]);
                if (v < best) {
                    best = v;
                    bi = i;
                }
            }
            f[(size_t)s * L + j] = best;
            arg[(size_t)s * L + j] = bi;
        }
    }
    double res = f[(size_t)(S - 1) * L + L - 1];
    for (int s = S - 1, j = L - 1; s >= 0; s--) {
        first[s] = arg[(size_t)s * L + j];
        j = first[s] - 1;
    }
    free(f);
    free(arg);
    return res;
}

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
    make_plan(x, MODE_MINSTASH, &orders[(size_t)bo * S], bf, "ppdl", out);
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
    if (schedule != PPDL_SCHED_1F1B && schedule != PPDL_SCHED_GPIPE)
        return ppdl_errf(err, errlen, "unknown schedule %d", schedule);
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
    }

    /* best plan so far: its order, cut and option mode */
    int *b_order = ppdl_xmalloc((size_t)N * sizeof(int)), *b_first = ppdl_xmalloc((size_t)S * sizeof(int));
    int *first = ppdl_xmalloc((size_t)S * sizeof(int));
    double bT = INFINITY;
    int b_mode = MODE_KEEP;
    for (int mode = MODE_KEEP; mode >= MODE_MINSTASH; mode--) {
        order_work w;
        work_init(&w, &x, mode);
        for (int k = 0; k < n_cand; k++) {
            double T = solve_order_work(&x, &w, &cand[(size_t)k * N], bT, first);
            if (T < bT) {
                bT = T;
                b_mode = mode;
                memcpy(b_order, &cand[(size_t)k * N], (size_t)N * sizeof(int));
                memcpy(b_first, first, (size_t)S * sizeof(int));
            }
        }
        work_free(&w);
    }
    int rc = 0;
    int exact_ok = !fixed_order && opts->placement && N <= opts->exact_max_ranks && N <= 20 &&
                   ldexp((double)N * x.L, N) <= (double)opts->exact_max_states;
    if (!(bT < INFINITY) && exact_ok) {
        /* no candidate order fits: is there any order that does? */
        int *o2 = ppdl_xmalloc((size_t)N * sizeof(int));
        double T = opt_bounded(&x, NULL, 1, MODE_MINSTASH, NULL, INFINITY, o2, first);
        if (T < bT) {
            bT = T;
            b_mode = MODE_MINSTASH;
            memcpy(b_order, o2, (size_t)N * sizeof(int));
            memcpy(b_first, first, (size_t)S * sizeof(int));
        }
        free(o2);
    }
    if (!(bT < INFINITY) && !exact_ok && !fixed_order && opts->placement) {
        /* too many ranks for the exact check: search for an order that fits, from every
         * candidate in turn */
        int *o2 = ppdl_xmalloc((size_t)N * sizeof(int));
        for (int k = 0; k < n_cand && !(bT < INFINITY); k++) {
            memcpy(o2, &cand[(size_t)k * N], (size_t)N * sizeof(int));
            if (!feasible_search(&x, o2, 4L * N * N)) continue;
            order_work w2;
            work_init(&w2, &x, MODE_MINSTASH);
            double T = solve_order_work(&x, &w2, o2, INFINITY, first);
            work_free(&w2);
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
    build_frontiers(&x, bT / x.M);
    info->frontier_points = x.n_pts;
    order_work w;
    work_init(&w, &x, MODE_BEST);
    for (int k = 0; k < n_cand; k++) {
        double T = solve_order_work(&x, &w, &cand[(size_t)k * N], bT, first);
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
            double T = opt_bounded(&x, NULL, 1, MODE_BEST, NULL, bT, o2, first);
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
                double T = solve_order_work(&x, &w, b_order, INFINITY, first);
                if (T <= bT) {
                    bT = T;
                    b_mode = MODE_BEST;
                    memcpy(b_first, first, (size_t)S * sizeof(int));
                }
            }
            if (b_mode == MODE_BEST) {
                long budget = opts->local_search_evals > 0 ? opts->local_search_evals : N < 25 ? 200 : 8L * N;
                local_search(&x, &w, b_order, b_first, &bT, budget);
            }
            snprintf(info->placement, sizeof info->placement, "heuristic: %d group%s of fast-linked ranks, "
                     "then swaps", info->n_groups, info->n_groups == 1 ? "" : "s");
        }
    }
    work_free(&w);
    info->exact = exact && !x.inexact;

    make_plan(&x, b_mode, b_order, b_first, method, out);
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
    ctx_free(&x);
    return rc;
}

/* No plan fits and the model has fewer layers than ranks (so no one-rank-per-stage
 * plan exists): report data parallelism with the smallest-stash options, the plan that
 * needs the fewest micro-batches in flight. */
static void report_infeasible_replicated(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                                         ppdl_plan *out, char *err, size_t errlen)
{
    char e2[PPDL_ERR_LEN];
    if (ppdl_plan_data_parallel(c->L, cl->N, out, e2, sizeof e2)) {
        ppdl_errf(err, errlen, "no plan fits in memory (%s)", e2);
        return;
    }
    snprintf(out->method, sizeof out->method, "ppdl");
    for (int l = 0; l < c->L; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        int o = 0;
        for (int k = 1; k < lc->n_opts; k++)
            if (lc->stash_bytes[k] < lc->stash_bytes[o]) o = k;
        out->stages[0].recompute[l] = o;
    }
    ppdl_cost_eval ev;
    if (ppdl_cost_evaluate(c, cl, M, schedule, out, &ev, e2, sizeof e2)) {
        ppdl_errf(err, errlen, "no plan fits in memory: the model has %d layers for %d ranks, so every plan "
                  "replicates stages, and none fits (%s)", c->L, cl->N, e2);
        return;
    }
    ppdl_cost_annotate(out, &ev);
    char a[32], b[32], d[32];
    ppdl_errf(err, errlen, "no plan fits in memory: the model has %d layers for %d ranks, so every plan "
              "replicates stages, and none fits even with full recompute; data parallelism, which holds the "
              "fewest micro-batches, is %s over its limit on a rank (it needs %s, the rank has %s). Give the "
              "ranks more memory or use a smaller micro-batch", c->L, cl->N,
              ppdl_fmt_bytes((size_t)fmax(ev.worst_over, 0), a, sizeof a), ppdl_fmt_bytes((size_t)ev.mem_bytes[0], b, sizeof b),
              ppdl_fmt_bytes((size_t)ev.mem_limit[0], d, sizeof d));
    ppdl_cost_eval_free(&ev);
}

int ppdl_solve(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
               const ppdl_solve_opts *opts, ppdl_plan *out, ppdl_solve_info *info, char *err, size_t errlen)
{
    ppdl_solve_opts def;
    if (!opts) {
        ppdl_solve_opts_default(&def);
        opts = &def;
    }
    if (!opts->replicate || !opts->placement) return solve_impl(c, cl, M, schedule, opts, NULL, out, info, err, errlen);
    ppdl_solve_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    memset(out, 0, sizeof *out);
    if (M < 1) return ppdl_errf(err, errlen, "--micro-batches %d: expected >= 1", M);
    if (schedule != PPDL_SCHED_1F1B && schedule != PPDL_SCHED_GPIPE)
        return ppdl_errf(err, errlen, "unknown schedule %d", schedule);
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
        report_infeasible_replicated(c, cl, M, schedule, out, err, errlen);
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
