/* mpich_end.h — the end of a job under MPICH 4.0 (Debian 12's 4.0.2) with its Hydra
 * process manager and UCX 1.13's TCP transport: two defects of that stack, worked
 * around here and nowhere else. core/finish.h's ppdl_end_job calls both; where the
 * rank was not started by Hydra (srun, a singleton) only the bound on MPI_Finalize acts.
 *
 * 1. MPI_Finalize can hang for ever over UCX's TCP transport: a rank that has flushed
 *    its endpoints waits in a PMI barrier without progressing UCX while a peer still
 *    waits for its acknowledgement (docs/clusters.md). So finalize runs
 *    under a watchdog: past the bound, the rank says so once (rank 0 for all), parks
 *    its main thread (it may be inside MPICH's PMI client), tells Hydra's proxy over
 *    PMI-1 that it finalized (else the proxy takes its end for a crash and kills the
 *    others) and ends with the run's status.
 * 2. Hydra forgets a rank's non-zero status after it has forwarded a signal (SIGTERM,
 *    SIGUSR1 to mpiexec): a helper process keeps the rank's outputs open until the
 *    proxy has reaped it, so the status is reported. */
#ifndef PPDL_MPICH_END_H
#define PPDL_MPICH_END_H

/* MPI_Finalize, bounded: after timeout_s seconds (0: no bound) the rank ends with
 * `status` as said above (never returning); otherwise returns once finalized. */
void ppdl_mpich_finalize(int status, double timeout_s);

/* After a stop by a signal, make sure Hydra reports this rank's non-zero status (2.
 * above); nothing otherwise. Call it last, just before exit(). */
void ppdl_mpich_keep_status(int status);

#endif
