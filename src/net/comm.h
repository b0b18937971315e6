/* comm.h — point-to-point messages between pipeline stages.
 *
 * Non-blocking MPI underneath. The wait is either MPI's own (blocking progress) or a
 * yielding loop (MPI_Test, then sched_yield; after 100 us, 50 us naps: netem.h's
 * ppdl_wait_pause) that lets 3-4 ranks share 2 cores without paying a scheduler time
 * slice (milliseconds) per message: a hop then costs microseconds (perf/bench-p2p.c).
 * The emulated network (--netem, netem.h) hooks in here: with it set, every message
 * arrives no earlier than the cluster file's latency + bytes/bandwidth of its link. */
#ifndef PPDL_COMM_H
#define PPDL_COMM_H

#include <mpi.h>
#include <stddef.h>

typedef struct ppdl_comm {
    MPI_Comm comm;
    int rank, size;
    int yield;                 /* 1: yielding wait */
    int nap;                   /* yielding waits nap after 100 us (default 1; the probe's
                                * round trips turn it off: a nap would count as latency) */
    double wait_s;             /* total time spent waiting, for the report */
    long n_msgs;
    struct ppdl_netem *netem;  /* NULL: the real network only */
} ppdl_comm;

struct ppdl_cluster_model;

/* yield: 1 = yielding wait, 0 = blocking wait, -1 = auto (yield when the ranks on this
 * node outnumber its cores). */
void ppdl_comm_init(ppdl_comm *c, MPI_Comm comm, int yield);
void ppdl_comm_isend(ppdl_comm *c, const void *buf, size_t n_bytes, int dst, int tag, MPI_Request *req);
void ppdl_comm_irecv(ppdl_comm *c, void *buf, size_t n_bytes, int src, int tag, MPI_Request *req);
/* wait for one request (no-op on MPI_REQUEST_NULL) */
void ppdl_comm_wait(ppdl_comm *c, MPI_Request *req);
/* Lets MPI advance the messages in flight without waiting for any (between layers). */
void ppdl_comm_progress(ppdl_comm *c);
/* Is it complete (under --netem: data and header in, and its emulated time passed)?
 * Never blocks. 1: complete, and its wait would return at once; 0: not yet. A request
 * tested complete still counts as done for ppdl_comm_wait (which then returns). */
int ppdl_comm_test(ppdl_comm *c, MPI_Request *req);
/* Wait without spinning, for ranks that have nothing else to do while others work
 * (the probe's bystanders): MPI_Test, then sleep (20 us growing to 0.5 ms), until all n
 * are complete. Plain MPI requests (never netem's). */
void ppdl_comm_waitall_idle(int n, MPI_Request *reqs);
/* Emulate the network of `cl` on this communicator from now on (netem.h). Collective.
 * -1 with a message, the same on every rank, when it cannot (wrong size, several hosts). */
int ppdl_comm_set_netem(ppdl_comm *c, const struct ppdl_cluster_model *cl, char *err, size_t errlen);
/* Release what init and set_netem made (every request must have been waited). */
void ppdl_comm_free(ppdl_comm *c);
/* cores and ranks on this node (MPI_Comm_split_type SHARED) */
int ppdl_comm_node_ranks(MPI_Comm comm);

#endif
