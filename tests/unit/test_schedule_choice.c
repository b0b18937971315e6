/* test_schedule_choice.c — the zero-bubble cost model, the solvers under it, and
 * `--schedule auto` (plan/costmodel.h, plan/schedule_choice.h).
 *
 *  - The op lists' counts from one play (ppdl_schedule_counts, and _layout for every
 *    replica of a layout) are the built lists'.
 *  - The cost model's T against the simulator (which plays the runtime's op lists) on
 *    S equal stages with F = B = W: equal, to rounding (relative 1e-9), for 1f1b, zb-h1,
 *    zb-h2 and zb-1p, S 1..6, M 1..9 (M < S included), links free. With links (each 5%
 *    of a stage's time) the two differ by the play's queueing: within 10%, the bound
 *    stated in docs/cost-model.md.
 *  - The solvers are exact for the zero-bubble T: on random instances (1-3 ranks, up to
 *    6 layers, two recompute options, tight memory on some) ppdl_solve's T equals the
 *    least T of the cost model over every layout (ranks to stages, replicated stages
 *    included, so every rank order), cut and option assignment that fits (brute force
 *    through ppdl_cost_evaluate), zb-h1, zb-h2 and zb-1p; where nothing fits both say so.
 *  - What B keeps for W (weight_keep_bytes) is counted: the plan fits by the cost
 *    model, which charges it per micro-batch between B and W.
 *  - The choice: 4 equal stages, ample memory: zb-h2 (least T); memory for 4 but not 7
 *    micro-batches a stage: zb-h1 (zb-h2 does not fit); 2 ranks whose memory holds
 *    three layers' stashes (1F1B's and zb-1p's last stage hold one micro-batch, zb-h1's
 *    and zb-h2's stages two): zb-1p; the same where what W keeps does not fit: 1f1b;
 *    the control with four: zb-h1; one rank (every schedule the same T): 1f1b, the
 *    tie's winner. For a given plan: data parallelism (one stage) gets 1f1b, the tie's
 *    winner; a pipeline with ample memory zb-h2; 2 stages x 2 replicas a zero-bubble
 *    schedule, of less T than 1f1b's.
 *  - Chunked plans in k copies: where the pipeline's fill dominates (M = N = 4, memory
 *    for half the model) and the sums of the gradients are cheap, zb-v in 2 copies of 2
 *    ranks, strictly better and confirmed by the simulator; with slow sums, one V.
 *  - The shared search of many ranks (schedule_choice.h): on 32 ranks the candidates
 *    after zb-1p start from its order with a small budget, one of them on a thread. Two runs give the same plans, bit for bit; each
 *    candidate's T is within 2% of the same schedule solved alone (the full search),
 *    the chosen T within 1% of the best alone (measured on these instances: see the
 *    lines); on 16 ranks nothing is shared: every T equals its solve
 *    alone exactly.
 */
#include "core/error.h"
#include "core/util.h"
#include "sched/schedule.h"
#include "plan/cluster_model.h"
#include "plan/costmodel.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/schedule_choice.h"
#include "plan/simulate.h"
#include "plan/solver.h"

#include "tap.h"
#include "unit/schedule_lists.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double uni(ppdl_rng *g, double a, double b) { return a + (b - a) * ppdl_rng_uniform(g); }

/* L equal layers of fwd f ms and bwd 2f (B = W = f: the split's default halves),
 * stash bytes each, param bytes of parameters */
static void equal_costs(ppdl_costs *c, int L, double f, double stash, double param)
{
    ppdl_costs_alloc(c, L);
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &c->layers[l];
        snprintf(lc->name, sizeof lc->name, "layer%d", l);
        lc->fwd_ms = f;
        lc->bwd_ms = 2 * f;
        lc->out_bytes = 1000;
        lc->stash_bytes[0] = stash;
        lc->param_bytes = param;
    }
}

/* N ranks of speed 1 and memory mem; links of latency lat and a bandwidth that makes
 * 1000 bytes free (bw huge) or not */
static void flat_cluster(ppdl_cluster_model *cl, int N, double mem, double lat, double bw)
{
    ppdl_cluster_model_alloc(cl, N);
    for (int a = 0; a < N; a++) {
        cl->speed[a] = 1;
        cl->mem[a] = mem;
        for (int b = 0; b < N; b++) {
            cl->bw[a * N + b] = bw;
            cl->lat[a * N + b] = a == b ? 0 : lat;
        }
    }
}

/* one layer per stage, stage s on rank s */
static void pipeline_plan(int S, ppdl_plan *p)
{
    char err[PPDL_ERR_LEN];
    PPDL_CHECK(ppdl_plan_uniform(S, S, p, err, sizeof err) == 0, "%s", err);
}

static double model_T(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int M, int sched)
{
    ppdl_cost_eval ev;
    char err[PPDL_ERR_LEN];
    if (ppdl_cost_evaluate(c, cl, M, sched, p, &ev, err, sizeof err)) return NAN;
    double T = ev.T;
    ppdl_cost_eval_free(&ev);
    return T;
}

/* ppdl_schedule_counts (one play for every stage) = the built lists' own counts */
static void test_counts(void)
{
    int bad = 0, n = 0;
    for (int kind = 0; kind < PPDL_SCHED_N_KINDS; kind++)
        for (int S = 1; S <= 8 && !ppdl_schedule_chunked(kind); S++) /* chunked: test_schedule_chunked.c */
            for (int M = 1; M <= 12; M++) {
                int held[8], pending[8];
                ppdl_schedule_counts(kind, S, M, held, pending);
                for (int s = 0; s < S; s++) {
                    ppdl_op_list l;
                    list_of(kind, S, M, NULL, NULL, s, 0, &l);
                    n++;
                    if (held[s] != ppdl_schedule_max_in_flight(&l) || pending[s] != ppdl_schedule_max_pending_weight(&l)) {
                        bad++;
                        diag("%s S=%d M=%d stage %d: %d/%d, the list %d/%d", ppdl_schedule_name(kind), S, M, s, held[s],
                             pending[s], ppdl_schedule_max_in_flight(&l), ppdl_schedule_max_pending_weight(&l));
                    }
                    ppdl_op_list_free(&l);
                }
            }
    ok(bad == 0, "ppdl_schedule_counts = each built list's micro-batches held and W's pending (%d stage lists, every "
                 "schedule, S 1..8, M 1..12)", n);
    /* the same for every replica of a layout (S 1..4 stages, 1..3 replicas each) */
    bad = n = 0;
    for (int kind = 0; kind < PPDL_SCHED_N_KINDS; kind++)
        for (int S = 1; S <= 4 && !ppdl_schedule_chunked(kind); S++)
            for (int code = 0, n_codes = S == 1 ? 3 : S == 2 ? 9 : S == 3 ? 27 : 81; code < n_codes; code++) {
                int k[4], kmax = 1, c = code;
                for (int s = 0; s < S; s++, c /= 3) {
                    k[s] = 1 + c % 3;
                    if (k[s] > kmax) kmax = k[s];
                }
                for (int M = kmax; M <= 12; M++) {
                    int held[12], pending[12];
                    ppdl_schedule_counts_layout(kind, S, M, k, held, pending);
                    for (int s = 0, d = 0; s < S; s++)
                        for (int q = 0; q < k[s]; q++, d++) {
                            ppdl_op_list l;
                            list_of(kind, S, M, k, NULL, s, q, &l);
                            n++;
                            if (held[d] != ppdl_schedule_max_in_flight(&l) ||
                                pending[d] != ppdl_schedule_max_pending_weight(&l)) {
                                if (bad++ < 3)
                                    diag("%s S=%d M=%d stage %d replica %d: %d/%d, the list %d/%d",
                                         ppdl_schedule_name(kind), S, M, s, q, held[d], pending[d],
                                         ppdl_schedule_max_in_flight(&l), ppdl_schedule_max_pending_weight(&l));
                            }
                            ppdl_op_list_free(&l);
                        }
                }
            }
    ok(bad == 0, "ppdl_schedule_counts_layout = each replica list's micro-batches held and W's pending (%d replica "
                 "lists, every schedule, S 1..4 with 1..3 replicas each, M up to 12)", n);
}

static void test_model_vs_simulator(void)
{
    static const int scheds[] = {PPDL_SCHED_1F1B, PPDL_SCHED_ZB_H1, PPDL_SCHED_ZB_H2, PPDL_SCHED_ZB_1P};
    int n_free = 0, bad_free = 0, n_link = 0, bad_link = 0, n_less = 0;
    double worst_free = 0, worst_link = 0;
    for (int S = 1; S <= 6; S++)
        for (int M = 1; M <= 9; M++)
            for (int k = 0; k < 4; k++) {
                ppdl_costs c;
                ppdl_plan p;
                equal_costs(&c, S, 1.0, 1, 0);
                pipeline_plan(S, &p);
                for (int links = 0; links < 2; links++) {
                    ppdl_cluster_model cl;
                    /* links: 1000 bytes at 2e7 B/s = 0.05 ms, 5% of a 3 ms stage */
                    flat_cluster(&cl, S, 1e12, 0, links ? 2e7 : 1e30);
                    double T = model_T(&c, &cl, &p, M, scheds[k]), sim = ppdl_simulated_ms(&c, &cl, &p, M, scheds[k]);
                    double rel = fabs(T - sim) / sim;
                    if (links) {
                        n_link++;
                        worst_link = fmax(worst_link, rel);
                        if (!(rel <= 0.10)) {
                            bad_link++;
                            diag("%s S=%d M=%d links: T %.4f, simulated %.4f", ppdl_schedule_name(scheds[k]), S, M, T,
                                 sim);
                        }
                    } else {
                        n_free++;
                        worst_free = fmax(worst_free, rel);
                        if (!(rel <= 1e-9)) {
                            bad_free++;
                            diag("%s S=%d M=%d: T %.6f, simulated %.6f", ppdl_schedule_name(scheds[k]), S, M, T, sim);
                        }
                        /* the zero-bubble T is below 1F1B's wherever the play is */
                        double T1 = model_T(&c, &cl, &p, M, PPDL_SCHED_1F1B);
                        if (k > 0 && S > 1 && T < T1) n_less++;
                    }
                    ppdl_cluster_model_free(&cl);
                }
                ppdl_plan_free(&p);
                ppdl_costs_free(&c);
            }
    ok(bad_free == 0, "cost model T = simulated step on equal stages, F = B = W, free links (%d cases: 1f1b, zb-h1, "
                      "zb-h2, zb-1p, S 1..6, M 1..9; worst relative difference %.2g)", n_free, worst_free);
    ok(bad_link == 0, "... with links of 5%% of a stage: within 10%% (%d cases, worst %.1f%%)", n_link,
       100 * worst_link);
    ok(n_less >= 3 * 5 * 9 - 2, "zero bubble's T is below 1F1B's on %d of the %d cases with S > 1", n_less, 3 * 5 * 9);
}

/* ---- the solvers are exact for the zero-bubble T ---- */

typedef struct brute {
    const ppdl_costs *c;
    const ppdl_cluster_model *cl;
    int M, sched, N, L;
    int S;                     /* the layout: S stages, stage s on ranks R[s][0..k[s]-1] */
    int k[8], R[8][8];
    int *first, *opt;
    double best;
    long n_fit;
} brute;

static double eval_choice(brute *b)
{
    ppdl_plan p;
    memset(&p, 0, sizeof p);
    p.S = b->S;
    p.stages = ppdl_xcalloc((size_t)b->S, sizeof *p.stages);
    for (int s = 0; s < b->S; s++) {
        ppdl_plan_stage *st = &p.stages[s];
        st->rank = b->R[s][0];
        if (b->k[s] > 1) {
            st->n_replicas = b->k[s];
            st->ranks = ppdl_xmalloc((size_t)b->k[s] * sizeof(int));
            memcpy(st->ranks, b->R[s], (size_t)b->k[s] * sizeof(int));
        }
        st->first = b->first[s];
        st->last = s + 1 < b->S ? b->first[s + 1] - 1 : b->L - 1;
        st->recompute = ppdl_xmalloc((size_t)(st->last - st->first + 1) * sizeof(int));
        memcpy(st->recompute, &b->opt[st->first], (size_t)(st->last - st->first + 1) * sizeof(int));
    }
    ppdl_cost_eval ev;
    char err[PPDL_ERR_LEN];
    double T = INFINITY;
    if (ppdl_cost_evaluate(b->c, b->cl, b->M, b->sched, &p, &ev, err, sizeof err) == 0) {
        if (ev.feasible) T = ev.T;
        ppdl_cost_eval_free(&ev);
    }
    ppdl_plan_free(&p);
    return T;
}

/* every option assignment of layers l.. */
static void brute_opts(brute *b, int l)
{
    if (l == b->L) {
        double T = eval_choice(b);
        if (T < INFINITY) b->n_fit++;
        if (T < b->best) b->best = T;
        return;
    }
    for (int o = 0; o < b->c->layers[l].n_opts; o++) {
        b->opt[l] = o;
        brute_opts(b, l + 1);
    }
}

/* every cut: stage s starts at first[s] */
static void brute_cuts(brute *b, int s)
{
    if (s == b->S) {
        brute_opts(b, 0);
        return;
    }
    int lo = s == 0 ? 0 : b->first[s - 1] + 1, hi = s == 0 ? 0 : b->L - (b->S - s);
    for (int i = lo; i <= hi; i++) {
        b->first[s] = i;
        brute_cuts(b, s + 1);
    }
}

/* every layout: rank r.. on stage grp[r] of S (every stage used, at most M replicas,
 * a stage's replicas in rank order as the planner orders them); S = N: every rank
 * order. replicate 0: S = N only (one rank per stage) */
static void brute_layouts(brute *b, int *grp, int r, int S)
{
    if (r == b->N) {
        if (S > b->L) return;
        b->S = S;
        for (int s = 0; s < S; s++) {
            b->k[s] = 0;
            for (int q = 0; q < b->N; q++)
                if (grp[q] == s) b->R[s][b->k[s]++] = q;
            if (b->k[s] == 0 || b->k[s] > b->M) return;
        }
        brute_cuts(b, 0);
        return;
    }
    for (int s = 0; s < S; s++) {
        grp[r] = s;
        brute_layouts(b, grp, r + 1, S);
    }
}

static void brute_all(brute *b, int replicate)
{
    int grp[8];
    for (int S = replicate ? 1 : b->N; S <= b->N; S++) brute_layouts(b, grp, 0, S);
}

static void random_instance(ppdl_rng *g, int N, int L, int tight, ppdl_costs *c, ppdl_cluster_model *cl, int M)
{
    ppdl_costs_alloc(c, L);
    c->state_multiplier = 4;
    double need = 0;
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &c->layers[l];
        snprintf(lc->name, sizeof lc->name, "layer%d", l);
        lc->fwd_ms = uni(g, 0.2, 3);
        lc->bwd_ms = lc->fwd_ms * uni(g, 1.2, 2.5);
        lc->param_bytes = floor(uni(g, 1e4, 2e6));
        lc->out_bytes = floor(uni(g, 1e3, 1e6));
        lc->n_opts = 2;
        lc->stash_bytes[0] = floor(uni(g, 1e5, 4e6));
        lc->stash_bytes[1] = floor(lc->stash_bytes[0] * 0.2);
        lc->extra_ms[1] = lc->fwd_ms;
        need += 4 * lc->param_bytes + M * lc->stash_bytes[0] / 2;
    }
    ppdl_cluster_model_alloc(cl, N);
    for (int a = 0; a < N; a++) {
        cl->speed[a] = uni(g, 0.6, 1.0);
        cl->mem[a] = floor(tight ? need / N * uni(g, 0.2, 2.0) : 1e12);
        for (int b = 0; b < N; b++) {
            cl->bw[a * N + b] = uni(g, 1e8, 1e10);
            cl->lat[a * N + b] = a == b ? 0 : uni(g, 1e-6, 5e-5);
        }
    }
}

static void test_solver_exact(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 22);
    int n = 0, bad = 0, n_none = 0, n_rc = 0, n_rep = 0;
    for (int k = 0; k < 60; k++) {
        int N = 1 + k % 3, L = N + (int)(ppdl_rng_u64(&g) % (unsigned)(7 - N)), M = 1 + (int)(ppdl_rng_u64(&g) % 6);
        static const int zb[] = {PPDL_SCHED_ZB_H1, PPDL_SCHED_ZB_H2, PPDL_SCHED_ZB_1P};
        int sched = zb[k % 3];
        ppdl_costs c;
        ppdl_cluster_model cl;
        random_instance(&g, N, L, k % 4 == 1, &c, &cl, M);
        brute b = {.c = &c, .cl = &cl, .M = M, .sched = sched, .N = N, .L = L,
                   .first = ppdl_xmalloc((size_t)N * sizeof(int)), .opt = ppdl_xcalloc((size_t)L, sizeof(int)),
                   .best = INFINITY};
        brute_all(&b, 1);
        ppdl_plan p;
        char err[PPDL_ERR_LEN];
        int rc = ppdl_solve(&c, &cl, M, sched, NULL, &p, NULL, err, sizeof err);
        double T = rc == 0 ? p.predicted_iter_ms : INFINITY;
        n++;
        if (!(b.best < INFINITY)) n_none++;
        if (rc == 0)
            for (int s = 0; s < p.S; s++)
                for (int l = 0; l <= p.stages[s].last - p.stages[s].first; l++) n_rc += p.stages[s].recompute[l] != 0;
        int same = (b.best == INFINITY && rc != 0) ||
                   (b.best < INFINITY && rc == 0 && fabs(T - b.best) <= 1e-9 * b.best);
        if (!same) {
            bad++;
            diag("instance %d (%s, N=%d L=%d M=%d): solver %s %.6f, brute force %.6f", k, ppdl_schedule_name(sched), N,
                 L, M, rc ? "none" : "T", T, b.best);
        }
        if (rc == 0)
            for (int s = 0; s < p.S; s++) n_rep += p.stages[s].n_replicas > 1;
        if (p.S) ppdl_plan_free(&p);
        free(b.first);
        free(b.opt);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    ok(bad == 0, "zb-h1/zb-h2/zb-1p: ppdl_solve's T = the brute-force optimum over layouts (replicated stages "
                 "included) x cuts x options (%d instances, %d where nothing fits, %d recomputed layers, %d replicated "
                 "stages in the plans)", n, n_none, n_rc, n_rep);
    ok(n_none > 0 && n_rc > 0 && n_rep > 0, "the instances exercise infeasibility (%d), recompute (%d) and replicated "
       "stages (%d)", n_none, n_rc, n_rep);
}

/* what B keeps for W is charged per micro-batch between B and W, and the plan fits */
static void test_weight_keep(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 23);
    int n = 0, bad = 0, charged = 0;
    for (int k = 0; k < 20; k++) {
        int N = 2 + k % 3, L = N + 3, M = 4 + k % 5;
        ppdl_costs c;
        ppdl_cluster_model cl;
        random_instance(&g, N, L, 1, &c, &cl, M);
        for (int l = 0; l < L; l++)
            for (int o = 0; o < c.layers[l].n_opts; o++) c.layers[l].weight_keep_bytes[o] = floor(uni(&g, 1e5, 2e6));
        for (int sched = PPDL_SCHED_ZB_H1; sched <= PPDL_SCHED_ZB_1P; sched++) {
            ppdl_plan p;
            char err[PPDL_ERR_LEN];
            if (ppdl_solve(&c, &cl, M, sched, NULL, &p, NULL, err, sizeof err) == 0) {
                ppdl_cost_eval ev;
                n++;
                if (ppdl_cost_evaluate(&c, &cl, M, sched, &p, &ev, err, sizeof err) || !ev.feasible) bad++;
                else
                    for (int s = 0; s < p.S; s++) {
                        double keep = 0, without;
                        const ppdl_plan_stage *st = &p.stages[s];
                        for (int l = st->first; l <= st->last; l++)
                            keep += c.layers[l].weight_keep_bytes[st->recompute[l - st->first]];
                        without = ppdl_stage_mem(&c, st->first, st->last, st->recompute, ev.in_flight[s]);
                        if (fabs(ev.mem_bytes[s] - without - ev.pending_weight[s] * keep) > 0.5) bad++;
                        charged += ev.pending_weight[s] > 0;
                    }
                ppdl_cost_eval_free(&ev);
            }
            if (p.S) ppdl_plan_free(&p);
        }
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    ok(bad == 0 && n > 0 && charged > 0, "weight_keep_bytes: %d zero-bubble plans fit by the cost model, which charges "
                                         "each stage's keep x micro-batches between B and W (%d stages hold some)", n,
       charged);
}

/* ---- the choice ---- */

static int choose(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, char *line, size_t len)
{
    ppdl_schedule_choice ch;
    char err[PPDL_ERR_LEN];
    int rc = ppdl_choose_schedule(c, cl, M, "ppdl", NULL, 0, &ch, err, sizeof err);
    int s = rc == 0 ? ch.opt[ch.chosen].schedule : -1;
    if (rc == 0) ppdl_schedule_choice_line(&ch, line, len);
    else snprintf(line, len, "%s", err);
    ppdl_schedule_choice_free(&ch);
    return s;
}

static void test_choice(void)
{
    char line[PPDL_ERR_LEN];
    ppdl_costs c;
    ppdl_cluster_model cl;
    /* 8 equal layers (stash 1000 bytes, 10 MB of parameters each: replicas would spend
     * 100 ms summing gradients) on 4 ranks, M = 8: 1F1B holds 4,3,2,1 micro-batches,
     * zb-h1 4 on every stage, zb-h2 7 */
    equal_costs(&c, 8, 1.0, 1000, 1e7);
    flat_cluster(&cl, 4, 1e12, 1e-6, 1e9);
    int s = choose(&c, &cl, 8, line, sizeof line);
    /* the V (8 stages of one layer, two per rank) leaves less bubble than zb-h2 at 1F1B's
     * memory, and the simulator agrees (issue 22) */
    ok(s == PPDL_SCHED_ZB_V, "ample memory, 4 equal stages: %s (%s)", ppdl_schedule_name(s), line);
    {
        ppdl_schedule_choice ch;
        ppdl_solve_opts o;
        ppdl_solve_opts_default(&o);
        o.auto_chunked = 0; /* a run that cannot hold several stages per rank */
        char err[PPDL_ERR_LEN];
        int rc = ppdl_choose_schedule(&c, &cl, 8, "ppdl", &o, 0, &ch, err, sizeof err);
        s = rc == 0 ? ch.opt[ch.chosen].schedule : -1;
        ok(s == PPDL_SCHED_ZB_H2, "... without the chunked candidates: %s", s >= 0 ? ppdl_schedule_name(s) : err);
        ppdl_schedule_choice_free(&ch);
    }
    for (int r = 0; r < 4; r++) cl.mem[r] = 4 * 2e7 + 8000; /* 2 layers x 4 in flight, not x 7 */
    s = choose(&c, &cl, 8, line, sizeof line);
    ok(s == PPDL_SCHED_ZB_H1, "memory for 4 micro-batches of a 2-layer stage, not 7: %s (%s)", ppdl_schedule_name(s),
       line);
    ppdl_cluster_model_free(&cl);
    ppdl_costs_free(&c);

    /* 4 equal layers (1 parameter byte each) on 2 ranks, M = 4, memory for 3 layers'
     * stashes: 1F1B fits as 1 layer x 2 in flight + 3 layers x 1, and so does zb-1p,
     * which holds what 1F1B holds on each stage; zb-h1 and zb-h2 hold 2 or more on each
     * stage (so one layer a stage at most: 2 layers of 4); data parallelism, 4 layers
     * x 1, does not fit */
    equal_costs(&c, 4, 1.0, 1000, 1);
    flat_cluster(&cl, 2, 3012, 1e-6, 1e10);
    s = choose(&c, &cl, 4, line, sizeof line);
    ok(s == PPDL_SCHED_ZB_1P, "memory that only 1F1B's counts fit: %s (%s)", ppdl_schedule_name(s), line);
    /* ... unless what W keeps tips it: 1000 bytes a layer, kept on stage 1 between B
     * and W (zb-1p's stage 0 fuses its B and W), so 3 layers there need 6000 */
    for (int l = 0; l < 4; l++) c.layers[l].weight_keep_bytes[0] = 1000;
    s = choose(&c, &cl, 4, line, sizeof line);
    ok(s == PPDL_SCHED_1F1B, "memory that no zero-bubble plan fits, with what W keeps: %s (%s)",
       ppdl_schedule_name(s), line);
    for (int l = 0; l < 4; l++) c.layers[l].weight_keep_bytes[0] = 0;
    /* the control: 2 layers x 2 in flight fit (data parallelism, 16 + 4000 bytes, not) */
    for (int r = 0; r < 2; r++) cl.mem[r] = 4008;
    s = choose(&c, &cl, 4, line, sizeof line);
    ok(s == PPDL_SCHED_ZB_H1, "the control, memory for 2 layers x 2 micro-batches: %s (%s)", ppdl_schedule_name(s), line);
    ppdl_cluster_model_free(&cl);
    ppdl_costs_free(&c);

    /* one rank: one stage, every schedule the same T: the tie goes to 1F1B */
    equal_costs(&c, 3, 1.0, 1000, 0);
    flat_cluster(&cl, 1, 1e12, 0, 1e10);
    s = choose(&c, &cl, 4, line, sizeof line);
    ok(s == PPDL_SCHED_1F1B, "one rank, equal T everywhere: %s (%s)", ppdl_schedule_name(s), line);
    ppdl_cluster_model_free(&cl);
    ppdl_costs_free(&c);

    /* a given plan */
    equal_costs(&c, 4, 1.0, 1000, 0);
    flat_cluster(&cl, 4, 1e12, 1e-6, 1e10);
    ppdl_plan dp, pipe;
    char err[PPDL_ERR_LEN];
    PPDL_CHECK(ppdl_plan_data_parallel(4, 4, &dp, err, sizeof err) == 0, "%s", err);
    pipeline_plan(4, &pipe);
    double T = 0;
    int a = ppdl_schedule_for_plan(&c, &cl, 8, &dp, &T, err, sizeof err);
    int b = ppdl_schedule_for_plan(&c, &cl, 8, &pipe, &T, err, sizeof err);
    ok(a == PPDL_SCHED_1F1B && b == PPDL_SCHED_ZB_H2,
       "a given plan: data parallel gets %s (one stage: every schedule the same T, the tie's winner), a 4-stage "
       "pipeline %s (T %.2f ms)", ppdl_schedule_name(a), ppdl_schedule_name(b), T);
    /* 2 stages x 2 replicas: zero bubble runs replicas, and fills their bubble too */
    ppdl_plan rep;
    PPDL_CHECK(ppdl_plan_uniform(4, 2, &rep, err, sizeof err) == 0, "%s", err);
    for (int t = 0; t < 2; t++) {
        rep.stages[t].n_replicas = 2;
        free(rep.stages[t].ranks);
        rep.stages[t].ranks = ppdl_xmalloc(2 * sizeof(int));
        rep.stages[t].ranks[0] = rep.stages[t].rank = 2 * t;
        rep.stages[t].ranks[1] = 2 * t + 1;
    }
    double T1 = model_T(&c, &cl, &rep, 8, PPDL_SCHED_1F1B);
    int r = ppdl_schedule_for_plan(&c, &cl, 8, &rep, &T, err, sizeof err);
    ok(ppdl_schedule_splits_backward(r) && T < T1, "a given plan of 2 stages x 2 replicas gets %s (T %.2f ms, 1f1b "
       "%.2f)", ppdl_schedule_name(r), T, T1);
    ppdl_plan_free(&rep);
    ppdl_plan_free(&dp);
    ppdl_plan_free(&pipe);
    ppdl_cluster_model_free(&cl);
    ppdl_costs_free(&c);
}

/* Chunked plans in k copies (solve_chunked.h "k copies"): 16 equal layers of 1e6 parameter bytes on
 * 4 ranks whose memory holds half the model (no data parallelism), M = 4: a pipeline of
 * 4 ranks spends most of the step filling and draining, 2 copies of a V on 2 ranks (2
 * micro-batches each) less, and with 1e12 B/s the sums of the gradients cost 0.008 ms:
 * auto takes zb-v in 2 copies, strictly better than every other candidate, and the
 * simulator agrees. The control: at 1e9 B/s a rank's sums take 8 ms, and zb-v's one V
 * on the 4 ranks wins. */
static void test_copies_choice(void)
{
    const double bws[2] = {1e12, 1e9};
    for (int i = 0; i < 2; i++) {
        ppdl_costs c;
        ppdl_cluster_model cl;
        equal_costs(&c, 16, 1.0, 1000, 1e6);
        flat_cluster(&cl, 4, 3.5e7, 1e-6, bws[i]);
        ppdl_schedule_choice ch;
        char err[PPDL_ERR_LEN], line[PPDL_ERR_LEN] = "", kind[128] = "";
        int rc = ppdl_choose_schedule(&c, &cl, 4, "ppdl", NULL, 0, &ch, err, sizeof err);
        const ppdl_schedule_option *w = rc == 0 ? &ch.opt[ch.chosen] : NULL;
        int strictly = w != NULL;
        for (int k = 0; w && k < PPDL_AUTO_N; k++)
            if (k != ch.chosen && ch.opt[k].rc == 0) strictly &= w->T < ch.opt[k].T;
        if (w) {
            ppdl_schedule_choice_line(&ch, line, sizeof line);
            ppdl_plan_kind(&w->plan, kind, sizeof kind);
        }
        int copies = w ? ppdl_plan_chunk_replicas(&w->plan) : 0;
        if (i == 0)
            ok(w && w->schedule == PPDL_SCHED_ZB_V && copies == 2 && strictly && !ch.chunked_vetoed &&
                   ch.chunked_sim_ms > 0 && ch.chunked_sim_ms < ch.one_sim_ms,
               "4 ranks, half the model a rank, M = 4, cheap sums: %s (%s)", kind, w ? line : err);
        else
            ok(w && w->schedule == PPDL_SCHED_ZB_V && copies == 1, "... the sums at 1e9 B/s: %s (%s)", kind, w ? line : err);
        if (rc == 0) ppdl_schedule_choice_free(&ch);
        ppdl_cluster_model_free(&cl);
        ppdl_costs_free(&c);
    }
}

/* Copies grouped across the nodes (solve_chunked.h "k copies" PPDL_COPIES_STRIDED): the case above
 * on 2 nodes of 2 ranks, 1e12 B/s inside a node and 1e8 between. In blocks a copy runs
 * inside a node and a rank's sums (4e6 bytes) cross the slow link, ~40 ms; strided, the
 * copies' 1000-byte activations cross it and the sums stay inside: auto takes zb-v in 2
 * copies, copy 1's rank beside copy 0's (stage 0 on ranks 0 and 1). */
static void test_copies_strided(void)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    equal_costs(&c, 16, 1.0, 1000, 1e6);
    flat_cluster(&cl, 4, 3.5e7, 1e-6, 1e12);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            if (a / 2 != b / 2) cl.bw[a * 4 + b] = 1e8;
    ppdl_schedule_choice ch;
    char err[PPDL_ERR_LEN], line[PPDL_ERR_LEN] = "", kind[128] = "";
    int rc = ppdl_choose_schedule(&c, &cl, 4, "ppdl", NULL, 0, &ch, err, sizeof err);
    const ppdl_schedule_option *w = rc == 0 ? &ch.opt[ch.chosen] : NULL;
    if (w) {
        ppdl_schedule_choice_line(&ch, line, sizeof line);
        ppdl_plan_kind(&w->plan, kind, sizeof kind);
    }
    int copies = w ? ppdl_plan_chunk_replicas(&w->plan) : 0;
    const ppdl_plan_stage *s0 = w ? &w->plan.stages[0] : NULL;
    ok(w && copies == 2 && s0->ranks[0] / 2 == s0->ranks[1] / 2 && ppdl_schedule_chunked(w->schedule),
       "2 nodes of 2 ranks, the nodes joined by 1e8 B/s: %s, stage 0 on ranks %d and %d, one node (%s)", kind,
       s0 ? s0->ranks[0] : -1, s0 && copies > 1 ? s0->ranks[1] : -1, w ? line : err);
    if (rc == 0) ppdl_schedule_choice_free(&ch);
    ppdl_cluster_model_free(&cl);
    ppdl_costs_free(&c);
}

/* the same plan, bit for bit */
static int same_plan(const ppdl_plan *a, const ppdl_plan *b)
{
    if (a->S != b->S || memcmp(&a->predicted_iter_ms, &b->predicted_iter_ms, sizeof(double))) return 0;
    for (int s = 0; s < a->S; s++)
        if (a->stages[s].rank != b->stages[s].rank || a->stages[s].first != b->stages[s].first ||
            a->stages[s].last != b->stages[s].last || a->stages[s].n_replicas != b->stages[s].n_replicas)
            return 0;
    return 1;
}

static void test_shared_search(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 20261202);
    ppdl_solve_opts def;
    ppdl_solve_opts_default(&def);
    const int Ns[2] = {32, 16};
    for (int t = 0; t < 2; t++) {
        int N = Ns[t], L = 48, M = 8;
        ppdl_costs c;
        ppdl_cluster_model cl;
        random_instance(&g, N, L, 0, &c, &cl, M);
        int shared = ppdl_auto_shares_search(N, L, "ppdl", &def);
        ok(shared == (N >= 25), "%d ranks, %d layers: the candidates %s the search", N, L, shared ? "share" : "do not share");
        ppdl_schedule_choice a, b;
        char err[PPDL_ERR_LEN];
        int ra = ppdl_choose_schedule(&c, &cl, M, "ppdl", NULL, 0, &a, err, sizeof err);
        int rb = ppdl_choose_schedule(&c, &cl, M, "ppdl", NULL, 0, &b, err, sizeof err);
        int same = ra == 0 && rb == 0 && a.chosen == b.chosen;
        for (int k = 0; k < PPDL_AUTO_N && same; k++) same = a.opt[k].rc == b.opt[k].rc && same_plan(&a.opt[k].plan, &b.opt[k].plan);
        ok(same, "... two runs: the same plans, bit for bit");
        double worst = 1, best_alone = INFINITY;
        for (int k = 0; k < PPDL_AUTO_N; k++) {
            ppdl_solve_opts o = def;
            if (k) o.fit_search = 0; /* as auto solves the zero-bubble candidates */
            o.chunks = ppdl_auto_chunks[k] > 1 ? ppdl_auto_chunks[k] : o.chunks; /* a chunked one's v */
            ppdl_plan p;
            ppdl_solve_info info;
            ppdl_shared_choice sc;
            char e[PPDL_ERR_LEN];
            if (ppdl_choose_plan(&c, &cl, M, ppdl_auto_schedules[k], "ppdl", &o, &p, &info, &sc, 1, NULL, NULL, NULL, e, sizeof e) == 0) {
                worst = fmax(worst, a.opt[k].T / p.predicted_iter_ms);
                /* (a chunked plan of least T is taken only where the simulator agrees:
                 * the chosen one is compared below among the candidates auto took) */
                best_alone = fmin(best_alone, p.predicted_iter_ms);
            }
            ppdl_plan_free(&p);
        }
        double chosen = ra == 0 ? a.opt[a.chosen].T : INFINITY;
        if (ra == 0 && a.chunked_vetoed) { /* the simulator took the best of one stage per rank instead */
            best_alone = INFINITY;
            for (int k = 0; k < PPDL_AUTO_ONE; k++)
                if (a.opt[k].rc == 0) best_alone = fmin(best_alone, a.opt[k].T);
        }
        if (shared) {
            ok(worst <= 1.02, "... every candidate's T within 2%% of its schedule solved alone (worst %.4fx)", worst);
            ok(chosen <= 1.01 * best_alone, "... the chosen T %.3f ms within 1%% of the best alone, %.3f ms", chosen,
               best_alone);
        } else {
            ok(worst == 1, "... every candidate's T is its schedule's alone (worst %.6fx)", worst);
            ok(chosen == best_alone, "... the chosen T %.3f ms is the best alone, %.3f ms", chosen, best_alone);
        }
        ppdl_schedule_choice_free(&a);
        ppdl_schedule_choice_free(&b);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
}

int main(void)
{
    test_counts();
    test_model_vs_simulator();
    test_solver_exact();
    test_weight_keep();
    test_choice();
    test_copies_choice();
    test_copies_strided();
    test_shared_search();
    done_testing();
    return exit_status();
}
