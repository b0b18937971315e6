/* finish.c — how every rank ends (finish.h): the meeting, then MPI_Finalize and the
 * status kept for the launcher through core/mpich_end.h. */
#include "core/finish.h"
#include "core/mpich_end.h"
#include "core/stop.h"
#include "core/util.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ppdl_finalize_timeout(double *seconds, char *err, size_t errlen)
{
    const char *s = getenv("PPDL_FINALIZE_TIMEOUT");
    *seconds = PPDL_FINALIZE_TIMEOUT_S;
    if (!s || !*s) return 0;
    if (ppdl_parse_float(s, 0, 86400, seconds))
        return ppdl_errf(err, errlen, "PPDL_FINALIZE_TIMEOUT=%s: expected seconds from 0 (no bound) to 86400", s);
    return 0;
}

void ppdl_wait_all_idle(int n, MPI_Request *reqs)
{
    /* naps grow from 20 us to 0.5 ms: a quick answer when the wait is short, and a long
     * wait (a bystander of the probe) wakes rarely, so it steals little from the ranks
     * that work */
    long nap_ns = 20 * 1000;
    for (;;) {
        int all = 1;
        for (int k = 0; k < n; k++) {
            int done = 1;
            if (reqs[k] != MPI_REQUEST_NULL) PPDL_CHECK_MPI(MPI_Test(&reqs[k], &done, MPI_STATUS_IGNORE));
            all &= done;
        }
        if (all) return;
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        if (nap_ns < 500 * 1000) nap_ns *= 2;
    }
}

void ppdl_end_job(int status)
{
    int up = 0, down = 0;
    fflush(stdout);
    fflush(stderr);
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (!up || down) exit(status);
    /* every rank's outputs are complete before any rank finalizes */
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    ppdl_wait_all_idle(1, &req);
    /* a malformed bound was refused at the start (run_start); here it means the default */
    double timeout_s;
    if (ppdl_finalize_timeout(&timeout_s, NULL, 0)) timeout_s = PPDL_FINALIZE_TIMEOUT_S;
    ppdl_mpich_finalize(status, timeout_s);
    ppdl_mpich_keep_status(status);
    exit(status);
}
