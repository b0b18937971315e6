/* test_solve_chunked.c — the planner of chunked plans (plan/solve_chunked.h) and the
 * chunked candidates of --schedule auto (plan/schedule_choice.h).
 *
 *  - Against every cut: on small random models (6 to 10 layers of random times,
 *    bytes and optimizer steps; 2 or 3 ranks of random speeds and links; M 1..2N)
 *    every cut into v N stages is evaluated by the cost model (ppdl_cost_evaluate), for
 *    interleaved v = 2, 3 and zb-v. The search's T is never below the best cut's (it
 *    would mean its own T is wrong), is within 2% of it in every case, and equal to it
 *    (1e-9) in most (the count is printed); its plan's T is the cost model's own.
 *  - Never worse than the uniform cut, on larger random cases (up to 40 layers, 6 ranks,
 *    heterogeneous speeds), the plan on the schedule's ranks, every layer once.
 *  - Memory: where option 0 everywhere is over a rank's limit and recompute can make
 *    it fit, the plan fits (every rank's stages together, as the cost model counts) and
 *    uses recompute; where nothing fits, -1, "no plan fits", and the least-over plan.
 *  - Refusals: too few layers for v N stages, a schedule of one stage per rank, zb-v
 *    with v = 3. A tied weight is planned under interleaved and zb-v, its exchange in
 *    T (none under zb-v: rank 0 holds both ends), its other part in both ends' memory.
 *  - The chunked reserve's slot bound holds on every rank of every schedule built for
 *    N 1..8, M 1..16, v 2..4 (and zb-v).
 *  - --schedule auto: the chunked candidates are solved and named; where a chunked plan
 *    is taken its T is the least and the simulator agrees; where the simulator does not,
 *    the best plan of one stage per rank is taken and the line says why; opts
 *    auto_chunked = 0 leaves them out with a reason; a case built for interleaved
 *    (equal layers, fast links, M = N: 1F1B's bubble is large) takes it; the same input
 *    gives the same plans; ppdl_schedule_for_plan gives a chunked plan its schedule.
 */
#include "core/error.h"
#include "core/util.h"
#include "plan/cluster_model.h"
#include "plan/costmodel.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/reserve.h"
#include "plan/schedule_choice.h"
#include "plan/simulate.h"
#include "plan/solve_chunked.h"
#include "sched/schedule.h"

#include "tap.h"
#include "unit/schedule_lists.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double uni(ppdl_rng *g, double a, double b) { return a + (b - a) * ppdl_rng_uniform(g); }

/* L layers of random times and bytes; n_opts 1 (no recompute) unless rc */
static void random_costs(ppdl_rng *g, int L, int rc, ppdl_costs *c)
{
    ppdl_costs_alloc(c, L);
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &c->layers[l];
        snprintf(lc->name, sizeof lc->name, "layer%d", l);
        lc->fwd_ms = uni(g, 0.2, 3);
        lc->bwd_ms = 2 * lc->fwd_ms * uni(g, 0.8, 1.2);
        lc->bwd_input_ms = lc->bwd_ms * uni(g, 0.4, 0.6);
        lc->bwd_weight_ms = lc->bwd_ms - lc->bwd_input_ms;
        lc->param_bytes = uni(g, 1e5, 1e6);
        lc->out_bytes = uni(g, 1e4, 1e6);
        lc->opt_ms = uni(g, 0, 0.3);
        lc->stash_bytes[0] = uni(g, 1e5, 1e6);
        if (rc) { /* one option: keep a tenth, pay a forward again */
            lc->n_opts = 2;
            lc->stash_bytes[1] = lc->stash_bytes[0] / 10;
            lc->extra_ms[1] = lc->fwd_ms;
            lc->weight_extra_ms[1] = 0;
        }
    }
    c->split_given = 1;
}

static void random_cluster(ppdl_rng *g, int N, ppdl_cluster_model *cl)
{
    ppdl_cluster_model_alloc(cl, N);
    for (int a = 0; a < N; a++) {
        cl->mem[a] = 1e15;
        cl->speed[a] = uni(g, 0.5, 1.5);
        for (int b = 0; b < N; b++) {
            cl->bw[a * N + b] = a == b ? 1e12 : uni(g, 1e8, 1e10);
            cl->lat[a * N + b] = a == b ? 0 : uni(g, 1e-6, 1e-4);
        }
    }
}

static const int kinds[3] = {PPDL_SCHED_INTERLEAVED, PPDL_SCHED_INTERLEAVED, PPDL_SCHED_ZB_V};
static const int kind_v[3] = {2, 3, 2};

/* the least T over every cut of the skeleton p (S stages, ranks kept), options 0 */
static double best_cut(const ppdl_costs *c, const ppdl_cluster_model *cl, int M, int schedule, ppdl_plan *p)
{
    int S = p->S, L = c->L;
    int *cut = ppdl_xmalloc((size_t)(S + 1) * sizeof(int)); /* stage s: cut[s]..cut[s+1]-1 */
    for (int s = 0; s <= S; s++) cut[s] = s;
    cut[S] = L;
    double best = INFINITY;
    for (;;) {
        for (int s = 0; s < S; s++) {
            p->stages[s].first = cut[s];
            p->stages[s].last = cut[s + 1] - 1;
            free(p->stages[s].recompute);
            p->stages[s].recompute = ppdl_xcalloc((size_t)(cut[s + 1] - cut[s]), sizeof(int));
        }
        ppdl_cost_eval ev;
        char err[PPDL_ERR_LEN];
        if (ppdl_cost_evaluate(c, cl, M, schedule, p, &ev, err, sizeof err) == 0) {
            if (ev.T < best) best = ev.T;
            ppdl_cost_eval_free(&ev);
        }
        /* the next cut: the last boundary that can move right does, those after it
         * follow as far left as they can */
        int b = S - 1;
        while (b >= 1 && cut[b] + 1 > L - (S - b)) b--;
        if (b < 1) break;
        cut[b]++;
        for (int t = b + 1; t < S; t++) cut[t] = cut[t - 1] + 1;
    }
    free(cut);
    return best;
}

static void test_against_every_cut(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 22);
    int cases = 0, equal = 0, below = 0, far = 0, own = 0, ls_cases = 0, ls_equal = 0, ls_below = 0;
    double worst = 1, ls_worst = 1, ls_sum = 0;
    int pick_cases = 0, pick_ok = 0, pick_faster = 0;
    for (int k = 0; k < 150; k++) {
        int ki = k % 3, N = 2 + (k / 3) % 2, v = kind_v[ki], L = v * N + (int)(ppdl_rng_u64(&g) % 4);
        if (v * N > 10) L = v * N + 1; /* every cut stays cheap to enumerate */
        int M = 1 + (int)(ppdl_rng_u64(&g) % (uint64_t)(2 * N));
        ppdl_costs c;
        ppdl_cluster_model cl;
        random_costs(&g, L, 0, &c);
        random_cluster(&g, N, &cl);
        ppdl_plan p, sk;
        char err[PPDL_ERR_LEN];
        ppdl_solve_opts ex;
        ppdl_solve_opts_default(&ex);
        ex.chunked_sim_pick = 0; /* the search's own cut: its T against every cut's */
        ex.placement = 0;        /* ... on the ranks in order, as best_cut's */
        int rc = ppdl_solve_chunked(&c, &cl, M, kinds[ki], v, &ex, &p, NULL, NULL, err, sizeof err);
        ppdl_plan_uniform_chunked(L, N, v, kinds[ki] == PPDL_SCHED_ZB_V, &sk, err, sizeof err);
        double opt = best_cut(&c, &cl, M, kinds[ki], &sk);
        /* the default: the simulator picks among the search's cut and the starting cuts */
        ppdl_plan d;
        if (rc == 0 && ppdl_solve_chunked(&c, &cl, M, kinds[ki], v, NULL, &d, NULL, NULL, err, sizeof err) == 0) {
            double sd = ppdl_simulated_ms(&c, &cl, &d, M, kinds[ki]), sp = ppdl_simulated_ms(&c, &cl, &p, M, kinds[ki]);
            pick_cases++;
            pick_ok += sd <= sp * (1 + 1e-9);
            pick_faster += sd < sp * (1 - 1e-9);
            ppdl_plan_free(&d);
        }
        /* the local search alone on the same case */
        ppdl_solve_opts lo;
        ppdl_solve_opts_default(&lo);
        lo.chunked_every_cut = 0;
        lo.chunked_sim_pick = 0;
        lo.placement = 0;
        ppdl_plan q;
        if (ppdl_solve_chunked(&c, &cl, M, kinds[ki], v, &lo, &q, NULL, NULL, err, sizeof err) == 0) {
            double r = q.predicted_iter_ms / opt;
            ls_cases++;
            ls_equal += r <= 1 + 1e-9;
            ls_below += r < 1 - 1e-9;
            ls_sum += r;
            if (r > ls_worst) ls_worst = r;
            ppdl_plan_free(&q);
        }
        if (rc == 0) {
            cases++;
            double r = p.predicted_iter_ms / opt;
            equal += r <= 1 + 1e-9;
            below += r < 1 - 1e-9;
            far += r > 1.02;
            if (r > worst) worst = r;
            own += fabs(ppdl_cost_apply(&c, &cl, M, kinds[ki], &p) - p.predicted_iter_ms) <= 1e-9 * opt;
            ppdl_plan_free(&p);
        } else {
            diag("case %d: %s", k, err);
        }
        ppdl_plan_free(&sk);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    ok(cases == 150, "the search plans every small case (%d of 150)", cases);
    ok(below == 0, "its T is never below the best cut's (%d below)", below);
    ok(far == 0 && equal == cases, "few cuts, every one tried: the best cut's T in every case (%d of %d; worst "
       "%.4fx)", equal, cases, worst);
    ok(own == cases, "the plan's T is the cost model's own (%d of %d)", own, cases);
    ok(pick_cases == cases && pick_ok == cases, "the simulator's pick never simulates slower than the search's cut "
       "(%d of %d; faster in %d)", pick_ok, pick_cases, pick_faster);
    /* the local search (what plans too many cuts to try) on the same cases: measured
     * 150 of 150 within 8%, mean 1.003x, equal in 138 (this seed) */
    ok(ls_cases == 150 && ls_below == 0 && ls_worst <= 1.10,
       "the local search alone: never below the best cut, within 10%% in every case (worst %.4fx, mean %.4fx, equal "
       "in %d of %d)", ls_worst, ls_cases ? ls_sum / ls_cases : 0, ls_equal, ls_cases);
    ok(ls_equal * 10 >= ls_cases * 8, "... and equal to it (1e-9) in at least 80%% of them: %d of %d", ls_equal,
       ls_cases);
}

static void test_vs_uniform(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 7);
    int cases = 0, not_worse = 0, placed = 0, covered = 0, better_n = 0, sim_better = 0;
    for (int k = 0; k < 60; k++) {
        int ki = k % 3, N = 2 + (int)(ppdl_rng_u64(&g) % 5), v = kind_v[ki];
        int L = v * N + (int)(ppdl_rng_u64(&g) % 20), M = 1 + (int)(ppdl_rng_u64(&g) % (uint64_t)(3 * N));
        ppdl_costs c;
        ppdl_cluster_model cl;
        random_costs(&g, L, 0, &c);
        random_cluster(&g, N, &cl);
        ppdl_plan p, u;
        char err[PPDL_ERR_LEN];
        ppdl_solve_opts ex;
        ppdl_solve_opts_default(&ex);
        ex.chunked_sim_pick = 0;
        ex.placement = 0; /* the uniform cut's ranks */
        ppdl_plan q;
        int rc = ppdl_solve_chunked(&c, &cl, M, kinds[ki], v, NULL, &p, NULL, NULL, err, sizeof err);
        int rq = ppdl_solve_chunked(&c, &cl, M, kinds[ki], v, &ex, &q, NULL, NULL, err, sizeof err);
        ppdl_plan_uniform_chunked(L, N, v, kinds[ki] == PPDL_SCHED_ZB_V, &u, err, sizeof err);
        double Tu = ppdl_cost_apply(&c, &cl, M, kinds[ki], &u), Su = ppdl_simulated_ms(&c, &cl, &u, M, kinds[ki]);
        if (rc == 0 && rq == 0) {
            cases++;
            double Sp = ppdl_simulated_ms(&c, &cl, &p, M, kinds[ki]);
            not_worse += q.predicted_iter_ms <= Tu * (1 + 1e-12) && Sp <= Su * (1 + 1e-9);
            better_n += q.predicted_iter_ms < Tu * (1 - 1e-3);
            sim_better += Sp < Su * (1 - 1e-3);
            ppdl_plan_free(&q);
            int on = p.S == v * N && ppdl_plan_chunk_order_is(&p, kinds[ki] == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V
                                                                                             : PPDL_CHUNKS_ROUND_ROBIN);
            int cov = p.stages[0].first == 0 && p.stages[p.S - 1].last == L - 1;
            for (int s = 1; s < p.S && cov; s++) cov = p.stages[s].first == p.stages[s - 1].last + 1;
            placed += on;
            covered += cov;
        }
        if (rc == 0) ppdl_plan_free(&p);
        if (rq == 0 && rc != 0) ppdl_plan_free(&q);
        ppdl_plan_free(&u);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    ok(cases == 60 && not_worse == 60, "never worse than the uniform cut: the search's T and the picked plan's "
       "simulated step, %d of %d (T better by > 0.1%% in %d, the simulated step in %d)", not_worse, cases, better_n,
       sim_better);
    ok(placed == cases && covered == cases, "every plan in its schedule's order (%d), every layer once in order (%d)",
       placed, covered);
}

/* 4 ranks numbered cyclically over 2 nodes (0 and 2 on one, 1 and 3 on the other),
 * 100x slower across: in order, every neighbour pair crosses; the planner's order
 * crosses twice (the fewest a ring or a V can) */
static void test_placement(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 11);
    int N = 4, L = 16, M = 8, found = 0, faster = 0, runs = 0;
    for (int ki = 0; ki < 3; ki++) {
        int v = kind_v[ki];
        ppdl_costs c;
        ppdl_cluster_model cl;
        random_costs(&g, L, 0, &c);
        for (int l = 0; l < L; l++) c.layers[l].out_bytes = 1e7; /* messages that matter */
        random_cluster(&g, N, &cl);
        for (int a = 0; a < N; a++) {
            cl.speed[a] = 1;
            for (int b = 0; b < N; b++) cl.bw[a * N + b] = a == b ? 1e12 : (a % 2 == b % 2) ? 1e11 : 1e9;
        }
        ppdl_plan p, q;
        char err[PPDL_ERR_LEN];
        ppdl_solve_opts in_order;
        ppdl_solve_opts_default(&in_order);
        in_order.placement = 0;
        int rc = ppdl_solve_chunked(&c, &cl, M, kinds[ki], v, NULL, &p, NULL, NULL, err, sizeof err);
        int rq = ppdl_solve_chunked(&c, &cl, M, kinds[ki], v, &in_order, &q, NULL, NULL, err, sizeof err);
        if (rc == 0 && rq == 0) {
            runs++;
            int crossings = 0; /* position neighbours on different nodes */
            for (int s = 0; s + 1 < N; s++) crossings += p.stages[s].rank % 2 != p.stages[s + 1].rank % 2;
            found += crossings <= 2 && ppdl_plan_chunk_order_is(&p, kinds[ki] == PPDL_SCHED_ZB_V);
            double sp = ppdl_simulated_ms(&c, &cl, &p, M, kinds[ki]), sq = ppdl_simulated_ms(&c, &cl, &q, M, kinds[ki]);
            faster += sp < sq && p.predicted_iter_ms < q.predicted_iter_ms;
            diag("%s v=%d: ranks %d %d %d %d, T %.2f simulated %.2f; in order T %.2f simulated %.2f",
                 ppdl_schedule_name(kinds[ki]), v, p.stages[0].rank, p.stages[1].rank, p.stages[2].rank,
                 p.stages[3].rank, p.predicted_iter_ms, sp, q.predicted_iter_ms, sq);
            ppdl_plan_free(&p);
            ppdl_plan_free(&q);
        }
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    ok(runs == 3 && found == 3, "ranks numbered cyclically over 2 nodes: the plan's positions cross between the nodes "
       "at most twice, in the schedule's order (%d of %d)", found, runs);
    ok(faster == runs, "... and its T and simulated step beat the ranks in order (%d of %d)", faster, runs);
}

static void test_memory(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 5);
    int N = 3, v = 2, L = 12, M = 6;
    ppdl_costs c;
    ppdl_cluster_model cl;
    random_costs(&g, L, 1, &c);
    random_cluster(&g, N, &cl);
    char err[PPDL_ERR_LEN];
    ppdl_plan p;
    /* the uniform cut's memory with option 0, and with option 1 everywhere */
    ppdl_plan u;
    ppdl_plan_uniform_chunked(L, N, v, 0, &u, err, sizeof err);
    ppdl_cost_eval ev;
    ppdl_cost_evaluate(&c, &cl, M, PPDL_SCHED_INTERLEAVED, &u, &ev, err, sizeof err);
    double need0 = 0;
    for (int s = 0; s < u.S; s++) need0 = fmax(need0, ev.mem_bytes[s] + ev.mem_bytes[(s + N) % u.S]);
    ppdl_cost_eval_free(&ev);
    for (int s = 0; s < u.S; s++)
        for (int l = u.stages[s].first; l <= u.stages[s].last; l++) u.stages[s].recompute[l - u.stages[s].first] = 1;
    ppdl_cost_evaluate(&c, &cl, M, PPDL_SCHED_INTERLEAVED, &u, &ev, err, sizeof err);
    double need1 = 0;
    for (int s = 0; s < u.S; s++) need1 = fmax(need1, ev.mem_bytes[s] + ev.mem_bytes[(s + N) % u.S]);
    ppdl_cost_eval_free(&ev);
    ppdl_plan_free(&u);
    for (int r = 0; r < N; r++) cl.mem[r] = (need0 + need1) / 2; /* between the two */
    int rc = ppdl_solve_chunked(&c, &cl, M, PPDL_SCHED_INTERLEAVED, v, NULL, &p, NULL, NULL, err, sizeof err);
    int fits = rc == 0 && p.feasible, uses = 0;
    if (rc == 0) {
        ppdl_cost_evaluate(&c, &cl, M, PPDL_SCHED_INTERLEAVED, &p, &ev, err, sizeof err);
        for (int r = 0; r < N; r++) {
            double mem = 0;
            for (int s = 0; s < p.S; s++) mem += p.stages[s].rank == r ? ev.mem_bytes[s] : 0;
            fits &= mem <= cl.mem[r];
        }
        ppdl_cost_eval_free(&ev);
        for (int s = 0; s < p.S; s++)
            for (int l = 0; l <= p.stages[s].last - p.stages[s].first; l++) uses += p.stages[s].recompute[l] > 0;
    } else {
        diag("%s", err);
    }
    ok(fits && uses > 0, "a limit between option 0's and recompute's memory: the plan fits every rank (%d layers "
       "recomputed)", uses);
    if (rc == 0) ppdl_plan_free(&p);
    for (int r = 0; r < N; r++) cl.mem[r] = need1 / 50; /* nothing fits */
    rc = ppdl_solve_chunked(&c, &cl, M, PPDL_SCHED_INTERLEAVED, v, NULL, &p, NULL, NULL, err, sizeof err);
    ok(rc == -1 && strstr(err, "no plan fits") && p.S == v * N && !p.feasible,
       "a limit nothing fits: -1, the least-over plan (%d stages) and the reason (%s)", p.S, err);
    ppdl_plan_free(&p);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

static void test_refusals(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 9);
    ppdl_costs c;
    ppdl_cluster_model cl;
    random_costs(&g, 7, 0, &c);
    random_cluster(&g, 2, &cl);
    ppdl_plan p;
    char err[PPDL_ERR_LEN] = "";
    int rc = ppdl_solve_chunked(&c, &cl, 4, PPDL_SCHED_INTERLEAVED, 4, NULL, &p, NULL, NULL, err, sizeof err);
    ok(rc == -1 && p.S == 0 && strstr(err, "7 layers"), "8 stages of 7 layers: refused (%s)", err);
    rc = ppdl_solve_chunked(&c, &cl, 4, PPDL_SCHED_1F1B, 2, NULL, &p, NULL, NULL, err, sizeof err);
    ok(rc == -1 && p.S == 0 && strstr(err, "one stage per rank"), "1f1b is not chunked: refused (%s)", err);
    rc = ppdl_solve_chunked(&c, &cl, 4, PPDL_SCHED_ZB_V, 3, NULL, &p, NULL, NULL, err, sizeof err);
    ok(rc == -1 && p.S == 0 && strstr(err, "zb-v holds 2"), "zb-v with 3 stages per rank: refused (%s)", err);
    /* a tied weight: planned under both schedules, its exchange in T (between ranks 0
     * and 1 under interleaved; none under zb-v, whose rank 0 holds both ends) and its
     * other part in both ends' memory: the plan's stages evaluated with and without */
    for (int ki = 0; ki < 2; ki++) {
        int kind = ki ? PPDL_SCHED_ZB_V : PPDL_SCHED_INTERLEAVED;
        err[0] = 0;
        c.tied_bytes = 1000;
        rc = ppdl_solve_chunked(&c, &cl, 4, kind, 2, NULL, &p, NULL, NULL, err, sizeof err);
        ppdl_cost_eval e1, e0;
        int erc = rc ? -1 : ppdl_cost_evaluate(&c, &cl, 4, kind, &p, &e1, err, sizeof err);
        c.tied_bytes = 0;
        int erc0 = erc ? -1 : ppdl_cost_evaluate(&c, &cl, 4, kind, &p, &e0, err, sizeof err);
        int S = p.S;
        ok(rc == 0 && S == 4 && erc == 0 && erc0 == 0 && (ki ? e1.tie == 0 : e1.tie > 0) && e1.feasible &&
               e1.mem_bytes[0] - e0.mem_bytes[0] == 1000 && e1.mem_bytes[S - 1] - e0.mem_bytes[S - 1] == 1000 &&
               fabs(e1.T - e0.T - e1.tie) < 1e-9,
           "%s, a tied weight: planned, %d stages, its exchange %.4f ms in T, +1000 bytes on stage 0 and %d (%s)",
           ppdl_schedule_name(kind), S, erc ? 0 : e1.tie, S - 1, err);
        if (!erc) ppdl_cost_eval_free(&e1);
        if (!erc0) ppdl_cost_eval_free(&e0);
        if (!rc) ppdl_plan_free(&p);
    }
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

static void test_reserve_slots(void)
{
    int cases = 0, held = 0;
    for (int ki = 0; ki < 3; ki++)
        for (int v = kind_v[ki]; v <= (ki == 2 ? 2 : PPDL_MAX_CHUNKS); v++)
            for (int N = 1; N <= 8; N++)
                for (int M = 1; M <= 16; M++) {
                    int bound = ppdl_reserve_slots_chunked(kinds[ki], N, v, M), worst = 0;
                    for (int r = 0; r < N; r++) {
                        ppdl_rank_schedule rs;
                        char err[PPDL_ERR_LEN];
                        if (rank_of(kinds[ki], N, v, M, r, &rs, err, sizeof err)) continue;
                        int sum = 0;
                        for (int k = 0; k < rs.n_stages; k++) sum += ppdl_schedule_max_in_flight(&rs.lists[k]);
                        if (sum > worst) worst = sum;
                        ppdl_rank_schedule_free(&rs);
                    }
                    cases++;
                    held += worst <= bound;
                    if (worst > bound)
                        diag("%s N=%d v=%d M=%d: a rank holds %d, bound %d", ppdl_schedule_name(kinds[ki]), N, v, M,
                             worst, bound);
                }
    ok(held == cases, "the chunked reserve's slots bound every rank's micro-batches in flight: %d of %d", held, cases);
}

/* N ranks of speed 1, fast equal links, L equal layers, memory for a pipeline but not
 * for replicas: 1F1B's bubble (N-1)/(M+N-1) is what interleaving divides */
static void interleaved_case(int N, int L, ppdl_costs *c, ppdl_cluster_model *cl)
{
    ppdl_costs_alloc(c, L);
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &c->layers[l];
        snprintf(lc->name, sizeof lc->name, "block%d", l);
        lc->fwd_ms = 1;
        lc->bwd_ms = 2;
        lc->bwd_input_ms = lc->bwd_weight_ms = 1;
        lc->param_bytes = 1e6;
        lc->out_bytes = 1e3;
        lc->stash_bytes[0] = 1e5;
    }
    c->split_given = 1;
    ppdl_cluster_model_alloc(cl, N);
    for (int a = 0; a < N; a++) {
        cl->mem[a] = 4e6 * (L / N + 2) + 1e5 * L; /* a rank holds about L / N + 2 layers: no replicas */
        for (int b = 0; b < N; b++) cl->bw[a * N + b] = 1e11, cl->lat[a * N + b] = a == b ? 0 : 1e-6;
    }
}

static void test_auto(void)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    char err[PPDL_ERR_LEN], line[512], name[32];
    /* built for interleaving: 4 ranks, 24 equal layers, M = 4 */
    interleaved_case(4, 24, &c, &cl);
    ppdl_schedule_choice ch;
    int rc = ppdl_choose_schedule(&c, &cl, 4, "ppdl", NULL, 0, &ch, err, sizeof err);
    int solved = 0;
    for (int k = PPDL_AUTO_ONE; k < PPDL_AUTO_N; k++) solved += ch.opt[k].rc == 0 && ppdl_plan_chunks(&ch.opt[k].plan) == ch.opt[k].chunks;
    ok(solved == PPDL_AUTO_N - PPDL_AUTO_ONE, "every chunked candidate solved, each with its own stages per rank (%d)",
       solved);
    int w = ch.chosen, least = rc == 0 && w >= PPDL_AUTO_ONE;
    for (int k = 0; k < PPDL_AUTO_N && least; k++) least = ch.opt[k].rc != 0 || k == w || ch.opt[w].T < ch.opt[k].T;
    ok(least && ch.chunked_sim_ms > 0 && ch.chunked_sim_ms < ch.one_sim_ms,
       "equal layers, fast links, M = N: a chunked plan is taken (%s, T %.2f), the least T, and the simulator agrees "
       "(%.2f against %.2f)", w >= 0 ? ppdl_auto_name(w, name, sizeof name) : "none", w >= 0 ? ch.opt[w].T : 0,
       ch.chunked_sim_ms, ch.one_sim_ms);
    ppdl_schedule_choice_line(&ch, line, sizeof line);
    ok(strstr(line, "the simulator agrees") && strstr(line, "interleaved v=2"), "the choice line: %s", line);
    /* the same input, the same plans */
    ppdl_schedule_choice ch2;
    ppdl_choose_schedule(&c, &cl, 4, "ppdl", NULL, 0, &ch2, err, sizeof err);
    int same = ch2.chosen == ch.chosen;
    for (int k = 0; k < PPDL_AUTO_N && same; k++) {
        char *a = ch.opt[k].plan.S ? ppdl_plan_to_json(&ch.opt[k].plan) : NULL;
        char *b = ch2.opt[k].plan.S ? ppdl_plan_to_json(&ch2.opt[k].plan) : NULL;
        same = (!a && !b) || (a && b && !strcmp(a, b));
        free(a);
        free(b);
    }
    ok(same, "deterministic: the same plans and choice again");
    /* a chunked plan given: its schedule */
    if (w >= PPDL_AUTO_ONE) {
        double T = 0;
        int s = ppdl_schedule_for_plan(&c, &cl, 4, &ch.opt[w].plan, &T, err, sizeof err);
        ok(s == ch.opt[w].schedule && fabs(T - ch.opt[w].T) <= 1e-9 * T,
           "ppdl_schedule_for_plan on the chunked plan: %s, T %.2f", s >= 0 ? ppdl_schedule_name(s) : err, T);
    } else {
        ok(0, "ppdl_schedule_for_plan on the chunked plan: no chunked plan taken");
    }
    ppdl_schedule_choice_free(&ch2);
    ppdl_schedule_choice_free(&ch);
    /* the run cannot hold several stages per rank: they are out, with the reason */
    ppdl_solve_opts o;
    ppdl_solve_opts_default(&o);
    o.auto_chunked = 0;
    rc = ppdl_choose_schedule(&c, &cl, 4, "ppdl", &o, 0, &ch, err, sizeof err);
    int out = rc == 0 && ch.chosen < PPDL_AUTO_ONE;
    for (int k = PPDL_AUTO_ONE; k < PPDL_AUTO_N; k++)
        out &= ch.opt[k].rc != 0 && ch.opt[k].plan.S == 0 && strstr(ch.opt[k].why, "not a candidate");
    ok(out, "auto_chunked = 0: no chunked candidate (%s), %s taken", ch.opt[PPDL_AUTO_ONE].why,
       ch.chosen >= 0 ? ppdl_auto_name(ch.chosen, name, sizeof name) : "none");
    ppdl_schedule_choice_free(&ch);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);

    /* random heterogeneous cases: whatever is taken is consistent with the rule */
    ppdl_rng g;
    ppdl_rng_seed(&g, 31);
    int cases = 0, consistent = 0, taken = 0, vetoed = 0;
    for (int k = 0; k < 30; k++) {
        int N = 2 + (int)(ppdl_rng_u64(&g) % 4), L = 4 * N + (int)(ppdl_rng_u64(&g) % 12);
        int M = N + (int)(ppdl_rng_u64(&g) % (uint64_t)(2 * N));
        random_costs(&g, L, 1, &c);
        random_cluster(&g, N, &cl);
        if (ppdl_choose_schedule(&c, &cl, M, "ppdl", NULL, 0, &ch, err, sizeof err) == 0) {
            cases++;
            int cw = ch.chosen, fine = 1;
            if (cw >= PPDL_AUTO_ONE) { /* least T of all, and the simulator agrees */
                taken++;
                for (int q = 0; q < PPDL_AUTO_N; q++) fine &= ch.opt[q].rc != 0 || q == cw || !(ch.opt[q].T < ch.opt[cw].T);
                fine &= ch.chunked_sim_ms < ch.one_sim_ms && !ch.chunked_vetoed;
            } else { /* the least T of the four, and a chunked one better only if vetoed */
                for (int q = 0; q < PPDL_AUTO_ONE; q++) fine &= ch.opt[q].rc != 0 || q == cw || !(ch.opt[q].T < ch.opt[cw].T * (1 - 1e-9));
                int chunk_better = 0;
                for (int q = PPDL_AUTO_ONE; q < PPDL_AUTO_N; q++) chunk_better |= ch.opt[q].rc == 0 && ch.opt[q].T < ch.opt[cw].T * (1 - 1e-9);
                fine &= chunk_better == ch.chunked_vetoed;
                if (ch.chunked_vetoed) {
                    vetoed++;
                    ppdl_schedule_choice_line(&ch, line, sizeof line);
                    fine &= !(ch.chunked_sim_ms < ch.one_sim_ms) && strstr(line, "but the simulator plays it") != NULL;
                }
            }
            consistent += fine;
            ppdl_schedule_choice_free(&ch);
        }
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    ok(cases == 30 && consistent == cases, "30 random cases, every choice by the rule: %d of %d (chunked taken %d, a "
       "chunked T vetoed by the simulator %d)", consistent, cases, taken, vetoed);
}

/* 26 ranks (the four share their search: the chunked candidates run on a thread of
 * their own where there are two cores), 60 layers: the chunked plans are those each
 * schedule gets solved alone, bit for bit */
static void test_auto_thread(void)
{
    ppdl_rng g;
    ppdl_rng_seed(&g, 41);
    int N = 26, L = 60, M = 2 * N;
    ppdl_costs c;
    ppdl_cluster_model cl;
    random_costs(&g, L, 1, &c);
    random_cluster(&g, N, &cl);
    ppdl_schedule_choice ch;
    char err[PPDL_ERR_LEN], name[32];
    ppdl_solve_opts o;
    ppdl_solve_opts_default(&o);
    int rc = ppdl_choose_schedule(&c, &cl, M, "ppdl", NULL, 0, &ch, err, sizeof err);
    int shared = ppdl_auto_shares_search(N, L, "ppdl", &o), solved = 0, same = 0;
    for (int k = PPDL_AUTO_ONE; k < PPDL_AUTO_N; k++) {
        if (ch.opt[k].plan.S == 0) continue; /* interleaved v = 3, 4: more stages than layers */
        solved++;
        ppdl_solve_opts alone = o;
        alone.chunks = ppdl_auto_chunks[k];
        ppdl_plan p;
        /* a candidate taken as copies of a shorter pipeline: that solve alone */
        int copies = ppdl_plan_chunk_replicas(&ch.opt[k].plan);
        alone.chunked_restarts = copies > 1 ? 0 : alone.chunked_restarts;
        /* strided copies put copy 1's rank next to copy 0's */
        const ppdl_plan_stage *s0 = &ch.opt[k].plan.stages[0];
        int grouping = copies > 1 && s0->ranks[1] == s0->ranks[0] + 1 ? PPDL_COPIES_STRIDED : PPDL_COPIES_BLOCKS;
        int rs = copies > 1 ? ppdl_solve_chunked_copies(&c, &cl, M, ppdl_auto_schedules[k], alone.chunks, copies,
                                                        grouping, &alone, &p, NULL, NULL, err, sizeof err)
                            : ppdl_choose_plan(&c, &cl, M, ppdl_auto_schedules[k], "ppdl", &alone, &p, NULL, NULL, 1, NULL, NULL, NULL, err, sizeof err);
        if (copies > 1) diag("%s: %d copies", ppdl_auto_name(k, name, sizeof name), copies);
        if (rs == 0) {
            char *a = ppdl_plan_to_json(&p), *b = ppdl_plan_to_json(&ch.opt[k].plan);
            if (!strcmp(a, b)) same++;
            else diag("%s: auto's plan differs from the one solved alone", ppdl_auto_name(k, name, sizeof name));
            free(a);
            free(b);
            ppdl_plan_free(&p);
        }
    }
    ok(rc == 0 && shared && solved == 2 && same == solved, "26 ranks, 60 layers (the candidates share the search): "
       "%d chunked candidates solved, %d the same bits as solved alone", solved, same);
    ppdl_schedule_choice_free(&ch);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

int main(void)
{
    test_against_every_cut();
    test_vs_uniform();
    test_placement();
    test_memory();
    test_refusals();
    test_reserve_slots();
    test_auto();
    test_auto_thread();
    done_testing();
    return exit_status();
}
