/* nccl_p2p.h — stage-to-stage transfers between GPUs with NCCL send/recv, on streams of
 * their own so that they overlap the compute stream, ordered against it with events
 * (no host waits). Only in builds with HAVE_CUDA; the backend must be the CUDA one.
 *
 * How the pipeline runtime uses it (instead of MPI on device pointers, or the host
 * staging of backend/xfer.h):
 *
 *   nc = ppdl_nccl_create(MPI_COMM_WORLD, be, err, len);   every rank, once (collective)
 *   SEND_ACT(mb):  ppdl_nccl_isend(nc, sl->out, n, next_rank, &sl->act_send_req);
 *                  (queued after the forward already on the compute stream)
 *   RECV_ACT(mb):  ppdl_nccl_irecv(nc, sl->act[0], n, prev_rank, &sl->act_recv_req)
 *                  when the slot is free (as the runtime posts MPI receives today), then
 *                  at the RECV op: ppdl_nccl_stream_wait(nc, &sl->act_recv_req) before
 *                  the forward is queued: the GPU waits, the host does not.
 *   before overwriting a buffer that was sent: ppdl_nccl_stream_wait(nc, &send_req)
 *   before the optimizer: ppdl_nccl_wait on every pending send (as today).
 *
 * Order: NCCL matches sends and receives between two ranks in the order they are
 * issued (there are no tags). The runtime's op lists issue, for each pair of ranks and
 * each direction, sends and receives in micro-batch order, so they match. Sends run on
 * one stream and receives on another, so a receive posted early never holds back a
 * send queued after it; both streams are FIFO.
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
/* the compute stream waits for the transfer (GPU side; returns at once) */
void ppdl_nccl_stream_wait(ppdl_nccl *nc, ppdl_nccl_req *req);
/* host side: 1 when the transfer is complete (no-op 1 for an idle request) */
int ppdl_nccl_test(ppdl_nccl *nc, ppdl_nccl_req *req);
void ppdl_nccl_wait(ppdl_nccl *nc, ppdl_nccl_req *req);
void ppdl_nccl_req_free(ppdl_nccl_req *req);
void ppdl_nccl_destroy(ppdl_nccl *nc);

#endif
