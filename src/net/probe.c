/* probe.c — measure every ordered pair of ranks, each rank's memory and speed.
 *
 * The measurement is a list of "tasks" grouped into "slots": the tasks of one slot run at
 * the same time, the slots one after another, each started by rank 0's "go" and ended by
 * the results that come back to it. A task is either a pair (a, b) of one tournament
 * round, or the local benchmarks of one rank (memcpy rate, SGEMM speed). The slots of
 * pairs run in passes: each pass gives every pair it measures one sample, and rank 0
 * decides after each pass which pairs need another (probe.h). */
#include "config.h"

#include "net/probe.h"
#include "backend/cuda/nccl_p2p.h"
#include "core/error.h"
#include "core/util.h"
#include "core/test_hooks.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SMALL_BYTES 8          /* the latency message */
#define N_LARGE 2              /* large sizes: the activation (or S/4), and S */
#define RES_LEN PPDL_PROBE_RES_LEN /* small round trip; per large size: out, back, bytes */
_Static_assert(PPDL_PROBE_RES_LEN == 1 + 3 * N_LARGE, "probe.h's PPDL_PROBE_RES_LEN: 1 + 3 per large size");
#define TAG_DATA 32000         /* pair messages (through ppdl_comm, so netem sees them) */
#define TAG_SIZES 32001        /* NCCL's exchanges: their sizes, ahead over MPI */
#define TAG_GO 1               /* control messages, on a private duplicate communicator */
#define TAG_RESULT 2
#define GEMM_N 256             /* the speed benchmark: C[N,N] = A[N,N] @ B[N,N] */

void ppdl_probe_defaults(ppdl_probe_opts *o)
{
    memset(o, 0, sizeof *o);
    /* Warm-up covers connection set-up (UCX makes endpoints on first use). A sample is
     * the fastest of 6 small and 2 large exchanges each way; 3 to 7 samples a pair, a
     * pass apart. Agreement within 10% of the median: a shaped link's samples agree well
     * inside that even on a loaded machine (perf/bench-probe); directions more than 2x
     * apart are probed again: 2x is the gap that makes a
     * hierarchy (PPDL_NODE_RATIO), so a smaller asymmetry cannot move a node boundary.
     * 4 warm-ups, not 2: they size the pair's large message (choose_large). */
    o->warmup = 4;
    o->reps_small = 6;
    o->reps_large = 2;
    o->min_samples = 3;
    o->max_samples = 7;
    o->target_ms = 25;
    o->max_bytes = (size_t)8 << 20;
    o->agree = 0.10;
    o->asym = 2.0;
}

/* ---- the schedule ----
 * Pairs come from a round-robin tournament (the circle method): N-1 rounds for even N,
 * N for odd, each round a set of disjoint pairs, so every unordered pair meets once.
 * Inside a round, pairs run at the same time when they share no host (an MPI
 * shared-memory node), one after another otherwise: on one machine ranks compete for
 * cores and memory, and two pairs crossing the same host's link would halve each
 * other's bandwidth. With one rank per host every round runs all its pairs at once. */

int ppdl_probe_rounds(int n) { return n < 2 ? 0 : (n % 2 ? n : n - 1); }

int ppdl_probe_round_pairs(int n, int r, int *a, int *b)
{
    /* circle method: player m-1 stays, the others rotate by one each round; with odd
     * n a dummy player m-1 = n gives a bye to whoever meets it */
    int m = n % 2 ? n + 1 : n, k = 0;
    for (int i = 0; i < m / 2; i++) {
        int x = i == 0 ? m - 1 : (r + i) % (m - 1);
        int y = (r - i + (m - 1)) % (m - 1);
        if (x >= n || y >= n) continue;
        a[k] = x < y ? x : y;
        b[k] = x < y ? y : x;
        k++;
    }
    return k;
}

static int share_host(const int *host, int a1, int b1, int a2, int b2)
{
    int h1[2] = {host[a1], host[b1]}, h2[2] = {host[a2], host[b2]};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (h1[i] == h2[j]) return 1;
    return 0;
}

int ppdl_probe_slots(int n_pairs, const int *a, const int *b, const int *host, int all_at_once, int *slot)
{
    int n_slots = 0;
    for (int k = 0; k < n_pairs; k++) {
        int s = 0;
        if (!all_at_once)
            for (; s < n_slots; s++) {
                int clash = 0;
                for (int q = 0; q < k && !clash; q++)
                    if (slot[q] == s) clash = share_host(host, a[k], b[k], a[q], b[q]);
                if (!clash) break;
            }
        slot[k] = s;
        if (s == n_slots) n_slots++;
    }
    return n_slots;
}

typedef struct task { int a, b; } task; /* b < 0: the local benchmarks of rank a */

typedef struct schedule {
    task *t;
    int n_t;
    int *start;                /* [n_slots + 1] first task of each slot */
    int n_slots, rounds;
} schedule;

/* The slots of one pass: the local benchmarks (locals: the first pass only), then the
 * pairs (a < b) with need[a * n + b] set (need NULL: every pair), round after round. */
static void build_schedule(int n, const int *host, int all_at_once, const unsigned char *need, int locals,
                           schedule *s)
{
    int max_t = n + n * (n - 1) / 2;
    s->t = ppdl_xmalloc((size_t)max_t * sizeof(task));
    s->start = ppdl_xmalloc((size_t)(max_t + 1) * sizeof(int));
    s->n_t = s->n_slots = 0;
    /* local slots: the j-th rank of every host at once */
    for (int j = 0; j < n && locals; j++) {
        int first = s->n_t;
        for (int i = 0; i < n; i++) {
            int before = 0;
            for (int q = 0; q < i; q++) before += host[q] == host[i];
            if (before == j) s->t[s->n_t++] = (task){i, -1};
        }
        if (s->n_t == first) break;
        s->start[s->n_slots++] = first;
    }
    /* pair slots, round after round */
    s->rounds = ppdl_probe_rounds(n);
    int *a = ppdl_xmalloc((size_t)(n / 2 + 1) * sizeof(int)), *b = ppdl_xmalloc((size_t)(n / 2 + 1) * sizeof(int));
    int *slot = ppdl_xmalloc((size_t)(n / 2 + 1) * sizeof(int));
    for (int r = 0; r < s->rounds; r++) {
        int np = ppdl_probe_round_pairs(n, r, a, b), kept = 0;
        for (int k = 0; k < np; k++)
            if (!need || need[a[k] * n + b[k]]) { a[kept] = a[k]; b[kept] = b[k]; kept++; }
        int ns = ppdl_probe_slots(kept, a, b, host, all_at_once, slot);
        for (int q = 0; q < ns; q++) {
            s->start[s->n_slots++] = s->n_t;
            for (int k = 0; k < kept; k++)
                if (slot[k] == q) s->t[s->n_t++] = (task){a[k], b[k]};
        }
    }
    s->start[s->n_slots] = s->n_t;
    free(a);
    free(b);
    free(slot);
}

static void free_schedule(schedule *s)
{
    free(s->t);
    free(s->start);
}

/* ---- measuring ---- */

typedef struct ctx {
    ppdl_comm *c;
    const ppdl_probe_opts *o;
    size_t first, cap;         /* the large size before a pair's own is chosen; the most */
    size_t *large;             /* [n] the large size S of each pair this rank drives, 0: not yet */
    int rounds;
    char *sbuf, *rbuf;         /* [cap] */
    void *dsbuf, *drbuf;       /* o->nccl: [cap] in the device's memory */
} ctx;

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Round trips keep the minimum, not the median: whatever disturbs a round trip
 * (another process on the core, a late wake-up) only ever adds time, and under --netem
 * no message can arrive before its emulated time, so the fastest repetition is the
 * least disturbed one. With a busy process beside the probe on a small machine the
 * medians stray far from the emulated values, the minima hardly at all. */

/* One exchange: the driver sends `fwd` bytes and receives `back` bytes; returns the
 * round trip on the driver (0 on the other side). The driver chooses the sizes: the
 * first 8 bytes of what it sends say how many bytes to send back, and the other side
 * receives into a buffer of the largest size, so it needs to know nothing else. */
#if HAVE_CUDA
/* The exchange through NCCL (o->nccl, --p2p nccl), between device buffers, as the
 * runtime's messages will go. NCCL has no tags and a receive must name its size, so the
 * driver sends the two sizes ahead over MPI and waits until the other side says that
 * its receive and its reply are queued; only then does the timed round trip start. The
 * reply is queued behind the receive (ppdl_nccl_stream_wait, then the send, which
 * follows the compute stream), so it leaves when the request has arrived. Both sides
 * issue their operations in one order, the driver's send first: NCCL runs a
 * communicator's operations in issue order, and a receive issued before the send on
 * both sides would wait for a send that waits behind it. */
static double exchange_nccl(ctx *x, int peer, int driver, size_t fwd, size_t back)
{
    ppdl_nccl *nc = x->o->nccl;
    ppdl_nccl_req s = {0}, r = {0};
    unsigned long long sz[2] = {fwd, back};
    int ready = 1;
    MPI_Request m;
    double t = 0;
    if (driver) {
        ppdl_comm_isend(x->c, sz, sizeof sz, peer, TAG_SIZES, &m);
        ppdl_comm_wait(x->c, &m);
        ppdl_comm_irecv(x->c, &ready, sizeof ready, peer, TAG_SIZES, &m);
        ppdl_comm_wait(x->c, &m);
        double t0 = ppdl_now_s();
        const int recv_first = ppdl_test_hook("PROBE_RECV_FIRST") != NULL; /* a negative control's */
        if (recv_first) ppdl_nccl_irecv(nc, x->drbuf, back, peer, &r);
        ppdl_nccl_isend(nc, x->dsbuf, fwd, peer, &s);
        if (!recv_first) ppdl_nccl_irecv(nc, x->drbuf, back, peer, &r);
        ppdl_nccl_wait(nc, &s);
        ppdl_nccl_wait(nc, &r);
        t = ppdl_now_s() - t0;
    } else {
        ppdl_comm_irecv(x->c, sz, sizeof sz, peer, TAG_SIZES, &m);
        ppdl_comm_wait(x->c, &m);
        ppdl_nccl_irecv(nc, x->drbuf, (size_t)sz[0], peer, &r);
        ppdl_nccl_stream_wait(nc, &r);
        ppdl_nccl_isend(nc, x->dsbuf, (size_t)sz[1], peer, &s);
        ppdl_comm_isend(x->c, &ready, sizeof ready, peer, TAG_SIZES, &m);
        ppdl_comm_wait(x->c, &m);
        ppdl_nccl_wait(nc, &r);
        ppdl_nccl_wait(nc, &s);
    }
    ppdl_nccl_req_free(&s);
    ppdl_nccl_req_free(&r);
    return t;
}
#endif

static double exchange(ctx *x, int peer, int driver, size_t fwd, size_t back)
{
#if HAVE_CUDA
    if (x->o->nccl) return exchange_nccl(x, peer, driver, fwd, back);
#endif
    MPI_Request s, r;
    if (driver) {
        memcpy(x->sbuf, &back, sizeof back);
        ppdl_comm_irecv(x->c, x->rbuf, back, peer, TAG_DATA, &r);
        double t0 = ppdl_now_s();
        ppdl_comm_isend(x->c, x->sbuf, fwd, peer, TAG_DATA, &s);
        ppdl_comm_wait(x->c, &s);
        ppdl_comm_wait(x->c, &r);
        return ppdl_now_s() - t0;
    }
    ppdl_comm_irecv(x->c, x->rbuf, x->cap, peer, TAG_DATA, &r);
    ppdl_comm_wait(x->c, &r);
    memcpy(&back, x->rbuf, sizeof back);
    ppdl_comm_isend(x->c, x->sbuf, back <= x->cap ? back : x->cap, peer, TAG_DATA, &s);
    ppdl_comm_wait(x->c, &s);
    return 0;
}

/* keep the fastest of the round trips seen in best[i] */
static void keep_min(double *best, double t)
{
    if (*best <= 0 || t < *best) *best = t;
}

/* The large size S of a pair, chosen by its driver during its warm-up: a message long
 * enough (target_ms on the link) that the wake-ups around it, a few ms on a busy
 * machine, are a small part of its time (1 MiB at 1 Gbit/s is 8.7 ms, and on a loaded
 * machine such a short message reads the link far too slow); between `first` and `cap`,
 * whole 4 KiB. Each warm-up of `bytes` that took t makes the next one larger when the
 * rate it shows asks for more, never smaller: a stalled warm-up reads the link slow, so
 * sizing from the first alone (1 MiB, where one timer-tick stall triples the time)
 * would leave many pairs of scripts/cluster-emu --node-rate well short of the size
 * their link asks for (perf/bench-ethernet's probes). */
static size_t choose_large(const ctx *x, size_t bytes, double t)
{
    if (x->o->msg_bytes || !(t > 0)) return bytes;
    double want = (double)bytes / t * x->o->target_ms * 1e-3;
    size_t s = want >= (double)x->cap ? x->cap : (size_t)want;
    s = s < x->first ? x->first : s;
    s = s / 4096 * 4096;
    return s > bytes ? s : bytes;
}

/* One direction of a pair: the driver sends the large sizes (out = 1) or receives them
 * (out = 0), always answered by / answering a small message. Warm-up first (it sets up
 * connections and drains a shaped link's token bucket; on the way out it chooses the
 * pair's size S), then reps_large rounds of [a few small exchanges, one of each large
 * size]: the latency samples are spread over the whole measurement instead of bunched
 * into 2 ms, so one burst of other work on the machine cannot spoil all of them; and
 * the large messages of one direction still follow each other closely, so a token
 * bucket (tc tbf) cannot refill between them. The sizes: [the activation, or S/4; S]. */
static void one_direction(ctx *x, int peer, int driver, int out, int warm, double *res)
{
    const ppdl_probe_opts *o = x->o;
    int small_per_round = (o->reps_small + 2 * o->reps_large - 1) / (2 * o->reps_large);
    size_t *S = driver ? &x->large[peer] : NULL, size[N_LARGE] = {0, 0};
    if (driver && !*S) *S = x->first;
    for (int w = 0; w < (warm ? o->warmup : 0); w++) {
        exchange(x, peer, driver, SMALL_BYTES, SMALL_BYTES);
        double t = exchange(x, peer, driver, out && S ? *S : SMALL_BYTES, !out && S ? *S : SMALL_BYTES);
        if (out && driver) *S = choose_large(x, *S, t); /* grows only: a stall can make it short, never long */
    }
    if (driver) {
        size_t act = o->act_bytes;
        size[0] = act > SMALL_BYTES && act < *S ? act : *S / 4;
        size[1] = *S;
    }
    for (int r = 0; r < o->reps_large; r++) {
        for (int q = 0; q < small_per_round; q++) keep_min(&res[0], exchange(x, peer, driver, SMALL_BYTES, SMALL_BYTES));
        for (int k = 0; k < N_LARGE; k++)
            keep_min(&res[1 + 3 * k + !out],
                     exchange(x, peer, driver, out ? size[k] : SMALL_BYTES, out ? SMALL_BYTES : size[k]));
    }
    for (int k = 0; k < N_LARGE && driver; k++) res[3 + 3 * k] = (double)size[k];
}

/* One sample of a pair: res = [small round trip, then per large size: its bytes out +
 * small back, small out + its bytes back, its bytes], the times the fastest of their
 * repetitions (on the driver a; zeros on b). warm: the pair's first sample, after
 * warm-up exchanges. */
static void run_pair(ctx *x, int a, int b, int warm, double *res)
{
    int me = x->c->rank, driver = me == a, peer = driver ? b : a, nap = x->c->nap;
    for (int i = 0; i < RES_LEN; i++) res[i] = 0;
    x->c->nap = 0; /* a round trip is timed: a nap in it would count as latency */
    one_direction(x, peer, driver, 1, warm, res);
    one_direction(x, peer, driver, 0, warm, res);
    x->c->nap = nap;
}

/* GFLOP/s of a GEMM_N^3 SGEMM on the backend: the fastest of at least 10 runs and 20
 * ms after 3 warm-ups; 0 when there is no backend or its memory is short. The speeds
 * are ratios of two ranks' numbers, so each must not depend on a passing disturbance:
 * a median of a few short runs gave two equal ranks of one machine speeds far apart
 * (under scripts/cluster-emu), and the planner loaded the "faster" one more. The
 * fastest run is what the rank can do; one that ran undisturbed is among 10+. */
static double gemm_gflops(ppdl_backend *be)
{
    if (!be) return 0;
    size_t bytes = (size_t)GEMM_N * GEMM_N * sizeof(float);
    float *h = ppdl_xmalloc(bytes);
    for (size_t i = 0; i < (size_t)GEMM_N * GEMM_N; i++) h[i] = 0.5f + 0.001f * (float)(i % 97);
    /* counted like any allocation, but the probe's buffers are gone before training:
     * the peak the report shows is put back to what it was */
    size_t peak = ppdl_be_peak(be);
    float *A = ppdl_be_try_alloc(be, bytes, "probe GEMM A"), *B = ppdl_be_try_alloc(be, bytes, "probe GEMM B"),
          *C = ppdl_be_try_alloc(be, bytes, "probe GEMM C");
    double g = 0;
    if (A && B && C) {
        ppdl_be_copy_h2d(be, A, h, bytes);
        ppdl_be_copy_h2d(be, B, h, bytes);
        double best = 0, start = 0;
        for (int k = 0; k < 200; k++) {
            double t0 = ppdl_now_s();
            if (k == 3) start = t0;
            ppdl_be_gemm(be, 0, 0, GEMM_N, GEMM_N, GEMM_N, 1.0f, A, GEMM_N, B, GEMM_N, 0.0f, C, GEMM_N);
            ppdl_be_sync(be);
            double t = ppdl_now_s() - t0;
            if (k < 3) continue;
            if (best == 0 || t < best) best = t;
            if (k >= 12 && ppdl_now_s() - start >= 0.02) break;
        }
        g = best > 0 ? 2.0 * GEMM_N * GEMM_N * GEMM_N / best / 1e9 : 0;
    }
    if (A) ppdl_be_free(be, A);
    if (B) ppdl_be_free(be, B);
    if (C) ppdl_be_free(be, C);
    ppdl_be_restore_peak(be, peak);
    free(h);
    return g;
}

/* res = [GFLOP/s, memcpy bytes/s] */
static void run_local(ctx *x, double *res)
{
    size_t n = x->first;
    double t[6];
    for (int k = 0; k < 6; k++) {
        double t0 = ppdl_now_s();
        memcpy(x->rbuf, x->sbuf, n);
        t[k] = ppdl_now_s() - t0;
    }
    double m = median(t + 1, 5);
    res[0] = gemm_gflops(x->o->be);
    res[1] = m > 0 ? (double)n / m : 1e12;
}

/* ---- fitting ---- */

/* least squares y = c + x/bw over (x, y); returns bw, or a fallback when the slope is
 * not positive (noise on a very fast link): the largest size over its time */
static double fit_bandwidth(const double *x, const double *y, int n)
{
    double mx = 0, my = 0, sxy = 0, sxx = 0;
    for (int i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
    mx /= n;
    my /= n;
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
    }
    double slope = sxx > 0 ? sxy / sxx : 0;
    if (slope > 0 && isfinite(1 / slope)) return 1 / slope;
    return y[n - 1] > 0 ? x[n - 1] / y[n - 1] : 1e12;
}

/* one sample of a pair from its exchanges (run_pair's res): out[0] a->b bandwidth,
 * out[1] b->a, out[2] the one-way latency. The latency is half the small round trip
 * (the OSU osu_latency method: a one-way asymmetry would need synchronised clocks, so
 * both directions get the same latency); a large size's one-way time is its round trip
 * less the small reply's one-way time, and the bandwidth is the slope of those times
 * fitted to latency + bytes / bandwidth over the sizes. */
static void fit_sample(const double *res, double *out)
{
    double half = 0.5 * res[0]; /* one-way small message */
    double xs[1 + N_LARGE], yab[1 + N_LARGE], yba[1 + N_LARGE];
    xs[0] = SMALL_BYTES;
    yab[0] = yba[0] = half;
    for (int k = 0; k < N_LARGE; k++) {
        xs[1 + k] = res[3 + 3 * k];
        yab[1 + k] = res[1 + 3 * k] - half;
        yba[1 + k] = res[2 + 3 * k] - half;
    }
    out[0] = fit_bandwidth(xs, yab, 1 + N_LARGE);
    out[1] = fit_bandwidth(xs, yba, 1 + N_LARGE);
    out[2] = half > 0 ? half : 0;
}

/* ---- the statistic ---- */

double ppdl_probe_pooled_bw(const double *res, const double *fits, int n, int dir, double gate)
{
    if (n < 1) return 0;
    double *w = ppdl_xmalloc((size_t)n * sizeof(double));
    memcpy(w, fits, (size_t)n * sizeof(double));
    double med = median(w, n);
    free(w);
    if (!(med > 0)) return med;
    double pool[RES_LEN] = {0};
    int used = 0;
    for (int k = 0; k < n; k++) {
        const double *r = res + (size_t)k * RES_LEN;
        if (!(fits[k] >= med / gate && fits[k] <= med * gate)) continue;
        if (!used) memcpy(pool, r, sizeof pool); /* the sizes: a pair's are fixed at its warm-up */
        keep_min(&pool[0], r[0]);
        for (int q = 0; q < N_LARGE; q++) keep_min(&pool[1 + 3 * q + dir], r[1 + 3 * q + dir]);
        used++;
    }
    double out[3];
    fit_sample(pool, out);
    return out[dir] > 0 ? out[dir] : med;
}

ppdl_link_stat ppdl_probe_link_stat(const double *v, int n, double agree)
{
    ppdl_link_stat st = {0, 0, n, 0};
    if (n < 1) return st;
    double *w = ppdl_xmalloc((size_t)n * sizeof(double));
    memcpy(w, v, (size_t)n * sizeof(double));
    st.median = median(w, n); /* sorts w */
    st.spread = st.median > 0 ? (w[n - 1] - w[0]) / st.median : 0;
    for (int i = 0; i < n; i++) st.agreeing += fabs(w[i] - st.median) <= agree * st.median;
    free(w);
    return st;
}

int ppdl_probe_pair_settled(const double *ab, const double *ba, int n, const ppdl_probe_opts *o)
{
    if (n >= o->max_samples) return 1;
    if (n < o->min_samples) return 0;
    ppdl_link_stat x = ppdl_probe_link_stat(ab, n, o->agree), y = ppdl_probe_link_stat(ba, n, o->agree);
    if (x.agreeing < o->min_samples || y.agreeing < o->min_samples) return 0;
    double hi = x.median > y.median ? x.median : y.median, lo = x.median > y.median ? y.median : x.median;
    return lo > 0 && hi <= o->asym * lo;
}

/* the median of a class's directed links (inside = 1: both ends in one node, any node;
 * 0: ends in two nodes), or 0 where it has fewer than 3 */
static double class_median(int n, const double *bw, const int *node, int inside)
{
    double *v = ppdl_xmalloc((size_t)n * (size_t)n * sizeof(double)), med = 0;
    int k = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            if (a != b && (node[a] == node[b]) == inside) v[k++] = bw[a * n + b];
    if (k >= 3) med = median(v, k);
    free(v);
    return med;
}

int ppdl_probe_class_outliers(int n, const double *bw, const int *count, int max, double tol, unsigned char *need)
{
    ppdl_cluster_model cl;
    ppdl_cluster_model_alloc(&cl, n);
    memcpy(cl.bw, bw, (size_t)n * (size_t)n * sizeof(double));
    ppdl_cluster_group_nodes(&cl, PPDL_NODE_RATIO);
    int marked = 0;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            if (count[a * n + b] >= max) continue;
            double med = class_median(n, bw, cl.node, cl.node[a] == cl.node[b]);
            int off = med > 0 && (fabs(bw[a * n + b] - med) > tol * med || fabs(bw[b * n + a] - med) > tol * med);
            if (off && !need[a * n + b]) need[a * n + b] = 1, marked++;
        }
    ppdl_cluster_model_free(&cl);
    return marked;
}

int ppdl_probe_skew(const char *spec, int n, int a, int b, int k, double *factor, char *err, size_t errlen)
{
    *factor = 1;
    if (!spec || !*spec) return 0;
    const char *p = spec;
    while (*p) {
        int ia, ib, ik, used = 0;
        double f;
        if (sscanf(p, "%d-%d:%d:%lf%n", &ia, &ib, &ik, &f, &used) != 4 || ia < 0 || ib < 0 || ia >= n ||
            ib >= n || ia == ib || ik < 0 || !(f > 0) || !isfinite(f) || (p[used] && p[used] != ','))
            return ppdl_errf(err, errlen, "%s=%s: expected A-B:K:F[,...] (ranks A != B below %d, "
                             "sample K >= 0, factor F > 0)", ppdl_test_hook_var("PROBE_SKEW"), spec, n);
        if (ia == a && ib == b && ik == k) *factor *= f;
        p += used + (p[used] == ',');
    }
    return 0;
}

/* ---- the machines ---- */

#define KEY_LEN 64

void ppdl_probe_hosts(MPI_Comm comm, int device, ppdl_hosts *h)
{
    int me, n;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &me));
    PPDL_CHECK_MPI(MPI_Comm_size(comm, &n));
    char name[MPI_MAX_PROCESSOR_NAME + 1] = "", key[KEY_LEN] = "";
    int len = 0;
    PPDL_CHECK_MPI(MPI_Get_processor_name(name, &len));
    name[len < 0 ? 0 : (len > MPI_MAX_PROCESSOR_NAME ? MPI_MAX_PROCESSOR_NAME : len)] = 0;
    /* one kernel, one machine: network namespaces and containers share it */
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f || !fgets(key, sizeof key, f)) snprintf(key, sizeof key, "name:%.*s", KEY_LEN - 6, name);
    if (f) fclose(f);
    key[strcspn(key, "\n")] = 0;
    char *keys = ppdl_xcalloc((size_t)n, KEY_LEN), *names = ppdl_xcalloc((size_t)n, KEY_LEN);
    char sname[KEY_LEN];
    snprintf(sname, sizeof sname, "%.*s", KEY_LEN - 1, name);
    PPDL_CHECK_MPI(MPI_Allgather(key, KEY_LEN, MPI_CHAR, keys, KEY_LEN, MPI_CHAR, comm));
    PPDL_CHECK_MPI(MPI_Allgather(sname, KEY_LEN, MPI_CHAR, names, KEY_LEN, MPI_CHAR, comm));
    const char **kp = ppdl_xmalloc((size_t)n * sizeof(char *)), **np = ppdl_xmalloc((size_t)n * sizeof(char *));
    for (int r = 0; r < n; r++) {
        kp[r] = keys + (size_t)r * KEY_LEN;
        np[r] = names + (size_t)r * KEY_LEN;
    }
    int color = me;
    for (int r = 0; r < me; r++)
        if (!strcmp(kp[r], kp[me])) { color = r; break; }
    /* the cores this host's ranks may run on: the union of their affinity masks */
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0 || CPU_COUNT(&mask) < 1) {
        long on = sysconf(_SC_NPROCESSORS_ONLN);
        CPU_ZERO(&mask);
        for (long c = 0; c < (on > 0 ? on : 1) && c < CPU_SETSIZE; c++) CPU_SET((int)c, &mask);
    }
    MPI_Comm hc;
    PPDL_CHECK_MPI(MPI_Comm_split(comm, color, me, &hc));
    cpu_set_t all;
    PPDL_CHECK_MPI(MPI_Allreduce(&mask, &all, (int)sizeof mask, MPI_BYTE, MPI_BOR, hc));
    int on_host = 1;
    PPDL_CHECK_MPI(MPI_Comm_size(hc, &on_host));
    PPDL_CHECK_MPI(MPI_Comm_free(&hc));
    int cores = device ? on_host : CPU_COUNT(&all);
    /* test hook: an emulated cluster (--netem) whose ranks share this machine's few
     * cores plans as a cluster of that many cores per host would (tests/mpi/plan_auto.sh
     * checks the network-aware plan, which the shared-core choice would override here) */
    const char *hc_env = ppdl_test_hook("HOST_CORES");
    if (hc_env && *hc_env) {
        char *end;
        long v = strtol(hc_env, &end, 10);
        if (*end || v < 1 || v > 1 << 20) ppdl_test_hook_bad("HOST_CORES", hc_env, "a whole number of cores >= 1");
        cores = (int)v;
    }
    int *cs = ppdl_xmalloc((size_t)n * sizeof(int));
    PPDL_CHECK_MPI(MPI_Allgather(&cores, 1, MPI_INT, cs, 1, MPI_INT, comm));
    ppdl_hosts_build(h, n, (const char *const *)kp, (const char *const *)np, cs);
    free(cs);
    free(kp);
    free(np);
    free(keys);
    free(names);
}

/* ---- memory contention (CPU ranks) ---- */

/* 4 Mi parameters: p, g, m and v take 64 MiB, past any cache this probe meets */
#define CONTENTION_FLOATS ((size_t)4 << 20)
#define CONTENTION_REPS 5

/* A nap-friendly barrier of the host's ranks: the ranks not timing sleep through it. */
static void host_barrier(MPI_Comm hc)
{
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Ibarrier(hc, &req));
    ppdl_comm_waitall_idle(1, &req);
}

/* The memory contention of each host (cluster_model.h ppdl_hosts.contention): the
 * host's first rank times an AdamW pass (the optimizer step every rank runs at the
 * step's end) alone, then with min(ranks, cores) of the host's ranks running it at the
 * same moment; the factor is the median together over the median alone, in 1..64.
 * Together, each rank runs two passes and the second is timed: ranks leave the barrier
 * up to a nap apart, and the second pass runs while the others run theirs.
 * Each host measures on its own, at the same time as the others (other machines share
 * no memory with it). A host whose ranks have no second core, or a device backend
 * (each GPU has its own memory), keeps 1. Collective over comm. */
static void measure_contention(MPI_Comm comm, ppdl_backend *be, int device, ppdl_hosts *h)
{
    int me, n;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &me));
    PPDL_CHECK_MPI(MPI_Comm_size(comm, &n));
    int host = h->of_rank[me], hr, hn;
    MPI_Comm hc;
    PPDL_CHECK_MPI(MPI_Comm_split(comm, host, me, &hc));
    PPDL_CHECK_MPI(MPI_Comm_rank(hc, &hr));
    PPDL_CHECK_MPI(MPI_Comm_size(hc, &hn));
    int m = hn < h->cores[host] ? hn : h->cores[host];
    double factor = 1;
    if (be && !device && m >= 2) {
        size_t peak = ppdl_be_peak(be), bytes = CONTENTION_FLOATS * sizeof(float);
        float *buf[4] = {0};
        int ok = 1;
        if (hr < m)
            for (int q = 0; q < 4 && ok; q++) {
                buf[q] = ppdl_be_try_alloc(be, bytes, "probe: memory contention");
                if (buf[q]) ppdl_be_zero(be, buf[q], bytes); /* touched now, not while timing */
                else ok = 0;
            }
        /* no room on some rank: the host keeps 1 */
        PPDL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, hc));
        double alone[CONTENTION_REPS + 1], together[CONTENTION_REPS + 1];
        for (int phase = 0; ok && phase < 2; phase++)
            for (int k = 0; k <= CONTENTION_REPS; k++) { /* k = 0: untimed */
                host_barrier(hc);
                for (int pass = 0; hr < (phase ? m : 1) && pass <= phase; pass++) {
                    double t0 = ppdl_now_s();
                    ppdl_be_adamw(be, CONTENTION_FLOATS, buf[0], buf[1], buf[2], buf[3], 1e-4, 0.9, 0.999, 1e-8,
                                  0.01, k + 1);
                    ppdl_be_sync(be);
                    (phase ? together : alone)[k] = ppdl_now_s() - t0;
                }
            }
        if (ok && hr == 0) {
            double a = median(alone + 1, CONTENTION_REPS), t = median(together + 1, CONTENTION_REPS);
            factor = a > 0 ? t / a : 1;
            if (!(factor >= 1)) factor = 1;
            if (factor > PPDL_MAX_CONTENTION) factor = PPDL_MAX_CONTENTION;
        }
        for (int q = 0; q < 4; q++)
            if (buf[q]) ppdl_be_free(be, buf[q]);
        ppdl_be_restore_peak(be, peak);
    }
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Ibcast(&factor, 1, MPI_DOUBLE, 0, hc, &req));
    ppdl_comm_waitall_idle(1, &req);
    PPDL_CHECK_MPI(MPI_Comm_free(&hc));
    double *all = ppdl_xmalloc((size_t)n * sizeof(double));
    PPDL_CHECK_MPI(MPI_Allgather(&factor, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, comm));
    free(h->contention);
    h->contention = ppdl_xmalloc((size_t)h->n * sizeof(double));
    for (int r = 0; r < n; r++) h->contention[h->of_rank[r]] = all[r];
    free(all);
}

/* ---- the whole probe ---- */

static int in_slot(const schedule *s, int slot, int rank, int *task_index)
{
    for (int k = s->start[slot]; k < s->start[slot + 1]; k++)
        if (s->t[k].a == rank || s->t[k].b == rank) { *task_index = k; return 1; }
    return 0;
}

static void run_task(ctx *x, const task *t, int warm, double *res)
{
    if (t->b < 0) run_local(x, res);
    else run_pair(x, t->a, t->b, warm, res);
}

/* Run the slots of one pass; rank 0 receives every task's results (results[k]). The
 * ranks outside a slot's tasks wait for rank 0's "go" sleeping (ppdl_comm_waitall_idle),
 * not spinning: a spinning bystander on shared cores cuts the timed pair's rate
 * several-fold; the pair itself waits as the job's ranks do (ppdl_comm_wait). */
static void run_pass(ctx *x, const schedule *s, MPI_Comm ctl, int warm, double *results, MPI_Request *reqs)
{
    int me = x->c->rank, go = 0;
    for (int sl = 0; sl < s->n_slots; sl++) {
        int k_mine = -1, mine = in_slot(s, sl, me, &k_mine);
        double res[RES_LEN] = {0};
        if (me == 0) {
            int nr = 0;
            for (int k = s->start[sl]; k < s->start[sl + 1]; k++) {
                const task *t = &s->t[k];
                if (t->a != 0)
                    PPDL_CHECK_MPI(MPI_Irecv(&results[k * RES_LEN], RES_LEN, MPI_DOUBLE, t->a, TAG_RESULT, ctl, &reqs[nr++]));
                int who[2] = {t->a, t->b};
                for (int w = 0; w < 2; w++)
                    if (who[w] > 0) PPDL_CHECK_MPI(MPI_Isend(&go, 1, MPI_INT, who[w], TAG_GO, ctl, &reqs[nr++]));
            }
            if (mine) {
                run_task(x, &s->t[k_mine], warm, res);
                memcpy(&results[k_mine * RES_LEN], res, sizeof res);
            }
            ppdl_comm_waitall_idle(nr, reqs);
        } else if (mine) {
            int got;
            PPDL_CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, 0, TAG_GO, ctl, &reqs[0]));
            ppdl_comm_waitall_idle(1, reqs);
            run_task(x, &s->t[k_mine], warm, res);
            if (s->t[k_mine].a == me) PPDL_CHECK_MPI(MPI_Send(res, RES_LEN, MPI_DOUBLE, 0, TAG_RESULT, ctl));
        }
    }
}

/* rank 0's samples: per unordered pair (a < b, index a * n + b), up to max_samples of
 * [a->b bandwidth, b->a bandwidth, latency] */
typedef struct samples {
    int n, max;
    double *v;                 /* [n * n][max][3] */
    double *raw;               /* [n * n][max][RES_LEN] the exchanges' times behind each */
    int *count;                /* [n * n] */
} samples;

static double *sample_at(const samples *sm, int a, int b, int k) { return &sm->v[(((size_t)a * sm->n + b) * sm->max + k) * 3]; }
static double *raw_at(const samples *sm, int a, int b, int k)
{
    return &sm->raw[(((size_t)a * sm->n + b) * sm->max + k) * RES_LEN];
}

/* one direction's (or the latency's, which = 2) samples of pair (a, b) into out */
static int series(const samples *sm, int a, int b, int which, double *out)
{
    int c = sm->count[a * sm->n + b];
    for (int k = 0; k < c; k++) out[k] = sample_at(sm, a, b, k)[which];
    return c;
}

/* After a pass, on rank 0: store its samples (with the test hook's skew), then mark
 * the pairs that need another in need[]; returns how many do. */
static int take_samples(const ctx *x, const schedule *s, const double *results, samples *sm, unsigned char *need)
{
    int n = sm->n, left = 0;
    const char *skew = ppdl_test_hook("PROBE_SKEW");
    for (int k = 0; k < s->n_t; k++) {
        const task *t = &s->t[k];
        if (t->b < 0) continue;
        int c = sm->count[t->a * n + t->b];
        if (c >= sm->max) continue;
        double *v = sample_at(sm, t->a, t->b, c), *raw = raw_at(sm, t->a, t->b, c), f;
        memcpy(raw, &results[k * RES_LEN], RES_LEN * sizeof(double));
        /* the hook scales the sample's transfer times, so that both the sample's own
         * fit and the pooled one read F times the rate */
        for (int d = 0; d < 2; d++) {
            char err[PPDL_ERR_LEN];
            if (ppdl_probe_skew(skew, n, d ? t->b : t->a, d ? t->a : t->b, c, &f, err, sizeof err)) ppdl_die("%s", err);
            for (int q = 0; q < N_LARGE && f != 1; q++) {
                double *tq = &raw[1 + 3 * q + d], half = 0.5 * raw[0];
                *tq = half + (*tq - half) / f;
            }
        }
        fit_sample(raw, v);
        sm->count[t->a * n + t->b] = c + 1;
    }
    double *ab = ppdl_xmalloc((size_t)sm->max * sizeof(double)), *ba = ppdl_xmalloc((size_t)sm->max * sizeof(double));
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            int c = series(sm, a, b, 0, ab);
            series(sm, a, b, 1, ba);
            need[a * n + b] = !ppdl_probe_pair_settled(ab, ba, c, x->o);
            left += need[a * n + b];
        }
    free(ab);
    free(ba);
    if (left == 0 && n >= 3) { /* all settled: a link far off its class's others is probed again */
        double *bw = ppdl_xcalloc((size_t)n * (size_t)n, sizeof(double));
        double *v = ppdl_xmalloc((size_t)sm->max * sizeof(double));
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                for (int which = 0; which < 2; which++) {
                    int c = series(sm, a, b, which, v);
                    bw[which ? b * n + a : a * n + b] = ppdl_probe_pooled_bw(raw_at(sm, a, b, 0), v, c, which, PPDL_PROBE_GATE);
                }
        left = ppdl_probe_class_outliers(n, bw, sm->count, sm->max, PPDL_PROBE_CLASS_TOL, need);
        free(v);
        free(bw);
    }
    return left;
}

/* Into the cluster: each direction's bandwidth from its pooled samples
 * (ppdl_probe_pooled_bw), the latency the median of the samples', with each link's
 * number of samples and the spread of its samples' own fits */
static void summarize(const samples *sm, double agree, ppdl_cluster_model *cl)
{
    int n = sm->n;
    const char *raw_env = getenv("PPDL_PROBE_RAW"); /* docs/clusters.md: for diagnosis */
    int print_raw = raw_env && *raw_env;
    double *v = ppdl_xmalloc((size_t)sm->max * sizeof(double));
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            for (int which = 0; which < 3; which++) {
                int c = series(sm, a, b, which, v);
                ppdl_link_stat st = ppdl_probe_link_stat(v, c, agree);
                if (which == 2) {
                    cl->lat[a * n + b] = cl->lat[b * n + a] = st.median;
                    continue;
                }
                int from = which ? b : a, to = which ? a : b;
                cl->bw[from * n + to] = ppdl_probe_pooled_bw(raw_at(sm, a, b, 0), v, c, which, PPDL_PROBE_GATE);
                if (print_raw) {
                    fprintf(stderr, "probe raw %d->%d median %.6g pooled %.6g B/s; samples [small rtt ms, "
                            "size 1 out/back ms, bytes, size 2 out/back ms, bytes]:", from, to, st.median, cl->bw[from * n + to]);
                    for (int k = 0; k < c; k++) {
                        const double *r = raw_at(sm, a, b, k);
                        fprintf(stderr, " [%.3f %.3f %.3f %.0f %.3f %.3f %.0f]", 1e3 * r[0], 1e3 * r[1], 1e3 * r[2], r[3], 1e3 * r[4], 1e3 * r[5], r[6]);
                    }
                    fprintf(stderr, "\n");
                }
                cl->samples[from * n + to] = c;
                cl->spread[from * n + to] = st.spread;
            }
    free(v);
}

static int cmp_speed(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void ppdl_probe_host_speeds(int n, const int *host, double *speed)
{
    double *v = ppdl_xmalloc((size_t)n * sizeof(double)), *out = ppdl_xmalloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) {
        int k = 0;
        for (int j = 0; j < n; j++)
            if (host[j] == host[i]) v[k++] = speed[j];
        qsort(v, (size_t)k, sizeof *v, cmp_speed);
        out[i] = host[i] == host[0] ? 1.0 : (k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]));
    }
    memcpy(speed, out, (size_t)n * sizeof(double));
    free(v);
    free(out);
}

void ppdl_probe_run(ppdl_comm *c, const ppdl_probe_opts *o, ppdl_cluster_model *cl)
{
    MPI_Comm comm = c->comm;
    int me = c->rank, n = c->size;
    double t_start = ppdl_now_s();

    /* hosts (MPI shared-memory nodes) and memory of every rank */
    MPI_Comm node;
    int node_size;
    PPDL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    PPDL_CHECK_MPI(MPI_Comm_size(node, &node_size));
    int host_id = me;
    PPDL_CHECK_MPI(MPI_Allreduce(&me, &host_id, 1, MPI_INT, MPI_MIN, node));
    PPDL_CHECK_MPI(MPI_Comm_free(&node));
    int *host = ppdl_xmalloc((size_t)n * sizeof(int));
    PPDL_CHECK_MPI(MPI_Allgather(&host_id, 1, MPI_INT, host, 1, MPI_INT, comm));
    double mem = (double)o->mem_bytes;
    if (mem <= 0 && o->be) mem = (double)ppdl_be_free_memory(o->be); /* a GPU's: its free memory */
    if (mem <= 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        mem = pages > 0 && page > 0 ? (double)pages * (double)page / node_size : 1e9;
    }
    double *mems = ppdl_xmalloc((size_t)n * sizeof(double));
    PPDL_CHECK_MPI(MPI_Allgather(&mem, 1, MPI_DOUBLE, mems, 1, MPI_DOUBLE, comm));

    ctx x = {.c = c, .o = o};
    x.first = o->msg_bytes ? o->msg_bytes : (o->act_bytes > (1u << 20) ? o->act_bytes : (size_t)1 << 20);
    x.cap = o->msg_bytes ? o->msg_bytes : (o->max_bytes > x.first ? o->max_bytes : x.first);
    x.large = ppdl_xcalloc((size_t)n, sizeof(size_t));
    x.sbuf = ppdl_xmalloc(x.cap);
    x.rbuf = ppdl_xmalloc(x.cap);
    memset(x.sbuf, 1, x.cap); /* touch the pages now, not while timing */
    memset(x.rbuf, 2, x.cap);
    size_t peak = 0;
    if (o->nccl) { /* the device buffers are the probe's: not in the run's peak */
        peak = ppdl_be_peak(o->be);
        x.dsbuf = ppdl_be_alloc(o->be, x.cap, "probe send buffer");
        x.drbuf = ppdl_be_alloc(o->be, x.cap, "probe receive buffer");
        ppdl_be_zero(o->be, x.dsbuf, x.cap);
        ppdl_be_sync(o->be);
    }

    MPI_Comm ctl;
    PPDL_CHECK_MPI(MPI_Comm_dup(comm, &ctl));
    /* per slot: a result and up to two "go"s per task */
    MPI_Request *reqs = ppdl_xmalloc((size_t)(3 * n + 2) * sizeof(MPI_Request));
    size_t nn = (size_t)n * (size_t)n;
    unsigned char *need = ppdl_xcalloc(nn, 1);
    samples sm = {.n = n, .max = o->max_samples > 0 ? o->max_samples : 1};
    if (me == 0) {
        sm.v = ppdl_xcalloc(nn * (size_t)sm.max * 3, sizeof(double));
        sm.raw = ppdl_xcalloc(nn * (size_t)sm.max * RES_LEN, sizeof(double));
        sm.count = ppdl_xcalloc(nn, sizeof(int));
    }
    ppdl_cluster_model_alloc(cl, n);
    cl->samples = ppdl_xcalloc(nn, sizeof(int));
    cl->spread = ppdl_xcalloc(nn, sizeof(double));

    /* the passes: the first measures every pair (and the local benchmarks), each next
     * one the pairs rank 0 found not settled */
    int pass = 0, first_slots = 0, left = n > 1;
    double *local = me == 0 ? ppdl_xcalloc(2 * (size_t)n, sizeof(double)) : NULL; /* GFLOP/s, memcpy B/s */
    while (left) {
        schedule s;
        build_schedule(n, host, o->all_at_once, pass ? need : NULL, pass == 0, &s);
        if (pass == 0) { first_slots = s.n_slots; x.rounds = s.rounds; }
        double *results = me == 0 ? ppdl_xcalloc((size_t)s.n_t * RES_LEN + 1, sizeof(double)) : NULL;
        run_pass(&x, &s, ctl, pass == 0, results, reqs);
        if (me == 0) {
            for (int k = 0; k < s.n_t; k++)
                if (s.t[k].b < 0) memcpy(&local[2 * s.t[k].a], &results[k * RES_LEN], 2 * sizeof(double));
            left = take_samples(&x, &s, results, &sm, need);
        }
        free(results);
        free_schedule(&s);
        pass++;
        /* every rank learns which pairs the next pass measures */
        MPI_Request req[2];
        PPDL_CHECK_MPI(MPI_Ibcast(&left, 1, MPI_INT, 0, ctl, &req[0]));
        PPDL_CHECK_MPI(MPI_Ibcast(need, (int)nn, MPI_UNSIGNED_CHAR, 0, ctl, &req[1]));
        ppdl_comm_waitall_idle(2, req);
    }
    if (n == 1) { /* no pair: the local benchmarks alone */
        schedule s;
        build_schedule(n, host, o->all_at_once, NULL, 1, &s);
        double res[RES_LEN] = {0};
        run_task(&x, &s.t[0], 1, res);
        memcpy(local, res, 2 * sizeof(double));
        first_slots = s.n_slots;
        free_schedule(&s);
        pass = 1;
    }

    /* rank 0 turns the samples into the cluster; everyone receives it */
    size_t len = 2 * nn + 3 * (size_t)n + 2 * nn + 1;
    double *pack = ppdl_xcalloc(len, sizeof(double));
    if (me == 0) {
        if (n > 1) summarize(&sm, o->agree, cl);
        double g0 = local[0];
        for (int i = 0; i < n; i++) {
            cl->bw[i * n + i] = local[2 * i + 1];
            /* speed relative to rank 0; no benchmark (or a failed one): 1 */
            cl->speed[i] = g0 > 0 && local[2 * i] > 0 ? local[2 * i] / g0 : 1.0;
        }
        /* the job's ranks all run the one --backend: CPU ranks of a host share its cores */
        if (o->be && !ppdl_be_device_memory(o->be)) ppdl_probe_host_speeds(n, host, cl->speed);
        memcpy(cl->mem, mems, (size_t)n * sizeof(double));
        memcpy(pack, cl->bw, nn * sizeof(double));
        memcpy(pack + nn, cl->lat, nn * sizeof(double));
        memcpy(pack + 2 * nn, cl->mem, (size_t)n * sizeof(double));
        memcpy(pack + 2 * nn + n, cl->speed, (size_t)n * sizeof(double));
        for (size_t k = 0; k < nn; k++) {
            pack[2 * nn + 2 * (size_t)n + k] = cl->samples[k];
            pack[3 * nn + 2 * (size_t)n + k] = cl->spread[k];
        }
        pack[len - 1] = 1e3 * (ppdl_now_s() - t_start);
    }
    PPDL_CHECK_MPI(MPI_Ibcast(pack, (int)len, MPI_DOUBLE, 0, comm, &reqs[0]));
    ppdl_comm_waitall_idle(1, reqs);
    memcpy(cl->bw, pack, nn * sizeof(double));
    memcpy(cl->lat, pack + nn, nn * sizeof(double));
    memcpy(cl->mem, pack + 2 * nn, (size_t)n * sizeof(double));
    memcpy(cl->speed, pack + 2 * nn + n, (size_t)n * sizeof(double));
    for (size_t k = 0; k < nn; k++) {
        cl->samples[k] = (int)pack[2 * nn + 2 * (size_t)n + k];
        cl->spread[k] = pack[3 * nn + 2 * (size_t)n + k];
    }
    cl->probe_ms = pack[len - 1];
    double most = 0; /* the largest message any pair used */
    for (int i = 0; i < n; i++) most = x.large[i] > most ? (double)x.large[i] : most;
    PPDL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &most, 1, MPI_DOUBLE, MPI_MAX, comm));
    cl->probe_bytes = most > 0 ? most : (double)x.first;
    cl->act_bytes = (double)o->act_bytes;
    cl->probe_rounds = x.rounds;
    cl->probe_slots = first_slots;
    cl->probe_passes = pass;
    cl->probe_nccl = o->nccl != NULL;
    ppdl_cluster_group_nodes(cl, PPDL_NODE_RATIO);
    ppdl_probe_hosts(comm, o->be && ppdl_be_device_memory(o->be), &cl->hosts);
    measure_contention(comm, o->be, o->be && ppdl_be_device_memory(o->be), &cl->hosts);

    PPDL_CHECK_MPI(MPI_Comm_free(&ctl));
    free(pack);
    free(mems);
    free(local);
    free(sm.v);
    free(sm.raw);
    free(sm.count);
    free(need);
    free(reqs);
    free(host);
    free(x.sbuf);
    free(x.rbuf);
    free(x.large);
    if (o->nccl) {
        ppdl_be_free(o->be, x.dsbuf);
        ppdl_be_free(o->be, x.drbuf);
        ppdl_be_restore_peak(o->be, peak);
    }
}
