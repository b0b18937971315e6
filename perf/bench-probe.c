/* bench-probe.c — the helper of perf/bench-probe.
 *
 *   bench-probe-bin schedule N [RANKS_PER_HOST ...]
 *       the probe's schedule for N ranks: tournament rounds, and the slots (groups of
 *       pairs measured at once) when ranks fill hosts of RANKS_PER_HOST (no MPI)
 *   mpiexec -n 2 bench-probe-bin pingpong [BYTES] [REPS]
 *       plain blocking MPI between ranks 0 and 1, the references for the probe's
 *       bandwidth of the pair: the probe's own method (BYTES out and 8 bytes back,
 *       minus half an 8-byte round trip: one way), a ping-pong of BYTES both ways
 *       (BYTES / half the round trip) and the osu_bw method (a window of 64 MPI_Isend
 *       of BYTES, then a 4-byte ack; 64 BYTES / time). REPS repetitions after 2
 *       warm-ups each, printed from the fastest (the statistic the probe keeps) and
 *       from the median: "oneway_Bps BEST MEDIAN", "pingpong_Bps ...", "osu_bw_Bps ...";
 *       and "probe_Bps FIRST SECOND": ppdl's probe of the pair (ppdl_probe_run) twice
 *       in the same two processes, before and after a second pass of the one-way
 *       reference (whose better pass is printed).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/finish.h"
#include "core/util.h"
#include "net/cluster.h"
#include "net/comm.h"
#include "net/probe.h"

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

static int schedule(int argc, char **argv)
{
    int n = atoi(argv[2]);
    if (n < 1 || n > 4096) { fprintf(stderr, "schedule N: N in 1..4096\n"); return 2; }
    int rounds = ppdl_probe_rounds(n);
    printf("ranks %d: %d rounds of up to %d disjoint pairs, %d ordered pairs\n", n, rounds, n / 2, n * (n - 1));
    int *a = malloc(sizeof(int) * (size_t)(n / 2 + 1)), *b = malloc(sizeof(int) * (size_t)(n / 2 + 1));
    int *slot = malloc(sizeof(int) * (size_t)(n / 2 + 1)), *host = malloc(sizeof(int) * (size_t)n);
    for (int k = 3; k < argc; k++) {
        int per = atoi(argv[k]);
        if (per < 1) continue;
        for (int i = 0; i < n; i++) host[i] = i / per;
        int slots = 0;
        for (int r = 0; r < rounds; r++) {
            int np = ppdl_probe_round_pairs(n, r, a, b);
            slots += ppdl_probe_slots(np, a, b, host, 0, slot);
        }
        printf("  %d ranks per host (%d hosts): %d slots of pairs\n", per, (n + per - 1) / per, slots);
    }
    free(a);
    free(b);
    free(slot);
    free(host);
    return 0;
}

/* round trips of `fwd` bytes from rank 0 to 1 and `back` bytes back, blocking MPI;
 * t[0..reps-1] after 2 warm-ups */
static void round_trips(int rank, char *sbuf, char *rbuf, size_t fwd, size_t back, int reps, double *t)
{
    for (int k = 0; k < reps + 2; k++) {
        PPDL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        if (rank == 0) {
            PPDL_CHECK_MPI(MPI_Send(sbuf, (int)fwd, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
            PPDL_CHECK_MPI(MPI_Recv(rbuf, (int)back, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else if (rank == 1) {
            PPDL_CHECK_MPI(MPI_Recv(rbuf, (int)fwd, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            PPDL_CHECK_MPI(MPI_Send(sbuf, (int)back, MPI_BYTE, 0, 1, MPI_COMM_WORLD));
        }
        if (k >= 2) t[k - 2] = MPI_Wtime() - t0;
    }
}

static int pingpong(int argc, char **argv)
{
    size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : (size_t)1 << 20;
    int reps = argc > 3 ? atoi(argv[3]) : 21, rank, size;
    enum { WINDOW = 64 };
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    PPDL_CHECK(size >= 2 && reps >= 1, "pingpong needs 2 ranks and REPS >= 1");
    /* separate, touched send and receive buffers, as the probe has */
    char *sbuf = ppdl_xmalloc(bytes * WINDOW), *rbuf = ppdl_xmalloc(bytes * WINDOW);
    memset(sbuf, 1, bytes * WINDOW);
    memset(rbuf, 2, bytes * WINDOW);
    double *t = ppdl_xmalloc((size_t)reps * sizeof(double));
    MPI_Request req[WINDOW];
    MPI_Status st[WINDOW]; /* (MPI_STATUSES_IGNORE trips gcc's -Wstringop-overflow) */
    int ack = 0;
    /* the probe's method in plain MPI: one way = (BYTES out + 8 back) - (8 out + 8 back) / 2 */
    round_trips(rank, sbuf, rbuf, 8, 8, reps, t);
    double small = median(t, reps), small_best = t[0]; /* median() sorts: t[0] is the fastest */
    round_trips(rank, sbuf, rbuf, bytes, 8, reps, t);
    double ow_med = (double)bytes / (median(t, reps) - small / 2), ow_best = (double)bytes / (t[0] - small_best / 2);
    /* ping-pong: BYTES there and back; bandwidth = BYTES / half the round trip */
    round_trips(rank, sbuf, rbuf, bytes, bytes, reps, t);
    double pp_med = (double)bytes / (median(t, reps) / 2), pp_best = (double)bytes / (t[0] / 2);
    /* osu_bw: a window of sends, one ack */
    for (int k = 0; k < reps + 2; k++) {
        PPDL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = MPI_Wtime();
        if (rank == 0) {
            for (int w = 0; w < WINDOW; w++)
                PPDL_CHECK_MPI(MPI_Isend(sbuf + (size_t)w * bytes, (int)bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[w]));
            PPDL_CHECK_MPI(MPI_Waitall(WINDOW, req, st));
            PPDL_CHECK_MPI(MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else if (rank == 1) {
            for (int w = 0; w < WINDOW; w++)
                PPDL_CHECK_MPI(MPI_Irecv(rbuf + (size_t)w * bytes, (int)bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req[w]));
            PPDL_CHECK_MPI(MPI_Waitall(WINDOW, req, st));
            PPDL_CHECK_MPI(MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD));
        }
        if (k >= 2) t[k - 2] = MPI_Wtime() - t0;
    }
    double bw_med = (double)bytes * WINDOW / median(t, reps), bw_best = (double)bytes * WINDOW / t[0];
    /* the probe itself, in these same two processes (placement on the cores and the
     * cache state count as much as the method on 2 vCPUs), before and after a second
     * pass of the one-way reference */
    double probe[2];
    for (int k = 0; k < 2; k++) {
        ppdl_comm c;
        ppdl_comm_init(&c, MPI_COMM_WORLD, -1);
        ppdl_probe_opts o;
        ppdl_probe_defaults(&o);
        o.msg_bytes = bytes;
        ppdl_cluster_model cl;
        ppdl_probe_run(&c, &o, &cl);
        probe[k] = cl.bw[1];
        ppdl_cluster_model_free(&cl);
        ppdl_comm_free(&c);
        if (k == 0) {
            round_trips(rank, sbuf, rbuf, 8, 8, reps, t);
            small = median(t, reps), small_best = t[0];
            round_trips(rank, sbuf, rbuf, bytes, 8, reps, t);
            double m = (double)bytes / (median(t, reps) - small / 2), b = (double)bytes / (t[0] - small_best / 2);
            if (b > ow_best) ow_best = b; /* the better of the two passes */
            if (m > ow_med) ow_med = m;
        }
    }
    if (rank == 0)
        printf("probe_Bps %.6g %.6g\noneway_Bps %.6g %.6g\npingpong_Bps %.6g %.6g\nosu_bw_Bps %.6g %.6g\n",
               probe[0], probe[1], ow_best, ow_med, pp_best, pp_med, bw_best, bw_med);
    free(sbuf);
    free(rbuf);
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "schedule")) return schedule(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "pingpong")) {
        PPDL_CHECK_MPI(MPI_Init(&argc, &argv));
        /* the bounded end of ppdl's jobs: over TCP MPI_Finalize can hang (core/finish.h) */
        ppdl_end_job(pingpong(argc, argv));
    }
    fprintf(stderr, "usage: bench-probe-bin schedule N [RANKS_PER_HOST...] | pingpong [BYTES] [REPS]\n");
    return 2;
}
