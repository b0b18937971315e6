/* test_vocab.c — vocabulary parallelism in the planner (plan/vocab.h): the head cut by
 * its vocabulary's rows into one slice per rank, played as a zb-v V.
 *
 *  - Equal V (every block and every slice F = B = W = 1, free links): the cost model's T
 *    and the simulated step are both the unit play's step, N = 2..4, M = 1..8.
 *  - Random small instances (2-4 ranks, random layer times, links and speeds): the
 *    planned layout's T and its simulated step within 25% of each other (T is the
 *    chunked plans' rule, not a play: the worst of these 24 is 19.3%, 4 ranks, M = 8).
 *  - The slices: water-filled by speed (t = 1, 1 at speeds 1, 3: rows 100 and 300 of
 *    400), by what a stage lacks (t = 2, 1: 100 and 200 of 300), capped (50 and 350);
 *    in the search, a rank twice as fast takes 5x the rows of its stage's neighbour,
 *    and a rank short of memory has its slice capped to what it holds.
 *  - The choice (ppdl_plan_make, --schedule auto): on fast links a head of six blocks'
 *    work, too big to replicate cheaply, is cut (auto takes it); on slow links, where
 *    the hidden state's way down and back doubles each link's bytes, auto refuses it;
 *    off never plans it. Negative control: with the broadcast's bytes dropped (the
 *    head's in_bytes 0) the slow case takes it.
 *  - The plan JSON round-trips the slices, and a gap between slices is refused.
 */
#include "core/error.h"
#include "core/util.h"
#include "plan/cluster_model.h"
#include "plan/costmodel.h"
#include "plan/costs.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/simulate.h"
#include "plan/vocab.h"
#include "sched/schedule.h"

#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* layer 0 and the blocks 1..L-2: F = f, B = W = b; the head: F = hf, B = W = hb, V rows */
static void vocab_costs(ppdl_costs *c, int L, double f, double b, double hf, double hb, long V, double x,
                        double head_params)
{
    ppdl_costs_alloc(c, L);
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &c->layers[l];
        int head = l == L - 1;
        snprintf(lc->name, sizeof lc->name, head ? "head" : "block");
        lc->fwd_ms = head ? hf : f;
        lc->bwd_input_ms = lc->bwd_weight_ms = head ? hb : b;
        lc->bwd_ms = 2 * lc->bwd_input_ms;
        lc->out_bytes = head ? 1e6 : x;
        lc->in_bytes = l ? x : 0;
        lc->param_bytes = head ? head_params : 1000;
    }
    c->split_given = 1;
    c->vocab_size = V;
}

static void cluster(ppdl_cluster_model *cl, int N, double bw, double lat)
{
    ppdl_cluster_model_alloc(cl, N);
    for (int a = 0; a < N; a++) {
        cl->mem[a] = 1e15;
        for (int z = 0; z < N; z++) {
            cl->bw[a * N + z] = bw;
            cl->lat[a * N + z] = a == z ? 0 : lat;
        }
    }
}

/* stage s = layer s on rank s, slice s of V / N rows each */
static void equal_layout(int N, long V, ppdl_plan *p)
{
    memset(p, 0, sizeof *p);
    p->S = p->n_vocab = N;
    p->vocab_layer = N;
    p->vocab_size = V;
    p->stages = ppdl_xcalloc((size_t)N, sizeof *p->stages);
    p->vocab = ppdl_xcalloc((size_t)N, sizeof *p->vocab);
    for (int s = 0; s < N; s++) {
        p->stages[s].rank = s;
        p->stages[s].first = p->stages[s].last = s;
        p->stages[s].recompute = ppdl_xcalloc(1, sizeof(int));
        p->vocab[s].rank = s;
        p->vocab[s].first = s * (V / N);
        p->vocab[s].last = (s + 1) * (V / N) - 1;
    }
}

static void test_equal_v(void)
{
    int bad = 0, n = 0;
    for (int N = 2; N <= 4; N++)
        for (int M = 1; M <= 8; M++) {
            ppdl_costs c;
            ppdl_cluster_model cl;
            ppdl_plan p;
            /* N blocks of F = B = W = 1, the head N times one: each slice one unit */
            vocab_costs(&c, N + 1, 1, 1, N, N, 10L * N, 1, 1000);
            cluster(&cl, N, 1e300, 0);
            equal_layout(N, 10L * N, &p);
            ppdl_cost_eval ev;
            char err[PPDL_ERR_LEN];
            long unit = ppdl_schedule_unit_step_chunked(PPDL_SCHED_ZB_V, N, 2, M);
            double sim = ppdl_simulated_ms(&c, &cl, &p, M, PPDL_SCHED_ZB_V);
            if (ppdl_cost_evaluate(&c, &cl, M, PPDL_SCHED_ZB_V, &p, &ev, err, sizeof err)) {
                diag("N %d M %d: %s", N, M, err);
                bad++;
            } else {
                if (fabs(ev.T - (double)unit) > 1e-6 || fabs(sim - (double)unit) > 1e-6) {
                    if (bad < 3) diag("N %d M %d: T %.6f simulated %.6f unit step %ld", N, M, ev.T, sim, unit);
                    bad++;
                }
                ppdl_cost_eval_free(&ev);
            }
            n++;
            ppdl_plan_free(&p);
            ppdl_costs_free(&c);
            ppdl_cluster_model_free(&cl);
        }
    ok(bad == 0, "equal V, free links: T = simulated = the unit play's step (%d layouts, %d off)", n, bad);
}

static double urand(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static void test_random_agree(void)
{
    unsigned long long seed = 44;
    double worst = 0;
    int n = 0, planned = 0;
    for (int i = 0; i < 24; i++) {
        int N = 2 + (int)(urand(&seed) * 3), L = N + 1 + (int)(urand(&seed) * 4), M = 2 + (int)(urand(&seed) * 7);
        ppdl_costs c;
        ppdl_cluster_model cl;
        vocab_costs(&c, L, 1, 1, 1, 1, 1000, 1e6, 1e6);
        for (int l = 0; l < L; l++) {
            double f = 0.5 + urand(&seed) * (l == L - 1 ? 6 : 2);
            c.layers[l].fwd_ms = f;
            c.layers[l].bwd_input_ms = c.layers[l].bwd_weight_ms = f * (0.8 + 0.4 * urand(&seed));
            c.layers[l].bwd_ms = c.layers[l].bwd_input_ms + c.layers[l].bwd_weight_ms;
        }
        cluster(&cl, N, 1e9 * (0.5 + 10 * urand(&seed)), 1e-5);
        for (int r = 0; r < N; r++) cl.speed[r] = urand(&seed) < 0.3 ? 0.5 : 1;
        ppdl_plan p;
        char err[PPDL_ERR_LEN];
        if (ppdl_vocab_plan(&c, &cl, M, &p, err, sizeof err) == 0) {
            double sim = ppdl_simulated_ms(&c, &cl, &p, M, PPDL_SCHED_ZB_V);
            double d = fabs(p.predicted_iter_ms - sim) / sim;
            if (d > worst) worst = d;
            planned++;
        } else {
            diag("instance %d: %s", i, err);
        }
        n++;
        ppdl_plan_free(&p);
        ppdl_costs_free(&c);
        ppdl_cluster_model_free(&cl);
    }
    ok(planned == n && worst <= 0.25, "random instances: T and the simulated step within 25%% (worst %.1f%%, %d of %d "
       "planned)", 100 * worst, planned, n);
}

/* the search on 2 ranks of 2 blocks (F = B = W = 1) and a head of 6 ms over 1000 rows:
 * rank 1 twice as fast takes 833 rows (level 4: (4 - 3) + 2 (4 - 1.5) = 6); with equal
 * speeds and rank 1's memory holding about 300 rows of the head's 4 MB of state a row,
 * its slice is capped and the layout fits */
static void test_search_slices(void)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    ppdl_plan p;
    char err[PPDL_ERR_LEN];
    vocab_costs(&c, 3, 1, 1, 2, 2, 1000, 1e6, 1e9);
    cluster(&cl, 2, 1e10, 1e-5);
    cl.speed[1] = 2;
    int rc = ppdl_vocab_plan(&c, &cl, 4, &p, err, sizeof err);
    long n0 = rc ? -1 : p.vocab[0].last - p.vocab[0].first + 1, n1 = rc ? -1 : p.vocab[1].last - p.vocab[1].first + 1;
    ok(rc == 0 && n0 == 167 && n1 == 833, "a rank twice as fast takes 833 of 1000 rows (got %ld and %ld)", n0, n1);
    if (rc) diag("%s", err);
    ppdl_plan_free(&p);
    cl.speed[1] = 1;
    cl.mem[1] = 300 * 4e6 + 1e7;
    rc = ppdl_vocab_plan(&c, &cl, 4, &p, err, sizeof err);
    n1 = rc ? -1 : p.vocab[1].last - p.vocab[1].first + 1;
    ok(rc == 0 && n1 > 250 && n1 <= 302, "rank 1's memory caps its slice near 300 rows (not 500): %ld, and it fits", n1);
    if (rc) diag("%s", err);
    ppdl_plan_free(&p);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
}

static void test_slices(void)
{
    size_t b[3];
    double t1[2] = {1, 1}, v1[2] = {1, 3}, t2[2] = {2, 1}, v2[2] = {1, 1}, cap[2] = {50, INFINITY};
    ppdl_vocab_slices(t1, v1, NULL, 2, 4, 400, b);
    ok(b[0] == 0 && b[1] == 100 && b[2] == 400, "slices by speed: 100 and 300 rows (got %zu, %zu)", b[1] - b[0],
       b[2] - b[1]);
    ppdl_vocab_slices(t2, v2, NULL, 2, 3, 300, b);
    ok(b[1] == 100 && b[2] == 300, "slices by what a stage lacks: 100 and 200 rows (got %zu, %zu)", b[1], b[2] - b[1]);
    ppdl_vocab_slices(t1, v1, cap, 2, 4, 400, b);
    ok(b[1] == 50 && b[2] == 400, "a capped slice: 50 and 350 rows (got %zu, %zu)", b[1], b[2] - b[1]);
}

/* 4 ranks; the embedding and 4 blocks of F = B = W = 1, a head of 6 blocks' work whose
 * 1 GB of parameters no replica can sum cheaply; x = 1 MB between layers */
static int choice(double bw, int mode, double head_in, double *T)
{
    ppdl_costs c;
    ppdl_cluster_model cl;
    vocab_costs(&c, 6, 1, 1, 6, 6, 1000, 1e6, 1e9);
    c.layers[0].fwd_ms = c.layers[0].bwd_input_ms = c.layers[0].bwd_weight_ms = 0.05;
    c.layers[0].bwd_ms = 0.1;
    c.layers[5].in_bytes = head_in;
    cluster(&cl, 4, bw, 1e-5);
    ppdl_plan_request rq = {&c, &cl, 16, PPDL_SCHED_AUTO, "ppdl", NULL, 1, 1, mode};
    ppdl_plan_result res;
    char err[PPDL_ERR_LEN];
    int rc = ppdl_plan_make(&rq, &res, err, sizeof err);
    int taken = rc == 0 && res.vocab_taken && res.plan.n_vocab == 4;
    if (rc) diag("plan: %s", err);
    diag("bw %.0e, %s, head in_bytes %.0e: %s", bw, mode == PPDL_VOCAB_OFF ? "off" : "auto", head_in,
         res.vocab_why[0] ? res.vocab_why : "(not considered)");
    *T = res.predicted_ms;
    if (rc == 0 && !taken && res.plan.n_vocab) taken = -1;
    ppdl_plan_result_free(&res);
    ppdl_costs_free(&c);
    ppdl_cluster_model_free(&cl);
    return taken;
}

/* 10 ms a message of x: each link's bytes doubled (20 ms a micro-batch) outpace the
 * head's 18 ms, while one message's way (10) would not */
#define SLOW 1e8

static void test_choice(void)
{
    double T;
    int k = choice(1e10, PPDL_VOCAB_AUTO, 1e6, &T);
    ok(k == 1, "fast links, the head dominating: auto cuts it (T %.1f ms)", T);
    k = choice(SLOW, PPDL_VOCAB_AUTO, 1e6, &T);
    ok(k == 0, "slow links: auto keeps the head whole (T %.1f ms)", T);
    k = choice(1e10, PPDL_VOCAB_OFF, 1e6, &T);
    ok(k == 0, "off: never cut, even where it would win (T %.1f ms)", T);
    k = choice(SLOW, PPDL_VOCAB_AUTO, 0, &T);
    ok(k == 1, "negative control: the broadcast's bytes dropped, the slow case cuts it (T %.1f ms)", T);
}

static void test_json(void)
{
    ppdl_plan p, q;
    char err[PPDL_ERR_LEN];
    equal_layout(3, 30, &p);
    char *js = ppdl_plan_to_json(&p);
    int rc = ppdl_plan_parse(js, "plan", 4, 3, NULL, &q, err, sizeof err);
    if (rc) diag("%s", err);
    ok(rc == 0 && q.n_vocab == 3 && q.vocab_size == 30 && q.vocab[1].first == 10 && q.vocab[1].last == 19 &&
           q.vocab[2].rank == 2, "the plan JSON round-trips vocab_parallel");
    if (rc == 0) ppdl_plan_free(&q);
    free(js);
    p.vocab[1].first = 11; /* a gap after slice 0 */
    js = ppdl_plan_to_json(&p);
    rc = ppdl_plan_parse(js, "plan", 4, 3, NULL, &q, err, sizeof err);
    ok(rc != 0 && strstr(err, "vocab_parallel.slices[1]"), "a gap between slices is refused: %s", err);
    free(js);
    ppdl_plan_free(&p);
}

int main(void)
{
    plan(13);
    test_equal_v();
    test_random_agree();
    test_slices();
    test_search_slices();
    test_choice();
    test_json();
    return exit_status();
}
