/* chunk_copies.c — chunked plans in k copies: one copy's cluster, its solve, the plan
 * repeated on every copy (chunk_copies.h) */
#include "plan/chunk_copies.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/costmodel.h"
#include "plan/solve_chunked.h"
#include "sched/schedule.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ppdl_copies_rank(int grouping, int n, int k, int q, int r)
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
    for (int r = 0; r < n; r++) out->of_rank[r] = h->of_rank[ppdl_copies_rank(grouping, n, k, 0, r)];
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

void ppdl_cluster_model_copy_of(const ppdl_cluster_model *cl, int k, int grouping, ppdl_cluster_model *out)
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
            int ra = ppdl_copies_rank(grouping, n, k, q, a);
            out->mem[a] = fmin(out->mem[a], cl->mem[ra]);
            out->speed[a] = fmin(out->speed[a], cl->speed[ra]);
            for (int b = 0; b < n; b++) {
                size_t ab = (size_t)ra * N + ppdl_copies_rank(grouping, n, k, q, b);
                out->bw[a * n + b] = fmin(out->bw[a * n + b], cl->bw[ab]);
                out->lat[a * n + b] = fmax(out->lat[a * n + b], cl->lat[ab]);
            }
        }
    }
    copy_hosts(&cl->hosts, N, k, grouping, &out->hosts);
}

void ppdl_plan_copies(const ppdl_plan *one, int n, int k, int grouping, ppdl_plan *out)
{
    *out = *one;
    out->stages = ppdl_xcalloc((size_t)one->S, sizeof *out->stages);
    for (int s = 0; s < one->S; s++) {
        const ppdl_plan_stage *a = &one->stages[s];
        ppdl_plan_stage *b = &out->stages[s];
        *b = *a;
        size_t nl = (size_t)(a->last - a->first + 1);
        b->recompute = ppdl_xmalloc(nl * sizeof(int));
        memcpy(b->recompute, a->recompute, nl * sizeof(int));
        b->n_replicas = k;
        b->ranks = ppdl_xmalloc((size_t)k * sizeof(int));
        for (int q = 0; q < k; q++) b->ranks[q] = ppdl_copies_rank(grouping, n, k, q, a->rank);
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
    ppdl_plan_copies(&one, n, k, grouping, &p);
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
    ppdl_cluster_model_copy_of(cl, k, grouping, &one_cl);
    ppdl_plan one;
    ppdl_solve_chunked(c, &one_cl, M0, schedule, v, opts, &one, info, NULL, err, errlen);
    ppdl_cluster_model_free(&one_cl);
    if (one.S == 0) return -1; /* err says why */
    ppdl_plan_copies(&one, n, k, grouping, out);
    ppdl_plan_free(&one);
    if (info) {
        info->replicated = 1;
        snprintf(info->hybrid, sizeof info->hybrid, "%d copies x %d ranks%s, copy 0 %d of %d micro-batches", k, n,
                 grouping == PPDL_COPIES_STRIDED ? " strided" : "", M0, M);
    }
    /* the whole plan: every copy's ranks and the sums of the gradients */
    int rc = ppdl_chunked_annotate(c, cl, M, schedule, out, info, err, errlen);
    if (sc && rc == 0) ppdl_chunked_shared_choice(c, cl, M, schedule, out, sc);
    return rc;
}
