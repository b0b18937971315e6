/* nccl_p2p.c — NCCL send/recv between pipeline stages (see nccl_p2p.h). */
#include "config.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/nccl_p2p.h"
#include "core/error.h"
#include "core/util.h"

struct ppdl_nccl {
    ncclComm_t comm;
    ppdl_backend *be;
    cudaStream_t compute, send, recv;
    cudaEvent_t ready;         /* recorded on the compute stream before each transfer */
    int rank, size;
};

#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) ppdl_die("%s: CUDA error %d: %s", #call, (int)e_, cudaGetErrorString(e_)); \
    } while (0)
#define NCCL_CHECK(nc, call)                                                                      \
    do {                                                                                          \
        ncclResult_t r_ = (call);                                                                 \
        if (r_ != ncclSuccess)                                                                    \
            ppdl_die("%s: NCCL error %d: %s (%s)", #call, (int)r_, ncclGetErrorString(r_),        \
                     (nc) && (nc)->comm ? ncclGetLastError((nc)->comm) : ncclGetLastError(NULL)); \
    } while (0)

/* 1 when two ranks of this node use the same GPU (NCCL refuses such a communicator);
 * collective over comm */
static int gpus_shared(MPI_Comm comm, int device, int *other_rank)
{
    MPI_Comm node;
    int me = 0, n = 0, world = 0;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &world));
    PPDL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, world, MPI_INFO_NULL, &node));
    PPDL_CHECK_MPI(MPI_Comm_rank(node, &me));
    PPDL_CHECK_MPI(MPI_Comm_size(node, &n));
    /* the PCI bus id names the physical GPU whatever CUDA_VISIBLE_DEVICES says */
    char mine[32] = "";
    CUDA_CHECK(cudaDeviceGetPCIBusId(mine, sizeof mine, device));
    char *all = ppdl_xcalloc((size_t)n, sizeof mine);
    int *ranks = ppdl_xcalloc((size_t)n, sizeof(int));
    PPDL_CHECK_MPI(MPI_Allgather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR, node));
    PPDL_CHECK_MPI(MPI_Allgather(&world, 1, MPI_INT, ranks, 1, MPI_INT, node));
    int shared = 0;
    for (int i = 0; i < n; i++)
        if (i != me && !strncmp(all + i * sizeof mine, mine, sizeof mine)) {
            shared = 1;
            *other_rank = ranks[i];
        }
    free(all);
    free(ranks);
    PPDL_CHECK_MPI(MPI_Comm_free(&node));
    return shared;
}

int ppdl_nccl_gpus_own(MPI_Comm comm, ppdl_backend *be, char *why, size_t len)
{
    PPDL_CHECK(!strcmp(ppdl_be_name(be), "cuda"), "NCCL transfers need the cuda backend, not %s", ppdl_be_name(be));
    int rank = 0, other = -1;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    int device = ppdl_cuda_device(be);
    int shared = gpus_shared(comm, device, &other), any = 0;
    PPDL_CHECK_MPI(MPI_Allreduce(&shared, &any, 1, MPI_INT, MPI_MAX, comm));
    if (!any) return 1;
    if (shared)
        snprintf(why, len, "NCCL needs one GPU per rank, and ranks %d and %d share CUDA device %d", rank, other,
                 device);
    else
        snprintf(why, len, "NCCL needs one GPU per rank, and some ranks of the job share a GPU");
    return 0;
}

ppdl_nccl *ppdl_nccl_create(MPI_Comm comm, ppdl_backend *be, char *err, size_t errlen)
{
    if (!ppdl_nccl_gpus_own(comm, be, err, errlen)) return NULL;
    int rank = 0, size = 0;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    PPDL_CHECK_MPI(MPI_Comm_size(comm, &size));
    int device = ppdl_cuda_device(be);
    ppdl_nccl *nc = ppdl_xcalloc(1, sizeof *nc);
    nc->be = be;
    nc->rank = rank;
    nc->size = size;
    nc->compute = (cudaStream_t)ppdl_cuda_stream(be);
    /* rank 0 makes the id; MPI carries it to the others (NCCL's bootstrap recipe) */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) NCCL_CHECK(nc, ncclGetUniqueId(&id));
    PPDL_CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm));
    CUDA_CHECK(cudaSetDevice(device));
    /* a failure here ends the job (ppdl_die -> MPI_Abort), so no rank is left inside
     * the collective init */
    NCCL_CHECK(nc, ncclCommInitRank(&nc->comm, size, id, rank));
    /* the highest priority: transfers get SMs ahead of queued compute kernels */
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&nc->send, cudaStreamNonBlocking, greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&nc->recv, cudaStreamNonBlocking, greatest));
    CUDA_CHECK(cudaEventCreateWithFlags(&nc->ready, cudaEventDisableTiming));
    return nc;
}

static void begin(ppdl_nccl *nc, ppdl_nccl_req *req, cudaStream_t s)
{
    PPDL_CHECK(!req->pending, "an NCCL request was reused while its transfer was in flight");
    if (!req->done) {
        cudaEvent_t e;
        CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        req->done = (void *)e;
    }
    /* the transfer starts after the work queued on the compute stream so far: the
     * producer of a send, the last reader of a receive's buffer */
    CUDA_CHECK(cudaEventRecord(nc->ready, nc->compute));
    CUDA_CHECK(cudaStreamWaitEvent(s, nc->ready, 0));
}

void ppdl_nccl_isend(ppdl_nccl *nc, const void *dev, size_t n, int peer, ppdl_nccl_req *req)
{
    begin(nc, req, nc->send);
    NCCL_CHECK(nc, ncclSend(dev, n, ncclChar, peer, nc->comm, nc->send));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)req->done, nc->send));
    req->pending = 1;
}

void ppdl_nccl_irecv(ppdl_nccl *nc, void *dev, size_t n, int peer, ppdl_nccl_req *req)
{
    begin(nc, req, nc->recv);
    NCCL_CHECK(nc, ncclRecv(dev, n, ncclChar, peer, nc->comm, nc->recv));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)req->done, nc->recv));
    req->pending = 1;
}

void ppdl_nccl_iallreduce_sum(ppdl_nccl *nc, float *dev, size_t n, ppdl_nccl_req *req)
{
    begin(nc, req, nc->send);
    NCCL_CHECK(nc, ncclAllReduce(dev, dev, n, ncclFloat, ncclSum, nc->comm, nc->send));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)req->done, nc->send));
    req->pending = 1;
}

void ppdl_nccl_stream_wait(ppdl_nccl *nc, ppdl_nccl_req *req)
{
    if (req->done) CUDA_CHECK(cudaStreamWaitEvent(nc->compute, (cudaEvent_t)req->done, 0));
}

int ppdl_nccl_test(ppdl_nccl *nc, ppdl_nccl_req *req)
{
    if (!req->pending) return 1;
    cudaError_t e = cudaEventQuery((cudaEvent_t)req->done);
    if (e == cudaSuccess) {
        req->pending = 0;
        return 1;
    }
    if (e != cudaErrorNotReady) CUDA_CHECK(e);
    /* a peer's failure shows up here rather than as a hang */
    ncclResult_t async = ncclSuccess;
    NCCL_CHECK(nc, ncclCommGetAsyncError(nc->comm, &async));
    NCCL_CHECK(nc, async);
    return 0;
}

void ppdl_nccl_wait(ppdl_nccl *nc, ppdl_nccl_req *req)
{
    while (!ppdl_nccl_test(nc, req)) sched_yield();
}

void ppdl_nccl_req_free(ppdl_nccl_req *req)
{
    if (req->done) CUDA_CHECK(cudaEventDestroy((cudaEvent_t)req->done));
    req->done = NULL;
    req->pending = 0;
}

void ppdl_nccl_destroy(ppdl_nccl *nc)
{
    if (!nc) return;
    CUDA_CHECK(cudaStreamSynchronize(nc->send));
    CUDA_CHECK(cudaStreamSynchronize(nc->recv));
    NCCL_CHECK(nc, ncclCommFinalize(nc->comm));
    NCCL_CHECK(nc, ncclCommDestroy(nc->comm));
    nc->comm = NULL;
    CUDA_CHECK(cudaEventDestroy(nc->ready));
    CUDA_CHECK(cudaStreamDestroy(nc->send));
    CUDA_CHECK(cudaStreamDestroy(nc->recv));
    free(nc);
}
