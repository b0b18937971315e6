/* nccl_p2p.h — stage-to-stage transfers between GPUs with NCCL send/recv, on streams of
 * their own so that they overlap the compute stream, ordered against it with events
 * (no host waits). Only in builds with HAVE_CUDA; the backend must be the CUDA one.
 *
 * How the pipeline runtime uses it (--p2p nccl; pipe/runtime.c, "the stages'
 * messages"), instead of the host staging of backend/xfer.h:
 *
 *   act = ppdl_nccl_create(MPI_COMM_WORLD, be, ...); grad = the same   every rank, once
 *          (collective; cmd/run_stage.c): one object per direction of the messages
 *   SEND_ACT(mb):  ppdl_nccl_isend(act, sl->out, n, next_rank, &req)
 *                  (queued after the forward already on the compute stream)
 *   receives:      ppdl_nccl_irecv(act or grad, buf, n, peer, &req) when the buffer is
 *                  free (where the runtime posts MPI receives), then at the RECV op
 *                  ppdl_nccl_stream_wait before the next compute is queued: the GPU
 *                  waits, the host does not
 *   before overwriting a buffer that was sent: ppdl_nccl_stream_wait on its send
 *   before a request is reused, and on every send before the optimizer: ppdl_nccl_wait
 *
 * Order: NCCL matches sends and receives between two ranks in the order they are
 * issued (there are no tags). The runtime's op lists issue, for each pair of ranks and
 * each direction, sends and receives in micro-batch order, so they match. Each object
 * has its own communicator and its own send and receive streams, both FIFO, so a
 * receive posted early never holds back a send queued after it, and (one object per
 * direction) an activation's receive never holds back a gradient's or the other way
 * round (pipe/runtime.h, cfg.nccl_act). Not yet run on a GPU: see README.
 *
 * NCCL needs one GPU per rank: two ranks on one GPU (PPDL_CUDA_SHARE=1) cannot form a
 * communicator. ppdl_nccl_create checks that before NCCL does and returns NULL with
 * the reason on every rank, so the caller can fall back to host-staged MPI. */
#ifndef PPDL_NCCL_P2P_H
#define PPDL_NCCL_P2P_H

#include <mpi.h>
#include <stddef.h>

#include "backend/backend.h"

typedef struct ppdl_nccl ppdl_nccl;

/* one transfer in flight; zero-initialise, reuse freely once it completed */
typedef struct ppdl_nccl_req {
    void *done;      /* cudaEvent_t recorded after the transfer on its stream */
    int pending;     /* 1 from isend/irecv until test/wait saw it complete */
} ppdl_nccl_req;

/* Collective over comm (the cuda backend on every rank): 1 when every rank has a GPU of
 * its own (told apart by PCI bus id), else 0 and why (the same answer on every rank) */
int ppdl_nccl_gpus_own(MPI_Comm comm, ppdl_backend *be, char *why, size_t len);
/* Collective over comm. NULL (on every rank) when ranks share a GPU, with the reason. */
ppdl_nccl *ppdl_nccl_create(MPI_Comm comm, ppdl_backend *be, char *err, size_t errlen);
void ppdl_nccl_isend(ppdl_nccl *nc, const void *dev, size_t n_bytes, int peer, ppdl_nccl_req *req);
void ppdl_nccl_irecv(ppdl_nccl *nc, void *dev, size_t n_bytes, int peer, ppdl_nccl_req *req);
/* the sum of n floats at dev over the communicator's ranks, in place (ncclAllReduce;
 * every rank gets the same bits), on the send stream after the work queued on the
 * compute stream so far: the replicas' gradient sums (pipe/runtime.c) */
void ppdl_nccl_iallreduce_sum(ppdl_nccl *nc, float *dev, size_t n, ppdl_nccl_req *req);
/* the compute stream waits for the transfer (GPU side; returns at once) */
void ppdl_nccl_stream_wait(ppdl_nccl *nc, ppdl_nccl_req *req);
/* host side: 1 when the transfer is complete (no-op 1 for an idle request) */
int ppdl_nccl_test(ppdl_nccl *nc, ppdl_nccl_req *req);
void ppdl_nccl_wait(ppdl_nccl *nc, ppdl_nccl_req *req);
void ppdl_nccl_req_free(ppdl_nccl_req *req);
void ppdl_nccl_destroy(ppdl_nccl *nc);

#endif
