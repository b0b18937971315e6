/* end_job.c — a job that ends the way ppdl's do (core/finish.h), after the traffic
 * that makes MPICH 4.0 + UCX 1.13's TCP transport hang in MPI_Finalize: every pair of
 * ranks exchanges 1 MiB both ways, three times, then every rank calls
 * ppdl_end_job(STATUS). Used by tests/faults/exit_status.sh:
 *   mpiexec -n 4 tests/mpi/end_job STATUS      (UCX_TLS=tcp,self, PPDL_FINALIZE_TIMEOUT)
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/finish.h"

int main(int argc, char **argv)
{
    PPDL_CHECK_MPI(MPI_Init(&argc, &argv));
    int me, n;
    PPDL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    PPDL_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &n));
    ppdl_set_log_rank(me);
    int status = argc > 1 ? atoi(argv[1]) : 0;
    size_t bytes = (size_t)1 << 20;
    char *s = malloc(bytes), *r = malloc(bytes);
    memset(s, me, bytes);
    for (int round = 0; round < 3; round++)
        for (int p = 0; p < n; p++)
            if (p != me)
                PPDL_CHECK_MPI(MPI_Sendrecv(s, (int)bytes, MPI_BYTE, p, 0, r, (int)bytes, MPI_BYTE, p, 0,
                                            MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    /* and last, rank 0 alone sends to every other rank */
    const char *pat = getenv("END_JOB_PATTERN");
    if (pat && !strcmp(pat, "fan")) {
        for (int p = 1; p < n; p++)
            if (me == 0) PPDL_CHECK_MPI(MPI_Send(s, (int)bytes, MPI_BYTE, p, 1, MPI_COMM_WORLD));
            else if (me == p) PPDL_CHECK_MPI(MPI_Recv(r, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    if (pat && !strcmp(pat, "in")) {
        for (int p = 1; p < n; p++)
            if (me == p) PPDL_CHECK_MPI(MPI_Send(s, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD));
            else if (me == 0) PPDL_CHECK_MPI(MPI_Recv(r, (int)bytes, MPI_BYTE, p, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    free(s);
    free(r);
    ppdl_end_job(status);
}
