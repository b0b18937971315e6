#include "net/comm.h"
#include "core/error.h"
#include "core/util.h"

#include <limits.h>
#include <sched.h>
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
    c->wait_s = 0;
    c->n_msgs = 0;
}

void ppdl_comm_isend(ppdl_comm *c, const void *buf, size_t n_bytes, int dst, int tag, MPI_Request *req)
{
    PPDL_CHECK(n_bytes <= INT_MAX, "message of %zu bytes is too large for one MPI send", n_bytes);
    PPDL_CHECK_MPI(MPI_Isend(buf, (int)n_bytes, MPI_BYTE, dst, tag, c->comm, req));
    c->n_msgs++;
}

void ppdl_comm_irecv(ppdl_comm *c, void *buf, size_t n_bytes, int src, int tag, MPI_Request *req)
{
    PPDL_CHECK(n_bytes <= INT_MAX, "message of %zu bytes is too large for one MPI receive", n_bytes);
    PPDL_CHECK_MPI(MPI_Irecv(buf, (int)n_bytes, MPI_BYTE, src, tag, c->comm, req));
}

void ppdl_comm_wait(ppdl_comm *c, MPI_Request *req)
{
    if (*req == MPI_REQUEST_NULL) return;
    double t0 = ppdl_now_s();
    if (c->yield) {
        int done = 0;
        for (;;) {
            PPDL_CHECK_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
            if (done) break;
            sched_yield();
        }
    } else {
        PPDL_CHECK_MPI(MPI_Wait(req, MPI_STATUS_IGNORE));
    }
    c->wait_s += ppdl_now_s() - t0;
}
