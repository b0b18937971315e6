/* ring_mpi.c — the ring all-reduce of src/net/ring.h on real MPI ranks (run by
 * tests/mpi/ring.sh on 1-4 ranks). Usage: ring_mpi [netem]
 *
 * Every rank fills buffers with values it can regenerate for any rank (a hash of rank,
 * buffer and index, magnitudes 1e-3..1e3 so that the order of a sum shows in its
 * bits), then sums them with three rings in flight at once (different tags; sizes 0,
 * 1, k-1, k+1, 1000, 100003 floats), advanced by polling in a scrambled order and
 * finished in another. Each rank then recomputes, on its own, the sum ring.h promises:
 * chunk c of k (elements [n c / k, n (c+1) / k)) summed as ((g_c + g_{c+1}) + ..) in
 * float, and compares bitwise: every rank equal to that reference means every rank
 * holds the same bits. A double-precision sum bounds it too (relative 1e-5 of the sum
 * of magnitudes), so a reference that shares a mistake with ring.c does not pass
 * unnoticed. With "netem", the comm layer emulates a slow two-node network (so the
 * emulated arrival times, not MPI's completion, decide when a step may go on).
 * Rank 0 prints one line per failure; the exit status is 0 when every rank passed. */
#include "net/cluster.h"
#include "net/comm.h"
#include "net/ring.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* value i of buffer b on rank r: deterministic, varied magnitude and sign */
static float value(int r, int b, size_t i)
{
    unsigned long x = (unsigned long)r * 2654435761u ^ (unsigned long)b * 40503u ^ (unsigned long)i * 2246822519u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    double mant = (double)(x % 20001) / 10000.0 - 1.0;   /* [-1, 1] */
    double mag = pow(10.0, (double)((x >> 16) % 7) - 3.0); /* 1e-3 .. 1e3 */
    return (float)(mant * mag);
}

static size_t lo(size_t n, int k, int c) { return n * (size_t)c / (size_t)k; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int netem = argc > 1 && strcmp(argv[1], "netem") == 0;
    ppdl_comm c;
    ppdl_comm_init(&c, MPI_COMM_WORLD, 1);
    if (netem) {
        /* two nodes: ranks {0,1} and {2,3}, 50 MB/s and 20 us inside, 5 MB/s and 100 us between */
        ppdl_cluster_model cl;
        ppdl_cluster_model_alloc(&cl, size);
        for (int i = 0; i < size; i++)
            for (int j = 0; j < size; j++) {
                int same = i / 2 == j / 2;
                cl.bw[i * size + j] = i == j ? 5e10 : same ? 50e6 : 5e6;
                cl.lat[i * size + j] = i == j ? 0 : same ? 20e-6 : 100e-6;
            }
        char err[256];
        if (ppdl_comm_set_netem(&c, &cl, err, sizeof err)) {
            if (rank == 0) printf("# set_netem: %s\n", err);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        ppdl_cluster_model_free(&cl);
    }
    /* the ring in an order that is not rank order: members[q] = (q * 3 + 1) mod size when
     * that is a permutation, else rank order */
    int *members = malloc((size_t)size * sizeof(int)), me = -1;
    int perm = size % 3 != 0;
    for (int q = 0; q < size; q++) members[q] = perm ? (q * 3 + 1) % size : q;
    for (int q = 0; q < size; q++)
        if (members[q] == rank) me = q;

    size_t sizes[] = {0, 1, (size_t)(size - 1), (size_t)(size + 1), 1000, 100003};
    int n_sizes = (int)(sizeof sizes / sizeof sizes[0]), failures = 0;
    enum { NR = 3 };
    for (int base = 0; base < n_sizes; base += NR) {
        ppdl_ring rings[NR];
        float *buf[NR];
        size_t n[NR];
        int nr = 0;
        for (int j = 0; j < NR && base + j < n_sizes; j++, nr++) {
            n[j] = sizes[base + j];
            buf[j] = malloc((n[j] ? n[j] : 1) * sizeof(float));
            for (size_t i = 0; i < n[j]; i++) buf[j][i] = value(members[me], base + j, i);
            ppdl_ring_init(&rings[j], &c, members, size, me, 100 + j);
        }
        /* started in order, polled last-first for a while, finished first-first */
        for (int j = 0; j < nr; j++) ppdl_ring_start(&rings[j], buf[j], n[j]);
        for (int spin = 0; spin < 200; spin++) {
            for (int j = nr - 1; j >= 0; j--) ppdl_ring_poll(&rings[j]);
            sched_yield();
        }
        for (int j = 0; j < nr; j++) ppdl_ring_finish(&rings[j]);
        for (int j = 0; j < nr; j++) {
            int bad_bits = 0, bad_sum = 0;
            for (int ch = 0; ch < size; ch++)
                for (size_t i = lo(n[j], size, ch); i < lo(n[j], size, ch + 1); i++) {
                    /* ring.h's order for chunk ch: member ch's value, then ch+1, .. */
                    float want = value(members[ch], base + j, i);
                    double exact = want, mag = fabs(want);
                    for (int t = 1; t < size; t++) {
                        float v = value(members[(ch + t) % size], base + j, i);
                        want = want + v;
                        exact += v;
                        mag += fabs(v);
                    }
                    bad_bits += memcmp(&want, &buf[j][i], sizeof want) != 0;
                    bad_sum += fabs((double)buf[j][i] - exact) > 1e-5 * mag;
                }
            if (bad_bits || bad_sum) {
                printf("# rank %d, %d ranks%s, %zu floats: %d elements differ from the ring order's bits, "
                       "%d from the exact sum\n", rank, size, netem ? " (netem)" : "", n[j], bad_bits, bad_sum);
                failures++;
            }
            ppdl_ring_free(&rings[j]);
            free(buf[j]);
        }
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("# %d ranks%s: %d failing (rank, buffer) pairs\n", size, netem ? " (netem)" : "", total);
    free(members);
    ppdl_comm_free(&c);
    MPI_Finalize();
    return total != 0;
}
