/* nccl_p2p.h — stage-to-stage transfers between GPUs with NCCL send/recv, and the
 * replicas' gradient sums with ncclAllReduce, on streams of their own so that they
 * overlap the compute stream, ordered against it with events (no host waits). Only in
 * builds with HAVE_CUDA; the backend must be the CUDA one.
 *
 * The pipeline runtime's use (--p2p nccl: pipe/transport.c, instead of backend/xfer.h's
 * host staging): every rank creates, once (cmd/run_stage.c), an activation and a
 * gradient communicator set (links to the next and from the previous stage's ranks, and
 * the reverse) and one over its stage's replicas (links NULL). SEND_ACT queues
 * ppdl_nccl_isend after the forward on the compute stream; receives are posted where the
 * runtime posts MPI's, and the RECV op queues ppdl_nccl_stream_wait before the next
 * compute (the GPU waits, the host does not); a sent buffer is overwritten only after a
 * stream wait on its send, and the optimizer waits (ppdl_nccl_wait) for every send.
 *
 * What NCCL does that this design lives with (tests/gpudouble/nccl.c models it):
 *  - a communicator runs its operations in the order they were issued, whatever their
 *    streams, so an early receive would hold back later sends: each directed link
 *    (i sends to j) is a communicator of its own, i's sends and j's receives on it in
 *    micro-batch order on both sides, which is how they match (NCCL has no tags);
 *  - the first operation between two ranks blocks the host until the peer makes it
 *    too: ppdl_nccl_create makes every link's first contact before it returns;
 *  - a stuck peer stops a transfer for ever: ppdl_nccl_wait ends the job after
 *    PPDL_NCCL_TIMEOUT seconds (default PPDL_NCCL_TIMEOUT_S) naming the transfer.
 * Two ranks on one GPU (PPDL_CUDA_SHARE=1) cannot form a communicator: ppdl_nccl_create
 * says so on every rank and returns NULL, so the caller falls back to host-staged MPI. */
#ifndef PPDL_NCCL_P2P_H
#define PPDL_NCCL_P2P_H

#include <mpi.h>
#include <stddef.h>

#include "backend/backend.h"

typedef struct ppdl_nccl ppdl_nccl;

/* seconds a host wait for one transfer may take (PPDL_NCCL_TIMEOUT overrides, 0: none) */
#define PPDL_NCCL_TIMEOUT_S 600.0

/* the directed links of a pipeline from this rank's side: it sends to to[0..n_to) and
 * receives from from[0..n_from) (ranks of the communicator) */
typedef struct ppdl_nccl_links {
    const int *to, *from;
    int n_to, n_from;
} ppdl_nccl_links;

/* one transfer in flight; zero-initialise, reuse freely once it completed */
typedef struct ppdl_nccl_req {
    void *done;      /* cudaEvent_t recorded after the transfer on its stream */
    int pending;     /* 1 from isend/irecv until test/wait saw it complete */
    const char *what; /* "send", "receive", "all-reduce": for the timeout's message */
    size_t bytes;
    int peer;        /* -1: an all-reduce */
} ppdl_nccl_req;

/* Collective over comm (the cuda backend on every rank): 1 when every rank has a GPU of
 * its own (told apart by PCI bus id), else 0 and why (the same answer on every rank) */
int ppdl_nccl_gpus_own(MPI_Comm comm, ppdl_backend *be, char *why, size_t len);
/* Collective over comm. links NULL: one communicator over comm's ranks (all-reduces,
 * the probe); else a communicator per directed link, each rank naming its own (see
 * above). NULL (on every rank) when ranks share a GPU, with the reason. */
ppdl_nccl *ppdl_nccl_create(MPI_Comm comm, ppdl_backend *be, const ppdl_nccl_links *links, char *err, size_t errlen);
void ppdl_nccl_isend(ppdl_nccl *nc, const void *dev, size_t n_bytes, int peer, ppdl_nccl_req *req);
void ppdl_nccl_irecv(ppdl_nccl *nc, void *dev, size_t n_bytes, int peer, ppdl_nccl_req *req);
/* the sum of n floats at dev over the communicator's ranks, in place (ncclAllReduce;
 * every rank gets the same bits), on the send stream after the work queued on the
 * compute stream so far: the replicas' gradient sums (pipe/grad_sum.c) */
void ppdl_nccl_iallreduce_sum(ppdl_nccl *nc, float *dev, size_t n, ppdl_nccl_req *req);
/* the compute stream waits for the transfer (GPU side; returns at once) */
void ppdl_nccl_stream_wait(ppdl_nccl *nc, ppdl_nccl_req *req);
/* host side: 1 when the transfer is complete (no-op 1 for an idle request) */
int ppdl_nccl_test(ppdl_nccl *nc, ppdl_nccl_req *req);
/* until complete; ends the job after the timeout (PPDL_NCCL_TIMEOUT) */
void ppdl_nccl_wait(ppdl_nccl *nc, ppdl_nccl_req *req);
void ppdl_nccl_req_free(ppdl_nccl_req *req);
void ppdl_nccl_destroy(ppdl_nccl *nc);

#endif
