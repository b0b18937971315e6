/* ring.h — a sum of float buffers across a group of ranks (all-reduce), built on the
 * comm layer's point-to-point messages, so that --netem delays it like any other
 * message and the yielding wait serves it.
 *
 * Ring algorithm over the k members, member m sending to m+1 and receiving from m-1
 * (mod k), the buffer cut into k chunks (chunk c = elements [n c / k, n (c+1) / k)):
 *   reduce-scatter, steps t = 0..k-2: send chunk (m - t) mod k, receive chunk
 *     (m - t - 1) mod k and add it to one's own; member m then holds chunk (m + 1) mod k;
 *   all-gather, steps t = 0..k-2: send chunk (m + 1 - t) mod k, receive chunk
 *     (m - t) mod k in place.
 * Each member sends and receives 2 (k-1)/k of the buffer, the least any all-reduce moves.
 *
 * Determinism: chunk c is summed at one place, in one order,
 *   ((g_c + g_{c+1}) + g_{c+2}) + ... + g_{c+k-1}   (g_i: member i's values)
 * and copied to everyone: the same bits on every member and in every run with the same
 * members in the same order (not a one-rank sum's, nor MPI_Allreduce's).
 *
 * Progress is the caller's: ppdl_ring_start posts step 0, ppdl_ring_poll advances as far
 * as the arrived messages allow without blocking, ppdl_ring_finish blocks until done. A
 * step's send and receive complete before the next is posted: a chunk is never written
 * while a send may read it. Messages carry the ring's tag on the comm layer's
 * communicator: two rings at once between the same ranks need different tags, kept
 * apart from the caller's other messages between them. */
#ifndef PPDL_RING_H
#define PPDL_RING_H

#include <stddef.h>

#include "net/comm.h"

typedef struct ppdl_ring {
    ppdl_comm *c;
    int k, me;             /* members, this rank's position among them */
    int left, right;       /* ranks (of c's communicator) to receive from and send to */
    int tag;
    float *buf;            /* the values summed in place */
    size_t n;
    float *tmp;            /* a received chunk of the reduce-scatter */
    size_t tmp_cap;
    int step;              /* the step in flight, 0..2(k-1)-1; 2(k-1): done; -1: idle */
    MPI_Request sreq, rreq;
    /* the step's receive came in and was added: the step waits for its send only */
    int recv_done;
} ppdl_ring;

/* members[0..k-1]: the ranks of c's communicator in ring order; this rank is
 * members[me]. */
void ppdl_ring_init(ppdl_ring *r, ppdl_comm *c, const int *members, int k, int me, int tag);
/* Start summing buf[0..n-1] (in place) across the members. Every member starts it with
 * the same n. The buffer is the ring's until ppdl_ring_poll returns 1 or
 * ppdl_ring_finish returns. */
void ppdl_ring_start(ppdl_ring *r, float *buf, size_t n);
/* Advance without blocking; 1 when the sum is complete (also when never started). */
int ppdl_ring_poll(ppdl_ring *r);
/* Block until the sum is complete (the comm layer's wait: yielding or MPI's). */
void ppdl_ring_finish(ppdl_ring *r);
/* 1 while started and not complete */
int ppdl_ring_active(const ppdl_ring *r);
void ppdl_ring_free(ppdl_ring *r);

#endif
