/* test_simulate_chunked.c — the simulator and the cost model on chunked plans
 * (interleaved, zb-v: a rank holds several stages), against steps computed by hand.
 *
 *  - Equal stages (F = 1, B = 2 fused or B = W = 1, no recompute), free links: the
 *    simulated step is the unit play's (ppdl_schedule_unit_step_chunked) and the cost
 *    model's T too (its fill factor is made for that), for interleaved v = 2, 3 and zb-v
 *    on N = 1..4 ranks, M = 1..9; and interleaved's closed form 3Mv + 3(N - 1) where N
 *    divides M (docs/schedules.md), written here, not taken from the library.
 *  - One micro-batch through interleaved N = 2, v = 2 with latency lam on every link
 *    and optimizer steps of o per stage: a chain F0 F1 F2 F3 B3 B2 B1 B0 across 6
 *    messages, then each rank's two optimizer steps after its sends arrived: step
 *    12 + 6 lam + 2 o, rank 1's first update at 10 + 6 lam (its last gradient's arrival,
 *    not its sending at 10 + 5 lam).
 *  - A message between two stages of one rank costs nothing: zb-v on 2 ranks with a
 *    100 ms latency on every rank's link to itself still takes the unit step (the
 *    negative control: charged, it would be 200 ms or more longer).
 *  - Two ranks on one host of one core (processor sharing): with free links the core
 *    never idles, so the step is all the work, 3 M S.
 *  - k copies of a chunked pipeline (every stage k replicas): the cost model's T is one
 *    copy's T for ceil(M/k) micro-batches plus each rank's stages' all-reduces, by hand;
 *    with a free all-reduce the simulated step is one copy's, with a slow one it grows
 *    by one to v stages' sums.
 *  - The events name each stage with its rank (for ppdl-plan --timeline), M forwards per
 *    stage; the refusals: a chunked plan under 1f1b, a plan of one stage per rank under
 *    interleaved, a stage off its schedule's rank, a tied weight.
 */
#include "core/error.h"
#include "core/util.h"
#include "plan/cluster_model.h"
#include "plan/costmodel.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/simulate.h"
#include "sched/schedule.h"

#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* L equal layers: F = 1 ms, B = 2 ms (split 1 + 1), out_bytes 1 */
static void unit_costs(ppdl_costs *c, int L)
{
    ppdl_costs_alloc(c, L);
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &c->layers[l];
        snprintf(lc->name, sizeof lc->name, "layer%d", l);
        lc->fwd_ms = 1;
        lc->bwd_ms = 2;
        lc->bwd_input_ms = lc->bwd_weight_ms = 1;
        lc->out_bytes = 1;
    }
    c->split_given = 1;
}

/* N ranks of speed 1, links of latency lat_s and (almost) infinite bandwidth */
static void free_cluster(ppdl_cluster_model *cl, int N, double lat_s)
{
    ppdl_cluster_model_alloc(cl, N);
    for (int a = 0; a < N; a++) {
        cl->mem[a] = 1e15;
        cl->speed[a] = 1;
        for (int b = 0; b < N; b++) {
            cl->bw[a * N + b] = 1e300;
            cl->lat[a * N + b] = a == b ? 0 : lat_s;
        }
    }
}

static int chunked_plan(int kind, int L, int N, int v, ppdl_plan *p)
{
    char err[PPDL_ERR_LEN];
    int rc = ppdl_plan_uniform_chunked(L, N, v, kind == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN, p,
                                       err, sizeof err);
    if (rc) diag("plan: %s", err);
    return rc;
}

static void test_unit_steps(void)
{
    const int kinds[] = {PPDL_SCHED_INTERLEAVED, PPDL_SCHED_ZB_V};
    int cases = 0, closed = 0;
    for (int ki = 0; ki < 2; ki++)
        for (int N = 1; N <= 4; N++)
            for (int v = 2; v <= (kinds[ki] == PPDL_SCHED_ZB_V ? 2 : 3); v++)
                for (int M = 1; M <= 9; M++) {
                    int S = v * N;
                    const char *name = ppdl_schedule_name(kinds[ki]);
                    ppdl_costs c;
                    ppdl_cluster_model cl;
                    ppdl_plan p;
                    unit_costs(&c, S);
                    free_cluster(&cl, N, 0);
                    if (chunked_plan(kinds[ki], S, N, v, &p)) {
                        fail("%s N=%d v=%d: no plan", name, N, v);
                        continue;
                    }
                    ppdl_sim sim;
                    ppdl_cost_eval ev;
                    char err[PPDL_ERR_LEN];
                    long unit = ppdl_schedule_unit_step_chunked(kinds[ki], N, v, M);
                    if (ppdl_simulate(&c, &cl, &p, M, kinds[ki], 0, &sim, err, sizeof err)) {
                        fail("%s N=%d v=%d M=%d: the simulator refuses: %s", name, N, v, M, err);
                    } else {
                        if (sim.step_ms != (double)unit)
                            fail("%s N=%d v=%d M=%d: simulated %.9f ms, the unit play %ld", name, N, v, M, sim.step_ms,
                                 unit);
                        /* the hand-computed closed form */
                        if (kinds[ki] == PPDL_SCHED_INTERLEAVED && M % N == 0) {
                            closed++;
                            if (sim.step_ms != 3.0 * M * v + 3.0 * (N - 1))
                                fail("interleaved N=%d v=%d M=%d: simulated %.9f ms, 3Mv + 3(N-1) = %d", N, v, M,
                                     sim.step_ms, 3 * M * v + 3 * (N - 1));
                        }
                        ppdl_sim_free(&sim);
                    }
                    if (ppdl_cost_evaluate(&c, &cl, M, kinds[ki], &p, &ev, err, sizeof err)) {
                        fail("%s N=%d v=%d M=%d: the cost model refuses: %s", name, N, v, M, err);
                    } else {
                        if (fabs(ev.T - unit) > 1e-9 * unit)
                            fail("%s N=%d v=%d M=%d: cost model T %.9f, the unit play %ld", name, N, v, M, ev.T, unit);
                        ppdl_cost_eval_free(&ev);
                    }
                    cases++;
                    ppdl_plan_free(&p);
                    ppdl_costs_free(&c);
                    ppdl_cluster_model_free(&cl);
                }
    char what[200];
    snprintf(what, sizeof what, "equal stages, free links: simulated step = cost model T = the unit play (%d cases: "
             "interleaved v = 2, 3, zb-v, N 1..4, M 1..9), = 3Mv + 3(N-1) in the %d interleaved ones with N | M",
             cases, closed);
    report(what);
}

/* the first event of `kind` on `rank` */
static const ppdl_event_rec *first_ev(const ppdl_sim *sim, int rank, int kind)
{
    for (int i = 0; i < sim->n_ev; i++)
        if (sim->ev[i].rank == rank && sim->ev[i].kind == kind) return &sim->ev[i];
    return NULL;
}

static void test_chain(void)
{
    const double lam = 1.0, o = 0.5; /* ms */
    ppdl_costs c;
    ppdl_cluster_model cl;
    ppdl_plan p;
    unit_costs(&c, 4);
    for (int l = 0; l < 4; l++) c.layers[l].opt_ms = o;
    free_cluster(&cl, 2, lam / 1000);
    chunked_plan(PPDL_SCHED_INTERLEAVED, 4, 2, 2, &p);
    ppdl_sim sim;
    char err[PPDL_ERR_LEN];
    int rc = ppdl_simulate(&c, &cl, &p, 1, PPDL_SCHED_INTERLEAVED, 1, &sim, err, sizeof err);
    ok(rc == 0 && fabs(sim.step_ms - (12 + 6 * lam + 2 * o)) < 1e-9,
       "interleaved N = 2, v = 2, M = 1, latency %.0f ms, optimizer %.1f ms a stage: step %.3f ms = 12 + 6 lam + 2 o",
       lam, o, rc ? NAN : sim.step_ms);
    const ppdl_event_rec *u1 = rc ? NULL : first_ev(&sim, 1, PPDL_OP_OPTIMIZER);
    ok(u1 && fabs(u1->t0_ms - (10 + 6 * lam)) < 1e-9,
       "rank 1 updates once its last gradient arrived: at %.3f ms = 10 + 6 lam (sent at 10 + 5 lam)",
       u1 ? u1->t0_ms : NAN);
    if (!rc) ppdl_sim_free(&sim);
    ppdl_cost_eval ev;
    rc = ppdl_cost_evaluate(&c, &cl, 1, PPDL_SCHED_INTERLEAVED, &p, &ev, err, sizeof err);
    ok(rc == 0 && fabs(ev.T - (12 + 6 * lam + 2 * o)) < 1e-9, "the cost model's T on the chain: %.3f ms (sum 12 + 2 x "
       "3 links + the rank's 2 optimizer steps)", rc ? NAN : ev.T);
    if (!rc) ppdl_cost_eval_free(&ev);
    ppdl_plan_free(&p);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

static void test_same_rank_free(void)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    ppdl_plan p;
    int N = 2, M = 4;
    unit_costs(&c, 4);
    free_cluster(&cl, N, 0);
    for (int a = 0; a < N; a++) cl.lat[a * N + a] = 0.1; /* 100 ms to itself: never charged */
    chunked_plan(PPDL_SCHED_ZB_V, 4, N, 2, &p);
    ppdl_sim sim;
    char err[PPDL_ERR_LEN];
    long unit = ppdl_schedule_unit_step_chunked(PPDL_SCHED_ZB_V, N, 2, M);
    int rc = ppdl_simulate(&c, &cl, &p, M, PPDL_SCHED_ZB_V, 0, &sim, err, sizeof err);
    ok(rc == 0 && sim.step_ms == (double)unit, "zb-v, 2 ranks: stages 1 and 2 share rank 1, their messages cost "
       "nothing (step %.3f ms, the unit play %ld, with 100 ms on every rank's link to itself)",
       rc ? NAN : sim.step_ms, unit);
    if (!rc) ppdl_sim_free(&sim);
    ppdl_plan_free(&p);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

static void test_shared_core(void)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    ppdl_plan p;
    int N = 2, v = 2, M = 4, S = 4;
    unit_costs(&c, S);
    free_cluster(&cl, N, 0);
    const char *key[] = {"h", "h"}, *name[] = {"h", "h"};
    int cores[] = {1, 1};
    ppdl_hosts_build(&cl.hosts, N, key, name, cores);
    int bad = 0;
    for (int ki = 0; ki < 2; ki++) {
        int kind = ki ? PPDL_SCHED_ZB_V : PPDL_SCHED_INTERLEAVED;
        chunked_plan(kind, S, N, v, &p);
        ppdl_sim sim;
        char err[PPDL_ERR_LEN];
        int rc = ppdl_simulate(&c, &cl, &p, M, kind, 0, &sim, err, sizeof err);
        if (rc || fabs(sim.step_ms - 3.0 * M * S) > 1e-9) {
            bad++;
            diag("%s: %s %.9f, expected %d", ppdl_schedule_name(kind), rc ? err : "simulated", rc ? NAN : sim.step_ms,
                 3 * M * S);
        }
        if (!rc) ppdl_sim_free(&sim);
        ppdl_plan_free(&p);
    }
    ok(bad == 0, "interleaved and zb-v, 2 ranks on one core: the step is all the work, 3 M S = %d ms", 3 * M * S);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

static void test_events(void)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    ppdl_plan p;
    int N = 3, v = 2, M = 5, S = 6;
    unit_costs(&c, S);
    free_cluster(&cl, N, 1e-4);
    chunked_plan(PPDL_SCHED_INTERLEAVED, S, N, v, &p);
    ppdl_sim sim;
    char err[PPDL_ERR_LEN];
    int rc = ppdl_simulate(&c, &cl, &p, M, PPDL_SCHED_INTERLEAVED, 1, &sim, err, sizeof err);
    int fwd[6] = {0}, bwd[6] = {0}, opt[6] = {0}, wrong_rank = 0;
    for (int i = 0; !rc && i < sim.n_ev; i++) {
        const ppdl_event_rec *e = &sim.ev[i];
        if (e->stage < 0 || e->stage >= S) continue;
        wrong_rank += e->rank != e->stage % N;
        fwd[e->stage] += e->kind == PPDL_OP_FORWARD;
        bwd[e->stage] += e->kind == PPDL_OP_BACKWARD;
        opt[e->stage] += e->kind == PPDL_OP_OPTIMIZER;
    }
    int counts = !rc;
    for (int s = 0; s < S; s++) counts &= fwd[s] == M && bwd[s] == M && opt[s] == 1;
    ok(counts && wrong_rank == 0, "interleaved N = 3, v = 2, M = 5 recorded: each stage's %d forwards, %d backwards "
       "and its update, on its rank (s mod 3)", M, M);
    if (!rc) ppdl_sim_free(&sim);
    ppdl_plan_free(&p);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

/* expect both the simulator and the cost model to refuse, with `why` in the message */
static void refused(const ppdl_costs *c, const ppdl_cluster_model *cl, const ppdl_plan *p, int kind, const char *why,
                    const char *what)
{
    ppdl_sim sim;
    ppdl_cost_eval ev;
    char e1[PPDL_ERR_LEN] = "", e2[PPDL_ERR_LEN] = "";
    int r1 = ppdl_simulate(c, cl, p, 4, kind, 0, &sim, e1, sizeof e1);
    int r2 = ppdl_cost_evaluate(c, cl, 4, kind, p, &ev, e2, sizeof e2);
    if (!r1) ppdl_sim_free(&sim);
    if (!r2) ppdl_cost_eval_free(&ev);
    if (!ok(r1 && r2 && strstr(e1, why) && strstr(e2, why), "refused: %s (\"%s\")", what, e1))
        diag("  the cost model said \"%s\"", e2);
}

static void test_refusals(void)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    ppdl_plan p, one;
    char err[PPDL_ERR_LEN];
    unit_costs(&c, 4);
    free_cluster(&cl, 2, 0);
    chunked_plan(PPDL_SCHED_INTERLEAVED, 4, 2, 2, &p);
    refused(&c, &cl, &p, PPDL_SCHED_1F1B, "not 1f1b", "a chunked plan under 1f1b");
    ppdl_plan_uniform(4, 2, &one, err, sizeof err);
    refused(&c, &cl, &one, PPDL_SCHED_INTERLEAVED, "one per rank", "a plan of one stage per rank under interleaved");
    refused(&c, &cl, &p, PPDL_SCHED_ZB_V, "do not follow zb-v's order (stage 2N-1-s on the rank of stage s)",
            "the round-robin plan under zb-v");
    ppdl_plan_free(&p);
    ppdl_plan_free(&one);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

/* A tied weight on chunked plans: stage 0 and S-1 exchange their parts (pipe/tie.h),
 * between ranks 0 and 1 under interleaved (N = 2, S = 4: stage 3 on rank 1), on rank 0
 * alone under zb-v (a copy in memory, free). 1000 bytes at 1e6 B/s: under interleaved
 * the cost model's T grows by exactly 1 ms and the simulated step by more than 0 and
 * at most 1 ms (an end may already wait for the other); under zb-v neither moves;
 * each end's memory grows by the other part's buffer under both. */
static void test_tied(void)
{
    const int kinds[2] = {PPDL_SCHED_INTERLEAVED, PPDL_SCHED_ZB_V};
    for (int ki = 0; ki < 2; ki++) {
        ppdl_costs c;
        ppdl_cluster_model cl;
        ppdl_plan p;
        char err[PPDL_ERR_LEN] = "";
        unit_costs(&c, 4);
        free_cluster(&cl, 2, 0);
        cl.bw[0 * 2 + 1] = cl.bw[1 * 2 + 0] = 1e6;
        double dt = ki == 0 ? 1 : 0; /* the exchange's ms */
        chunked_plan(kinds[ki], 4, 2, 2, &p);
        ppdl_cost_eval e0, e1;
        ppdl_sim s0, s1;
        int rc = ppdl_cost_evaluate(&c, &cl, 4, kinds[ki], &p, &e0, err, sizeof err);
        rc |= ppdl_simulate(&c, &cl, &p, 4, kinds[ki], 0, &s0, err, sizeof err);
        c.tied_bytes = 1000;
        rc |= ppdl_cost_evaluate(&c, &cl, 4, kinds[ki], &p, &e1, err, sizeof err);
        rc |= ppdl_simulate(&c, &cl, &p, 4, kinds[ki], 0, &s1, err, sizeof err);
        if (!ok(rc == 0 && fabs(e1.T - e0.T - dt) < 1e-9 && e1.mem_bytes[0] - e0.mem_bytes[0] == 1000 &&
                    e1.mem_bytes[3] - e0.mem_bytes[3] == 1000 &&
                    (dt > 0 ? s1.step_ms > s0.step_ms : s1.step_ms == s0.step_ms) &&
                    s1.step_ms - s0.step_ms <= dt + 1e-9,
                "%s, tied weight of 1000 bytes at 1e6 B/s: T %.3f -> %.3f ms, stage 0's memory +%.0f, "
                "simulated %.3f -> %.3f ms", ppdl_schedule_name(kinds[ki]), e0.T, e1.T,
                e1.mem_bytes[0] - e0.mem_bytes[0], s0.step_ms, s1.step_ms))
            diag("  %s", err);
        if (!rc) {
            ppdl_cost_eval_free(&e0);
            ppdl_cost_eval_free(&e1);
            ppdl_sim_free(&s0);
            ppdl_sim_free(&s1);
        }
        ppdl_plan_free(&p);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
}

/* k copies of n ranks (copy q on ranks q n ..): inside a copy latency lat_s and endless
 * bandwidth, between copies bandwidth bw_x and latency lat_x (the all-reduce's links) */
static void copies_cluster(ppdl_cluster_model *cl, int k, int n, double lat_s, double bw_x, double lat_x)
{
    int N = k * n;
    free_cluster(cl, N, lat_s);
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++)
            if (a / n != b / n) {
                cl->bw[a * N + b] = bw_x;
                cl->lat[a * N + b] = lat_x;
            }
}

static int copies_plan(int kind, int L, int n, int v, int k, ppdl_plan *p)
{
    char err[PPDL_ERR_LEN];
    int rc = ppdl_plan_uniform_replicated(L, k * n, v, kind == PPDL_SCHED_ZB_V ? PPDL_CHUNKS_V : PPDL_CHUNKS_ROUND_ROBIN,
                                          k, p, err, sizeof err);
    if (rc) diag("plan: %s", err);
    return rc;
}

/* One copy of a chunked pipeline against k copies of it, by hand: interleaved, n = 2
 * ranks a copy, v = 2, 8 layers of 1e6 parameter bytes (2 a stage), M = 5 (copy 0 runs
 * 3), 1 ms latency inside a copy; between the copies 1e9 B/s and 0.1 ms. Each stage's
 * ring among its 2 replicas: 1000 (2 (2-1)/2 x 2e6 / 1e9 + 2 layers x 2 (2-1) x 1e-4)
 * = 2.4 ms, and each rank sums its 2 stages one after the other: T = one copy's T for 3
 * micro-batches on 2 ranks + 4.8 ms, exactly; each stage holds what one copy's list
 * holds for 3 micro-batches. */
static void test_copies_cost(void)
{
    const int n = 2, v = 2, k = 2, M = 5, M0 = 3, L = 8;
    ppdl_costs c;
    ppdl_cluster_model one_cl, cl;
    ppdl_plan one, p;
    unit_costs(&c, L);
    for (int l = 0; l < L; l++) c.layers[l].param_bytes = 1e6;
    free_cluster(&one_cl, n, 1e-3);
    copies_cluster(&cl, k, n, 1e-3, 1e9, 1e-4);
    chunked_plan(PPDL_SCHED_INTERLEAVED, L, n, v, &one);
    copies_plan(PPDL_SCHED_INTERLEAVED, L, n, v, k, &p);
    ppdl_cost_eval e1, ek;
    char err[PPDL_ERR_LEN] = "";
    int rc = ppdl_cost_evaluate(&c, &one_cl, M0, PPDL_SCHED_INTERLEAVED, &one, &e1, err, sizeof err);
    if (!rc) rc = ppdl_cost_evaluate(&c, &cl, M, PPDL_SCHED_INTERLEAVED, &p, &ek, err, sizeof err);
    int same_lists = !rc;
    for (int s = 0; !rc && s < p.S; s++)
        same_lists &= ek.in_flight[s] == e1.in_flight[s] && ek.mem_bytes[s] == e1.mem_bytes[s] &&
                      ek.replicas[s] == k && fabs(ek.allreduce_ms[s] - 2.4) < 1e-12;
    if (!ok(rc == 0 && fabs(ek.T - (e1.T + 4.8)) < 1e-9 * ek.T && fabs(ek.allreduce - 4.8) < 1e-12 && same_lists,
            "interleaved v = 2 in 2 copies of 2 ranks, M = 5: T %.6f ms = one copy's T for M0 = 3 (%.6f) + its ranks' "
            "2 all-reduces of 2.4 ms; each stage holds one copy's count", rc ? NAN : ek.T, rc ? NAN : e1.T))
        diag("  %s", err);
    /* more copies than micro-batches: refused, with the reason */
    ppdl_cost_eval ev;
    int r2 = ppdl_cost_evaluate(&c, &cl, 1, PPDL_SCHED_INTERLEAVED, &p, &ev, err, sizeof err);
    ok(r2 == -1 && strstr(err, "2 copies of the pipeline but a step has 1 micro-batches"),
       "refused: 2 copies for 1 micro-batch (\"%s\")", err);
    if (!r2) ppdl_cost_eval_free(&ev);
    if (!rc) {
        ppdl_cost_eval_free(&e1);
        ppdl_cost_eval_free(&ek);
    }
    ppdl_plan_free(&one);
    ppdl_plan_free(&p);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&one_cl);
    ppdl_cluster_model_free(&cl);
}

/* The simulator on k copies. With a free all-reduce (endless bandwidth and no latency
 * between the copies) the step is one copy's step for M0 = ceil(M/k) micro-batches on
 * n ranks, and so is the cost model's T (interleaved v = 2 and 3, zb-v; k = 2, 3; M = 7;
 * 1 ms inside a copy). With a slow one (1e6 B/s: 2 ms a stage of 2 layers of 1000 bytes
 * at k = 2) the step grows by at least one stage's sum (the last backward's rank still
 * sums after it) and at most a rank's v sums (all of them after its last backward). */
static void test_copies_sim(void)
{
    const struct { int kind, n, v, k; } cs[] = {
        {PPDL_SCHED_INTERLEAVED, 2, 2, 2}, {PPDL_SCHED_ZB_V, 2, 2, 2}, {PPDL_SCHED_INTERLEAVED, 2, 3, 3},
        {PPDL_SCHED_ZB_V, 3, 2, 2}};
    const int M = 7;
    int bad = 0, bad_slow = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        int n = cs[i].n, v = cs[i].v, k = cs[i].k, kind = cs[i].kind, L = 2 * v * n, M0 = (M + k - 1) / k;
        ppdl_costs c;
        ppdl_cluster_model one_cl, cl, slow;
        ppdl_plan one, p;
        unit_costs(&c, L);
        for (int l = 0; l < L; l++) c.layers[l].param_bytes = 1000;
        free_cluster(&one_cl, n, 1e-3);
        copies_cluster(&cl, k, n, 1e-3, 1e300, 0);
        copies_cluster(&slow, k, n, 1e-3, 1e6, 0);
        chunked_plan(kind, L, n, v, &one);
        copies_plan(kind, L, n, v, k, &p);
        char err[PPDL_ERR_LEN] = "";
        ppdl_sim s1, sk, ss;
        ppdl_cost_eval e1, ek, es;
        int rc = ppdl_simulate(&c, &one_cl, &one, M0, kind, 0, &s1, err, sizeof err);
        rc = rc ? rc : ppdl_simulate(&c, &cl, &p, M, kind, 0, &sk, err, sizeof err);
        rc = rc ? rc : ppdl_simulate(&c, &slow, &p, M, kind, 0, &ss, err, sizeof err);
        rc = rc ? rc : ppdl_cost_evaluate(&c, &one_cl, M0, kind, &one, &e1, err, sizeof err);
        rc = rc ? rc : ppdl_cost_evaluate(&c, &cl, M, kind, &p, &ek, err, sizeof err);
        rc = rc ? rc : ppdl_cost_evaluate(&c, &slow, M, kind, &p, &es, err, sizeof err);
        if (rc) {
            bad++;
            diag("%s n=%d v=%d k=%d: %s", ppdl_schedule_name(kind), n, v, k, err);
        } else {
            double ar = es.allreduce_ms[0], grow = ss.step_ms - sk.step_ms;
            if (fabs(sk.step_ms - s1.step_ms) > 1e-9 * s1.step_ms || fabs(ek.T - e1.T) > 1e-9 * e1.T) {
                bad++;
                diag("%s n=%d v=%d k=%d, free all-reduce: simulated %.9f against one copy's %.9f, T %.9f against %.9f",
                     ppdl_schedule_name(kind), n, v, k, sk.step_ms, s1.step_ms, ek.T, e1.T);
            }
            if (!(grow >= ar - 1e-9 && grow <= v * ar + 1e-9 && ar > 1) || fabs(es.T - ek.T - v * ar) > 1e-9 * es.T) {
                bad_slow++;
                diag("%s n=%d v=%d k=%d, all-reduce %.3f ms a stage: the step grows by %.6f ms, T by %.6f",
                     ppdl_schedule_name(kind), n, v, k, ar, grow, es.T - ek.T);
            }
            ppdl_sim_free(&s1);
            ppdl_sim_free(&sk);
            ppdl_sim_free(&ss);
            ppdl_cost_eval_free(&e1);
            ppdl_cost_eval_free(&ek);
            ppdl_cost_eval_free(&es);
        }
        ppdl_plan_free(&one);
        ppdl_plan_free(&p);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&one_cl);
        ppdl_cluster_model_free(&cl);
        ppdl_cluster_model_free(&slow);
    }
    ok(bad == 0, "k copies with a free all-reduce: simulated step and T = one copy's for M0 = ceil(M/k) (interleaved "
       "v = 2, 3, zb-v on 2 and 3 ranks a copy, k = 2, 3, M = 7)");
    ok(bad_slow == 0, "a slow all-reduce: the step grows by one stage's sum to a rank's v sums, T by the v sums");
}

int main(void)
{
    plan(16);
    test_unit_steps();
    test_chain();
    test_same_rank_free();
    test_shared_core();
    test_events();
    test_refusals();
    test_tied();
    test_copies_cost();
    test_copies_sim();
    return exit_status();
}
