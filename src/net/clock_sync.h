/* clock_sync.h — every rank's clock against rank 0's, so that events timed on
 * different ranks can be drawn on one time axis (the merged --trace and --timeline).
 *
 * Ranks of one node share CLOCK_MONOTONIC, ranks of different nodes do not; and each
 * rank starts a step at its own moment (after its own optimizer), so "ms since my step
 * began" differs from rank to rank by up to an optimizer step. The events are
 * therefore shifted onto rank 0's clock by an offset estimated from round trips.
 *
 * The measurement (Cristian's method): rank 0 exchanges a few round trips with each
 * other rank in turn, t_a = rank 0's clock when it sends, t_p = the peer's clock when
 * it answers, t_b = rank 0's clock when the answer is in. The peer's clock read
 * t_p at some moment between t_a and t_b, so offset = t_p - (t_a + t_b) / 2 is right
 * within (t_b - t_a) / 2; the round trip with the smallest t_b - t_a is kept. Plain
 * MPI on the communicator given (not --netem's emulated links, whose delays would
 * only widen the bound); ranks waiting for their turn sleep rather than spin. */
#ifndef PPDL_CLOCK_SYNC_H
#define PPDL_CLOCK_SYNC_H

#include <mpi.h>

/* Collective over comm. *offset_s: this rank's clock (ppdl_now_s) minus rank 0's;
 * *error_s: the bound on its error (half the best round trip). Rank 0: 0 and 0. */
void ppdl_clock_offset(MPI_Comm comm, double *offset_s, double *error_s);

#endif
