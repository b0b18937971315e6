#include "net/comm.h"
#include "net/netem.h"
#include "core/error.h"
#include "core/finish.h"
#include "core/util.h"

#include <limits.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

int ppdl_comm_node_ranks(MPI_Comm comm)
{
    MPI_Comm node;
    int n = 1;
    PPDL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    PPDL_CHECK_MPI(MPI_Comm_size(node, &n));
    PPDL_CHECK_MPI(MPI_Comm_free(&node));
    return n;
}

void ppdl_comm_init(ppdl_comm *c, MPI_Comm comm, int yield)
{
    c->comm = comm;
    PPDL_CHECK_MPI(MPI_Comm_rank(comm, &c->rank));
    PPDL_CHECK_MPI(MPI_Comm_size(comm, &c->size));
    if (yield < 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        yield = ppdl_comm_node_ranks(comm) > (cores > 0 ? cores : 1);
    }
    c->yield = yield;
    c->nap = 1;
    c->wait_s = 0;
    c->n_msgs = 0;
    c->netem = NULL;
}

int ppdl_comm_set_netem(ppdl_comm *c, const struct ppdl_cluster_model *cl, char *err, size_t errlen)
{
    ppdl_netem_free(c->netem);
    c->netem = ppdl_netem_create(c->comm, cl, err, errlen);
    return c->netem ? 0 : -1;
}

void ppdl_comm_free(ppdl_comm *c)
{
    ppdl_netem_free(c->netem);
    c->netem = NULL;
}

void ppdl_comm_isend(ppdl_comm *c, const void *buf, size_t n_bytes, int dst, int tag, MPI_Request *req)
{
    PPDL_CHECK(n_bytes <= INT_MAX, "message of %zu bytes is too large for one MPI send", n_bytes);
    PPDL_CHECK_MPI(MPI_Isend(buf, (int)n_bytes, MPI_BYTE, dst, tag, c->comm, req));
    if (c->netem) ppdl_netem_on_send(c->netem, dst, n_bytes, tag, req);
    c->n_msgs++;
}

void ppdl_comm_irecv(ppdl_comm *c, void *buf, size_t n_bytes, int src, int tag, MPI_Request *req)
{
    PPDL_CHECK(n_bytes <= INT_MAX, "message of %zu bytes is too large for one MPI receive", n_bytes);
    PPDL_CHECK_MPI(MPI_Irecv(buf, (int)n_bytes, MPI_BYTE, src, tag, c->comm, req));
    if (c->netem) ppdl_netem_on_recv(c->netem, src, tag, req);
}

void ppdl_comm_wait(ppdl_comm *c, MPI_Request *req)
{
    double t0 = ppdl_now_s();
    /* netem first: a message whose data a test already received (*req is then
     * MPI_REQUEST_NULL) may still be waiting for its emulated arrival */
    if (c->netem && ppdl_netem_wait(c->netem, req, c->yield ? 1 + c->nap : 0)) {
        /* an emulated message: complete, and not before its emulated time */
    } else if (*req == MPI_REQUEST_NULL) {
        return;
    } else if (c->yield) {
        int done = 0;
        for (;;) {
            PPDL_CHECK_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
            if (done) break;
            ppdl_wait_pause(t0, c->nap);
        }
    } else {
        PPDL_CHECK_MPI(MPI_Wait(req, MPI_STATUS_IGNORE));
    }
    c->wait_s += ppdl_now_s() - t0;
}

void ppdl_comm_progress(ppdl_comm *c)
{
    /* MPICH moves messages only inside MPI calls; over TCP a transfer whose peer is busy
     * computing stalls (socket buffers full, a rendezvous unanswered) until that peer next
     * calls MPI. One probe runs the progress engine and completes no request. */
    int flag = 0;
    PPDL_CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &flag, MPI_STATUS_IGNORE));
}

int ppdl_comm_test(ppdl_comm *c, MPI_Request *req)
{
    int done = 0;
    if (c->netem && ppdl_netem_test(c->netem, req, &done)) return done;
    if (*req == MPI_REQUEST_NULL) return 1;
    PPDL_CHECK_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    return done;
}

void ppdl_comm_waitall_idle(int n, MPI_Request *reqs) { ppdl_wait_all_idle(n, reqs); }
