/* clock_sync.c — rank 0's clock on every rank, within half a round trip (clock_sync.h). */
#include "net/clock_sync.h"
#include "core/error.h"
#include "core/util.h"
#include "net/comm.h"

#include <sched.h>

enum { ROUND_TRIPS = 12, TAG_CLOCK = 1 };

/* the two ranks of a timed round trip spin (a sleep would count as latency) */
static void spin_wait(MPI_Request *req)
{
    int done = 0;
    while (!done) {
        PPDL_CHECK_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (!done) sched_yield();
    }
}

void ppdl_clock_offset(MPI_Comm world, double *offset_s, double *error_s)
{
    /* a communicator of its own: no message of the caller's can match these */
    MPI_Comm comm;
    PPDL_CHECK_MPI(MPI_Comm_dup(world, &comm));
    int rank, size;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    PPDL_CHECK_MPI(MPI_Comm_size(comm, &size));
    *offset_s = *error_s = 0;
    MPI_Request req;
    if (rank == 0) {
        for (int p = 1; p < size; p++) {
            double best_rtt = -1, best_off = 0, t_p = 0;
            for (int k = 0; k < ROUND_TRIPS; k++) {
                double t_a = ppdl_now_s();
                PPDL_CHECK_MPI(MPI_Send(&t_a, 1, MPI_DOUBLE, p, TAG_CLOCK, comm));
                PPDL_CHECK_MPI(MPI_Irecv(&t_p, 1, MPI_DOUBLE, p, TAG_CLOCK, comm, &req));
                spin_wait(&req);
                double t_b = ppdl_now_s();
                if (best_rtt < 0 || t_b - t_a < best_rtt) {
                    best_rtt = t_b - t_a;
                    best_off = t_p - 0.5 * (t_a + t_b);
                }
            }
            double result[2] = {best_off, 0.5 * best_rtt};
            PPDL_CHECK_MPI(MPI_Send(result, 2, MPI_DOUBLE, p, TAG_CLOCK + 1, comm));
        }
        PPDL_CHECK_MPI(MPI_Comm_free(&comm));
        return;
    }
    for (int k = 0; k < ROUND_TRIPS; k++) {
        double ping;
        PPDL_CHECK_MPI(MPI_Irecv(&ping, 1, MPI_DOUBLE, 0, TAG_CLOCK, comm, &req));
        /* the first ping may be a while (rank 0 serves the ranks below first): sleep */
        if (k == 0) ppdl_comm_waitall_idle(1, &req);
        else spin_wait(&req);
        double t_p = ppdl_now_s();
        PPDL_CHECK_MPI(MPI_Send(&t_p, 1, MPI_DOUBLE, 0, TAG_CLOCK, comm));
    }
    double result[2];
    PPDL_CHECK_MPI(MPI_Irecv(result, 2, MPI_DOUBLE, 0, TAG_CLOCK + 1, comm, &req));
    ppdl_comm_waitall_idle(1, &req);
    *offset_s = result[0];
    *error_s = result[1];
    PPDL_CHECK_MPI(MPI_Comm_free(&comm));
}
