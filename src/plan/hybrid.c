/* hybrid.c — plans with replicated stages: for each replica layout (which
 * ranks form each stage, in pipeline order) the exact partition and recompute; over
 * layouts, every one for few ranks, candidates from the cluster's structure and local
 * moves for many.
 *
 * 1. One layout. Stage s has replicas R_s (in ppdl_sort_replicas order), replica q
 *    with n_sq micro-batches, f_sq of them in flight (replica.h). A stage over layers
 *    i..j takes the options of least extra time that fit every replica
 *    (sm P + f_sq stash <= mem[R_s[q]]: one query of solver.c's Pareto frontier of
 *    (stash, extra) with that predicate; T grows with every stage time, so that is
 *    the stage's best), and then, with W = fwd + bwd ms and P = parameter bytes,
 *       fill_s = (W + extra) / min_q speed[R_s[q]]    (the slowest replica)
 *       pace_s = (W + extra) max_q (n_sq - 1) / speed[R_s[q]]
 *       ar_s   = the gradient all-reduce of P among R_s (replica.h)
 *    and for the cut after layer j between stages s and s+1
 *       link_s = max over pairs lam(a, b, j),   lpace_s = max over pairs (m_ab - 1) lam(a, b, j)
 *    (pairs: the ranks a of stage s and b of s+1 that carry m_ab >= 1 micro-batches)
 *    so T = sum fill + 2 sum link + max(all pace, lpace) + max ar (costmodel.h).
 *    Two maxima: a DP over (stage, last layer) finds, for bounds B and A, the least
 *    sum over the plans whose every pace term is <= B and every ar <= A, O(S L len)
 *    with len the longest stage. For a fixed A, the least sum + pace V(A) comes down
 *    the staircase of B as in solver.c (each step: the least sum under "every pace <
 *    the last plan's largest"). The plan that reaches V(A) has some largest ar a <= A,
 *    and every plan with its largest ar in [a, A] has T >= V(A) + a, that plan's T. So
 *    the next bound is "ar < a", until no plan is left under it or a lower bound of
 *    sum + pace under it (the least sum plus the least largest pace, or the least sum
 *    plus the mean of the stages' pace terms, from the same DP) cannot beat the best T.
 *    Exact; one or two A steps in practice (an ar changes only with a replicated
 *    stage's parameters). In the heuristic search (many ranks) a layout's search stops
 *    within 0.1% of the best T: the staircase's last steps trade hundredths of a percent.
 *    Tables of fill/pace/ar per (stage, last layer, length) are filled once per layout;
 *    a stage of fill time t is left out when floor(M/k_s) t reaches the incumbent T
 *    (T >= fill + pace >= the slowest replica's micro-batches x fill).
 * 2. Layouts. Up to opts.exact_hybrid_ranks ranks: every assignment of the ranks to
 *    S < N ordered stages of at most M replicas each (ordered set partitions: 3963 for
 *    6 ranks), each solved under the incumbent T (most end at the first DP).
 *    Above: candidates from the groups of fast-linked ranks (placement.c) in the
 *    groups' path order: data parallelism (one stage on every rank); each group split
 *    into parts of k ranks, one stage per part (pipeline between nodes, data
 *    parallelism inside); with equal groups, the i-th ranks of c consecutive groups
 *    as one stage (pipeline inside nodes, data parallelism across); runs of k ranks
 *    in that order. Then first-improvement local moves, from the best candidate and
 *    from the one-rank-per-stage plan of solver.c: merge two adjacent stages, split one
 *    in halves, exchange two adjacent stages, and up to 16 ranks also move a stage
 *    anywhere, take a rank out into a stage of its own, move a rank to another stage,
 *    exchange two ranks of different stages; then (up to 16 ranks) kicks of two random
 *    rank moves followed by descents (iterated local search, fixed seed), all within a
 *    budget of layout solves (opts.hybrid_evals: 400 up to 16 ranks, 40 above).
 *    Before the frontiers exist (no incumbent from the one-rank-per-stage search), the
 *    same layouts are solved with every layer on option 0 and then on its
 *    smallest-stash option, from prefix sums, for a first T.
 * Deterministic: budgets count solves, never seconds.
 */
#include "core/error.h"
#include "core/util.h"
#include "plan/costmodel.h"
#include "plan/replica.h"
#include "plan/solver_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hyb {
    plan_ctx x;                /* prefix sums; frontiers for stages of any length */
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    int L, N, M, schedule, mode;
    int *NP;                   /* [L+1] prefix count of layers with parameters */
    /* the layout being solved */
    int S, ML;                 /* stages; the longest a stage can be, L - S + 1 */
    int *grp;                  /* [N] stage of each rank */
    int *start, *ranks;        /* [N+1], [N]: stage s is ranks[start[s] .. start[s+1]-1] */
    int *reps;                 /* [N] per stage: its replicas (the layout's k_s) */
    int *moff, *mfl;           /* stage s's memory constraints: moff[s] .. moff[s+1]-1, */
    double *mmem;              /* one per distinct in-flight count mfl, with the least
                                  memory mmem of the replicas that hold that many */
    double *cfill, *cpace;     /* [N] per stage: max 1/speed_q; max (n_q - 1)/speed_q */
    double *arbw, *arlat;      /* [N] per stage: slowest link and largest latency inside */
    int *n0;                   /* [N] per stage: the fewest micro-batches of a replica */
    int *poff, *pa, *pb, *pm;  /* link pairs after stage s: poff[s] .. poff[s+1]-1 */
    int cap_pairs;
    /* tables and DP, sized for the layout */
    double *tf, *tp, *ta;      /* [S][L][ML] fill, pace, ar (+ the optimizer step) of stage s
                                  over the len layers ending at j */
    int *mlen;                 /* [S][L] stages s ending at j have at most this many layers
                                  (only those entries of tf/tp/ta are filled) */
    double *lf, *lp;           /* [S][L] link after layer j from stage s: fill, pace */
    double *f, *g, *av;        /* [S][L] least sum; least largest pace; least sum + mean stage pace */
    int *arg, *argg;
    double tol;                /* relative: a layout's search stops this close to the best T
                                  (0: exact) */
    size_t cap_t, cap_d;
    long solves, dps;
} hyb;

#define TIX(h, s, j, len) ((((size_t)(s) * (h)->L + (size_t)(j)) * (h)->ML) + (size_t)(len) - 1)

static void hyb_init(hyb *h, const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule)
{
    memset(h, 0, sizeof *h);
    ctx_init(&h->x, c, cl, M, schedule, 1); /* S = 1: frontiers for stages of up to L layers */
    h->c = c;
    h->cl = cl;
    h->L = c->L;
    h->N = cl->N;
    h->M = M;
    h->schedule = schedule;
    int L = h->L, N = h->N;
    h->NP = ppdl_xcalloc((size_t)L + 1, sizeof(int));
    for (int l = 0; l < L; l++) h->NP[l + 1] = h->NP[l] + (c->layers[l].param_bytes > 0);
    h->grp = ppdl_xmalloc((size_t)N * sizeof(int));
    h->start = ppdl_xmalloc(((size_t)N + 1) * sizeof(int));
    h->ranks = ppdl_xmalloc((size_t)N * sizeof(int));
    h->reps = ppdl_xmalloc((size_t)N * sizeof(int));
    h->moff = ppdl_xmalloc(((size_t)N + 1) * sizeof(int));
    h->mfl = ppdl_xmalloc((size_t)N * sizeof(int));
    h->mmem = ppdl_xmalloc((size_t)N * sizeof(double));
    h->cfill = ppdl_xmalloc((size_t)N * sizeof(double));
    h->cpace = ppdl_xmalloc((size_t)N * sizeof(double));
    h->arbw = ppdl_xmalloc((size_t)N * sizeof(double));
    h->arlat = ppdl_xmalloc((size_t)N * sizeof(double));
    h->n0 = ppdl_xmalloc((size_t)N * sizeof(int));
    h->poff = ppdl_xmalloc(((size_t)N + 1) * sizeof(int));
}

static void hyb_free(hyb *h)
{
    ctx_free(&h->x);
    void *all[] = {h->NP, h->grp, h->start, h->ranks, h->reps, h->moff, h->mfl, h->mmem, h->cfill,
                   h->cpace, h->arbw, h->arlat, h->n0, h->poff, h->pa, h->pb, h->pm, h->tf, h->tp, h->ta,
                   h->mlen, h->lf, h->lp, h->f, h->g, h->av, h->arg, h->argg};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]);
    memset(h, 0, sizeof *h);
}

// ----------------------------------------------------------------------------
// one layout: its stages, tables and the DP

/* Set the layout grp[0..N-1] (stage of each rank, stages 0..S-1 all used). Returns 0
 * when it is not a plan of this problem: a stage with more replicas than micro-batches,
 * or more stages than layers. */
static int set_layout(hyb *h, const int *grp)
{
    int N = h->N, L = h->L, M = h->M, S = 0;
    const ppdl_cluster_model *cl = h->cl;
    for (int r = 0; r < N; r++) S = grp[r] + 1 > S ? grp[r] + 1 : S;
    if (S > L) return 0;
    memcpy(h->grp, grp, (size_t)N * sizeof(int));
    h->S = S;
    h->ML = L - S + 1;
    int n = 0;
    for (int s = 0; s < S; s++) {
        h->start[s] = n;
        for (int r = 0; r < N; r++)
            if (grp[r] == s) h->ranks[n++] = r;
        int k = n - h->start[s];
        if (k < 1 || k > M) return 0;
        h->reps[s] = k;
        ppdl_sort_replicas(cl, &h->ranks[h->start[s]], k);
    }
    h->start[S] = n;
    int npairs = 0, nm = 0;
    for (int s = 0; s < S; s++) {
        const int *R = &h->ranks[h->start[s]];
        int k = h->start[s + 1] - h->start[s];
        h->cfill[s] = 0;
        h->cpace[s] = 0;
        /* the replicas' memory constraints, base + in-flight x stash <= mem: of those
         * with the same in-flight count only the least mem binds (dp over 64 ranks:
         * one test, not 64) */
        h->moff[s] = nm;
        int nc = 0, *cfl = &h->mfl[nm];
        double *cmem = &h->mmem[nm];
        for (int q = 0; q < k; q++) {
            h->cfill[s] = fmax(h->cfill[s], 1.0 / cl->speed[R[q]]);
            h->cpace[s] = fmax(h->cpace[s], (ppdl_replica_mbs(M, k, q) - 1) / cl->speed[R[q]]);
            int f = ppdl_replica_in_flight(h->schedule, S, M, h->reps, s, q), c = 0;
            while (c < nc && cfl[c] != f) c++;
            if (c == nc) { cfl[nc] = f; cmem[nc++] = cl->mem[R[q]]; }
            else cmem[c] = fmin(cmem[c], cl->mem[R[q]]);
        }
        nm += nc;
        h->n0[s] = ppdl_replica_mbs(M, k, k - 1); /* the last replica has the fewest */
        h->arbw[s] = ppdl_group_min_bw(cl, R, k);
        h->arlat[s] = ppdl_group_max_lat(cl, R, k);
        if (s + 1 < S) npairs += k * (h->start[s + 2] - h->start[s + 1]);
    }
    h->moff[S] = nm;
    if (npairs > h->cap_pairs) {
        h->cap_pairs = npairs;
        h->pa = realloc(h->pa, (size_t)npairs * sizeof(int));
        h->pb = realloc(h->pb, (size_t)npairs * sizeof(int));
        h->pm = realloc(h->pm, (size_t)npairs * sizeof(int));
        PPDL_CHECK(h->pa && h->pb && h->pm, "out of host memory for the planner's link pairs");
    }
    int np = 0;
    for (int s = 0; s < S; s++) {
        h->poff[s] = np;
        if (s + 1 == S) continue;
        int ka = h->start[s + 1] - h->start[s], kb = h->start[s + 2] - h->start[s + 1];
        for (int a = 0; a < ka; a++)
            for (int b = 0; b < kb; b++) {
                int m = ppdl_pair_mbs(M, ka, a, kb, b);
                if (m < 1) continue;
                h->pa[np] = h->ranks[h->start[s] + a];
                h->pb[np] = h->ranks[h->start[s + 1] + b];
                h->pm[np++] = m;
            }
    }
    h->poff[S] = np;
    return 1;
}

static int fits(const hyb *h, int s, double base, double stash)
{
    for (int c = h->moff[s]; c < h->moff[s + 1]; c++)
        if (base + (double)h->mfl[c] * stash > h->mmem[c]) return 0;
    return 1;
}

/* the least extra time of layers i..j on stage s that fits every replica under the
 * mode, INFINITY when none does; *pt: the frontier point (MODE_BEST) */
static double stage_extra(const hyb *h, int s, int i, int j, long *pt)
{
    const plan_ctx *x = &h->x;
    double base = h->c->state_multiplier * (x->P[j + 1] - x->P[i]);
    if (pt) *pt = -1;
    if (h->mode == MODE_KEEP) return fits(h, s, base, x->S0[j + 1] - x->S0[i]) ? 0 : INFINITY;
    if (h->mode == MODE_MINSTASH)
        return fits(h, s, base, x->Smin[j + 1] - x->Smin[i]) ? x->Emin[j + 1] - x->Emin[i] : INFINITY;
    if (j > x->jmax[i]) return INFINITY;
    size_t at = (size_t)i * x->MLmax + (size_t)(j - i);
    long off = x->fr_off[at];
    int lo = 0, hi = x->fr_n[at] - 1;
    if (!fits(h, s, base, x->pt_stash[off])) return INFINITY;
    while (lo < hi) { /* the largest stash that fits has the least extra */
        int mid = (lo + hi + 1) / 2;
        if (fits(h, s, base, x->pt_stash[off + mid])) lo = mid;
        else hi = mid - 1;
    }
    if (pt) *pt = off + lo;
    return x->pt_extra[off + lo];
}

/* fill the tables of the layout; stages that cannot be part of a plan below T_inc are
 * left out (INFINITY) */
static void fill_tables(hyb *h, double T_inc)
{
    int S = h->S, L = h->L, ML = h->ML;
    const plan_ctx *x = &h->x;
    size_t nt = (size_t)S * L * ML, nd = (size_t)S * L;
    if (nt > h->cap_t) {
        free(h->tf);
        free(h->tp);
        free(h->ta);
        h->tf = ppdl_xmalloc(nt * sizeof(double));
        h->tp = ppdl_xmalloc(nt * sizeof(double));
        h->ta = ppdl_xmalloc(nt * sizeof(double));
        h->cap_t = nt;
    }
    if (nd > h->cap_d) {
        free(h->mlen);
        free(h->lf);
        free(h->lp);
        free(h->f);
        free(h->g);
        free(h->av);
        free(h->arg);
        free(h->argg);
        h->mlen = ppdl_xmalloc(nd * sizeof(int));
        h->lf = ppdl_xmalloc(nd * sizeof(double));
        h->lp = ppdl_xmalloc(nd * sizeof(double));
        h->f = ppdl_xmalloc(nd * sizeof(double));
        h->g = ppdl_xmalloc(nd * sizeof(double));
        h->av = ppdl_xmalloc(nd * sizeof(double));
        h->arg = ppdl_xmalloc(nd * sizeof(int));
        h->argg = ppdl_xmalloc(nd * sizeof(int));
        h->cap_d = nd;
    }
    for (int s = 0; s < S; s++) {
        int k = h->start[s + 1] - h->start[s];
        int *mlen = &h->mlen[(size_t)s * L];
        for (int j = 0; j < L; j++) mlen[j] = 0;
        /* stages that start later end no earlier (a shorter stage passes wherever a
         * longer one does): for each end j, the stages [i, j] that pass are those with
         * i >= the first start that reaches j */
        int reach = s - 1; /* the furthest end of the starts so far */
        for (int i = s; i <= L - S + s; i++) {
            for (int len = 1; i + len - 1 <= L - S + s; len++) {
                int j = i + len - 1;
                double e = stage_extra(h, s, i, j, NULL);
                if (!(e < INFINITY)) break; /* a longer stage does not fit either */
                double t = x->W[j + 1] - x->W[i] + e;
                double fill = t * h->cfill[s], pace = t * h->cpace[s];
                double ar = ppdl_allreduce_ms_bw(k, x->P[j + 1] - x->P[i], h->NP[j + 1] - h->NP[i], h->arbw[s],
                                                 h->arlat[s]);
                /* after the flush the stage all-reduces, then runs its optimizer step
                 * (the slowest replica's); both only grow with the stage */
                if (x->has_opt) ar += (x->O[j + 1] - x->O[i]) * h->cfill[s];
                /* T >= fill + pace >= (micro-batches of the slowest replica) x fill >=
                 * n0 fill, and T >= ar; also T >= fill + pace + the other stages' fill,
                 * which is at least their work at the fastest speed (fill >= t / vmax):
                 * these only grow with the stage */
                if (h->n0[s] * fill >= T_inc || ar >= T_inc ||
                    fill + pace + (x->W[L] - (x->W[j + 1] - x->W[i])) / x->vmax >= T_inc)
                    break;
                h->tf[TIX(h, s, j, len)] = fill;
                h->tp[TIX(h, s, j, len)] = pace;
                h->ta[TIX(h, s, j, len)] = ar;
                if (j > reach) { /* i is the first start to reach j */
                    mlen[j] = len;
                    reach = j;
                }
            }
        }
        if (s + 1 < S)
            for (int j = s; j <= L - S + s; j++) {
                double lf = 0, lp = 0;
                for (int p = h->poff[s]; p < h->poff[s + 1]; p++) {
                    double lk = ppdl_link_ms(h->c, h->cl, j, h->pa[p], h->pb[p]);
                    lf = fmax(lf, lk);
                    lp = fmax(lp, (h->pm[p] - 1) * lk);
                }
                h->lf[(size_t)s * L + j] = lf;
                h->lp[(size_t)s * L + j] = lp;
            }
    }
}

#define UNDER(v, bound, strict) ((strict) ? (v) < (bound) : (v) <= (bound))

/* The least sum (fill + 2 links) over the plans whose every pace term is under B and
 * every ar under A, into f/arg; extras, over the same plans: the least largest pace,
 * into g/argg, and the least sum + mean of the stages' pace terms into av (<= sum +
 * largest pace: a lower bound of T, close to it when the stages are balanced).
 * Returns 1 when some plan is under the bounds. */
static int run_dp(hyb *h, double B, int sB, double A, int sA, int extras)
{
    int S = h->S, L = h->L;
    double *f = h->f, *g = h->g, *av = h->av, w = 1.0 / S;
    h->dps++;
    for (size_t k = 0; k < (size_t)S * L; k++) f[k] = g[k] = av[k] = INFINITY;
    /* stage s-1 reaches (a finite f) only the ends in [flo, fhi] */
    int flo = 0, fhi = -1;
    for (int j = 0; j <= L - S; j++) {
        size_t t = TIX(h, 0, j, j + 1);
        if (h->mlen[j] < j + 1 || !UNDER(h->tp[t], B, sB) || !UNDER(h->ta[t], A, sA)) break;
        f[j] = h->tf[t];
        g[j] = h->tp[t];
        av[j] = h->tf[t] + w * h->tp[t];
        h->arg[j] = h->argg[j] = 0;
        fhi = j;
    }
    for (int s = 1; s < S && flo <= fhi; s++) {
        const double *fp = &f[(size_t)(s - 1) * L], *gp = &g[(size_t)(s - 1) * L], *ap = &av[(size_t)(s - 1) * L];
        const double *lf = &h->lf[(size_t)(s - 1) * L], *lp = &h->lp[(size_t)(s - 1) * L];
        int nlo = L, nhi = -1;
        for (int j = flo + 1; j <= L - S + s; j++) {
            double best = INFINITY, gbest = INFINITY, abest = INFINITY;
            int bi = -1, gi = -1;
            int ilo = j - h->mlen[(size_t)s * L + j] + 1;
            if (ilo < flo + 1) ilo = flo + 1;
            for (int i = j < fhi + 1 ? j : fhi + 1; i >= ilo; i--) {
                size_t t = TIX(h, s, j, j - i + 1);
                /* pace and ar only grow as the stage grows */
                if (!UNDER(h->tp[t], B, sB) || !UNDER(h->ta[t], A, sA)) break;
                if (!(fp[i - 1] < INFINITY) || !UNDER(lp[i - 1], B, sB)) continue;
                double v = fp[i - 1] + 2 * lf[i - 1] + h->tf[t];
                if (v < best) best = v, bi = i;
                if (extras) {
                    double m = fmax(gp[i - 1], fmax(lp[i - 1], h->tp[t]));
                    if (m < gbest) gbest = m, gi = i;
                    abest = fmin(abest, ap[i - 1] + 2 * lf[i - 1] + h->tf[t] + w * h->tp[t]);
                }
            }
            if (best < INFINITY) {
                nlo = j < nlo ? j : nlo;
                nhi = j;
            }
            f[(size_t)s * L + j] = best;
            g[(size_t)s * L + j] = gbest;
            av[(size_t)s * L + j] = abest;
            h->arg[(size_t)s * L + j] = bi;
            h->argg[(size_t)s * L + j] = gi;
        }
        flo = nlo;
        fhi = nhi;
    }
    return f[(size_t)(S - 1) * L + L - 1] < INFINITY;
}

/* the plan behind arg: its cut, its sum, largest pace and largest ar */
static void walk(const hyb *h, const int *arg, int *first, double *sum, double *pm, double *am)
{
    int S = h->S, L = h->L, j = L - 1;
    *sum = *pm = *am = 0;
    for (int s = S - 1; s >= 0; s--) {
        int i = arg[(size_t)s * L + j];
        first[s] = i;
        size_t t = TIX(h, s, j, j - i + 1);
        *sum += h->tf[t];
        *pm = fmax(*pm, h->tp[t]);
        *am = fmax(*am, h->ta[t]);
        if (s + 1 < S) {
            *sum += 2 * h->lf[(size_t)s * L + j];
            *pm = fmax(*pm, h->lp[(size_t)s * L + j]);
        }
        j = i - 1;
    }
}

typedef struct track {
    double best;               /* best T found (starts at the incumbent) */
    int found;
    double vbest, var;         /* least sum + pace under the current ar bound, and its ar */
} track;

static void consider(const hyb *h, track *tk, const int *arg, int *cur, int *first_out)
{
    double sum, pm, am;
    walk(h, arg, cur, &sum, &pm, &am);
    double T = sum + pm + am;
    if (T < tk->best) {
        tk->best = T;
        tk->found = 1;
        memcpy(first_out, cur, (size_t)h->S * sizeof(int));
    }
    if (sum + pm < tk->vbest || (sum + pm == tk->vbest && am < tk->var)) {
        tk->vbest = sum + pm;
        tk->var = am;
    }
}

/* The exact optimum of the current layout below T_inc: its T and cut, or INFINITY. */
static double solve_layout(hyb *h, double T_inc, int *first_out)
{
    h->solves++;
    fill_tables(h, T_inc);
    int S = h->S, L = h->L;
    int *cur = ppdl_xmalloc((size_t)S * sizeof(int));
    track tk = {T_inc, 0, INFINITY, 0};
    double A = INFINITY;
    int sA = 0;
    for (;;) {
        /* V(A) = least sum + pace over the plans with every ar under A */
        if (!run_dp(h, INFINITY, 0, A, sA, 1)) break;
        double sum_min = h->f[(size_t)(S - 1) * L + L - 1], pmin = h->g[(size_t)(S - 1) * L + L - 1];
        double lb = fmax(sum_min + pmin, h->av[(size_t)(S - 1) * L + L - 1]); /* <= sum + pace of any plan under A */
        double keep = 1 - h->tol;
        if (lb >= tk.best * keep) break;
        tk.vbest = INFINITY;
        consider(h, &tk, h->arg, cur, first_out);
        consider(h, &tk, h->argg, cur, first_out);
        /* the cheapest plan of the least pace, then down the staircase of B from
         * "pace < what could still beat the best" */
        if (run_dp(h, pmin, 0, A, sA, 0)) consider(h, &tk, h->arg, cur, first_out);
        double B = fmin(tk.vbest, tk.best) - sum_min;
        for (;;) {
            if (lb >= fmin(tk.vbest, tk.best) * keep) break;
            if (!run_dp(h, B, 1, A, sA, 0)) break;
            double sum, pm, am;
            walk(h, h->arg, cur, &sum, &pm, &am);
            consider(h, &tk, h->arg, cur, first_out);
            if (sum + pmin >= fmin(tk.vbest, tk.best) * keep) break;
            B = fmin(pm, fmin(tk.vbest, tk.best) - sum);
        }
        /* every plan with its largest ar in [var, A] is no better than the one found;
         * those under a smaller bound have sum + pace >= V(A) >= min(vbest, best), so
         * none of them beats the best once vbest does not */
        if (!(tk.vbest < tk.best * keep) || tk.var <= 0) break;
        A = tk.var;
        sA = 1;
    }
    free(cur);
    return tk.found ? tk.best : INFINITY;
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
    int N = h->N;
    int *group = ppdl_xmalloc((size_t)N * sizeof(int)), *grp = ppdl_xmalloc((size_t)N * sizeof(int));
    int G = rank_groups(&h->x, group);
    int *gorder = ppdl_xmalloc((size_t)G * sizeof(int)), *seq = ppdl_xmalloc((size_t)N * sizeof(int));
    int *gsize = ppdl_xcalloc((size_t)G, sizeof(int)), *gstart = ppdl_xmalloc(((size_t)G + 1) * sizeof(int));
    order_groups(h->cl, group, G, gorder);
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
    if (!set_layout(h, grp)) return 0;
    double T = solve_layout(h, in->T, first);
    if (!(T < in->T)) return 0;
    in->T = T;
    in->mode = h->mode;
    memcpy(in->grp, grp, (size_t)h->N * sizeof(int));
    memcpy(in->first, first, (size_t)h->S * sizeof(int));
    return 1;
}

/* One pass of first-improvement moves from the incumbent's layout. 1 when improved. */
static int descend(hyb *h, incumbent *in, long budget, int *first)
{
    int N = h->N, improved = 0;
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
        set_layout(h, in->grp);
        int k = h->start[s + 1] - h->start[s];
        if (k < 2) continue;
        memcpy(R, &h->ranks[h->start[s]], (size_t)k * sizeof(int));
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
    set_layout(h, in->grp);
    int S = h->S, L = h->L;
    memset(p, 0, sizeof *p);
    snprintf(p->method, sizeof p->method, "ppdl");
    p->S = S;
    p->stages = ppdl_xcalloc((size_t)S, sizeof *p->stages);
    for (int s = 0; s < S; s++) {
        ppdl_plan_stage *st = &p->stages[s];
        int k = h->start[s + 1] - h->start[s];
        st->n_replicas = k;
        st->ranks = ppdl_xmalloc((size_t)k * sizeof(int));
        memcpy(st->ranks, &h->ranks[h->start[s]], (size_t)k * sizeof(int));
        st->rank = st->ranks[0];
        st->first = in->first[s];
        st->last = s + 1 < S ? in->first[s + 1] - 1 : L - 1;
        st->recompute = ppdl_xcalloc((size_t)(st->last - st->first + 1), sizeof(int));
        for (int l = st->first; l <= st->last; l++)
            st->recompute[l - st->first] = h->mode == MODE_MINSTASH ? h->x.omin[l] : 0;
        if (h->mode == MODE_BEST) {
            long k2;
            stage_extra(h, s, st->first, st->last, &k2);
            PPDL_CHECK(k2 >= 0, "planner: stage %d (layers %d-%d) has no option that fits", s, st->first, st->last);
            for (int l = st->last; l >= st->first; l--) {
                st->recompute[l - st->first] = h->x.pt_opt[k2];
                k2 = h->x.pt_parent[k2];
            }
        }
    }
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
    hyb_init(&h, c, cl, M, schedule);
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
                set_layout(&h, in.grp);
                double T = solve_layout(&h, INFINITY, first);
                if (T <= in.T) {
                    in.T = T;
                    in.mode = MODE_BEST;
                    memcpy(in.first, first, (size_t)h.S * sizeof(int));
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
    info->dp_runs += h.dps;
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
