/* comm.h — point-to-point messages between pipeline stages.
 *
 * Non-blocking MPI underneath. The wait is either MPI's own (blocking progress) or a
 * yielding loop (MPI_Test, then sched_yield) that lets 3-4 ranks share 2 cores without
 * paying a scheduler time slice per message (ENVIRONMENT.md: 2-3 ms -> ~12 us per hop).
 * The emulated network (--netem, a later layer) hooks in here. */
#ifndef PPDL_COMM_H
#define PPDL_COMM_H

#include <mpi.h>
#include <stddef.h>

typedef struct ppdl_comm {
    MPI_Comm comm;
    int rank, size;
    int yield;                 /* 1: yielding wait */
    double wait_s;             /* total time spent waiting, for the report */
    long n_msgs;
} ppdl_comm;

/* yield: 1 = yielding wait, 0 = blocking wait, -1 = auto (yield when the ranks on this
 * node outnumber its cores). */
void ppdl_comm_init(ppdl_comm *c, MPI_Comm comm, int yield);
void ppdl_comm_isend(ppdl_comm *c, const void *buf, size_t n_bytes, int dst, int tag, MPI_Request *req);
void ppdl_comm_irecv(ppdl_comm *c, void *buf, size_t n_bytes, int src, int tag, MPI_Request *req);
/* wait for one request (no-op on MPI_REQUEST_NULL) */
void ppdl_comm_wait(ppdl_comm *c, MPI_Request *req);
/* cores and ranks on this node (MPI_Comm_split_type SHARED) */
int ppdl_comm_node_ranks(MPI_Comm comm);

#endif
