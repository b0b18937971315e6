/* test_probe_stats.c — the probe's statistic (probe.h: the median of samples taken a
 * pass apart, more samples until they agree, directions re-measured when they differ
 * by more than 2x) and the node grouping (cluster.h), against injected outliers.
 *
 *   1. the statistic alone: one sample 20x too slow or too fast among five moves the
 *      median to a neighbour, never past it; the mean of the same samples is moved far
 *      (the negative control: the outlier is big enough to matter);
 *   2. when a pair counts as settled: too few samples, an outlier among three, two
 *      directions far apart, the bound on samples;
 *   3. simulated probes of the 2 x 2 network of scripts/cluster-emu (4 GB/s inside a
 *      node, 0.12 GB/s between: the measurements) run with the real rule:
 *      each sample is the true rate less 0-8% noise, and in every probe some samples
 *      are replaced by outliers (0.02x-0.5x or 2x-20x; one of them the misread,
 *      0.082 GB/s for an in-node link). Every link must be within 15% of its true rate
 *      and the grouping {0,1} {2,3} in all 500 probes; a probe keeping the mean of its
 *      samples instead (negative control) must fail some;
 *   4. the grouping of a matrix with one direction misread (the run): still
 *      {0,1} {2,3}; both directions of the link slow is a different network, and
 *      groups differently (the grouping does read the link);
 *   5. one speed per host for CPU ranks: ranks of rank 0's host get 1, another host's
 *      ranks the median of their measured speeds, whatever each measured;
 *   6. the pooled bandwidth (ppdl_probe_pooled_bw) against the stalls seen under
 *      scripts/cluster-emu --node-rate (perf/bench-ethernet's probes): a transfer that
 *      stalls ends on the VM's 4 ms timer tick, and then a whole tick later with
 *      probability 1/2, again and again. Every reading stalls with probability 1/2;
 *      2000 pairs of 4 samples (2 repetitions per size each, the probe's defaults):
 *      the pooled fit must be within 15% of the rate in every pair, the median of the
 *      samples' own fits (negative control) must not be; a sample 20x too fast or
 *      too slow is left out of the pool;
 *   7. the class check (ppdl_probe_class_outliers): on the 2 x 2 emulation's rates a
 *      link more than 10% off its class's median (inside a node, or between the two;
 *      slow or fast) is measured again, one 5-6% off is not, nor one already at
 *      max_samples.
 * Pure: no MPI ranks. */
#include "core/error.h"
#include "core/util.h"
#include "net/cluster.h"
#include "net/probe.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *groups(const ppdl_cluster_model *cl)
{
    static char buf[64];
    size_t len = 0;
    buf[0] = 0;
    for (int g = 0; g < cl->n_nodes; g++)
        for (int i = 0, first = 1; i < cl->N; i++)
            if (cl->node[i] == g) {
                len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", first ? (g ? "|" : "") : ",", i);
                first = 0;
            }
    return buf;
}

#define N 4
#define PROBES 500

static double truth(int i, int j) { return i / 2 == j / 2 ? 4e9 : 0.12e9; }

static double mean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s / n;
}

/* One simulated probe with the real rule; out: the bandwidth matrix. use_mean: keep
 * the mean of a link's samples instead of the median (the negative control). Returns
 * the number of passes. */
static int simulated_probe(ppdl_rng *rng, const ppdl_probe_opts *o, int use_mean, double *out)
{
    double s[N][N][16];
    int count[N][N] = {{0}}, need[N][N], passes = 0, left = 1;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) need[a][b] = a < b;
    /* the outliers of this probe: 1-3 samples anywhere, one of them maybe the issue's */
    int n_out = 1 + (int)(ppdl_rng_uniform(rng) * 3), oa[3], ob[3], ok_[3];
    double of[3];
    for (int q = 0; q < n_out; q++) {
        oa[q] = (int)(ppdl_rng_uniform(rng) * N);
        ob[q] = (oa[q] + 1 + (int)(ppdl_rng_uniform(rng) * (N - 1))) % N;
        ok_[q] = (int)(ppdl_rng_uniform(rng) * o->min_samples);
        double u = ppdl_rng_uniform(rng);
        of[q] = ppdl_rng_uniform(rng) < 0.5 ? 0.02 + 0.48 * u : 2 + 18 * u;
        if (q == 0 && ppdl_rng_uniform(rng) < 0.3) { oa[q] = 0; ob[q] = 1; of[q] = 0.082e9 / truth(0, 1); }
    }
    while (left) {
        passes++;
        for (int a = 0; a < N; a++)
            for (int b = a + 1; b < N; b++) {
                if (!need[a][b]) continue;
                int k = count[a][b]++;
                for (int d = 0; d < 2; d++) {
                    int x = d ? b : a, y = d ? a : b;
                    double v = truth(x, y) * (1 - 0.08 * ppdl_rng_uniform(rng));
                    for (int q = 0; q < n_out; q++)
                        if (oa[q] == x && ob[q] == y && ok_[q] == k) v = truth(x, y) * of[q];
                    s[x][y][k] = v;
                }
            }
        left = 0;
        for (int a = 0; a < N; a++)
            for (int b = a + 1; b < N; b++) {
                need[a][b] = !ppdl_probe_pair_settled(s[a][b], s[b][a], count[a][b], o);
                left += need[a][b];
            }
    }
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            int c = count[a < b ? a : b][a < b ? b : a];
            out[a * N + b] = a == b ? 1e12
                             : use_mean ? mean(s[a][b], c)
                                        : ppdl_probe_link_stat(s[a][b], c, o->agree).median;
        }
    return passes;
}

/* ---- 6. the pooled bandwidth ---- */
#define TICK 4e-3
#define STALL_RATE 374e6       /* B/s: 3 Gbit/s, cluster-emu --node-rate 3gbit */
#define STALL_LAT 30e-6

static const double stall_sizes[2] = {2 << 20, 8 << 20};

/* one timed round trip of `bytes` one way (8 bytes: the small one, never stalled) */
static double stalled_trip(ppdl_rng *rng, double bytes)
{
    double t = 2 * STALL_LAT + bytes / STALL_RATE;
    if (bytes > 8 && ppdl_rng_uniform(rng) < 0.5) {
        double t0 = TICK * ppdl_rng_uniform(rng); /* where the transfer began on the grid */
        t = (floor((t0 + t) / TICK) + 1) * TICK - t0;
        while (ppdl_rng_uniform(rng) < 0.5) t += TICK;
    }
    return t;
}

/* one sample of a pair (PPDL_PROBE_RES_LEN layout), each time the faster of 2 */
static void stalled_sample(ppdl_rng *rng, double *res)
{
    res[0] = fmin(stalled_trip(rng, 8), stalled_trip(rng, 8));
    for (int q = 0; q < 2; q++) {
        for (int d = 0; d < 2; d++) res[1 + 3 * q + d] = fmin(stalled_trip(rng, stall_sizes[q]), stalled_trip(rng, stall_sizes[q]));
        res[3 + 3 * q] = stall_sizes[q];
    }
}

/* a sample's own fit of direction dir: the single-sample pool */
static double own_fit(const double *res, int dir)
{
    double big = 1e30; /* any fit is within a factor 2 of itself */
    return ppdl_probe_pooled_bw(res, &big, 1, dir, 1e40);
}

/* the worst relative error of a probed matrix, and its grouping */
static double judge(const double *bw, char *grouping, size_t len)
{
    ppdl_cluster_model cl;
    ppdl_cluster_model_alloc(&cl, N);
    double worst = 0;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            cl.bw[a * N + b] = bw[a * N + b];
            if (a != b && fabs(bw[a * N + b] / truth(a, b) - 1) > worst) worst = fabs(bw[a * N + b] / truth(a, b) - 1);
        }
    ppdl_cluster_group_nodes(&cl, PPDL_NODE_RATIO);
    snprintf(grouping, len, "%s", groups(&cl));
    ppdl_cluster_model_free(&cl);
    return worst;
}

int main(void)
{
    plan(29);
    ppdl_probe_opts o;
    ppdl_probe_defaults(&o);

    /* ---- 1. the statistic ---- */
    double slow[5] = {1.00, 1.02, 0.98, 1.01, 0.05}, fast[5] = {1.00, 1.02, 0.98, 1.01, 20.0};
    ppdl_link_stat st = ppdl_probe_link_stat(slow, 5, 0.10);
    ok(st.median >= 0.98 && st.median <= 1.01 && st.agreeing == 4,
       "a sample 20x too slow among 5: median %.3f (between its neighbours), 4 agree", st.median);
    close_f(st.spread, (1.02 - 0.05) / st.median, 1e-12, 0, "spread = (largest - smallest) / median");
    st = ppdl_probe_link_stat(fast, 5, 0.10);
    ok(st.median >= 0.98 && st.median <= 1.01 && st.agreeing == 4, "a sample 20x too fast: median %.3f", st.median);
    ok(fabs(mean(slow, 5) - 1) > 0.15 && fabs(mean(fast, 5) - 1) > 0.15,
       "negative control: the means of the same samples are off by %.0f%% and %.0f%%", 100 * fabs(mean(slow, 5) - 1),
       100 * fabs(mean(fast, 5) - 1));

    /* ---- 2. settled ---- */
    double a3[3] = {1.0, 1.03, 0.97}, b3[3] = {1.01, 0.99, 1.0}, out3[3] = {1.0, 0.08, 1.02};
    ok(!ppdl_probe_pair_settled(a3, b3, 2, &o), "2 samples each way: not settled (min_samples %d)", o.min_samples);
    ok(ppdl_probe_pair_settled(a3, b3, 3, &o), "3 agreeing samples each way: settled");
    ok(!ppdl_probe_pair_settled(out3, b3, 3, &o), "an outlier among 3: not settled (another sample)");
    double a4[4] = {1.0, 0.08, 1.02, 0.99}, b4[4] = {1.01, 0.99, 1.0, 1.0};
    ok(ppdl_probe_pair_settled(a4, b4, 4, &o), "... settled once a 4th sample agrees with the majority");
    double far[3] = {0.3, 0.31, 0.29};
    ok(!ppdl_probe_pair_settled(far, b3, 3, &o), "directions 3.3x apart (> %.0fx): measured again", o.asym);
    double far7[7] = {0.3, 0.31, 0.29, 0.3, 0.3, 0.3, 0.3}, b7[7] = {1, 1, 1, 1, 1, 1, 1};
    ok(ppdl_probe_pair_settled(far7, b7, o.max_samples, &o), "... until max_samples (%d): a real asymmetry stays",
       o.max_samples);

    /* ---- 3. simulated probes with outliers ---- */
    ppdl_rng rng;
    ppdl_rng_seed(&rng, 20261202);
    int right = 0, within = 0, max_passes = 0, mean_bad = 0;
    double worst_all = 0, bw[N * N];
    char g[64];
    for (int p = 0; p < PROBES; p++) {
        int passes = simulated_probe(&rng, &o, 0, bw);
        if (passes > max_passes) max_passes = passes;
        double w = judge(bw, g, sizeof g);
        if (w > worst_all) worst_all = w;
        within += w <= 0.15;
        right += !strcmp(g, "0,1|2,3");
    }
    is_int(within, PROBES, "%d probes with 1-3 outliers each: every link within 15%% of its rate (worst %.1f%%)",
           PROBES, 100 * worst_all);
    is_int(right, PROBES, "... and the nodes {0,1} {2,3} in every one");
    ok(max_passes <= o.max_samples, "... in at most %d passes (max_samples %d)", max_passes, o.max_samples);
    ppdl_rng_seed(&rng, 20261202);
    for (int p = 0; p < PROBES; p++) {
        simulated_probe(&rng, &o, 1, bw);
        mean_bad += judge(bw, g, sizeof g) > 0.15 || strcmp(g, "0,1|2,3");
    }
    ok(mean_bad > 0, "negative control: keeping the mean instead, %d of %d probes misread a link or the nodes",
       mean_bad, PROBES);

    /* ---- 4. the grouping of the run ---- */
    ppdl_cluster_model cl;
    ppdl_cluster_model_alloc(&cl, N);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            if (i != j) cl.bw[i * N + j] = truth(i, j);
    cl.bw[0 * N + 1] = 0.082e9; /* 0 -> 1 misread; 1 -> 0 right */
    ppdl_cluster_group_nodes(&cl, PPDL_NODE_RATIO);
    ok(!strcmp(groups(&cl), "0,1|2,3"), "one direction of an in-node link misread at 0.082 GB/s: nodes %s",
       groups(&cl));
    cl.bw[1 * N + 0] = 0.082e9; /* both: rank 0 and 1 are no longer fast-linked */
    ppdl_cluster_group_nodes(&cl, PPDL_NODE_RATIO);
    ok(strcmp(groups(&cl), "0,1|2,3") != 0, "both directions slow: a different network, other nodes (%s)",
       groups(&cl));
    ppdl_cluster_model_free(&cl);

    /* ---- 5. one speed per host (CPU ranks share their host's cores) ---- */
    {
        /* the 3 ranks on one 2-core host, as probed: 1, 0.855, 0.951 */
        int host1[3] = {0, 0, 0};
        double sp1[3] = {1.0, 0.855, 0.951};
        ppdl_probe_host_speeds(3, host1, sp1);
        ok(sp1[0] == 1.0 && sp1[1] == 1.0 && sp1[2] == 1.0, "3 ranks on rank 0's host: speeds %.3f %.3f %.3f (all 1)",
           sp1[0], sp1[1], sp1[2]);
        /* two hosts: ranks 0-1 on rank 0's, 2-4 on another host measured 0.48, 0.55, 0.50 */
        int host2[5] = {0, 0, 2, 2, 2};
        double sp2[5] = {1.0, 1.12, 0.48, 0.55, 0.50};
        ppdl_probe_host_speeds(5, host2, sp2);
        ok(sp2[0] == 1.0 && sp2[1] == 1.0, "two hosts: rank 0's host 1, 1 (measured 1, 1.12)");
        ok(sp2[2] == 0.50 && sp2[3] == 0.50 && sp2[4] == 0.50, "... the other host's 3 ranks its median 0.50 (%.3f %.3f %.3f)",
           sp2[2], sp2[3], sp2[4]);
        /* an even count takes the mean of the middle two; hosts need not be contiguous */
        int host3[4] = {0, 1, 0, 1};
        double sp3[4] = {1.0, 2.0, 0.9, 2.4};
        ppdl_probe_host_speeds(4, host3, sp3);
        ok(sp3[0] == 1.0 && sp3[2] == 1.0 && fabs(sp3[1] - 2.2) < 1e-12 && fabs(sp3[3] - 2.2) < 1e-12,
           "interleaved hosts {0,2} {1,3}: 1, 1 and the mean of 2.0 and 2.4 (%.3f %.3f)", sp3[1], sp3[3]);
    }

    /* ---- 6. the pooled bandwidth against tick stalls ---- */
    {
        ppdl_rng_seed(&rng, 20261203);
        int pooled_bad = 0, median_bad = 0;
        double worst_pooled = 0, worst_median = 0, res[4 * PPDL_PROBE_RES_LEN], fits[4];
        for (int p = 0; p < 2000; p++) {
            for (int k = 0; k < 4; k++) {
                stalled_sample(&rng, res + k * PPDL_PROBE_RES_LEN);
                fits[k] = own_fit(res + k * PPDL_PROBE_RES_LEN, 0);
            }
            double e_pool = fabs(ppdl_probe_pooled_bw(res, fits, 4, 0, PPDL_PROBE_GATE) / STALL_RATE - 1);
            double e_med = fabs(ppdl_probe_link_stat(fits, 4, o.agree).median / STALL_RATE - 1);
            pooled_bad += e_pool > 0.15;
            median_bad += e_med > 0.15;
            worst_pooled = fmax(worst_pooled, e_pool);
            worst_median = fmax(worst_median, e_med);
        }
        is_int(pooled_bad, 0, "2000 pairs, half their readings stalled on a 4 ms tick: the pooled fit within 15%% in "
               "all (worst %.1f%%)", 100 * worst_pooled);
        ok(median_bad > 0, "negative control: the median of the samples' own fits is off by more in %d (worst %.1f%%)",
           median_bad, 100 * worst_median);
        /* an unstalled pair's samples, one of them then made 20x too fast (its times
         * shrunk) or 20x too slow: the pool leaves it out */
        ppdl_rng_seed(&rng, 7);
        for (int k = 0; k < 4; k++) {
            double *r = res + k * PPDL_PROBE_RES_LEN;
            r[0] = 2 * STALL_LAT;
            for (int q = 0; q < 2; q++) {
                r[1 + 3 * q] = r[2 + 3 * q] = 2 * STALL_LAT + stall_sizes[q] / STALL_RATE * (1 + 0.02 * k);
                r[3 + 3 * q] = stall_sizes[q];
            }
        }
        for (int f = 0; f < 2; f++) {
            double saved[PPDL_PROBE_RES_LEN], *r = res + 2 * PPDL_PROBE_RES_LEN, factor = f ? 20 : 0.05;
            memcpy(saved, r, sizeof saved);
            for (int q = 0; q < 2; q++) r[1 + 3 * q] = STALL_LAT + (r[1 + 3 * q] - STALL_LAT) * factor;
            for (int k = 0; k < 4; k++) fits[k] = own_fit(res + k * PPDL_PROBE_RES_LEN, 0);
            double got = ppdl_probe_pooled_bw(res, fits, 4, 0, PPDL_PROBE_GATE);
            ok(fabs(got / STALL_RATE - 1) < 0.01, "a sample %s among 4: pooled %.1f MB/s (rate %.1f; that sample %.1f)",
               f ? "20x too slow" : "20x too fast", got / 1e6, STALL_RATE / 1e6, fits[2] / 1e6);
            memcpy(r, saved, sizeof saved);
        }
    }

    /* ---- 7. a link far below its class's others is measured again ---- */
    {
        double cbw[N * N];
        int count[N * N];
        unsigned char need[N * N];
        /* the 2 x 2 emulation: 375 MB/s inside {0,1} and {2,3}, 118 MB/s between */
#define RESET()                                                                           \
    for (int a = 0; a < N; a++)                                                           \
        for (int b = 0; b < N; b++) {                                                     \
            cbw[a * N + b] = a == b ? 0 : a / 2 == b / 2 ? 375e6 : 118e6;                  \
            count[a * N + b] = 3;                                                         \
            need[a * N + b] = 0;                                                          \
        }
        RESET();
        int m = ppdl_probe_class_outliers(N, cbw, count, o.max_samples, PPDL_PROBE_CLASS_TOL, need);
        ok(m == 0, "every link at its class's rate: none measured again (%d)", m);
        RESET();
        cbw[0 * N + 1] = 375e6 * 0.83; /* run 5's miss: an inside link 17% slow */
        cbw[2 * N + 0] = 118e6 * 0.85;
        cbw[3 * N + 2] = 375e6 * 0.95; /* within 10%: left */
        m = ppdl_probe_class_outliers(N, cbw, count, o.max_samples, PPDL_PROBE_CLASS_TOL, need);
        ok(m == 2 && need[0 * N + 1] && need[0 * N + 2] && !need[2 * N + 3],
           "an inside link 17%% slow and a cross link 15%% slow are measured again, one 5%% slow is not (%d marked)", m);
        RESET();
        cbw[3 * N + 2] = 375e6 * 1.20; /* this run's misses: 14-24% fast */
        cbw[2 * N + 3] = 375e6 * 1.14;
        cbw[1 * N + 3] = 118e6 * 1.06; /* within 10%: left */
        m = ppdl_probe_class_outliers(N, cbw, count, o.max_samples, PPDL_PROBE_CLASS_TOL, need);
        ok(m == 1 && need[2 * N + 3] && !need[1 * N + 3],
           "an inside pair read 14%% and 20%% fast is measured again, a cross link 6%% fast is not (%d marked)", m);
        RESET();
        cbw[0 * N + 1] = 375e6 * 0.83;
        count[0 * N + 1] = o.max_samples;
        m = ppdl_probe_class_outliers(N, cbw, count, o.max_samples, PPDL_PROBE_CLASS_TOL, need);
        ok(m == 0, "... but not past max_samples (%d): a link that is truly slower stays so", o.max_samples);
        RESET();
        cbw[0 * N + 1] = cbw[1 * N + 0] = 0.05 * 375e6; /* 18.75 MB/s both ways: another network */
        m = ppdl_probe_class_outliers(N, cbw, count, o.max_samples, PPDL_PROBE_CLASS_TOL, need);
        ok(m == 2 && need[0 * N + 1] && need[2 * N + 3], "a link 20x slower both ways: the grouping puts all 4 ranks "
           "in one class (median 118 MB/s), and both pairs far off it, 0-1 and 2-3, are measured again (%d marked)", m);
#undef RESET
    }
    return exit_status();
}
