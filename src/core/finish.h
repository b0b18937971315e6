/* finish.h — how every rank of a job ends: with the run's exit status, the same on
 * every rank, and never hanging after its work is done.
 *
 * ppdl_end_job(status) is the last call of every path that ends a job normally (the
 * end of main(), the job-ending agreement of src/cmd/run_agree.c): every rank calls
 * it at the same point, after every output it writes is complete and closed.
 *
 *   1. stdout and stderr are flushed; the ranks meet (a barrier that waits without
 *      spinning), so each rank's outputs are complete before any rank finalizes and
 *      the bound below starts from the same moment on every rank;
 *   2. MPI_Finalize runs under a watchdog, and the status reaches the launcher: the
 *      workarounds for MPICH 4.0's Hydra and UCX's TCP transport, which can hang in
 *      finalize and forget a status (core/mpich_end.h). The bound is
 *      PPDL_FINALIZE_TIMEOUT seconds (default 5, 0: no bound; a healthy finalize takes
 *      a fraction of a second, even on a loaded machine).
 * Nothing here runs before the outputs are written, so ending a hung finalize can
 * lose nothing. */
#ifndef PPDL_FINISH_H
#define PPDL_FINISH_H

#include <mpi.h>
#include <stddef.h>

#include "core/error.h"

/* the bound on MPI_Finalize, seconds, when PPDL_FINALIZE_TIMEOUT is not set */
#define PPDL_FINALIZE_TIMEOUT_S 5.0

/* The bound in use: PPDL_FINALIZE_TIMEOUT (seconds >= 0, 0: none), else the default;
 * a malformed value is refused (-1, with the reason in err). */
int ppdl_finalize_timeout(double *seconds, char *err, size_t errlen);

/* Wait for n requests without spinning: MPI_Test, then a nap growing from 20 us to
 * 0.5 ms, for ranks that have nothing else to do while others work. */
void ppdl_wait_all_idle(int n, MPI_Request *reqs);

/* End this rank with `status` (see above). Collective over MPI_COMM_WORLD when MPI is
 * initialized; never returns. */
PPDL_NORETURN void ppdl_end_job(int status);

#endif
