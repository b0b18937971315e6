/* placement.c — which rank runs which stage, when there are too many ranks to try
 * every order: use the structure of the bandwidth matrix.
 *
 * 1. Groups. Clusters are made of nodes: ranks on one node share fast links, links
 *    between nodes are 10-100x slower. Sort the pairwise bandwidths (the slower of the
 *    two directions), cut at the largest ratio between consecutive values (when it is
 *    at least 2x), and join the ranks linked above the cut (single linkage): the groups
 *    are the nodes, found from the probed matrix alone.
 * 2. Orders. A pipeline should cross each slow link once: keep each group's ranks
 *    together, order the groups along the path of least total 1/bandwidth (exact DP
 *    over subsets of groups up to 12 groups, else nearest neighbour), and order the
 *    ranks inside a group by memory (1F1B's early stages hold more micro-batches), by
 *    speed, or by index. Each candidate is solved exactly (partition + recompute), as is
 *    the plain order 0..N-1, so the result is never worse than a plan that keeps the
 *    ranks in order.
 * 3. Local search. From the best candidate: exchange two runs of one group's ranks,
 *    reverse a run, swap two ranks (nearest positions first), move one rank elsewhere,
 *    reverse a stretch of positions; keep any move that lowers T; repeat until a pass
 *    finds nothing. Then, while the budget of solves lasts, kick the best order with two
 *    random swaps (fixed seed) and descend again (iterated local search). Interchangeable
 *    ranks are never swapped. Each try refills only the rows of the moved ranks and is
 *    pruned by the incumbent T (solve_order, engine.c), so most tries cost one bounded DP.
 * 4. When no candidate fits in memory at all, swaps that lower the largest overflow
 *    (of the smallest-stash plan) look for an order that fits first.
 * Deterministic: budgets count solves, never seconds. */
#include "core/util.h"
#include "plan/placement.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double sym_bw(const ppdl_cluster_model *cl, int a, int b)
{
    return fmin(cl->bw[a * cl->N + b], cl->bw[b * cl->N + a]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int find_root(int *parent, int a)
{
    while (parent[a] != a) a = parent[a] = parent[parent[a]];
    return a;
}

int rank_groups(const plan_ctx *x, int *group)
{
    const ppdl_cluster_model *cl = x->cl;
    int N = cl->N;
    for (int r = 0; r < N; r++) group[r] = 0;
    if (N < 3) return 1;
    size_t n = (size_t)N * (N - 1) / 2, k = 0;
    double *v = ppdl_xmalloc(n * sizeof(double));
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++) v[k++] = sym_bw(cl, a, b);
    qsort(v, n, sizeof *v, cmp_double);
    double best_ratio = 2.0, thr = -1; /* a gap below 2x is noise, not a hierarchy */
    for (size_t i = 0; i + 1 < n; i++)
        if (v[i] > 0 && v[i + 1] / v[i] >= best_ratio) {
            best_ratio = v[i + 1] / v[i];
            thr = v[i + 1];
        }
    free(v);
    if (thr < 0) return 1;
    int *parent = ppdl_xmalloc((size_t)N * sizeof(int));
    for (int r = 0; r < N; r++) parent[r] = r;
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++)
            if (sym_bw(cl, a, b) >= thr) {
                int ra = find_root(parent, a), rb = find_root(parent, b);
                if (ra != rb) parent[ra > rb ? ra : rb] = ra < rb ? ra : rb;
            }
    /* number the groups by their smallest rank */
    int G = 0;
    int *id = ppdl_xmalloc((size_t)N * sizeof(int));
    for (int r = 0; r < N; r++) id[r] = -1;
    for (int r = 0; r < N; r++) {
        int root = find_root(parent, r);
        if (id[root] < 0) id[root] = G++;
        group[r] = id[root];
    }
    free(parent);
    free(id);
    return G;
}

void order_groups(const ppdl_cluster_model *cl, const int *group, int G, int *gorder)
{
    int N = cl->N;
    double *d = ppdl_xmalloc((size_t)G * G * sizeof(double));
    for (int g = 0; g < G * G; g++) d[g] = INFINITY;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++)
            if (group[a] != group[b]) {
                double c = 1.0 / sym_bw(cl, a, b);
                double *e = &d[group[a] * G + group[b]];
                if (c < *e) *e = c;
            }
    if (G <= 12) {
        /* Held-Karp for the cheapest Hamiltonian path */
        size_t nS = (size_t)1 << G;
        double *f = ppdl_xmalloc(nS * G * sizeof(double));
        int *arg = ppdl_xmalloc(nS * G * sizeof(int));
        for (size_t k = 0; k < nS * G; k++) f[k] = INFINITY;
        for (int g = 0; g < G; g++) {
            f[((size_t)1 << g) * G + g] = 0;
            arg[((size_t)1 << g) * G + g] = -1;
        }
        for (size_t U = 1; U < nS; U++)
            for (int g = 0; g < G; g++) {
                double v = f[U * G + g];
                if (!(U >> g & 1) || !(v < INFINITY)) continue;
                for (int h = 0; h < G; h++) {
                    if (U >> h & 1) continue;
                    size_t k = (U | (size_t)1 << h) * G + h;
                    if (v + d[g * G + h] < f[k]) {
                        f[k] = v + d[g * G + h];
                        arg[k] = g;
                    }
                }
            }
        size_t U = nS - 1;
        int g = 0;
        for (int h = 1; h < G; h++)
            if (f[U * G + h] < f[U * G + g]) g = h;
        for (int p = G - 1; p >= 0; p--) {
            gorder[p] = g;
            int prev = arg[U * G + g];
            U &= ~((size_t)1 << g);
            g = prev;
        }
        free(f);
        free(arg);
    } else {
        /* nearest neighbour from every start; keep the cheapest path */
        int *cur = ppdl_xmalloc((size_t)G * sizeof(int)), *used = ppdl_xmalloc((size_t)G * sizeof(int));
        double best = INFINITY;
        for (int s0 = 0; s0 < G; s0++) {
            memset(used, 0, (size_t)G * sizeof(int));
            cur[0] = s0;
            used[s0] = 1;
            double cost = 0;
            for (int p = 1; p < G; p++) {
                int nb = -1;
                for (int h = 0; h < G; h++)
                    if (!used[h] && (nb < 0 || d[cur[p - 1] * G + h] < d[cur[p - 1] * G + nb])) nb = h;
                cur[p] = nb;
                used[nb] = 1;
                cost += d[cur[p - 1] * G + nb];
            }
            if (cost < best) {
                best = cost;
                memcpy(gorder, cur, (size_t)G * sizeof(int));
            }
        }
        free(cur);
        free(used);
    }
    free(d);
}

/* Sort ranks r[0..n-1] (insertion sort: groups are small, and qsort has no context
 * argument). key 0: memory, then speed, descending; 1: speed, then memory; 2: index.
 * Ties by index, so the result is the same everywhere. */
static int rank_before(const ppdl_cluster_model *cl, int key, int a, int b)
{
    double ka0 = cl->mem[a], ka1 = cl->speed[a], kb0 = cl->mem[b], kb1 = cl->speed[b];
    if (key == 1) {
        ka0 = cl->speed[a], ka1 = cl->mem[a];
        kb0 = cl->speed[b], kb1 = cl->mem[b];
    }
    if (key < 2) {
        if (ka0 != kb0) return ka0 > kb0;
        if (ka1 != kb1) return ka1 > kb1;
    }
    return a < b;
}

static void sort_ranks(const ppdl_cluster_model *cl, int key, int *r, int n)
{
    for (int i = 1; i < n; i++) {
        int v = r[i], k = i;
        for (; k > 0 && rank_before(cl, key, v, r[k - 1]); k--) r[k] = r[k - 1];
        r[k] = v;
    }
}

int add_candidate_order(int *orders, int n, int max, int N, const int *o)
{
    if (n >= max) return n;
    for (int k = 0; k < n; k++)
        if (!memcmp(&orders[(size_t)k * N], o, (size_t)N * sizeof(int))) return n;
    memcpy(&orders[(size_t)n * N], o, (size_t)N * sizeof(int));
    return n + 1;
}

int candidate_orders(const plan_ctx *x, int *orders, int max, int *n_groups)
{
    const ppdl_cluster_model *cl = x->cl;
    int N = cl->N, n = 0;
    int *o = ppdl_xmalloc((size_t)N * sizeof(int)), *group = ppdl_xmalloc((size_t)N * sizeof(int));
    for (int r = 0; r < N; r++) o[r] = r;
    n = add_candidate_order(orders, n, max, N, o);
    int G = rank_groups(x, group);
    *n_groups = G;
    int *gorder = ppdl_xmalloc((size_t)G * sizeof(int));
    order_groups(cl, group, G, gorder);
    for (int key = 0; key < 3; key++)
        for (int dir = 0; dir < 2; dir++) {
            int p = 0;
            for (int gi = 0; gi < G; gi++) {
                int g = gorder[dir ? G - 1 - gi : gi], p0 = p;
                for (int r = 0; r < N; r++)
                    if (group[r] == g) o[p++] = r;
                sort_ranks(cl, key, &o[p0], p - p0);
            }
            n = add_candidate_order(orders, n, max, N, o);
        }
    /* ignoring the groups: by memory, by speed */
    for (int key = 0; key < 2; key++) {
        for (int r = 0; r < N; r++) o[r] = r;
        sort_ranks(cl, key, o, N);
        n = add_candidate_order(orders, n, max, N, o);
    }
    free(o);
    free(group);
    free(gorder);
    return n;
}

/* try one order; keep it when it beats T */
static int try_order(plan_ctx *x, stage_tables *w, layout *ly, int *order, int *first, double *T, const int *cand,
                     int *f2, long *used)
{
    (*used)++;
    double T2 = solve_order(x, w, ly, cand, *T, f2);
    if (!(T2 < *T)) return 0;
    *T = T2;
    memcpy(order, cand, (size_t)x->N * sizeof(int));
    memcpy(first, f2, (size_t)x->S * sizeof(int));
    return 1;
}

/* maximal runs of ranks of one group in `order`: run k is [start[k], start[k+1]) */
static int group_runs(const int *group, const int *order, int N, int *start)
{
    int n = 0;
    for (int p = 0; p < N; p++)
        if (p == 0 || group[order[p]] != group[order[p - 1]]) start[n++] = p;
    start[n] = N;
    return n;
}

/* One pass of first-improvement descent over the neighbourhoods, cheapest and most
 * structural first: exchange two group runs, reverse a run, swap two ranks (nearest
 * positions first), move one rank elsewhere, reverse any stretch of positions.
 * Returns 1 when some move improved T. */
static int descend_pass(plan_ctx *x, stage_tables *w, layout *ly, const int *group, int *order, int *first, double *T,
                        long budget, long *used)
{
    int N = x->N, improved = 0;
    int *cand = ppdl_xmalloc((size_t)N * sizeof(int)), *f2 = ppdl_xmalloc((size_t)x->S * sizeof(int));
    int *start = ppdl_xmalloc(((size_t)N + 1) * sizeof(int));
    /* group runs: exchange two runs (keeping each run's inner order), reverse one */
    int nr = group_runs(group, order, N, start);
    for (int a = 0; a < nr && *used < budget && nr > 1; a++)
        for (int b = a + 1; b < nr && *used < budget; b++) {
            int k = 0;
            for (int p = 0; p < start[a]; p++) cand[k++] = order[p];
            for (int p = start[b]; p < start[b + 1]; p++) cand[k++] = order[p];
            for (int p = start[a + 1]; p < start[b]; p++) cand[k++] = order[p];
            for (int p = start[a]; p < start[a + 1]; p++) cand[k++] = order[p];
            for (int p = start[b + 1]; p < N; p++) cand[k++] = order[p];
            if (try_order(x, w, ly, order, first, T, cand, f2, used)) {
                improved = 1;
                nr = group_runs(group, order, N, start);
            }
        }
    for (int a = 0; a < nr && *used < budget; a++) {
        int p0 = start[a], p1 = start[a + 1] - 1;
        if (p1 - p0 < 1) continue;
        memcpy(cand, order, (size_t)N * sizeof(int));
        for (int k = 0; k <= p1 - p0; k++) cand[p0 + k] = order[p1 - k];
        improved |= try_order(x, w, ly, order, first, T, cand, f2, used);
    }
    /* swaps, nearest positions first; interchangeable ranks are never swapped */
    for (int d = 1; d < N && *used < budget; d++)
        for (int p = 0; p + d < N && *used < budget; p++) {
            int q = p + d;
            if (x->eq[order[p]] == x->eq[order[q]]) continue;
            memcpy(cand, order, (size_t)N * sizeof(int));
            cand[p] = order[q];
            cand[q] = order[p];
            improved |= try_order(x, w, ly, order, first, T, cand, f2, used);
        }
    /* move the rank at p to position q (distance 1 is a swap, done) */
    for (int d = 2; d < N && *used < budget; d++)
        for (int p = 0; p < N && *used < budget; p++)
            for (int sgn = -1; sgn <= 1 && *used < budget; sgn += 2) {
                int q = p + sgn * d;
                if (q < 0 || q >= N) continue;
                int k = 0, r = order[p];
                for (int i = 0; i < N; i++) {
                    if (i == p) continue;
                    if (k == q) cand[k++] = r;
                    cand[k++] = order[i];
                }
                if (k == q) cand[k++] = r;
                improved |= try_order(x, w, ly, order, first, T, cand, f2, used);
            }
    /* reverse positions p..q, 3 or more of them */
    for (int d = 2; d < N && *used < budget; d++)
        for (int p = 0; p + d < N && *used < budget; p++) {
            memcpy(cand, order, (size_t)N * sizeof(int));
            for (int k = 0; k <= d; k++) cand[p + k] = order[p + d - k];
            improved |= try_order(x, w, ly, order, first, T, cand, f2, used);
        }
    free(cand);
    free(f2);
    free(start);
    return improved;
}

void local_search(plan_ctx *x, stage_tables *w, layout *ly, int *order, int *first, double *T, long budget)
{
    int N = x->N, S = x->S;
    int *group = ppdl_xmalloc((size_t)N * sizeof(int));
    rank_groups(x, group);
    long used = 0;
    while (used < budget && descend_pass(x, w, ly, group, order, first, T, budget, &used)) {}
    /* iterated local search: kick the best order with two random swaps, descend from
     * there, keep the result when it beats the best; a fixed seed keeps it deterministic */
    ppdl_rng g;
    ppdl_rng_seed(&g, 0x9e3779b97f4a7c15ULL);
    int *o2 = ppdl_xmalloc((size_t)N * sizeof(int)), *f2 = ppdl_xmalloc((size_t)S * sizeof(int));
    int stale = 0;
    while (used < budget && N >= 3 && stale < 50) {
        memcpy(o2, order, (size_t)N * sizeof(int));
        for (int k = 0; k < 2; k++) {
            int p = (int)(ppdl_rng_u64(&g) % (uint64_t)N), q = (int)(ppdl_rng_u64(&g) % (uint64_t)N);
            int t = o2[p];
            o2[p] = o2[q];
            o2[q] = t;
        }
        used++;
        double T2 = solve_order(x, w, ly, o2, INFINITY, f2);
        if (!(T2 < INFINITY)) { stale++; continue; }
        while (used < budget && descend_pass(x, w, ly, group, o2, f2, &T2, budget, &used)) {}
        if (T2 < *T) {
            *T = T2;
            memcpy(order, o2, (size_t)N * sizeof(int));
            memcpy(first, f2, (size_t)S * sizeof(int));
            stale = 0;
        } else {
            stale++;
        }
    }
    free(o2);
    free(f2);
    free(group);
}

/* Find an order where the smallest-stash plan fits, by swaps and moves of one rank that
 * lower the largest overflow (least_over), from the given order. Returns 1 when found. */
int feasible_search(const plan_ctx *x, int *order, long budget)
{
    int N = x->N;
    int *first = ppdl_xmalloc((size_t)N * sizeof(int)), *cand = ppdl_xmalloc((size_t)N * sizeof(int));
    double best = least_over(x, order, first);
    long used = 0;
    int improved = 1;
    while (best > 0 && improved && used < budget) {
        improved = 0;
        for (int p = 0; p < N && best > 0 && used < budget; p++)
            for (int q = 0; q < N && best > 0 && used < budget; q++) {
                if (q == p) continue;
                for (int kind = 0; kind < 2; kind++) {
                    if (kind == 0) { /* swap p and q */
                        if (q < p || x->eq[order[p]] == x->eq[order[q]]) continue;
                        memcpy(cand, order, (size_t)N * sizeof(int));
                        cand[p] = order[q];
                        cand[q] = order[p];
                    } else { /* move the rank at p to position q */
                        if (q == p + 1 || q == p - 1) continue;
                        int k = 0;
                        for (int i = 0; i < N; i++) {
                            if (i == p) continue;
                            if (k == q) cand[k++] = order[p];
                            cand[k++] = order[i];
                        }
                        if (k == q) cand[k++] = order[p];
                    }
                    used++;
                    double v = least_over(x, cand, first);
                    if (v < best) {
                        best = v;
                        memcpy(order, cand, (size_t)N * sizeof(int));
                        improved = 1;
                    }
                }
            }
    }
    free(first);
    free(cand);
    return best <= 0;
}
