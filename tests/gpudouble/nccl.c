/* nccl.c — the GPU double's NCCL, over MPI, with the semantics ppdl must live with:
 *
 *  - one issue order per communicator: an operation starts only when every operation
 *    issued before it on the same communicator has completed, whatever their streams
 *    (NCCL runs a communicator's kernels one after another);
 *  - the first contact between two peers blocks the host: the first ncclSend to a peer
 *    returns only once that peer has issued its first ncclRecv from this rank on the
 *    same communicator, and the other way round (NCCL connects peers lazily); the first
 *    collective blocks until every rank has issued one;
 *  - a send completes only when its receive has taken it (MPI_Issend), and a receive
 *    must name exactly the size sent;
 *  - stricter than NCCL, where a GPU would only be slow: a send issued on a
 *    communicator behind a receive from another peer that has not completed is fatal
 *    (it cannot leave before that receive: a pipeline's middle stage serialised, or
 *    deadlocked in other orders);
 *  - ranks on one GPU cannot form a communicator ("Duplicate GPU detected");
 *  - GPUD_NCCL_ERROR=K: the K-th operation never completes and the communicator
 *    reports ncclRemoteError through ncclCommGetAsyncError; GPUD_NCCL_HANG=K: the K-th
 *    never completes and nothing says why (a peer stuck without an error);
 *  - each connection charges NCCL's buffers to the device (GPUD_NCCL_BUFFER bytes, 4 MiB
 *    by default, per peer and direction; twice that for a communicator's collectives).
 * An all-reduce is a reduce to rank 0 and a broadcast, so every rank gets the same bits,
 * as NCCL's do. Data moves through host bounce buffers, so MPI never reads device memory.
 * Each communicator gets its own MPI communicator (MPI_Comm_create_group over the
 * world); the rendezvous that forms it uses tags at the top of MPI_COMM_WORLD's range. */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud.h"
#include "nccl.h"

#define MAGIC_COMM 0x4CC1C033u
#define ID_MAGIC 0x6770756Eu
#define TAG_DATA 0
#define TAG_HS_SEND 1
#define TAG_HS_RECV 2

enum { OP_SEND, OP_RECV, OP_ALLREDUCE };
static const char *op_name[] = {"ncclSend", "ncclRecv", "ncclAllReduce"};

typedef struct nop {
    struct nop *next;             /* in the communicator's issue order */
    struct gpud_nccl_comm *comm;
    int kind, peer, state;        /* state 0 queued, 1 in flight (2: broadcast of an all-reduce), 3 failed */
    void *buf;
    size_t bytes, count;
    long serial;
    MPI_Request req;
    void *bounce;
} nop;

struct gpud_nccl_comm {
    unsigned magic;
    int rank, nranks, device_phys;
    MPI_Comm mc;
    int *world;                    /* world rank of each rank */
    nop *head, *tail;
    unsigned char *conn_send, *conn_recv;
    int coll_connected;
    void **bufs;                   /* charged connection buffers */
    int n_bufs;
    ncclResult_t async_error;
    char last_error[256];
    int destroyed;
    struct gpud_nccl_comm *next_all;
};

static struct gpud_nccl_comm *all_comms;
static long n_ops, fail_op = -1, hang_op = -1;
static char global_error[256];

static int tag_ub(void)
{
    int *v = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
    return flag && v ? *v : 32767;
}

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    if (comm && comm->magic == MAGIC_COMM && comm->last_error[0]) return comm->last_error;
    return global_error;
}

static ncclResult_t fail(ncclComm_t comm, ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ncclResult_t fail(ncclComm_t comm, ncclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(comm ? comm->last_error : global_error, sizeof global_error, fmt, ap);
    va_end(ap);
    gpud_trace("NCCL: %s", comm ? comm->last_error : global_error);
    return r;
}

static int live(ncclComm_t c) { return c && c->magic == MAGIC_COMM && !c->destroyed; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static int serial;
    int up = 0, world = 0;
    MPI_Initialized(&up);
    if (!up) return fail(NULL, ncclInvalidUsage, "the GPU double's NCCL runs over MPI: MPI_Init first");
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    memset(id, 0, sizeof *id);
    uint32_t w[4] = {ID_MAGIC, (uint32_t)world, (uint32_t)++serial, 0};
    memcpy(id->internal, w, sizeof w);
    return ncclSuccess;
}

/* ------------------------------------------------------------------ waiting with MPI */

typedef struct reqs {
    int n;
    MPI_Request *r;
} reqs;
static int reqs_done(void *a_)
{
    reqs *a = a_;
    int all = 1;
    for (int i = 0; i < a->n; i++) {
        int flag = 0;
        MPI_Test(&a->r[i], &flag, MPI_STATUS_IGNORE);
        all &= flag;
    }
    return all;
}
static void wait_reqs(int n, MPI_Request *r, const char *what)
{
    reqs a = {n, r};
    gpud_wait(reqs_done, &a, what);
}

/* ------------------------------------------------------------------ communicators */

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    if (fail_op < 0) fail_op = env_long("GPUD_NCCL_ERROR", 0);
    if (hang_op < 0) hang_op = env_long("GPUD_NCCL_HANG", 0);
    uint32_t w[4];
    memcpy(w, id.internal, sizeof w);
    if (!out || w[0] != ID_MAGIC) return fail(NULL, ncclInvalidArgument, "ncclCommInitRank: not an id of ncclGetUniqueId");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(NULL, ncclInvalidArgument, "ncclCommInitRank: rank %d of %d", rank, nranks);
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return fail(NULL, ncclUnhandledCudaError, "ncclCommInitRank: no device");
    int world = 0, root = (int)w[1], tag = tag_ub() - (int)(w[2] % 1000);
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    /* rendezvous at the id's maker: {rank, world rank, GPU} from each, the table back */
    int mine[3] = {rank, world, gpud_physical(dev)};
    int *table = calloc((size_t)nranks * 3, sizeof(int));
    if (world == root) {
        int got = 0;
        if (rank >= 0) memcpy(&table[3 * rank], mine, sizeof mine), got++;
        while (got < nranks) {
            int in[3];
            MPI_Request r;
            MPI_Irecv(in, 3, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &r);
            wait_reqs(1, &r, "ncclCommInitRank (waiting for the other ranks)");
            if (in[0] < 0 || in[0] >= nranks) gpud_fatal("ncclCommInitRank: a rank %d joins a communicator of %d", in[0], nranks);
            memcpy(&table[3 * in[0]], in, sizeof in);
            got++;
        }
        MPI_Request *rs = calloc((size_t)nranks, sizeof *rs);
        int n = 0;
        for (int i = 0; i < nranks; i++)
            if (table[3 * i + 1] != world) MPI_Isend(table, 3 * nranks, MPI_INT, table[3 * i + 1], tag, MPI_COMM_WORLD, &rs[n++]);
        wait_reqs(n, rs, "ncclCommInitRank (sending the table)");
        free(rs);
    } else {
        MPI_Request r[2];
        MPI_Isend(mine, 3, MPI_INT, root, tag, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(table, 3 * nranks, MPI_INT, root, tag, MPI_COMM_WORLD, &r[1]);
        wait_reqs(2, r, "ncclCommInitRank (waiting for the other ranks)");
    }
    for (int i = 0; i < nranks; i++)
        for (int j = 0; j < i; j++)
            if (table[3 * i + 2] == table[3 * j + 2]) {
                int gpu = table[3 * i + 2];
                free(table);
                return fail(NULL, ncclInvalidUsage, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d",
                            j, i, gpu);
            }
    MPI_Group wg, g;
    int *ranks = malloc((size_t)nranks * sizeof(int));
    for (int i = 0; i < nranks; i++) ranks[i] = table[3 * i + 1];
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_incl(wg, nranks, ranks, &g);
    ncclComm_t c = calloc(1, sizeof *c);
    if (MPI_Comm_create_group(MPI_COMM_WORLD, g, tag - 1000, &c->mc) != MPI_SUCCESS)
        gpud_fatal("ncclCommInitRank: MPI_Comm_create_group failed");
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    MPI_Comm_set_errhandler(c->mc, MPI_ERRORS_RETURN);
    free(table);
    c->magic = MAGIC_COMM;
    c->rank = rank;
    c->nranks = nranks;
    c->device_phys = gpud_physical(dev);
    c->world = ranks;
    c->conn_send = calloc((size_t)nranks, 1);
    c->conn_recv = calloc((size_t)nranks, 1);
    c->bufs = calloc((size_t)(2 * nranks + 1), sizeof(void *));
    c->next_all = all_comms;
    all_comms = c;
    gpud_handle_open("NCCL communicator");
    *out = c;
    gpud_trace("ncclCommInitRank: rank %d of %d", rank, nranks);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!live(comm)) return fail(NULL, ncclInvalidArgument, "ncclCommCount: not a live communicator");
    *count = comm->nranks;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!live(comm)) return fail(NULL, ncclInvalidArgument, "ncclCommUserRank: not a live communicator");
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
    if (!live(comm)) return fail(NULL, ncclInvalidArgument, "ncclCommGetAsyncError: not a live communicator");
    *async_error = comm->async_error;
    return ncclSuccess;
}

static int comm_idle(void *c) { return ((ncclComm_t)c)->head == NULL; } /* under the lock (gpud_wait) */

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (!live(comm)) return fail(NULL, ncclInvalidArgument, "ncclCommFinalize: not a live communicator");
    if (!comm->async_error) gpud_wait(comm_idle, comm, "ncclCommFinalize (operations still pending)");
    return ncclSuccess;
}

static ncclResult_t release(ncclComm_t comm)
{
    gpud_lock();
    for (int i = 0; i < comm->n_bufs; i++) gpud_lib_free(comm->bufs[i]);
    comm->n_bufs = 0;
    MPI_Comm_free(&comm->mc);
    comm->destroyed = 1; /* kept, so that a later use is caught */
    gpud_handle_close("NCCL communicator");
    gpud_unlock();
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!live(comm)) return fail(NULL, ncclInvalidArgument, "ncclCommDestroy: not a live communicator (destroyed twice?)");
    gpud_lock();
    int busy = comm->head != NULL;
    gpud_unlock();
    if (busy && !comm->async_error)
        gpud_fatal("ncclCommDestroy with %s still pending: finalize first, or wait for the operations",
                   op_name[comm->head->kind]);
    return release(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!live(comm)) return ncclSuccess;
    return release(comm);
}

/* ------------------------------------------------------------------ operations */

static void describe(void *o_, char *buf, size_t len)
{
    nop *o = o_;
    const char *st[] = {"waiting for its turn on the communicator", "in flight", "in flight (broadcast)", "failed"};
    int behind = 0;
    for (nop *p = o->comm->head; p && p != o; p = p->next) behind++;
    snprintf(buf, len, "%s of %zu bytes %s rank %d (world rank %d) on a communicator of %d ranks, %s%s", op_name[o->kind],
             o->bytes, o->kind == OP_SEND ? "to" : "from", o->peer,
             o->peer >= 0 && o->peer < o->comm->nranks ? o->comm->world[o->peer] : -1, o->comm->nranks, st[o->state],
             behind ? " behind earlier operations of that communicator" : "");
    if (o->kind == OP_ALLREDUCE) snprintf(buf, len, "ncclAllReduce of %zu floats over %d ranks, %s", o->count,
                                          o->comm->nranks, st[o->state]);
}

int gpud_nccl_pending(void)
{
    int n = 0;
    for (ncclComm_t c = all_comms; c; c = c->next_all)
        for (nop *o = c->destroyed ? NULL : c->head; o; o = o->next) n++;
    return n;
}

void gpud_nccl_dump(void)
{
    int world = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    for (ncclComm_t c = all_comms; c; c = c->next_all) {
        if (c->destroyed) continue;
        int k = 0;
        for (nop *o = c->head; o; o = o->next, k++) {
            char d[256];
            describe(o, d, sizeof d);
            fprintf(stderr, "gpu double (rank %d):   NCCL pending %d: %s\n", world, k, d);
        }
    }
}

static void unlink_op(nop *o)
{
    ncclComm_t c = o->comm;
    nop **p = &c->head, *prev = NULL;
    while (*p && *p != o) prev = *p, p = &(*p)->next;
    if (!*p) return;
    *p = o->next;
    if (c->tail == o) c->tail = prev;
}

static int poll_op(void *o_)
{
    nop *o = o_;
    ncclComm_t c = o->comm;
    if (o->state == 3 || c->destroyed) return 0; /* failed: never completes */
    if (o->state == 0) {
        if (c->head != o) return 0; /* one issue order per communicator */
        if (o->serial == fail_op) {
            o->state = 3;
            c->async_error = ncclRemoteError;
            snprintf(c->last_error, sizeof c->last_error, "the double failed operation %ld (GPUD_NCCL_ERROR)", o->serial);
            return 0;
        }
        if (o->serial == hang_op) {
            o->state = 3;
            return 0;
        }
        o->bounce = malloc(o->bytes ? o->bytes : 1);
        if (o->kind != OP_RECV) memcpy(o->bounce, o->buf, o->bytes);
        int rc = MPI_SUCCESS;
        if (o->kind == OP_SEND) rc = MPI_Issend(o->bounce, (int)o->bytes, MPI_BYTE, o->peer, TAG_DATA, c->mc, &o->req);
        else if (o->kind == OP_RECV) rc = MPI_Irecv(o->bounce, (int)o->bytes, MPI_BYTE, o->peer, TAG_DATA, c->mc, &o->req);
        else rc = MPI_Ireduce(c->rank == 0 ? MPI_IN_PLACE : o->bounce, o->bounce, (int)o->count, MPI_FLOAT, MPI_SUM, 0,
                              c->mc, &o->req);
        if (rc != MPI_SUCCESS) gpud_fatal("%s: MPI error %d", op_name[o->kind], rc);
        o->state = 1;
        gpud_progressed();
    }
    int flag = 0;
    MPI_Status status;
    int rc = MPI_Test(&o->req, &flag, &status);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int n = 0;
        MPI_Error_string(rc, s, &n);
        char d[256];
        describe(o, d, sizeof d);
        gpud_fatal("%s: the message does not fit: a send larger than this receive (%s)", d, s);
    }
    if (!flag) return 0;
    if (o->kind == OP_RECV) {
        int got = 0;
        MPI_Get_count(&status, MPI_BYTE, &got);
        if ((size_t)got != o->bytes)
            gpud_fatal("ncclRecv of %zu bytes from rank %d got a send of %d bytes: NCCL needs the sizes to match",
                       o->bytes, o->peer, got);
    }
    if (o->kind == OP_ALLREDUCE && o->state == 1) { /* then the same bits to every rank */
        MPI_Ibcast(o->bounce, (int)o->count, MPI_FLOAT, 0, c->mc, &o->req);
        o->state = 2;
        gpud_progressed();
        return 0;
    }
    if (o->kind != OP_SEND) memcpy(o->buf, o->bounce, o->bytes);
    free(o->bounce);
    o->bounce = NULL;
    unlink_op(o);
    return 1;
}

/* NCCL's buffers for one connection, charged to the device */
static int charge(ncclComm_t c, size_t bytes)
{
    void *p = gpud_lib_alloc(bytes, "NCCL connection buffers");
    if (!p) return 0;
    c->bufs[c->n_bufs++] = p;
    return 1;
}

/* the host blocks until the peer makes the matching connection */
static ncclResult_t connect_peer(ncclComm_t c, int peer, int sending)
{
    unsigned char *done = sending ? c->conn_send : c->conn_recv;
    if (done[peer]) return ncclSuccess;
    size_t buf = (size_t)env_long("GPUD_NCCL_BUFFER", 4 << 20);
    if (!charge(c, buf))
        return fail(c, ncclSystemError, "out of device memory for the connection buffers to rank %d (%zu bytes)", peer, buf);
    int token = c->rank, got = -1;
    MPI_Request r[2];
    MPI_Isend(&token, 1, MPI_INT, peer, sending ? TAG_HS_SEND : TAG_HS_RECV, c->mc, &r[0]);
    MPI_Irecv(&got, 1, MPI_INT, peer, sending ? TAG_HS_RECV : TAG_HS_SEND, c->mc, &r[1]);
    char what[160];
    snprintf(what, sizeof what, "%s's first contact with rank %d (world rank %d): the host waits until that rank "
                                "issues its first %s with this one on this communicator",
             sending ? "ncclSend" : "ncclRecv", peer, c->world[peer], sending ? "ncclRecv" : "ncclSend");
    wait_reqs(2, r, what);
    done[peer] = 1;
    return ncclSuccess;
}

static ncclResult_t issue(int kind, void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                          cudaStream_t stream)
{
    const char *who = op_name[kind];
    if (!live(comm)) return fail(NULL, ncclInvalidArgument, "%s: not a live communicator", who);
    if (!gpud_stream_live(stream)) return fail(comm, ncclInvalidArgument, "%s: not a live stream", who);
    size_t elem = type == ncclChar || type == ncclUint8 ? 1 : type == ncclFloat ? 4 : 0;
    if (!elem) return fail(comm, ncclInvalidArgument, "%s: the double knows only ncclChar and ncclFloat (got %d)", who, type);
    if (kind == OP_ALLREDUCE && type != ncclFloat)
        return fail(comm, ncclInvalidArgument, "%s: the double sums floats only", who);
    if (kind != OP_ALLREDUCE && (peer < 0 || peer >= comm->nranks || peer == comm->rank))
        return fail(comm, ncclInvalidArgument, "%s: peer %d of a communicator of %d ranks (this is rank %d)", who, peer,
                    comm->nranks, comm->rank);
    if (count * elem > (size_t)0x7fffffff) return fail(comm, ncclInvalidArgument, "%s: too large for the double", who);
    gpud_require_device(buf, count * elem, who, "buffer");
    ncclResult_t r = ncclSuccess;
    if (kind == OP_ALLREDUCE) {
        if (!comm->coll_connected) {
            if (!charge(comm, 2 * (size_t)env_long("GPUD_NCCL_BUFFER", 4 << 20)))
                return fail(comm, ncclSystemError, "out of device memory for the collective's buffers");
            MPI_Request b;
            MPI_Ibarrier(comm->mc, &b);
            wait_reqs(1, &b, "ncclAllReduce's first call: the host waits until every rank calls it");
            comm->coll_connected = 1;
        }
    } else {
        r = connect_peer(comm, peer, kind == OP_SEND);
    }
    if (r) return r;
    nop *o = calloc(1, sizeof *o);
    gpud_lock();
    for (nop *p = comm->head; kind == OP_SEND && p; p = p->next)
        if (p->kind == OP_RECV && p->peer != peer)
            gpud_fatal("ncclSend to rank %d issued behind an ncclRecv from rank %d on one communicator of %d ranks: "
                       "it cannot leave before that receive completes (NCCL runs a communicator's operations in "
                       "issue order)",
                       peer, p->peer, comm->nranks);
    *o = (nop){.comm = comm, .kind = kind, .peer = peer, .buf = buf, .bytes = count * elem, .count = count,
               .serial = ++n_ops};
    if (comm->tail) comm->tail->next = o;
    else comm->head = o;
    comm->tail = o;
    cudaError_t e = gpud_enqueue_poll(stream, who, poll_op, describe, o);
    if (e != cudaSuccess) unlink_op(o);
    gpud_unlock();
    if (e != cudaSuccess) {
        free(o);
        return fail(comm, ncclUnhandledCudaError, "%s: the stream refused the work", who);
    }
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return issue(OP_SEND, (void *)sendbuff, count, datatype, peer, comm, stream);
}
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return issue(OP_RECV, recvbuff, count, datatype, peer, comm, stream);
}
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    if (op != ncclSum) return fail(comm, ncclInvalidArgument, "ncclAllReduce: the double sums only");
    if (sendbuff != recvbuff) return fail(comm, ncclInvalidArgument, "ncclAllReduce: the double works in place only");
    return issue(OP_ALLREDUCE, recvbuff, count, datatype, -1, comm, stream);
}
