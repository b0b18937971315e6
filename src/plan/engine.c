/* engine.c — the planner's engine (engine.h): context, frontiers, the feasibility
 * test, the stage DP over a layout's tables, the exact solve of one rank order and the
 * plans' reconstruction. It calls none of the drivers (placement.c, hybrid.c, solver.c).
 *
 * 1. Options inside one stage. T never decreases when a stage's time grows, so every
 *    stage takes its fastest option assignment that fits: the least extra time with
 *    f * sum stash_l(c_l) <= mem - state_multiplier * params on each replica. That
 *    multiple-choice knapsack is solved exactly by the Pareto frontier of (stash, extra)
 *    over the segment's assignments, frontier(i, j) merged from frontier(i, j-1) and
 *    layer j's options; a query is a binary search (stage_fit). Points too slow for the
 *    cap or too large for any memory are dropped, so the tables record where a start's
 *    stages may end (tend). FRONTIER_BUDGET bounds the pool of points: past it each
 *    frontier is thinned evenly (x->inexact), keeping its smallest-stash point, so the
 *    bound costs optimality, never a plan.
 * 2. The stage DP. For bounds B (every pace term) and A (every tail term), a DP over
 *    (stage s, last layer j) finds the least sum of fills + 2 links under the bounds,
 *    O(S L len) with len the longest stage; the drivers walk a staircase of bounds on it.
 * 3. One rank order (T = sum + (M-1) max). If the plan of inner(B) has largest term
 *    B' <= B, the best T with the largest term in [B', B] is inner(B) + (M-1) B', so the
 *    optimum is the least over a finite staircase: a first pass under T_inc/M (the least
 *    sum, the least bottleneck bmin and a lower bound on T), then inner(bmin), then down
 *    from (best - sum_min)/(M-1) with "every term < the last plan's largest" until
 *    sum + (M-1) bmin >= best. Exact; a few DPs per order in practice (one or two to
 *    reject an order that cannot beat the incumbent).
 */
#include "plan/engine.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/costmodel.h"
#include "plan/replica.h"
#include "sched/schedule.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* frontier points kept at most (25 bytes each: ~25 MB); a segment keeps at least 2 */
#define FRONTIER_BUDGET 1000000L
#define TT_MAX 16000000L          /* tabulated stage times at most, else computed on demand */

// ----------------------------------------------------------------------------
// context: prefix sums, bounds, interchangeable ranks

/* is swapping ranks a and b an automorphism of the cluster? With a memory contention
 * (cluster_model.h), a rank's optimizer step depends on its host, and an all-reduce
 * link on whether its ends share a host and on their memcpy rates (the diagonal) */
static int swappable(const ppdl_cluster_model *cl, int a, int b)
{
    int N = cl->N;
    if (cl->speed[a] != cl->speed[b] || cl->mem[a] != cl->mem[b]) return 0;
    if (cl->bw[a * N + b] != cl->bw[b * N + a] || cl->lat[a * N + b] != cl->lat[b * N + a]) return 0;
    const ppdl_hosts *h = &cl->hosts;
    if (h->n > 0 && h->contention && (h->of_rank[a] != h->of_rank[b] || cl->bw[a * N + a] != cl->bw[b * N + b]))
        return 0;
    for (int x = 0; x < N; x++) {
        if (x == a || x == b) continue;
        if (cl->bw[a * N + x] != cl->bw[b * N + x] || cl->bw[x * N + a] != cl->bw[x * N + b]) return 0;
        if (cl->lat[a * N + x] != cl->lat[b * N + x] || cl->lat[x * N + a] != cl->lat[x * N + b]) return 0;
    }
    return 1;
}

/* Layer l's option o as the frontiers and the prefix sums see it: its stash per
 * micro-batch in flight and its extra ms over option 0. With a split backward both B
 * and W pay the option (costs.h), and what B keeps for W is counted with the stash. */
static double opt_stash(const plan_ctx *x, int l, int o)
{
    const ppdl_layer_cost *lc = &x->c->layers[l];
    return x->split ? lc->stash_bytes[o] + lc->weight_keep_bytes[o] : lc->stash_bytes[o];
}

static double opt_extra(const plan_ctx *x, int l, int o)
{
    if (!x->split) return x->c->layers[l].extra_ms[o];
    return o == 0 ? 0 : ppdl_layer_sched_ms(x->c, l, o, 1) - ppdl_layer_sched_ms(x->c, l, 0, 1);
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
    x->split = ppdl_schedule_splits_backward(schedule);
    x->phi = ppdl_fill_factor(schedule, S, M);
    x->mt = M - 1 + x->phi; /* exactly M when phi = 1 */
    x->infl = ppdl_xmalloc((size_t)S * sizeof(int));
    if (x->split) { /* the op lists' counts, from one play */
        int *pending = ppdl_xmalloc((size_t)S * sizeof(int));
        ppdl_schedule_counts(schedule, S, M, x->infl, pending);
        free(pending);
    } else {
        for (int s = 0; s < S; s++) x->infl[s] = ppdl_in_flight(schedule, S, M, s);
    }
    int L = c->L;
    x->W = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->P = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->S0 = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->Smin = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->Emin = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->omin = ppdl_xcalloc((size_t)L, sizeof(int));
    x->O = ppdl_xcalloc((size_t)L + 1, sizeof(double));
    x->NP = ppdl_xcalloc((size_t)L + 1, sizeof(int));
    double maxlayer = 0, maxopt = 0;
    for (int l = 0; l < L; l++) {
        const ppdl_layer_cost *lc = &c->layers[l];
        int o = 0;
        for (int k = 1; k < lc->n_opts; k++)
            if (opt_stash(x, l, k) < opt_stash(x, l, o) ||
                (opt_stash(x, l, k) == opt_stash(x, l, o) && opt_extra(x, l, k) < opt_extra(x, l, o)))
                o = k;
        x->omin[l] = o;
        double w = x->split ? ppdl_layer_sched_ms(c, l, 0, 1) : lc->fwd_ms + lc->bwd_ms;
        /* reading the data: part of the first and the last stage's time */
        if (l == 0) w += c->input_ms;
        if (l == L - 1) w += c->target_ms;
        if (w > maxlayer) maxlayer = w;
        x->O[l + 1] = x->O[l] + lc->opt_ms;
        if (lc->opt_ms > maxopt) maxopt = lc->opt_ms;
        if (lc->opt_ms > 0) x->has_opt = 1;
        x->W[l + 1] = x->W[l] + w;
        x->P[l + 1] = x->P[l] + lc->param_bytes;
        x->NP[l + 1] = x->NP[l] + (lc->param_bytes > 0);
        x->S0[l + 1] = x->S0[l] + opt_stash(x, l, 0);
        x->Smin[l + 1] = x->Smin[l] + opt_stash(x, l, o);
        x->Emin[l + 1] = x->Emin[l] + opt_extra(x, l, o);
    }
    double sumv = 0, sumo = 0, omax = 0;
    for (int r = 0; r < x->N; r++) {
        sumv += cl->speed[r];
        sumo += ppdl_opt_speed(cl, r);
        omax = fmax(omax, ppdl_opt_speed(cl, r));
        if (cl->speed[r] > x->vmax) x->vmax = cl->speed[r];
        if (cl->mem[r] > x->maxmem) x->maxmem = cl->mem[r];
    }
    /* max_s time_s >= sum_s W_s / sum speeds, and >= the heaviest layer on the fastest rank */
    x->lb = fmax(x->W[L] / sumv, maxlayer / x->vmax);
    x->optlb = fmax(x->O[L] / sumo, maxopt / omax);
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
    free(x->NP);
    free(x->eq);
    free(x->infl);
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

static void pool_push(plan_ctx *x, double stash, double extra, int nrc, int parent, int option)
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
    x->pt_opt[x->n_pts] = (unsigned char)option;
    x->n_pts++;
}

/* the least a stage of layers i..j holds but for its stash (stage_fit's base at its
 * least): state_multiplier x its parameter bytes, less AdamW's m and v where they may
 * be sharded (over many replicas, about nothing of them), with a tied weight's term
 * (on one stage holding both its layers, (state_multiplier - 1) b less) */
static double least_base(const plan_ctx *x, int i, int j)
{
    double sm = x->c->state_multiplier;
    return (x->shard ? sm - fmin(2.0, sm) : sm) * (x->P[j + 1] - x->P[i]) + ppdl_tie_mem(x->c, i, j);
}

/* the segments i..i+len-1 a frontier is built for: fill at most tcap on the fastest
 * rank, and parameters within the largest memory (the loop below stops at the same
 * place or earlier) */
static long frontier_segments(const plan_ctx *x, double tcap)
{
    long n = 0;
    for (int i = 0; i < x->L; i++)
        for (int len = 1; len <= x->MLmax && i + len - 1 < x->L; len++) {
            int j = i + len - 1;
            double w = x->W[j + 1] - x->W[i];
            if (w / x->vmax > tcap || x->maxmem < least_base(x, i, j)) break;
            n++;
        }
    return n;
}

/* Thin the frontier of n points at `start` (ascending stash, descending extra) to at
 * most cap (>= 2): for q = 0 .. cap-1 the first point whose stash reaches the q-th of
 * cap-1 equal steps from the least stash to the largest; the first and last points
 * stay. Returns the points kept, moved to the front of the range. */
static int thin_frontier(plan_ctx *x, long start, int n, int cap)
{
    double s0 = x->pt_stash[start], step = (x->pt_stash[start + n - 1] - s0) / (cap - 1);
    int kept = 0;
    for (int p = 0, q = 0; p < n && q < cap; p++) {
        if (p < n - 1 && x->pt_stash[start + p] < s0 + q * step) continue;
        long a = start + kept++, b = start + p;
        x->pt_stash[a] = x->pt_stash[b];
        x->pt_extra[a] = x->pt_extra[b];
        x->pt_nrc[a] = x->pt_nrc[b];
        x->pt_parent[a] = x->pt_parent[b];
        x->pt_opt[a] = x->pt_opt[b];
        while (q < cap && x->pt_stash[b] >= s0 + q * step) q++;
    }
    return kept;
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
    long segs = frontier_segments(x, tcap), share = segs > 0 ? FRONTIER_BUDGET / segs : FRONTIER_BUDGET;
    int cap = share < 2 ? 2 : share > INT_MAX ? INT_MAX : (int)share;
    for (int i = 0; i < L; i++) {
        x->jmax[i] = i - 1;
        long prev_off = -1; /* -1: the empty assignment (0, 0) before layer i */
        int prev_n = 1;
        for (int len = 1; len <= MLmax && i + len - 1 < L; len++) {
            int j = i + len - 1;
            double w = x->W[j + 1] - x->W[i];
            if (w / x->vmax > tcap) break;
            double hi = x->maxmem - least_base(x, i, j);
            double ecap = tcap * x->vmax - w;
            if (hi < 0 || ecap < 0) break;
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
                    double s = s0 + opt_stash(x, j, o), e = e0 + opt_extra(x, j, o);
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
            if (n > cap) {
                n = thin_frontier(x, start, n, cap);
                x->n_pts = start + n;
                x->inexact = 1;
            }
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

// ----------------------------------------------------------------------------
// feasibility: does a stage fit its ranks' memory

static int fits_all(double base, double stash, int nc, const int *fl, const double *mem)
{
    for (int c = 0; c < nc; c++)
        if (base + (double)fl[c] * stash > mem[c]) return 0;
    return 1;
}

/* a stage's AdamW state and how it is held: base (the stage's memory but for the
 * stash) with the equal slices' largest charged, or (sized) without any of the state */
typedef struct {
    int k;                     /* 0: unsharded; < 0: sized slices among -k */
    size_t n;                  /* the state's elements */
    double base;
    double *w;                 /* sized: the weights of the last fit (w_buf or caller's) */
    double *h;
} shard_fit;

static int fits_sharded(const plan_ctx *x, const shard_fit *sf, double stash, int nc, const int *fl,
                        const double *mem)
{
    if (sf->k >= 0) return fits_all(sf->base, stash, nc, fl, mem);
    for (int q = 0; q < nc; q++) sf->h[q] = mem[q] - sf->base - (double)fl[q] * stash;
    return ppdl_slices_sized(x->c, sf->n, nc, sf->h, sf->w);
}

double stage_fit(const plan_ctx *x, int mode, int i, int j, int nc, const int *fl, const double *mem, int shk,
                 long *pt, double *w)
{
    double params = x->P[j + 1] - x->P[i];
    double base = x->c->state_multiplier * params + ppdl_tie_mem(x->c, i, j), res = INFINITY;
    if (pt) *pt = -1;
    shard_fit sf = {shk, 0, base, NULL, NULL};
    double buf[128];
    if (shk >= 2 || shk <= -2) {
        int k = shk < 0 ? -shk : shk;
        sf.n = ppdl_stage_opt_elems(x->c, i, j, params);
        sf.base = base - ppdl_opt_elem_bytes(x->c) * (double)sf.n;
        if (shk > 0) sf.base += ppdl_slice_opt_bytes(x->c, sf.n, k, NULL, 0);
        else {
            sf.h = k <= 64 ? buf : ppdl_xmalloc(2 * (size_t)k * sizeof(double));
            sf.w = sf.h + k;
        }
    } else sf.k = 0;
    double stash = 0;
    if (mode == MODE_KEEP) {
        stash = x->S0[j + 1] - x->S0[i];
        if (fits_sharded(x, &sf, stash, nc, fl, mem)) res = 0;
    } else if (mode == MODE_MINSTASH) {
        stash = x->Smin[j + 1] - x->Smin[i];
        if (fits_sharded(x, &sf, stash, nc, fl, mem)) res = x->Emin[j + 1] - x->Emin[i];
    } else if (x->jmax && j <= x->jmax[i]) { /* else no frontier for this segment */
        size_t at = (size_t)i * x->MLmax + (size_t)(j - i);
        long off = x->fr_off[at];
        int lo = 0, hi = x->fr_n[at] - 1;
        if (fits_sharded(x, &sf, x->pt_stash[off], nc, fl, mem)) {
            while (lo < hi) { /* the largest stash that fits has the least extra */
                int mid = (lo + hi + 1) / 2;
                if (fits_sharded(x, &sf, x->pt_stash[off + mid], nc, fl, mem)) lo = mid;
                else hi = mid - 1;
            }
            if (pt) *pt = off + lo;
            res = x->pt_extra[off + lo];
            stash = x->pt_stash[off + lo];
        }
    }
    if (sf.k < 0) {
        /* the weights of the options chosen: fit again at their stash */
        if (w && res < INFINITY) {
            PPDL_CHECK(fits_sharded(x, &sf, stash, nc, fl, mem), "planner: sized slices of layers %d-%d", i, j);
            memcpy(w, sf.w, (size_t)nc * sizeof(double));
        }
        if (sf.h != buf) free(sf.h);
    }
    return res;
}

double rank_stage_time(const plan_ctx *x, int mode, int i, int j, int r, int n)
{
    const ppdl_cluster_model *cl = x->cl;
    if (x->optcap < INFINITY) { /* the bound on the optimizer step (opt_staircase) */
        double u = (x->O[j + 1] - x->O[i]) / ppdl_opt_speed(cl, r);
        if (x->optstrict ? u >= x->optcap : u > x->optcap) return INFINITY;
    }
    double e = stage_fit(x, mode, i, j, 1, &n, &cl->mem[r], 0, NULL, NULL);
    if (!(e < INFINITY)) return INFINITY;
    return (x->W[j + 1] - x->W[i] + e) / cl->speed[r];
}

// ----------------------------------------------------------------------------
// layouts

void layout_init(layout *ly, const plan_ctx *x)
{
    memset(ly, 0, sizeof *ly);
    size_t N = (size_t)x->N;
    ly->N = x->N;
    ly->start = ppdl_xmalloc((N + 1) * sizeof(int));
    ly->ranks = ppdl_xmalloc(N * sizeof(int));
    ly->reps = ppdl_xmalloc(N * sizeof(int));
    ly->moff = ppdl_xmalloc((N + 1) * sizeof(int));
    ly->mfl = ppdl_xmalloc(N * sizeof(int));
    ly->mmem = ppdl_xmalloc(N * sizeof(double));
    ly->cfill = ppdl_xmalloc(N * sizeof(double));
    ly->cpace = ppdl_xmalloc(N * sizeof(double));
    ly->copt = ppdl_xmalloc(N * sizeof(double));
    ly->arbw = ppdl_xmalloc(N * sizeof(double));
    ly->arlat = ppdl_xmalloc(N * sizeof(double));
    ly->n0 = ppdl_xmalloc(N * sizeof(int));
    ly->poff = ppdl_xmalloc((N + 1) * sizeof(int));
    ly->held = ppdl_xmalloc(2 * N * sizeof(int));
    ly->pending = ly->held + N;
    ly->shk = ppdl_xcalloc(N, sizeof(int));
}

void layout_free(layout *ly)
{
    void *all[] = {ly->start, ly->ranks, ly->reps, ly->moff, ly->mfl, ly->mmem, ly->cfill, ly->cpace, ly->copt,
                   ly->arbw, ly->arlat, ly->n0, ly->poff, ly->pa, ly->pb, ly->pm, ly->held, ly->shk};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]);
    memset(ly, 0, sizeof *ly);
}

void layout_from_order(layout *ly, const plan_ctx *x, const int *order)
{
    int S = x->N;
    ly->S = S;
    ly->factored = 1;
    ly->phi = x->phi;
    for (int s = 0; s < S; s++) {
        ly->start[s] = ly->moff[s] = s;
        ly->ranks[s] = order[s];
        ly->reps[s] = 1;
        ly->shk[s] = 0;
        ly->mfl[s] = x->infl[s];
        ly->mmem[s] = x->cl->mem[order[s]];
    }
    ly->start[S] = ly->moff[S] = S;
}

int layout_from_groups(layout *ly, const plan_ctx *x, const int *grp)
{
    int N = x->N, L = x->L, M = x->M, S = 0;
    const ppdl_cluster_model *cl = x->cl;
    for (int r = 0; r < N; r++) S = grp[r] + 1 > S ? grp[r] + 1 : S;
    if (S > L) return 0;
    ly->S = S;
    ly->factored = 0;
    int n = 0;
    for (int s = 0; s < S; s++) {
        ly->start[s] = n;
        for (int r = 0; r < N; r++)
            if (grp[r] == s) ly->ranks[n++] = r;
        int k = n - ly->start[s];
        if (k < 1 || k > M) return 0;
        ly->reps[s] = k;
        ppdl_sort_replicas(cl, &ly->ranks[ly->start[s]], k);
    }
    ly->start[S] = n;
    /* every replica's op list's peaks from one play (zero bubble: of the whole layout),
     * and the fill factor of the layout */
    long step = ppdl_schedule_counts_layout(x->schedule, S, M, ly->reps, ly->held, ly->pending);
    ly->phi = ppdl_fill_factor_step(x->schedule, S, M, ly->reps, step);
    int npairs = 0, nm = 0;
    for (int s = 0; s < S; s++) {
        const int *R = &ly->ranks[ly->start[s]];
        int k = ly->start[s + 1] - ly->start[s];
        ly->cfill[s] = 0;
        ly->cpace[s] = 0;
        ly->copt[s] = 0;
        /* the replicas' memory constraints, base + in-flight x stash <= mem: of those
         * with the same in-flight count only the least mem binds (dp over 64 ranks:
         * one test, not 64) */
        ly->moff[s] = nm;
        int nc = 0, *cfl = &ly->mfl[nm];
        double *cmem = &ly->mmem[nm];
        /* sharded AdamW state: equal slices where the replicas' memories are equal, else
         * slices sized to them, tested replica by replica */
        int same = 1;
        for (int q = 1; q < k; q++) same &= cl->mem[R[q]] == cl->mem[R[0]];
        ly->shk[s] = !x->shard || k < 2 ? 0 : same ? k : -k;
        double odiv = ly->shk[s] > 0 ? k : 1; /* ppdl_opt_divisor: equal slices update 1/k each */
        for (int q = 0; q < k; q++) {
            ly->cfill[s] = fmax(ly->cfill[s], 1.0 / cl->speed[R[q]]);
            ly->cpace[s] = fmax(ly->cpace[s], (ppdl_replica_mbs(M, k, q) - 1) / cl->speed[R[q]]);
            ly->copt[s] = fmax(ly->copt[s], 1.0 / ppdl_opt_speed(cl, R[q]) / odiv);
            int f = ly->held[ly->start[s] + q], c = 0;
            if (ly->shk[s] < 0) c = nc; /* one constraint per replica */
            else
                while (c < nc && cfl[c] != f) c++;
            if (c == nc) { cfl[nc] = f; cmem[nc++] = cl->mem[R[q]]; }
            else cmem[c] = fmin(cmem[c], cl->mem[R[q]]);
        }
        nm += nc;
        ly->n0[s] = ppdl_replica_mbs(M, k, k - 1); /* the last replica has the fewest */
        ly->arbw[s] = ppdl_group_min_bw(cl, R, k);
        ly->arlat[s] = ppdl_group_max_lat(cl, R, k);
        if (s + 1 < S) npairs += k * (ly->start[s + 2] - ly->start[s + 1]);
    }
    ly->moff[S] = nm;
    if (npairs > ly->cap_pairs) {
        ly->cap_pairs = npairs;
        ly->pa = realloc(ly->pa, (size_t)npairs * sizeof(int));
        ly->pb = realloc(ly->pb, (size_t)npairs * sizeof(int));
        ly->pm = realloc(ly->pm, (size_t)npairs * sizeof(int));
        PPDL_CHECK(ly->pa && ly->pb && ly->pm, "out of host memory for the planner's link pairs");
    }
    int np = 0;
    for (int s = 0; s < S; s++) {
        ly->poff[s] = np;
        if (s + 1 == S) continue;
        int ka = ly->start[s + 1] - ly->start[s], kb = ly->start[s + 2] - ly->start[s + 1];
        for (int a = 0; a < ka; a++)
            for (int b = 0; b < kb; b++) {
                int m = ppdl_pair_mbs(M, ka, a, kb, b);
                if (m < 1) continue;
                ly->pa[np] = ly->ranks[ly->start[s] + a];
                ly->pb[np] = ly->ranks[ly->start[s + 1] + b];
                ly->pm[np++] = m;
            }
    }
    ly->poff[S] = np;
    return 1;
}

/* stage s's memory constraints, for stage_fit */
#define STAGE_CON(ly, s)                                                                                         \
    ((ly)->moff[(s) + 1] - (ly)->moff[s]), &(ly)->mfl[(ly)->moff[s]], &(ly)->mmem[(ly)->moff[s]], (ly)->shk[s]

// ----------------------------------------------------------------------------
// tables

/* Stage s ends at a layer j in s..L-S+s and starts at or after layer s, so its entries
 * are the lengths 1..min(ML, j-s+1) of each end: row j-s of the stage begins at
 * roff[j-s], and a stage holds per entries in all (about L^3/27 at worst, where
 * [S][L][ML] would hold L^3/4). */
#define TIX(tb, s, j, len) ((size_t)(s) * (tb)->per + (size_t)(tb)->roff[(j) - (s)] + (size_t)(len) - 1)

/* roff and per for the tables' S, L and ML; the entries of all S stages */
static size_t tables_rows(stage_tables *tb)
{
    if (!tb->roff) tb->roff = ppdl_xmalloc(((size_t)tb->L + 1) * sizeof(long));
    long n = 0;
    for (int d = 0; d <= tb->L - tb->S; d++) {
        tb->roff[d] = n;
        n += d + 1 < tb->ML ? d + 1 : tb->ML;
    }
    tb->per = n;
    return (size_t)tb->S * (size_t)n;
}

static void tables_size(stage_tables *tb, size_t nt, size_t nd, int tabulate)
{
    if (tabulate && nt > tb->cap_t) {
        free(tb->tf);
        if (!tb->factored) free(tb->tp);
        free(tb->ta);
        tb->tf = ppdl_xmalloc(nt * sizeof(double));
        tb->tp = tb->factored ? tb->tf : ppdl_xmalloc(nt * sizeof(double));
        tb->ta = tb->factored ? NULL : ppdl_xmalloc(nt * sizeof(double));
        tb->cap_t = nt;
    }
    if (nd > tb->cap_d) {
        void *old[] = {tb->tend, tb->lf, tb->factored ? NULL : tb->lp, tb->f, tb->g, tb->av, tb->h,
                       tb->arg, tb->argg, tb->argh};
        for (size_t k = 0; k < sizeof old / sizeof old[0]; k++) free(old[k]);
        tb->tend = ppdl_xmalloc(nd * sizeof(int));
        tb->lf = ppdl_xcalloc(nd, sizeof(double));
        tb->lp = tb->factored ? tb->lf : ppdl_xmalloc(nd * sizeof(double));
        tb->f = ppdl_xmalloc(nd * sizeof(double));
        tb->g = ppdl_xmalloc(nd * sizeof(double));
        tb->av = ppdl_xmalloc(nd * sizeof(double));
        tb->h = ppdl_xmalloc(nd * sizeof(double));
        tb->arg = ppdl_xmalloc(nd * sizeof(int));
        tb->argg = ppdl_xmalloc(nd * sizeof(int));
        tb->argh = ppdl_xmalloc(nd * sizeof(int));
        tb->cap_d = nd;
    }
}

void tables_init_order(stage_tables *tb, const plan_ctx *x, int mode)
{
    memset(tb, 0, sizeof *tb);
    int S = x->S, L = x->L;
    tb->mode = mode;
    tb->factored = 1;
    tb->L = L;
    tb->S = S;
    tb->ML = mode == MODE_BEST ? x->ML : x->MLmax;
    tb->mult = x->M - 1;
    tb->kf = x->phi;
    /* the largest stage time is at least the average: T >= sum (kf + (M-1)/S) time_s */
    if (x->phi == 1) {
        tb->ca = 1 + (double)(x->M - 1) / S;
        tb->cb = 0;
    } else {
        tb->ca = 1; /* of the fill, kf time_s */
        tb->cb = (double)(x->M - 1) / S; /* of the pace, time_s */
    }
    int ML1 = tb->ML ? tb->ML : 1;
    /* fixed modes cost O(1) per stage from prefix sums: no table */
    tables_size(tb, tables_rows(tb), (size_t)S * L, mode == MODE_BEST && (double)S * L * ML1 <= TT_MAX);
    tb->row_rank = ppdl_xmalloc((size_t)S * sizeof(int));
    tb->lk_a = ppdl_xmalloc((size_t)S * sizeof(int));
    tb->lk_b = ppdl_xmalloc((size_t)S * sizeof(int));
    for (int s = 0; s < S; s++) tb->row_rank[s] = tb->lk_a[s] = tb->lk_b[s] = -1;
    tb->jlo = ppdl_xmalloc((size_t)S * sizeof(int));
    tb->jhi = ppdl_xmalloc((size_t)S * sizeof(int));
}

void tables_free(stage_tables *tb)
{
    void *all[] = {tb->tf, tb->factored ? NULL : tb->tp, tb->ta, tb->tend, tb->lf, tb->factored ? NULL : tb->lp,
                   tb->f, tb->g, tb->av, tb->h, tb->arg, tb->argg, tb->argh, tb->jlo, tb->jhi, tb->row_rank,
                   tb->lk_a, tb->lk_b, tb->roff};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]);
    memset(tb, 0, sizeof *tb);
}

/* Refill the rows whose rank changed. The tables are indexed by the stage's last layer
 * j and its length, so the DP's scan over first layers reads memory in order. */
void tables_fill_order(const plan_ctx *x, stage_tables *tb, const layout *ly)
{
    int S = x->S, L = x->L, ML = tb->ML;
    tb->ly = ly;
    for (int s = 0; s < S; s++) {
        int r = ly->ranks[s];
        if (tb->tf && tb->row_rank[s] != r) {
            int n = ly->mfl[s], *tend = &tb->tend[(size_t)s * L];
            for (int i = 0; i < L; i++) tend[i] = i - 1;
            for (int i = s; i <= L - S + s; i++) {
                int len = 1;
                for (; len <= ML && i + len - 1 <= L - S + s; len++) {
                    double t = rank_stage_time(x, tb->mode, i, i + len - 1, r, n);
                    /* longer stages do not fit either, or are slower than any stage of a
                     * plan that beats the known one: T >= mt time_s, and T >= mt time_s +
                     * phi x the other stages' work at the fastest speed (both grow with
                     * the stage, since time_s >= its work / vmax; mt = M, phi = 1 but
                     * for the zero-bubble schedules) */
                    if (!(t <= x->tcap) ||
                        x->mt * t + x->phi * ((x->W[L] - (x->W[i + len] - x->W[i])) / x->vmax) > x->mt * x->tcap)
                        break;
                    tb->tf[TIX(tb, s, i + len - 1, len)] = t;
                }
                tend[i] = i + len - 2;
            }
        }
        tb->row_rank[s] = r;
        if (s + 1 < S && (tb->lk_a[s] != r || tb->lk_b[s] != ly->ranks[s + 1])) {
            for (int j = s; j <= L - S + s; j++)
                tb->lf[(size_t)s * L + j] = ppdl_link_ms(x->c, x->cl, j, r, ly->ranks[s + 1]);
            tb->lk_a[s] = r;
            tb->lk_b[s] = ly->ranks[s + 1];
        }
    }
}

void tables_fill_layout(const plan_ctx *x, stage_tables *tb, const layout *ly, int mode, double T_inc)
{
    int S = ly->S, L = x->L, ML = L - S + 1;
    tb->mode = mode;
    tb->factored = 0;
    tb->L = L;
    tb->S = S;
    tb->ML = ML;
    tb->mult = 1;
    tb->kf = 1;
    tb->ca = 1;
    tb->cb = 1.0 / S; /* the stages' mean pace: at most the largest */
    tb->ly = ly;
    tables_size(tb, tables_rows(tb), (size_t)S * L, 1);
    for (int s = 0; s < S; s++) {
        int k = ly->start[s + 1] - ly->start[s], *tend = &tb->tend[(size_t)s * L];
        for (int i = 0; i < L; i++) tend[i] = i - 1;
        for (int i = s; i <= L - S + s; i++) {
            int len = 1;
            for (; i + len - 1 <= L - S + s; len++) {
                int j = i + len - 1;
                double e = stage_fit(x, mode, i, j, STAGE_CON(ly, s), NULL, NULL);
                if (!(e < INFINITY)) break; /* a longer stage does not fit either */
                double t = x->W[j + 1] - x->W[i] + e;
                double fill = ly->phi * t * ly->cfill[s], pace = t * ly->cpace[s];
                double ar = ppdl_allreduce_ms_bw(k, x->P[j + 1] - x->P[i], x->NP[j + 1] - x->NP[i], ly->arbw[s],
                                                 ly->arlat[s]);
                /* after the flush the stage all-reduces, then runs its optimizer step
                 * (the slowest replica's); both only grow with the stage */
                if (x->has_opt) ar += (x->O[j + 1] - x->O[i]) * ly->copt[s];
                /* T >= fill + pace >= (phi + micro-batches of the slowest replica - 1)
                 * x its time >= (phi + n0 - 1) t cfill (every replica has n0 or more),
                 * and T >= ar; also T >= fill + pace + the other stages' fill, which is
                 * at least phi x their work at the fastest speed (fill >= phi t / vmax):
                 * these only grow with the stage */
                if ((ly->n0[s] - 1 + ly->phi) * t * ly->cfill[s] >= T_inc || ar >= T_inc ||
                    fill + pace + ly->phi * (x->W[L] - (x->W[j + 1] - x->W[i])) / x->vmax >= T_inc)
                    break;
                tb->tf[TIX(tb, s, j, len)] = fill;
                tb->tp[TIX(tb, s, j, len)] = pace;
                tb->ta[TIX(tb, s, j, len)] = ar;
            }
            tend[i] = i + len - 2;
        }
        if (s + 1 < S)
            for (int j = s; j <= L - S + s; j++) {
                double lf = 0, lp = 0;
                for (int p = ly->poff[s]; p < ly->poff[s + 1]; p++) {
                    double lk = ppdl_link_ms(x->c, x->cl, j, ly->pa[p], ly->pb[p]);
                    lf = fmax(lf, lk);
                    lp = fmax(lp, (ly->pm[p] - 1) * lk);
                }
                tb->lf[(size_t)s * L + j] = lf;
                tb->lp[(size_t)s * L + j] = lp;
            }
    }
}

// ----------------------------------------------------------------------------
// the stage DP

/* stage s over layers i..j: its fill (INFINITY: no such stage), pace and tail */
static inline double cell(const plan_ctx *x, const stage_tables *tb, int s, int i, int j, double *pace, double *tail)
{
    *pace = INFINITY;
    *tail = 0;
    if (j - i + 1 > tb->ML) return INFINITY;
    if (!tb->tf) { /* factored, computed on demand */
        const layout *ly = tb->ly;
        *pace = rank_stage_time(x, tb->mode, i, j, ly->ranks[s], ly->mfl[s]);
        return tb->kf * *pace;
    }
    if (j > tb->tend[(size_t)s * tb->L + i]) return INFINITY;
    size_t t = TIX(tb, s, j, j - i + 1);
    *pace = tb->tp[t];
    if (tb->ta) *tail = tb->ta[t];
    /* factored: the table holds time_s, the pace; the fill is kf x it (kf = 1 but for
     * the zero-bubble schedules, and then exactly time_s) */
    return tb->factored ? tb->kf * tb->tf[t] : tb->tf[t];
}

#define UNDER(v, bound, strict) ((strict) ? (v) < (bound) : (v) <= (bound))

int stage_dp(plan_ctx *x, stage_tables *tb, double B, int sB, double A, int sA, int extras)
{
    x->n_dp++;
    int S = tb->S, L = tb->L, ML = tb->ML;
    double *f = tb->f, *g = tb->g, *av = tb->av, *h = tb->h, ca = tb->ca, cb = tb->cb;
    int *arg = tb->arg, *argg = tb->argg, *argh = tb->argh;
    for (size_t k = 0; k < (size_t)S * L; k++) f[k] = g[k] = av[k] = h[k] = INFINITY;
    /* One rank per stage, capacity: a stage on a rank of speed v with time <= B holds
     * layers of at most B v fwd+bwd ms, so stages 0..s end at a layer j with W[j+1] <=
     * B (v_0 + ... + v_s) and leave W[L] - W[j+1] <= B (v_s+1 + ... + v_S-1) for the
     * rest: a window of j per stage, narrow when B is near the optimum. */
    int *jlo = tb->factored ? tb->jlo : NULL, *jhi = tb->factored ? tb->jhi : NULL;
    if (jlo) {
        const int *order = tb->ly->ranks;
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
    }
    /* stage s-1 reaches (a finite f) only the ends in [flo, fhi] */
    int flo = 0, fhi = -1;
    for (int j = 0; j <= L - S && (!jhi || j <= jhi[0]); j++) {
        double tp, ta, tf = cell(x, tb, 0, 0, j, &tp, &ta);
        if (!(tf < INFINITY) || !UNDER(tp, B, sB) || !UNDER(ta, A, sA)) break;
        f[j] = tf;
        g[j] = tp;
        av[j] = ca * tf + cb * tp;
        h[j] = ta;
        arg[j] = argg[j] = argh[j] = 0;
        fhi = j;
    }
    for (int s = 1; s < S && flo <= fhi; s++) {
        const double *fp = &f[(size_t)(s - 1) * L], *gp = &g[(size_t)(s - 1) * L], *ap = &av[(size_t)(s - 1) * L];
        const double *hp = &h[(size_t)(s - 1) * L];
        const double *lf = &tb->lf[(size_t)(s - 1) * L], *lp = &tb->lp[(size_t)(s - 1) * L];
        int nlo = L, nhi = -1;
        int j0 = jlo && jlo[s] > flo + 1 ? jlo[s] : flo + 1, j1 = jhi ? jhi[s] : L - S + s;
        for (int j = j0; j <= j1; j++) {
            double best = INFINITY, gbest = INFINITY, abest = INFINITY, hbest = INFINITY;
            int bi = -1, gi = -1, hi = -1;
            /* stage s-1 ends at i-1 among its reachable ends (and inside its window) */
            int ilo = j - ML + 1 > flo + 1 ? j - ML + 1 : flo + 1, ihi = j < fhi + 1 ? j : fhi + 1;
            if (jlo && ilo < jlo[s - 1] + 1) ilo = jlo[s - 1] + 1;
            if (jhi && ihi > jhi[s - 1] + 1) ihi = jhi[s - 1] + 1;
            for (int i = ihi; i >= ilo; i--) {
                double tp, ta, tf = cell(x, tb, s, i, j, &tp, &ta);
                /* fill, pace and tail only grow as the stage grows */
                if (!(tf < INFINITY) || !UNDER(tp, B, sB) || !UNDER(ta, A, sA)) break;
                if (!(fp[i - 1] < INFINITY) || !UNDER(lp[i - 1], B, sB)) continue;
                double v = fp[i - 1] + 2 * lf[i - 1] + tf;
                if (v < best) best = v, bi = i;
                if (extras) {
                    double m = fmax(gp[i - 1], fmax(lp[i - 1], tp));
                    double a = ap[i - 1] + 2 * lf[i - 1] + ca * tf + cb * tp;
                    if (m < gbest) gbest = m, gi = i;
                    if (a < abest) abest = a, hi = i;
                    hbest = fmin(hbest, fmax(hp[i - 1], ta));
                }
            }
            if (best < INFINITY) {
                nlo = j < nlo ? j : nlo;
                nhi = j;
            }
            f[(size_t)s * L + j] = best;
            g[(size_t)s * L + j] = gbest;
            av[(size_t)s * L + j] = abest;
            h[(size_t)s * L + j] = hbest;
            arg[(size_t)s * L + j] = bi;
            argg[(size_t)s * L + j] = gi;
            argh[(size_t)s * L + j] = hi;
        }
        flo = nlo;
        fhi = nhi;
    }
    return f[(size_t)(S - 1) * L + L - 1] < INFINITY;
}

void stage_walk(const plan_ctx *x, const stage_tables *tb, const int *arg, int *first, double *sum, double *pm,
                double *am)
{
    int S = tb->S, L = tb->L, j = L - 1;
    *sum = *pm = *am = 0;
    for (int s = S - 1; s >= 0; s--) {
        int i = arg[(size_t)s * L + j];
        first[s] = i;
        double tp, ta, tf = cell(x, tb, s, i, j, &tp, &ta);
        *sum += tf;
        *pm = fmax(*pm, tp);
        *am = fmax(*am, ta);
        if (s + 1 < S) {
            *sum += 2 * tb->lf[(size_t)s * L + j];
            *pm = fmax(*pm, tb->lp[(size_t)s * L + j]);
        }
        j = i - 1;
    }
}

// ----------------------------------------------------------------------------
// one rank order: the staircase of bounds

/* No term of a plan that beats T_inc is above this: T >= mt time_s (mt = M - 1 + phi,
 * M but for the zero-bubble schedules), T >= (M+1) link_s, and T >= phi sum_s time_s +
 * (M-1) max >= phi W[L]/vmax + (M-1) max (every layer runs once, at most at the fastest
 * speed). The second is the tighter when M is small. */
double first_bound(const plan_ctx *x, double T_inc)
{
    if (!(T_inc < INFINITY)) return INFINITY;
    double b = T_inc / x->mt;
    if (x->M > 1) b = fmin(b, (T_inc - x->phi * (x->W[x->L] / x->vmax)) / (x->M - 1));
    return b;
}

typedef struct order_arg {
    stage_tables *tb;
    layout *ly;
} order_arg;

/* the walked plan of arg: keep it when its T beats *best */
static void order_consider(const plan_ctx *x, const stage_tables *tb, const int *arg, int *cur, double *best,
                           int *found, int *first, double *sum, double *mx)
{
    double am;
    stage_walk(x, tb, arg, cur, sum, mx, &am);
    if (*sum + tb->mult * *mx < *best) {
        *best = *sum + tb->mult * *mx;
        *found = 1;
        memcpy(first, cur, (size_t)tb->S * sizeof(int));
    }
}

static double order_inner(plan_ctx *x, void *varg, double T_inc, int *order_out, int *first)
{
    (void)order_out;
    order_arg *oa = varg;
    stage_tables *tb = oa->tb;
    x->n_solved++;
    tables_fill_order(x, tb, oa->ly);
    int S = x->S, L = x->L, M = x->M, found = 0;
    int *cur = ppdl_xmalloc((size_t)S * sizeof(int));
    double best = T_inc, sum, mx;
    /* first pass, over the plans that could beat T_inc (all terms <= T_inc/M, since
     * T >= M time_s and T >= (M+1) link_s): the least-sum, least-bottleneck and
     * least-average plans are candidates, and their values bound every plan */
    if (!stage_dp(x, tb, first_bound(x, T_inc), 0, INFINITY, 0, 1)) goto out;
    const int *args[3] = {tb->arg, tb->argg, tb->argh};
    for (int k = 0; k < (M > 1 ? 3 : 1); k++) order_consider(x, tb, args[k], cur, &best, &found, first, &sum, &mx);
    if (M == 1) goto out;
    /* Every plan of this order that could beat `best` has T >= sum_min + (M-1) bmin and
     * T >= lb_avg, and its largest term below (best - sum_min) / (M-1). First the least
     * sum among the plans of the least bottleneck (usually close to the optimum, which
     * narrows that window), then down the staircase from the window's top: the least
     * sum under "every term < the last plan's largest", until the bounds stop it. */
    double sum_min = tb->f[(size_t)(S - 1) * L + L - 1];
    double bmin = fmax(tb->g[(size_t)(S - 1) * L + L - 1], x->lb), lb_avg = tb->av[(size_t)(S - 1) * L + L - 1];
    if (sum_min + (M - 1) * bmin < best && lb_avg < best && stage_dp(x, tb, bmin, 0, INFINITY, 0, 0))
        order_consider(x, tb, tb->arg, cur, &best, &found, first, &sum, &mx);
    double B = (best - sum_min) / (M - 1);
    int strict = 0;
    while (sum_min + (M - 1) * bmin < best && lb_avg < best) {
        if (!stage_dp(x, tb, B, strict, INFINITY, 0, 0)) break;
        order_consider(x, tb, tb->arg, cur, &best, &found, first, &sum, &mx);
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
        m = fmax(m, (x->O[j + 1] - x->O[i]) / ppdl_opt_speed(x->cl, order[s]));
    }
    return m;
}

static void set_optcap(plan_ctx *x, stage_tables *tb, double cap, int strict)
{
    x->optcap = cap;
    x->optstrict = strict;
    if (tb) /* the tabulated stage times depend on the bound */
        for (int s = 0; s < x->S; s++) tb->row_rank[s] = -1;
}

/* With optimizer_ms, T = T' + max_s OPT_s, T' the form the DPs minimise: a staircase
 * on a bound A of every stage's optimizer step. inner(A) gives the least T' over the
 * plans whose every OPT_s <= A; its plan has some largest OPT a <= A, and every plan
 * whose largest OPT is in [a, A] has T >= T'(A) + a, that plan's T. So the next bound
 * is OPT < a, until no plan under it has T' < best - (least possible OPT). Without
 * optimizer_ms: one inner solve. order NULL: the inner solve chooses the order too. */
double opt_staircase(plan_ctx *x, inner_solve inner, void *arg, stage_tables *tb, const int *order, double T_inc,
                     int *order_out, int *first)
{
    if (!x->has_opt) return inner(x, arg, T_inc, order_out, first);
    int N = x->N, S = x->S, found = 0;
    int *o2 = ppdl_xmalloc((size_t)N * sizeof(int)), *f2 = ppdl_xmalloc((size_t)S * sizeof(int));
    double best = T_inc;
    set_optcap(x, tb, INFINITY, 0);
    for (;;) {
        double T = inner(x, arg, best - x->optlb, o2, f2);
        if (!(T < INFINITY)) break;
        const int *ord = order ? order : o2;
        double a = plan_opt(x, ord, f2);
        if (T + a < best) {
            best = T + a;
            found = 1;
            memcpy(first, f2, (size_t)S * sizeof(int));
            if (!order) memcpy(order_out, o2, (size_t)N * sizeof(int));
        }
        if (a <= x->optlb) break; /* no plan has a shorter largest step */
        set_optcap(x, tb, a, 1);
    }
    set_optcap(x, tb, INFINITY, 0);
    free(o2);
    free(f2);
    return found ? best : INFINITY;
}

double layout_tie_ms(const plan_ctx *x, const layout *ly)
{
    int S = ly->S;
    if (S < 2) return 0; /* one stage holds both layers of the tie */
    return ppdl_tie_ms(x->c, x->cl, &ly->ranks[ly->start[0]], ly->start[1] - ly->start[0], &ly->ranks[ly->start[S - 1]],
                       ly->start[S] - ly->start[S - 1]);
}

double solve_order(plan_ctx *x, stage_tables *tb, layout *ly, const int *order, double T_inc, int *first)
{
    layout_from_order(ly, x, order);
    order_arg oa = {tb, ly};
    /* a tied weight's exchange: a constant of the order, outside the staircases */
    double X = layout_tie_ms(x, ly);
    return opt_staircase(x, order_inner, &oa, tb, order, T_inc - X, NULL, first) + X;
}

// ----------------------------------------------------------------------------
// plans out of (layout, cut, mode)

void plan_from_layout(const plan_ctx *x, const layout *ly, int mode, const int *first, const char *method,
                      ppdl_plan *p)
{
    int S = ly->S, L = x->L;
    memset(p, 0, sizeof *p);
    snprintf(p->method, sizeof p->method, "%s", method);
    p->S = S;
    p->shard_optimizer = x->shard;
    p->stages = ppdl_xcalloc((size_t)S, sizeof *p->stages);
    for (int s = 0; s < S; s++) {
        ppdl_plan_stage *st = &p->stages[s];
        int k = ly->start[s + 1] - ly->start[s];
        if (ly->shk[s] < 0) st->slice_weights = ppdl_xmalloc((size_t)k * sizeof(double));
        st->rank = ly->ranks[ly->start[s]];
        if (!ly->factored) { /* the replicas, also of a stage of one */
            st->n_replicas = k;
            st->ranks = ppdl_xmalloc((size_t)k * sizeof(int));
            memcpy(st->ranks, &ly->ranks[ly->start[s]], (size_t)k * sizeof(int));
        }
        st->first = first[s];
        st->last = s + 1 < S ? first[s + 1] - 1 : L - 1;
        st->recompute = ppdl_xcalloc((size_t)(st->last - st->first + 1), sizeof(int));
        if (mode == MODE_MINSTASH)
            for (int l = st->first; l <= st->last; l++) st->recompute[l - st->first] = x->omin[l];
        if (mode != MODE_BEST && st->slice_weights)
            stage_fit(x, mode, st->first, st->last, STAGE_CON(ly, s), NULL, st->slice_weights);
        if (mode == MODE_BEST) {
            long pt;
            stage_fit(x, MODE_BEST, st->first, st->last, STAGE_CON(ly, s), &pt, st->slice_weights);
            PPDL_CHECK(pt >= 0, "planner: stage %d (layers %d-%d) has no option that fits", s, st->first, st->last);
            for (int l = st->last; l >= st->first; l--) {
                st->recompute[l - st->first] = x->pt_opt[pt];
                pt = x->pt_parent[pt];
            }
        }
    }
}

// ----------------------------------------------------------------------------
// nothing fits: the least-over cut

/* min over cuts of the largest (mem_s - limit) with smallest-stash options */
double least_over(const plan_ctx *x, const int *order, int *first)
{
    int S = x->S, L = x->L;
    double sm = x->c->state_multiplier;
    double *f = ppdl_xmalloc((size_t)S * L * sizeof(double));
    int *arg = ppdl_xmalloc((size_t)S * L * sizeof(int));
    for (int s = 0; s < S; s++) {
        int r = order[s], n = x->infl[s];
        for (int j = s; j <= L - S + s; j++) {
            double best = INFINITY;
            int bi = -1;
            for (int i = s == 0 ? 0 : j; i >= (s == 0 ? 0 : s); i--) {
                double over = sm * (x->P[j + 1] - x->P[i]) + ppdl_tie_mem(x->c, i, j) +
                              (double)n * (x->Smin[j + 1] - x->Smin[i]) - x->cl->mem[r];
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
