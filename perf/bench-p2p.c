/* bench-p2p.c — the cost of one message hop between pipeline stages, through ppdl's
 * comm layer (src/net/comm.c), with the yielding wait and with MPI's blocking wait.
 * A token of BYTES bytes travels around a ring of all ranks HOPS times; the time per
 * hop is the per-message overhead a pipeline pays on its critical path.
 *   mpiexec -n 4 perf/bench-p2p [--bytes N] [--hops N]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/util.h"
#include "net/comm.h"

static double ring(ppdl_comm *c, char *buf, size_t bytes, int hops)
{
    int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
    PPDL_CHECK_MPI(MPI_Barrier(c->comm));
    double t0 = ppdl_now_s();
    for (int h = 0; h < hops; h++) {
        MPI_Request r = MPI_REQUEST_NULL, s = MPI_REQUEST_NULL;
        if (c->rank == 0) {
            ppdl_comm_isend(c, buf, bytes, next, 7, &s);
            ppdl_comm_wait(c, &s);
            ppdl_comm_irecv(c, buf, bytes, prev, 7, &r);
            ppdl_comm_wait(c, &r);
        } else {
            ppdl_comm_irecv(c, buf, bytes, prev, 7, &r);
            ppdl_comm_wait(c, &r);
            ppdl_comm_isend(c, buf, bytes, next, 7, &s);
            ppdl_comm_wait(c, &s);
        }
    }
    return (ppdl_now_s() - t0) / ((double)hops * c->size);
}

int main(int argc, char **argv)
{
    PPDL_CHECK_MPI(MPI_Init(&argc, &argv));
    size_t bytes = 1024;
    int hops = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes")) bytes = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--hops")) hops = atoi(argv[i + 1]);
    }
    char *buf = ppdl_xcalloc(bytes ? bytes : 1, 1);
    ppdl_comm c;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double us[2];
    for (int y = 1; y >= 0; y--) {
        ppdl_comm_init(&c, MPI_COMM_WORLD, y);
        ring(&c, buf, bytes, hops / 10 + 1); /* warm-up */
        /* the blocking wait is ~1000x slower oversubscribed: fewer hops */
        int n = y ? hops : hops / 20 + 1;
        us[y] = 1e6 * ring(&c, buf, bytes, n);
    }
    if (rank == 0)
        printf("bench-p2p: %d ranks, %zu-byte messages: %.1f us per hop with the yielding wait, "
               "%.1f us with MPI's blocking wait\n", size, bytes, us[1], us[0]);
    free(buf);
    MPI_Finalize();
    return 0;
}
