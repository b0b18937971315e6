/* ranking.c — candidate plans ranked by their simulated step (ranking.h). */
#include "plan/ranking.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* every layout kind up to this many ranks (2^(N-1) of them: 128 at 8) */
#define ALL_KINDS_MAX_RANKS 8

struct ppdl_ranking {
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    int M, schedule;
    int *order;                /* the ranks in the order the layout kinds take them */
    char method[32];           /* order_of's method: the name of every plan moved out */
    /* the distinct candidates of least simulated step so far, ascending; a slot moved
     * out (take_best, runners_up) is left empty (S = 0) */
    int keep, kept;
    ppdl_plan best[PPDL_RANKING_KEEP];
    double best_ms[PPDL_RANKING_KEEP];
    char label[PPDL_RANKING_KEEP][48];
    int n;                     /* candidates simulated */
};

/* 1 when a and b run the same layers on the same ranks with the same recompute */
static int same_plan(const ppdl_plan *a, const ppdl_plan *b)
{
    if (a->S != b->S) return 0;
    for (int s = 0; s < a->S; s++) {
        const ppdl_plan_stage *x = &a->stages[s], *y = &b->stages[s];
        int kx = x->n_replicas > 0 ? x->n_replicas : 1, ky = y->n_replicas > 0 ? y->n_replicas : 1;
        if (x->first != y->first || x->last != y->last || x->rank != y->rank || kx != ky) return 0;
        for (int q = 0; q < kx && x->n_replicas > 0 && y->n_replicas > 0; q++)
            if (x->ranks[q] != y->ranks[q]) return 0;
        for (int l = 0; l <= x->last - x->first; l++)
            if (x->recompute[l] != y->recompute[l]) return 0;
    }
    return 1;
}

/* a plan's family: 0 data parallel (one stage, replicated), 1 pipeline (no stage
 * replicated), 2 both (some stages replicated) */
static int plan_family(const ppdl_plan *p)
{
    int replicated = 0;
    for (int s = 0; s < p->S; s++) replicated += p->stages[s].n_replicas > 1;
    return p->S == 1 && replicated ? 0 : replicated ? 2 : 1;
}

/* the plan's ranks, stage after stage (replicas in order) */
static void plan_rank_order(const ppdl_plan *p, int *order)
{
    int pos = 0;
    for (int s = 0; s < p->S; s++) {
        const ppdl_plan_stage *st = &p->stages[s];
        for (int q = 0; q < (st->n_replicas > 0 ? st->n_replicas : 1); q++)
            order[pos++] = st->n_replicas > 0 ? st->ranks[q] : st->rank;
    }
}

ppdl_ranking *ppdl_ranking_new(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, int keep,
                               const ppdl_plan *order_of)
{
    ppdl_ranking *r = ppdl_xcalloc(1, sizeof *r);
    r->c = c, r->cl = cl, r->M = M, r->schedule = schedule;
    r->keep = keep < 1 ? 1 : keep > PPDL_RANKING_KEEP ? PPDL_RANKING_KEEP : keep;
    r->order = ppdl_xmalloc((size_t)cl->N * sizeof(int));
    plan_rank_order(order_of, r->order);
    snprintf(r->method, sizeof r->method, "%s", order_of->method);
    return r;
}

void ppdl_ranking_offer(ppdl_ranking *r, ppdl_plan *p, const char *label)
{
    if (p->S == 0) return;
    double ms = p->feasible ? ppdl_simulated_ms(r->c, r->cl, p, r->M, r->schedule) : INFINITY;
    if (isnan(ms)) ms = INFINITY; /* the simulator cannot play it */
    if (ms < INFINITY) r->n++;
    int at = r->kept, dup = 0;
    while (at > 0 && ms < r->best_ms[at - 1] * (1 - 1e-9)) at--;
    for (int i = 0; i < r->kept && !dup; i++) dup = same_plan(&r->best[i], p);
    if (!(ms < INFINITY) || at >= r->keep || dup) {
        ppdl_plan_free(p);
        return;
    }
    if (r->kept == r->keep) ppdl_plan_free(&r->best[--r->kept]); /* the last falls off */
    for (int i = r->kept; i > at; i--) {
        r->best[i] = r->best[i - 1];
        r->best_ms[i] = r->best_ms[i - 1];
        memcpy(r->label[i], r->label[i - 1], sizeof r->label[i]);
    }
    r->best[at] = *p;
    r->best_ms[at] = ms;
    snprintf(r->label[at], sizeof r->label[at], "%s", label);
    r->kept++;
}

int ppdl_ranking_layout_kinds(ppdl_ranking *r, const ppdl_plan *pipeline, int **grps, char **labels)
{
    if (pipeline) plan_rank_order(pipeline, r->order);
    int N = r->cl->N, M = r->M, L = r->c->L, cap = 64, n = 0;
    *grps = ppdl_xmalloc((size_t)cap * N * sizeof(int));
    *labels = ppdl_xmalloc((size_t)cap * 48);
    int *k = ppdl_xmalloc((size_t)N * sizeof(int));
    /* composition c of N: bit i of c set means a stage ends after position i */
    unsigned long n_comp = N <= ALL_KINDS_MAX_RANKS ? 1UL << (N - 1) : 0;
    for (unsigned long c = 0; c < n_comp || (N > ALL_KINDS_MAX_RANKS && c < (unsigned long)N); c++) {
        int S = 0, len = 0, okc = 1;
        if (N <= ALL_KINDS_MAX_RANKS) {
            for (int i = 0; i < N; i++) {
                len++;
                if (i == N - 1 || (c >> i & 1)) k[S++] = len, len = 0;
            }
        } else { /* equal counts only: c + 1 replicas on each of N / (c + 1) stages */
            int kk = (int)c + 1;
            if (N % kk) continue;
            for (S = 0; S < N / kk; S++) k[S] = kk;
        }
        for (int s = 0; s < S; s++) okc &= k[s] <= M;
        if (!okc || S > L) continue;
        if (n == cap) {
            cap *= 2;
            *grps = realloc(*grps, (size_t)cap * N * sizeof(int));
            *labels = realloc(*labels, (size_t)cap * 48);
            PPDL_CHECK(*grps && *labels, "out of host memory for layout kinds");
        }
        int *g = &(*grps)[(size_t)n * N], pos = 0;
        char *lab = &(*labels)[(size_t)n * 48];
        size_t ll = (size_t)snprintf(lab, 48, "layout ");
        for (int s = 0; s < S; s++) {
            for (int q = 0; q < k[s]; q++) g[r->order[pos++]] = s;
            if (ll < 48) ll += (size_t)snprintf(lab + ll, 48 - ll, "%s%d", s ? "+" : "", k[s]);
        }
        n++;
    }
    free(k);
    return n;
}

int ppdl_ranking_simulated(const ppdl_ranking *r) { return r->n; }

/* move slot i out into *out (its label and step where asked) */
static void take(ppdl_ranking *r, int i, ppdl_plan *out, char *label, double *ms)
{
    *out = r->best[i];
    memset(&r->best[i], 0, sizeof r->best[i]);
    snprintf(out->method, sizeof out->method, "%s", r->method);
    if (label) snprintf(label, 48, "%s", r->label[i]);
    if (ms) *ms = r->best_ms[i];
}

int ppdl_ranking_take_best(ppdl_ranking *r, ppdl_plan *out, char *label, double *ms)
{
    for (int i = 0; i < r->kept; i++)
        if (r->best[i].S > 0) {
            take(r, i, out, label, ms);
            return 0;
        }
    return -1;
}

int ppdl_ranking_runners_up(ppdl_ranking *r, const ppdl_plan *plan, double max_ms, int rest, int n,
                            ppdl_plan *others, double *others_ms, char (*others_label)[48])
{
    int pick[PPDL_RANKING_KEEP], n_pick = 0, taken[PPDL_RANKING_KEEP] = {0}, seen[3] = {0};
    seen[plan_family(plan)] = 1;
    for (int i = 0; i < r->kept; i++) {
        if (r->best[i].S == 0) continue;
        int f = plan_family(&r->best[i]);
        if (seen[f] || same_plan(&r->best[i], plan) || r->best_ms[i] > max_ms) continue;
        seen[f] = 1, pick[n_pick++] = i, taken[i] = 1;
    }
    for (int i = 0; i < r->kept && rest; i++)
        if (r->best[i].S > 0 && !taken[i]) pick[n_pick++] = i;
    int got = 0;
    for (int j = 0; j < n_pick && got < n; j++, got++)
        take(r, pick[j], &others[got], others_label ? others_label[got] : NULL, others_ms ? &others_ms[got] : NULL);
    return got;
}

void ppdl_ranking_free(ppdl_ranking *r)
{
    if (!r) return;
    for (int i = 0; i < r->kept; i++) ppdl_plan_free(&r->best[i]);
    free(r->order);
    free(r);
}
