/* netem.h — an emulated network inside the communication layer (--netem CLUSTER.json).
 *
 * The machines this was built on have no netem qdisc in their kernel, and a shaped veth
 * only limits the rate; so latency and per-link bandwidth are emulated by the
 * application, at the one place every message passes: ppdl_comm_isend / irecv / wait.
 *
 * One directed link i -> j (latency L, bandwidth W from CLUSTER.json): a message of n
 * bytes sent at time t leaves when the link is free, start = max(t, free_ij), occupies
 * it until free_ij = start + n / W, and arrives at free_ij + L. A lone message takes
 * L + n/W; back-to-back messages queue behind each other's transmission while their
 * latencies overlap, as on a wire. The link's state lives with its only sender.
 *
 * How: the data goes at once; next to it the sender sends a 16-byte header (arrival
 * time, bytes) with the same tag on a private duplicate communicator, and MPI's
 * non-overtaking order pairs the k-th header with the k-th message of (source, tag). A
 * receive's wait completes when data and header are in and the clock has passed the
 * arrival; a send's wait no earlier than its last byte left the link. Only timing
 * changes: the bytes delivered are exactly the bytes sent.
 *
 * Clocks: the arrival time is the sender's CLOCK_MONOTONIC, read by the receiver, so
 * creation refuses ranks on different hosts. Wildcard receives (MPI_ANY_SOURCE/TAG)
 * are not supported (ppdl never uses them). */
#ifndef PPDL_NETEM_H
#define PPDL_NETEM_H

#include <mpi.h>
#include <stddef.h>

struct ppdl_cluster_model;
typedef struct ppdl_netem ppdl_netem;

/* Collective over comm. Keeps this rank's row of the cluster's matrices. NULL with a
 * message (the same on every rank) when the cluster does not fit the communicator or
 * the ranks do not share one machine. */
ppdl_netem *ppdl_netem_create(MPI_Comm comm, const struct ppdl_cluster_model *cl, char *err, size_t errlen);
/* Completes what is still pending (headers of unwaited sends), frees the communicator. */
void ppdl_netem_free(ppdl_netem *ne);

/* Hooks called by comm.c right after the data's MPI_Isend / MPI_Irecv. A message is
 * known by the address of the caller's request variable (req), so the caller must
 * wait on that same variable before reusing it. */
void ppdl_netem_on_send(ppdl_netem *ne, int dst, size_t n_bytes, int tag, MPI_Request *req);
void ppdl_netem_on_recv(ppdl_netem *ne, int src, int tag, MPI_Request *req);
/* Wait for a request made through the hooks: 1 when it was one of them (then it is
 * complete and *req is MPI_REQUEST_NULL), 0 when netem does not know it (the caller
 * waits as usual). yield: 0 = MPI_Wait, 1 = MPI_Test + sched_yield loop, 2 = the same
 * loop with naps after 100 us (ppdl_wait_pause). */
int ppdl_netem_wait(ppdl_netem *ne, MPI_Request *req, int yield);
/* The same without blocking: 1 when netem knows req, then *done = 1 when data and
 * header are in and the emulated time has passed (the message is then forgotten, as
 * after a wait), else 0; 0 when netem does not know req. */
int ppdl_netem_test(ppdl_netem *ne, MPI_Request *req, int *done);

/* One pause of a yielding wait that began at t0 (ppdl_now_s): sched_yield, and with nap
 * set, after the first 100 us, 50 us naps instead. A rank that keeps yielding stays
 * runnable, so with more ranks than cores the scheduler counts it as load and can leave
 * two computing ranks sharing one core while the other runs the waiters' yield loops;
 * napping waiters give the computing ranks the cores, and the step is faster. A short
 * wait (a message in flight) still ends within the yields. */
void ppdl_wait_pause(double t0, int nap);

/* Sleep until CLOCK_MONOTONIC (ppdl_now_s) reaches t: nanosleep for the bulk, then
 * spin the last ~300 us. */
void ppdl_sleep_until(double t);

#endif
