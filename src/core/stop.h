/* stop.h — when a run stops before its last step: a signal from the batch system, or
 * the wall-time limit coming close (GROMACS's -maxh).
 *
 * The signal handler only sets a flag. The trainer reads the flag after every step and
 * the ranks agree on it through the per-step collective they already make, so all of
 * them finish the same step, write one checkpoint together and exit with
 * PPDL_EXIT_CHECKPOINTED. A second signal while the checkpoint is being written only
 * sets the flag again: nothing is interrupted and nothing is corrupted.
 */
#ifndef PPDL_STOP_H
#define PPDL_STOP_H

/* Exit status of a run that stopped early and wrote a checkpoint: "resubmit the same
 * command to continue" (sysexits.h EX_TEMPFAIL). Job scripts requeue on it. */
#define PPDL_EXIT_CHECKPOINTED 75

/* The exit status of a run stopped early by `stop` (a signal number, or -1: the time
 * limit): PPDL_EXIT_CHECKPOINTED with a checkpoint written, else 128 + the signal (143
 * for SIGTERM, 138 for SIGUSR1: what a shell reports for a process the signal ended). */
int ppdl_exit_stopped(int stop, int checkpointed);

/* Catch SIGUSR1 and SIGTERM from now on (sigaction, SA_RESTART). */
void ppdl_stop_signals_install(void);
/* The first signal caught since install (SIGUSR1 or SIGTERM), or 0. */
int ppdl_stop_signal(void);

/* Parse a wall-time duration into seconds: "90s", "10m", "1.5h", "2d", Slurm's
 * "MM:SS", "HH:MM:SS", "D-HH:MM:SS" (what `squeue -o %L` prints). A bare number is
 * refused (seconds or minutes?). Returns -1 when malformed or not > 0. */
int ppdl_parse_duration(const char *s, double *seconds);

/* The -maxh rule: after a step, is there time for one more step and a checkpoint
 * before the limit? Stop (1) when
 *     elapsed + step + checkpoint + margin > limit,   margin = 1% of limit + 1 s
 * where step and checkpoint are estimates of one more step's and one checkpoint's
 * duration (the caller passes pessimistic ones). 0: carry on. */
int ppdl_stop_for_time(double elapsed_s, double limit_s, double step_s, double checkpoint_s);

#endif
