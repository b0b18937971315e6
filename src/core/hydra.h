/* hydra.h — MPICH's Hydra process manager (mpiexec) at the end of a job: what a rank
 * must do so that Hydra reports its exit status and does not take its end for a
 * crash. Measured with MPICH 4.0.2 (Debian 12); the reasons are in hydra.c and README
 * "Exit statuses and hangs". Every function does nothing where the rank was not
 * started by Hydra (srun, a singleton). */
#ifndef PPDL_HYDRA_H
#define PPDL_HYDRA_H

#include <sys/types.h>

/* The socket on which Hydra's proxy talks PMI-1 with this rank; -1: not under Hydra
 * (its proxy sets MPI_LOCALNRANKS and PMI_FD; srun does not set the first). */
int ppdl_hydra_pmi_fd(void);

/* Is thread `tid` of this process blocked reading the PMI socket (waiting in a PMI
 * call: MPI_Finalize's barrier)? From /proc/self/task/TID/syscall (Linux). */
int ppdl_hydra_reads_pmi(pid_t tid);

/* Tell the proxy that this rank finalized, and wait (2 s at most) for its answer: the
 * rank may then end without the proxy killing the other ranks. Only while no other
 * thread of the rank reads the PMI socket. */
void ppdl_hydra_tell_finalized(void);

/* After Hydra forwarded a signal, make sure it reports this rank's status: a helper
 * process keeps the rank's stdout and stderr open until the proxy has reaped the rank
 * (about 0.3 s after the rank ends). Call it last, just before exit(). */
void ppdl_hydra_keep_status(void);

#endif
