/* shared_cores.c — the choice among candidate plans by the simulated step where a
 * host's ranks outnumber its cores (shared_cores.h says which candidates and why; the
 * chooser, chooser.c, makes them and offers them here). */
#include "plan/shared_cores.h"
#include "core/error.h"
#include "core/util.h"
#include "plan/simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* every layout kind up to this many ranks (2^(N-1) of them: 128 at 8) */
#define ALL_KINDS_MAX_RANKS 8

/* the candidates kept for the runners-up: all of them at 4 ranks (20), the best 24
 * above */
#define KEEP 24
/* A core per rank: the plan is the optimum of T, and where another family's best
 * candidate simulates within this fraction of it, the call is close enough to measure
 * (2 ranks of mlp: data parallelism and the pipeline simulated within 1% and measured
 * 7.1 against 5.8 ms: the all-reduce of 6 MB between the two ranks of one host). Up to
 * CLOSE_CALL_MAX_RANKS ranks, whose candidates solve in milliseconds. */
#define CLOSE_CALL 0.10
#define CLOSE_CALL_MAX_RANKS 8

struct ppdl_shared_ranking {
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    int M, schedule;
    int shared, close_call;    /* why the ranking was entered (shared_cores.h) */
    int *order;                /* the ranks in the order the layout kinds take them */
    int K_asked;               /* the choice and its runners-up returned */
    double opt_ms;             /* the method's optimum's simulated step */
    char method[32];           /* the method's name, on every plan returned */
    /* the K distinct candidates of least simulated step so far, ascending: best[0] is
     * the choice, the others its runners-up (ppdl --plan-trials measures some) */
    int K, kept;
    ppdl_plan best[KEEP];
    double best_ms[KEEP];
    char label[KEEP][48];
    int n;                     /* candidates simulated */
};
typedef struct ppdl_shared_ranking chooser;

/* The simulated step of p (cores shared), INFINITY when it cannot be played */
static double simulated_ms(const chooser *ch, const ppdl_plan *p)
{
    ppdl_sim sim;
    char err[PPDL_ERR_LEN];
    if (ppdl_simulate(ch->c, ch->cl, p, ch->M, ch->schedule, 0, &sim, err, sizeof err)) return INFINITY;
    double ms = sim.step_ms;
    ppdl_sim_free(&sim);
    return ms;
}

/* 1 when a and b run the same layers on the same ranks with the same recompute (one
 * plan found twice: uniform and ppdl-inorder often are) */
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

/* Offer p (built and annotated by the cost model; owned from here on): it takes its
 * place among the K kept candidates, in simulated order, when it fits, is not one of
 * them already, and its simulated step is shorter than a kept one's by more than a
 * relative 1e-9 (ties keep the earlier candidate); else it is freed. With K = 1: the
 * least simulated step, the earliest of equals. */
static void offer(chooser *ch, ppdl_plan *p, const char *label)
{
    if (p->S == 0) return;
    double ms = p->feasible ? simulated_ms(ch, p) : INFINITY;
    if (ms < INFINITY) ch->n++;
    int at = ch->kept, dup = 0;
    while (at > 0 && ms < ch->best_ms[at - 1] * (1 - 1e-9)) at--;
    for (int i = 0; i < ch->kept && !dup; i++) dup = same_plan(&ch->best[i], p);
    if (!(ms < INFINITY) || at >= ch->K || dup) {
        ppdl_plan_free(p);
        return;
    }
    if (ch->kept == ch->K) ppdl_plan_free(&ch->best[--ch->kept]); /* the last falls off */
    for (int i = ch->kept; i > at; i--) {
        ch->best[i] = ch->best[i - 1];
        ch->best_ms[i] = ch->best_ms[i - 1];
        memcpy(ch->label[i], ch->label[i - 1], sizeof ch->label[i]);
    }
    ch->best[at] = *p;
    ch->best_ms[at] = ms;
    snprintf(ch->label[at], sizeof ch->label[at], "%s", label);
    ch->kept++;
}

/* a plan's family: 0 data parallel (one stage, replicated), 1 pipeline (no stage
 * replicated), 2 both (some stages replicated) */
static int plan_family(const ppdl_plan *p)
{
    int replicated = 0;
    for (int s = 0; s < p->S; s++) replicated += p->stages[s].n_replicas > 1;
    return p->S == 1 && replicated ? 0 : replicated ? 2 : 1;
}

/* Layout kinds as stage-of-rank arrays: replicas per stage k_0..k_S-1 (each 1..M,
 * S <= L), ranks taken in `order`. All compositions of N up to ALL_KINDS_MAX_RANKS
 * ranks, else equal replica counts. Returns how many were written to grps (caller
 * frees), each labelled "k_0+k_1+..." in labels[48 each]. */
static int layout_kinds(int N, int M, int L, const int *order, int **grps, char **labels)
{
    int cap = 64, n = 0;
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
            for (int q = 0; q < k[s]; q++) g[order[pos++]] = s;
            if (ll < 48) ll += (size_t)snprintf(lab + ll, 48 - ll, "%s%d", s ? "+" : "", k[s]);
        }
        n++;
    }
    free(k);
    return n;
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

void ppdl_shared_choice_host(const ppdl_cluster_model *cl, ppdl_shared_choice *sc)
{
    int *cnt = ppdl_xcalloc((size_t)cl->hosts.n, sizeof(int));
    for (int r = 0; r < cl->N; r++) cnt[cl->hosts.of_rank[r]]++;
    sc->max_ranks = sc->cores = 0;
    for (int h = 0; h < cl->hosts.n; h++)
        if (sc->max_ranks == 0 || (double)cnt[h] / cl->hosts.cores[h] > (double)sc->max_ranks / sc->cores) {
            sc->max_ranks = cnt[h];
            sc->cores = cl->hosts.cores[h];
        }
    free(cnt);
}

ppdl_shared_ranking *ppdl_shared_begin(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule,
                                       ppdl_plan *plan, ppdl_shared_choice *sc, int K)
{
    if (K < 1) K = 1;
    if (K > PPDL_SHARED_MAX_CANDIDATES) K = PPDL_SHARED_MAX_CANDIDATES;
    memset(sc, 0, sizeof *sc);
    int N = cl->N;
    if (N < 2 || plan->S == 0 || !plan->feasible) return NULL;
    /* a core per rank: the plan stays the optimum of T; runners-up only for a close
     * call (below), small jobs only (the candidates cost a solve per layout kind) */
    int shared = ppdl_hosts_oversubscribed(&cl->hosts, N);
    int close_call = !shared && K > 1 && N <= CLOSE_CALL_MAX_RANKS;
    if (!shared && !close_call) return NULL;
    chooser *ch = ppdl_xcalloc(1, sizeof *ch);
    /* every candidate is kept (up to KEEP), the K returned chosen from them below */
    ch->c = c, ch->cl = cl, ch->M = M, ch->schedule = schedule, ch->K = K > 1 ? KEEP : 1;
    ch->shared = shared, ch->close_call = close_call, ch->K_asked = K;
    double opt_ms = ch->opt_ms = simulated_ms(ch, plan);
    if (shared) {
        ppdl_shared_choice_host(cl, sc);
        sc->active = 1;
        ppdl_plan_kind(plan, sc->optimum_kind, sizeof sc->optimum_kind);
        sc->optimum_sim_ms = opt_ms;
    }
    if (!(opt_ms < INFINITY)) { /* cannot be played: keep it as it is */
        if (shared) snprintf(sc->chosen, sizeof sc->chosen, "the optimum of T (not simulated)");
        free(ch);
        return NULL;
    }
    snprintf(ch->method, sizeof ch->method, "%s", plan->method);
    /* the ranks in the order of the method's optimum (before it moves) */
    ch->order = ppdl_xmalloc((size_t)N * sizeof(int));
    plan_rank_order(plan, ch->order);
    if (shared) { /* the optimum is a candidate, owned by the ranking from here on */
        ch->best[0] = *plan;
        ch->best_ms[0] = opt_ms;
        snprintf(ch->label[0], sizeof ch->label[0], "the optimum of T");
        ch->kept = ch->n = 1;
        memset(plan, 0, sizeof *plan);
    }
    return ch;
}

void ppdl_shared_offer(ppdl_shared_ranking *ch, ppdl_plan *p, const char *label)
{
    offer(ch, p, label);
}

int ppdl_shared_layout_kinds(ppdl_shared_ranking *ch, const ppdl_plan *pipeline, int **grps, char **labels)
{
    if (pipeline) plan_rank_order(pipeline, ch->order);
    return layout_kinds(ch->cl->N, ch->M, ch->c->L, ch->order, grps, labels);
}

void ppdl_shared_finish(ppdl_shared_ranking *ch, ppdl_plan *plan, ppdl_shared_choice *sc, ppdl_plan *others,
                        double *others_ms, char (*others_label)[48])
{
    int shared = ch->shared, close_call = ch->close_call, K = ch->K_asked;
    double opt_ms = ch->opt_ms;
    int first = 0; /* the first runner-up in ch->best */
    if (shared) {
        *plan = ch->best[0];
        snprintf(plan->method, sizeof plan->method, "%s", ch->method);
        snprintf(sc->chosen, sizeof sc->chosen, "%s", ch->label[0]);
        sc->chosen_sim_ms = ch->best_ms[0];
        sc->candidates = ch->n;
        first = 1;
    }
    /* the runners-up: first the best of each other family (data parallel, pipeline,
     * some stages replicated) in simulated order, then (shared cores) the other
     * candidates in simulated order, K-1 in all; in a close call only the families
     * within CLOSE_CALL of the optimum's simulated step; the rest freed */
    int pick[KEEP], n_pick = 0, taken[KEEP] = {0};
    int seen[3] = {0};
    seen[plan_family(plan)] = 1;
    for (int i = first; i < ch->kept; i++) {
        int f = plan_family(&ch->best[i]);
        if (seen[f] || same_plan(&ch->best[i], plan)) continue;
        if (close_call && ch->best_ms[i] > opt_ms * (1 + CLOSE_CALL)) continue;
        if (shared && ch->best_ms[i] > ch->best_ms[0] * PPDL_SHARED_FAMILY_FIRST) continue;
        seen[f] = 1, pick[n_pick++] = i, taken[i] = 1;
    }
    for (int i = first; i < ch->kept && !close_call; i++)
        if (!taken[i]) pick[n_pick++] = i;
    for (int i = first; i < ch->kept; i++) /* the ones not picked at all */
        if (close_call && !taken[i]) ppdl_plan_free(&ch->best[i]);
    sc->n_others = 0;
    for (int j = 0; j < n_pick; j++) {
        int i = pick[j];
        if (j >= K - 1) {
            ppdl_plan_free(&ch->best[i]);
            continue;
        }
        ppdl_plan *o = &others[j];
        *o = ch->best[i];
        snprintf(o->method, sizeof o->method, "%s", ch->method);
        if (others_ms) others_ms[j] = ch->best_ms[i];
        if (others_label) snprintf(others_label[j], 48, "%s", ch->label[i]);
        sc->n_others++;
    }
    free(ch->order);
    free(ch);
}

const char *ppdl_shared_choice_line(const ppdl_shared_choice *sc, char *buf, size_t len)
{
    if (!sc->active) {
        snprintf(buf, len, "%s", "");
        return buf;
    }
    size_t n = (size_t)snprintf(buf, len, "ranks share cores (%d ranks on a host of %d core%s): ", sc->max_ranks,
                                sc->cores, sc->cores == 1 ? "" : "s");
    if (n >= len) return buf;
    if (!strcmp(sc->chosen, "the optimum of T"))
        snprintf(buf + n, len - n, "of %d candidate plans, the optimum of T (%s) simulates fastest (%.2f ms)",
                 sc->candidates, sc->optimum_kind, sc->chosen_sim_ms);
    else if (sc->candidates == 0)
        snprintf(buf + n, len - n, "kept the optimum of T (%s): the simulator cannot play it", sc->optimum_kind);
    else
        snprintf(buf + n, len - n, "of %d candidate plans, %s simulates fastest (%.2f ms); the optimum of T, %s, "
                 "simulates to %.2f ms", sc->candidates, sc->chosen, sc->chosen_sim_ms, sc->optimum_kind,
                 sc->optimum_sim_ms);
    return buf;
}
