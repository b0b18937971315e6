/* nccl_p2p.c — NCCL send/recv between pipeline stages and all-reduce over replicas
 * (see nccl_p2p.h). */
#include "config.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/nccl_p2p.h"
#include "core/error.h"
#include "core/util.h"
#include "core/test_hooks.h"

/* a communicator of two ranks that carries one direction of one link: `peer` sends to
 * this rank (recv) or this rank sends to it (send); in it this rank is `me` */
typedef struct link {
    int peer, sending, me;
    ncclComm_t comm;
} link;

#define PENDING_MAX 256

struct ppdl_nccl {
    ncclComm_t comm;           /* over the whole MPI communicator (links == NULL), else NULL */
    link *links;               /* the pipeline's directed links (links != NULL) */
    int n_links;
    ppdl_backend *be;
    cudaStream_t compute, send, recv;
    cudaEvent_t ready;         /* recorded on the compute stream before each transfer */
    void *warm;                /* one byte of device memory: the links' first contact */
    int rank, size;
    double timeout_s;
    ppdl_nccl_req *pending[PENDING_MAX]; /* issued, not yet seen complete: for the timeout's message */
    int n_pending;
};

#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) ppdl_die("%s: CUDA error %d: %s", #call, (int)e_, cudaGetErrorString(e_)); \
    } while (0)
#define NCCL_CHECK(c, call)                                                                       \
    do {                                                                                          \
        ncclResult_t r_ = (call);                                                                 \
        if (r_ != ncclSuccess)                                                                    \
            ppdl_die("%s: NCCL error %d: %s (%s)", #call, (int)r_, ncclGetErrorString(r_), ncclGetLastError(c)); \
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

/* PPDL_NCCL_TIMEOUT: seconds a host wait for one NCCL transfer may take before the job
 * ends (default 600; 0: no bound) */
static double nccl_timeout(void)
{
    const char *v = getenv("PPDL_NCCL_TIMEOUT");
    if (!v || !*v) return PPDL_NCCL_TIMEOUT_S;
    char *end;
    double s = strtod(v, &end);
    PPDL_CHECK(*end == 0 && s >= 0, "PPDL_NCCL_TIMEOUT=%s: expected seconds (a number >= 0, 0: no bound)", v);
    return s;
}

/* a communicator of `size` ranks in which this one is `rank`: `root` (a rank of comm)
 * makes the id, MPI carries it (NCCL's bootstrap recipe); a failure ends the job, so no
 * rank is left inside the collective init */
static ncclComm_t init_comm(MPI_Comm comm, int root, int size, int rank, const int *members)
{
    ncclUniqueId id;
    int me = 0;
    memset(&id, 0, sizeof id);
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &me));
    if (me == root) NCCL_CHECK(NULL, ncclGetUniqueId(&id));
    if (!members) {
        PPDL_CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, root, comm));
    } else if (me == root) { /* a link: the two members alone */
        for (int i = 0; i < size; i++)
            if (members[i] != me) PPDL_CHECK_MPI(MPI_Send(&id, (int)sizeof id, MPI_BYTE, members[i], 0, comm));
    } else {
        PPDL_CHECK_MPI(MPI_Recv(&id, (int)sizeof id, MPI_BYTE, root, 0, comm, MPI_STATUS_IGNORE));
    }
    ncclComm_t c = NULL;
    NCCL_CHECK(NULL, ncclCommInitRank(&c, size, id, rank));
    return c;
}

static int cmp_link(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The pipeline's links, each its own communicator of two ranks, connected now.
 * Every directed link (i sends to j) of the job is listed (the union of what each
 * rank says it sends and receives), sorted, and each rank makes its own links in that
 * order: the first link not yet made has both of its ranks at it, so no rank waits
 * for one that waits elsewhere. The first contact (a 1-byte send and its receive) is
 * made here too: NCCL connects two ranks at their first operation and holds the
 * host until the peer makes the same connection, which inside a step would wait on a
 * rank that waits in another communicator. */
static void make_links(ppdl_nccl *nc, MPI_Comm comm, const ppdl_nccl_links *l)
{
    int n = nc->size, me = nc->rank;
    MPI_Comm ids; /* the ids travel apart from the job's other messages */
    PPDL_CHECK_MPI(MPI_Comm_dup(comm, &ids));
    /* each rank's list: pairs (from, to) of the links it knows */
    int mine_n = l->n_to + l->n_from;
    int *mine = ppdl_xcalloc((size_t)(2 * mine_n + 1), sizeof(int));
    for (int i = 0; i < l->n_to; i++) mine[2 * i] = me, mine[2 * i + 1] = l->to[i];
    for (int i = 0; i < l->n_from; i++) mine[2 * (l->n_to + i)] = l->from[i], mine[2 * (l->n_to + i) + 1] = me;
    for (int i = 0; i < 2 * mine_n; i++)
        PPDL_CHECK(mine[i] >= 0 && mine[i] < n && mine[i / 2 * 2] != mine[i / 2 * 2 + 1],
                   "NCCL links: rank %d names rank %d of %d", me, mine[i], n);
    int *counts = ppdl_xcalloc((size_t)n, sizeof(int)), *displs = ppdl_xcalloc((size_t)n, sizeof(int));
    int two_n = 2 * mine_n;
    PPDL_CHECK_MPI(MPI_Allgather(&two_n, 1, MPI_INT, counts, 1, MPI_INT, comm));
    int total = 0;
    for (int i = 0; i < n; i++) displs[i] = total, total += counts[i];
    int *all = ppdl_xcalloc((size_t)total + 1, sizeof(int));
    PPDL_CHECK_MPI(MPI_Allgatherv(mine, two_n, MPI_INT, all, counts, displs, MPI_INT, comm));
    int n_all = total / 2;
    qsort(all, (size_t)n_all, 2 * sizeof(int), cmp_link);
    nc->links = ppdl_xcalloc((size_t)(n_all ? n_all : 1), sizeof(link));
    for (int i = 0; i < n_all; i++) {
        int from = all[2 * i], to = all[2 * i + 1];
        if (i > 0 && from == all[2 * i - 2] && to == all[2 * i - 1]) continue; /* named by both ends */
        if (from != me && to != me) continue;
        link *k = &nc->links[nc->n_links++];
        k->sending = from == me;
        k->peer = k->sending ? to : from;
        k->me = k->sending ? 0 : 1;
        int members[2] = {from, to};
        k->comm = init_comm(ids, from, 2, k->me, members);
        if (ppdl_test_hook("NCCL_NO_WARMUP")) continue; /* the negative control of the first contact */
        if (k->sending) NCCL_CHECK(k->comm, ncclSend(nc->warm, 1, ncclChar, 1, k->comm, nc->send));
        else NCCL_CHECK(k->comm, ncclRecv(nc->warm, 1, ncclChar, 0, k->comm, nc->recv));
        CUDA_CHECK(cudaStreamSynchronize(k->sending ? nc->send : nc->recv));
    }
    PPDL_CHECK_MPI(MPI_Comm_free(&ids));
    free(mine);
    free(counts);
    free(displs);
    free(all);
}

static void watch(void *arg, double waited_s);

/* The first contact of every pair of ranks on the one communicator, and of its
 * collectives (one all-reduce of one float). The pairs (a < b) go in one order on every
 * rank, a sending first: the first pair not yet connected has both ranks at it, and
 * the communicator's issue order is the same on both sides. */
static void connect_all(ppdl_nccl *nc)
{
    if (ppdl_test_hook("NCCL_NO_WARMUP")) return; /* the negative control of the first contact */
    for (int a = 0; a < nc->size; a++)
        for (int b = a + 1; b < nc->size; b++) {
            if (a != nc->rank && b != nc->rank) continue;
            int peer = a == nc->rank ? b : a;
            for (int k = 0; k < 2; k++) {
                if ((k == 0) == (a == nc->rank)) NCCL_CHECK(nc->comm, ncclSend(nc->warm, 1, ncclChar, peer, nc->comm, nc->send));
                else NCCL_CHECK(nc->comm, ncclRecv(nc->warm, 1, ncclChar, peer, nc->comm, nc->recv));
                CUDA_CHECK(cudaStreamSynchronize(nc->send));
                CUDA_CHECK(cudaStreamSynchronize(nc->recv));
            }
        }
    NCCL_CHECK(nc->comm, ncclAllReduce(nc->warm, nc->warm, 1, ncclFloat, ncclSum, nc->comm, nc->send));
    CUDA_CHECK(cudaStreamSynchronize(nc->send));
}

ppdl_nccl *ppdl_nccl_create(MPI_Comm comm, ppdl_backend *be, const ppdl_nccl_links *links, char *err, size_t errlen)
{
    if (!ppdl_nccl_gpus_own(comm, be, err, errlen)) return NULL;
    ppdl_nccl *nc = ppdl_xcalloc(1, sizeof *nc);
    nc->be = be;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &nc->rank));
    PPDL_CHECK_MPI(MPI_Comm_size(comm, &nc->size));
    nc->timeout_s = nccl_timeout();
    nc->compute = (cudaStream_t)ppdl_cuda_stream(be);
    CUDA_CHECK(cudaSetDevice(ppdl_cuda_device(be)));
    /* the highest priority: transfers get SMs ahead of queued compute kernels */
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&nc->send, cudaStreamNonBlocking, greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&nc->recv, cudaStreamNonBlocking, greatest));
    CUDA_CHECK(cudaEventCreateWithFlags(&nc->ready, cudaEventDisableTiming));
    /* the test hook NCCL_ONE_COMM, the negative control of the links: one communicator for
     * every message */
    if (links && ppdl_test_hook("NCCL_ONE_COMM")) links = NULL;
    /* the device may be full already (the weights, or other communicators): that is the
     * run's out-of-memory status, as any allocation's */
    cudaError_t e = cudaMalloc(&nc->warm, sizeof(float));
    if (e == cudaErrorMemoryAllocation)
        ppdl_fail(3, "the cuda device is out of memory creating NCCL's communicators");
    CUDA_CHECK(e);
    CUDA_CHECK(cudaMemsetAsync(nc->warm, 0, sizeof(float), nc->compute));
    CUDA_CHECK(cudaStreamSynchronize(nc->compute));
    if (links) {
        make_links(nc, comm, links);
    } else {
        nc->comm = init_comm(comm, 0, nc->size, nc->rank, NULL);
        connect_all(nc);
    }
    ppdl_cuda_watch(be, watch, nc, 1);
    return nc;
}

/* the communicator and peer rank within it of a transfer to or from `peer` */
static ncclComm_t comm_for(ppdl_nccl *nc, int peer, int sending, int *rank_in)
{
    if (nc->comm) {
        *rank_in = peer;
        return nc->comm;
    }
    for (int i = 0; i < nc->n_links; i++)
        if (nc->links[i].peer == peer && nc->links[i].sending == sending) {
            *rank_in = 1 - nc->links[i].me;
            return nc->links[i].comm;
        }
    ppdl_die("NCCL: rank %d has no link %s rank %d (the pipeline's links are made at the start)", nc->rank,
             sending ? "to" : "from", peer);
}

static void begin(ppdl_nccl *nc, ppdl_nccl_req *req, cudaStream_t s, const char *what, size_t n, int peer)
{
    PPDL_CHECK(!req->pending, "an NCCL request was reused while its transfer was in flight");
    if (!req->done) {
        cudaEvent_t e;
        CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        req->done = (void *)e;
    }
    req->what = what;
    req->bytes = n;
    req->peer = peer;
    if (nc->n_pending < PENDING_MAX) nc->pending[nc->n_pending++] = req;
    /* the transfer starts after the work queued on the compute stream so far: the
     * producer of a send, the last reader of a receive's buffer */
    CUDA_CHECK(cudaEventRecord(nc->ready, nc->compute));
    CUDA_CHECK(cudaStreamWaitEvent(s, nc->ready, 0));
}

void ppdl_nccl_isend(ppdl_nccl *nc, const void *dev, size_t n, int peer, ppdl_nccl_req *req)
{
    int to = 0;
    ncclComm_t c = comm_for(nc, peer, 1, &to);
    begin(nc, req, nc->send, "send", n, peer);
    NCCL_CHECK(c, ncclSend(dev, n, ncclChar, to, c, nc->send));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)req->done, nc->send));
    req->pending = 1;
}

void ppdl_nccl_irecv(ppdl_nccl *nc, void *dev, size_t n, int peer, ppdl_nccl_req *req)
{
    int from = 0;
    ncclComm_t c = comm_for(nc, peer, 0, &from);
    begin(nc, req, nc->recv, "receive", n, peer);
    NCCL_CHECK(c, ncclRecv(dev, n, ncclChar, from, c, nc->recv));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)req->done, nc->recv));
    req->pending = 1;
}

void ppdl_nccl_iallreduce_sum(ppdl_nccl *nc, float *dev, size_t n, ppdl_nccl_req *req)
{
    PPDL_CHECK(nc->comm, "NCCL: an all-reduce needs a communicator over all ranks, not links");
    begin(nc, req, nc->send, "all-reduce", n * sizeof(float), -1);
    NCCL_CHECK(nc->comm, ncclAllReduce(dev, dev, n, ncclFloat, ncclSum, nc->comm, nc->send));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)req->done, nc->send));
    req->pending = 1;
}

void ppdl_nccl_stream_wait(ppdl_nccl *nc, ppdl_nccl_req *req)
{
    if (req->done) CUDA_CHECK(cudaStreamWaitEvent(nc->compute, (cudaEvent_t)req->done, 0));
}

/* a peer's failure shows up as the communicator's asynchronous error */
static void check_async(ppdl_nccl *nc)
{
    ncclResult_t async = ncclSuccess;
    if (nc->comm) {
        NCCL_CHECK(nc->comm, ncclCommGetAsyncError(nc->comm, &async));
        NCCL_CHECK(nc->comm, async);
    }
    for (int i = 0; i < nc->n_links; i++) {
        NCCL_CHECK(nc->links[i].comm, ncclCommGetAsyncError(nc->links[i].comm, &async));
        NCCL_CHECK(nc->links[i].comm, async);
    }
}

static void forget(ppdl_nccl *nc, ppdl_nccl_req *req)
{
    for (int i = 0; i < nc->n_pending; i++)
        if (nc->pending[i] == req) {
            nc->pending[i] = nc->pending[--nc->n_pending];
            return;
        }
}

int ppdl_nccl_test(ppdl_nccl *nc, ppdl_nccl_req *req)
{
    if (!req->pending) return 1;
    cudaError_t e = cudaEventQuery((cudaEvent_t)req->done);
    if (e == cudaSuccess) {
        req->pending = 0;
        forget(nc, req);
        return 1;
    }
    if (e != cudaErrorNotReady) CUDA_CHECK(e);
    check_async(nc);
    return 0;
}

/* the job ends: `req`'s transfer (or, req NULL, the first still pending) has not
 * completed after the timeout */
static void timed_out(ppdl_nccl *nc, ppdl_nccl_req *req, double waited_s, const char *who)
{
    for (int i = 0; !req && i < nc->n_pending; i++)
        if (cudaEventQuery((cudaEvent_t)nc->pending[i]->done) == cudaErrorNotReady) req = nc->pending[i];
    char what[96] = "a transfer";
    if (req && req->peer >= 0)
        snprintf(what, sizeof what, "an NCCL %s of %zu bytes %s rank %d", req->what, req->bytes,
                 strcmp(req->what, "send") ? "from" : "to", req->peer);
    else if (req)
        snprintf(what, sizeof what, "an NCCL %s of %zu bytes", req->what, req->bytes);
    ppdl_die("rank %d: %s has not completed after %.0f s (PPDL_NCCL_TIMEOUT)%s: a peer stopped or failed", nc->rank,
             what, waited_s, who);
}

void ppdl_nccl_wait(ppdl_nccl *nc, ppdl_nccl_req *req)
{
    struct timespec nap = {0, 20000};
    double t0 = ppdl_now_s();
    for (long i = 0; !ppdl_nccl_test(nc, req); i++) {
        if (i < 1000) {
            sched_yield();
            continue;
        }
        nanosleep(&nap, NULL); /* a long wait leaves the core to others */
        double waited = ppdl_now_s() - t0;
        if (nc->timeout_s > 0 && waited > nc->timeout_s) timed_out(nc, req, waited, "");
    }
}

/* registered with the CUDA backend (ppdl_cuda_watch): while the host waits for the
 * compute stream, which may wait on this object's transfers */
static void watch(void *arg, double waited_s)
{
    ppdl_nccl *nc = arg;
    check_async(nc);
    if (nc->timeout_s > 0 && waited_s > nc->timeout_s && nc->n_pending)
        timed_out(nc, NULL, waited_s, ", and the GPU's compute stream waits on it");
}

void ppdl_nccl_req_free(ppdl_nccl_req *req)
{
    /* a request freed while pending stays on its object's list only until the object
     * checks it: the runtime waits on every request before freeing it */
    if (req->done) CUDA_CHECK(cudaEventDestroy((cudaEvent_t)req->done));
    req->done = NULL;
    req->pending = 0;
}

void ppdl_nccl_destroy(ppdl_nccl *nc)
{
    if (!nc) return;
    ppdl_cuda_watch(nc->be, watch, nc, 0);
    CUDA_CHECK(cudaStreamSynchronize(nc->send));
    CUDA_CHECK(cudaStreamSynchronize(nc->recv));
    if (nc->comm) {
        NCCL_CHECK(nc->comm, ncclCommFinalize(nc->comm));
        NCCL_CHECK(nc->comm, ncclCommDestroy(nc->comm));
    }
    for (int i = 0; i < nc->n_links; i++) {
        NCCL_CHECK(nc->links[i].comm, ncclCommFinalize(nc->links[i].comm));
        NCCL_CHECK(nc->links[i].comm, ncclCommDestroy(nc->links[i].comm));
    }
    free(nc->links);
    if (nc->warm) CUDA_CHECK(cudaFree(nc->warm));
    CUDA_CHECK(cudaEventDestroy(nc->ready));
    CUDA_CHECK(cudaStreamDestroy(nc->send));
    CUDA_CHECK(cudaStreamDestroy(nc->recv));
    free(nc);
}
