/* transport.c — the stages' messages (runtime_impl.h: ppdl_p2p_ops).
 *
 * Two transports behind one table. MPI: non-blocking point-to-point through the comm
 * layer (net/comm.h), staged through host memory where the backend's memory is not
 * MPI's (backend/xfer.h, which passes a CPU backend's pointer through), each wait
 * blocking the host. NCCL, with the CUDA backend and --p2p nccl: send/recv between the
 * GPUs (backend/cuda/nccl_p2p.h), where a wait before a buffer is read or overwritten
 * is the compute stream's (the host queues on) and the host waits for a transfer only
 * before its request is reused and, for every send, before the update. The MPI path
 * is the same code whichever build runs it.
 *
 * The op loop calls the wrappers ppdl_rt_* only; they add what both transports share
 * (the bf16 packing of a message, the count of the bytes sent) and call the table. */
#include "config.h"

#include "pipe/runtime_impl.h"
#include "core/util.h"

/* ---- MPI ---- */

static void mpi_recv_post(ppdl_runtime *rt, const ppdl_msg *m, int mb)
{
    (void)mb;
    ppdl_comm_irecv(rt->comm, ppdl_xfer_recv_buf(rt->be, &m->req->x, m->dev, m->wire), m->wire, m->peer, m->tag,
                    &m->req->mpi);
}

static void mpi_recv_complete(ppdl_runtime *rt, const ppdl_msg *m, int mb)
{
    ppdl_rt_wait(rt, &m->req->mpi, mb, PPDL_EV_WAIT);
    ppdl_xfer_recv_done(rt->be, &m->req->x, m->dev, m->wire);
}

static double mpi_send_post(ppdl_runtime *rt, const ppdl_msg *m, int mb)
{
    (void)mb;
    const void *buf = ppdl_xfer_send_buf(rt->be, &m->req->x, m->dev, m->wire);
    double t = ppdl_now_s();
    ppdl_comm_isend(rt->comm, buf, m->wire, m->peer, m->tag, &m->req->mpi);
    return t;
}

/* both kinds of a send's completion are the host's */
static void mpi_send_wait(ppdl_runtime *rt, const ppdl_msg *m, int mb)
{
    ppdl_rt_wait(rt, &m->req->mpi, mb, PPDL_EV_WAIT);
}

static void mpi_req_free(ppdl_runtime *rt, ppdl_nccl *nc, ppdl_p2p_req *r)
{
    (void)nc;
    ppdl_xfer_free(rt->be, &r->x);
}

static const ppdl_p2p_ops p2p_mpi = {
    .name = "mpi",
    .recv_post = mpi_recv_post,
    .recv_complete = mpi_recv_complete,
    .send_post = mpi_send_post,
    .send_wait_before_write = mpi_send_wait,
    .send_complete = mpi_send_wait,
    .req_free = mpi_req_free,
};

/* ---- NCCL ---- */
#if HAVE_CUDA
void ppdl_rt_nccl_host_wait(ppdl_runtime *rt, ppdl_nccl *nc, ppdl_nccl_req *req, int mb, int kind)
{
    if (ppdl_nccl_test(nc, req)) return;
    double t0 = ppdl_now_s();
    ppdl_nccl_wait(nc, req);
    double t1 = ppdl_now_s();
    rt->comm->wait_s += t1 - t0;
    if (t1 - t0 > 20e-6) ppdl_rt_record(rt, kind, mb, t0, t1);
}

void ppdl_rt_nccl_req_release(ppdl_nccl *nc, ppdl_nccl_req *req)
{
    if (!nc) return;
    ppdl_nccl_wait(nc, req);
    ppdl_nccl_req_free(req);
}

static void nccl_recv_post(ppdl_runtime *rt, const ppdl_msg *m, int mb)
{
    ppdl_rt_nccl_host_wait(rt, m->nc, &m->req->nc, mb, PPDL_EV_WAIT); /* the buffer's last receive, read long ago */
    ppdl_nccl_irecv(m->nc, m->dev, m->wire, m->peer, &m->req->nc);
}

/* the compute stream waits for the transfer: a wait before its buffer is read
 * (receives) or written again (sends) */
static void nccl_stream_wait(ppdl_runtime *rt, const ppdl_msg *m, int mb)
{
    (void)rt;
    (void)mb;
    ppdl_nccl_stream_wait(m->nc, &m->req->nc);
}

static double nccl_send_post(ppdl_runtime *rt, const ppdl_msg *m, int mb)
{
    ppdl_rt_nccl_host_wait(rt, m->nc, &m->req->nc, mb, PPDL_EV_WAIT); /* the slot's last send of this kind */
    double t = ppdl_now_s();
    ppdl_nccl_isend(m->nc, m->dev, m->wire, m->peer, &m->req->nc);
    return t;
}

static void nccl_send_complete(ppdl_runtime *rt, const ppdl_msg *m, int mb)
{
    ppdl_rt_nccl_host_wait(rt, m->nc, &m->req->nc, mb, PPDL_EV_WAIT);
}

static void nccl_req_free(ppdl_runtime *rt, ppdl_nccl *nc, ppdl_p2p_req *r)
{
    ppdl_rt_nccl_req_release(nc, &r->nc);
    ppdl_xfer_free(rt->be, &r->x);
}

static const ppdl_p2p_ops p2p_nccl = {
    .name = "nccl",
    .recv_post = nccl_recv_post,
    .recv_complete = nccl_stream_wait,
    .send_post = nccl_send_post,
    .send_wait_before_write = nccl_stream_wait,
    .send_complete = nccl_send_complete,
    .req_free = nccl_req_free,
};
#endif

const ppdl_p2p_ops *ppdl_rt_p2p_of(const ppdl_runtime *rt)
{
#if HAVE_CUDA
    if (rt->nc_act) return &p2p_nccl;
#else
    (void)rt;
#endif
    return &p2p_mpi;
}

/* ---- the messages, and the wrappers the op loop calls ---- */

/* the rank of micro-batch mb's peer among `ranks` (the replicas of the stage before or
 * after); -1 where there is none (the end stages, a free slot's mb -1), for the waits,
 * which then find no request */
static int peer_of(const int *ranks, int n, int mb) { return ranks && mb >= 0 ? ranks[mb % n] : -1; }

static ppdl_msg msg_of(const ppdl_runtime *rt, void *dev, size_t n, int peer, int tag, ppdl_nccl *nc,
                       ppdl_p2p_req *req)
{
    /* under bf16 a message travels packed, half its fp32 bytes (the bf16 field) */
    return (ppdl_msg){dev, n, rt->bf16 ? n / 2 : n, peer, tag, nc, req};
}

ppdl_msg ppdl_rt_act_in(ppdl_runtime *rt, inbox_buf *ib, int mb)
{
    return msg_of(rt, ib->buf, rt->in_bytes, peer_of(rt->cfg.prev_ranks, rt->cfg.n_prev, mb),
                  rt_tag_msg(rt, rt->cfg.stage, mb, 0), rt->nc_act, &ib->req);
}

ppdl_msg ppdl_rt_grad_in(ppdl_runtime *rt, slot *sl, int mb)
{
    return msg_of(rt, sl->dout, rt->out_bytes, peer_of(rt->cfg.next_ranks, rt->cfg.n_next, mb),
                  rt_tag_msg(rt, rt->cfg.stage, mb, 1), rt->nc_grad, &sl->grad_recv);
}

ppdl_msg ppdl_rt_out_of(ppdl_runtime *rt, slot *sl, int mb, int act)
{
    if (act)
        return msg_of(rt, sl->out, rt->out_bytes, peer_of(rt->cfg.next_ranks, rt->cfg.n_next, mb),
                      rt_tag_msg(rt, rt->cfg.stage + 1, mb, 0), rt->nc_act, &sl->act_send);
    return msg_of(rt, sl->din, rt->in_bytes, peer_of(rt->cfg.prev_ranks, rt->cfg.n_prev, mb),
                  rt_tag_msg(rt, rt->cfg.stage - 1, mb, 1), rt->nc_grad, &sl->grad_send);
}

void ppdl_rt_recv_post(ppdl_runtime *rt, ppdl_msg m, int mb) { rt->p2p->recv_post(rt, &m, mb); }

void ppdl_rt_recv_complete(ppdl_runtime *rt, ppdl_msg m, int mb)
{
    rt->p2p->recv_complete(rt, &m, mb);
    if (rt->bf16) ppdl_be_unpack_bf16(rt->be, m.n / sizeof(float), m.dev);
}

double ppdl_rt_send_post(ppdl_runtime *rt, ppdl_msg m, int mb)
{
    rt->sent_bytes += (double)m.wire;
    if (rt->bf16) ppdl_be_pack_bf16(rt->be, m.n / sizeof(float), m.dev);
    return rt->p2p->send_post(rt, &m, mb);
}

void ppdl_rt_send_wait_before_write(ppdl_runtime *rt, ppdl_msg m, int mb)
{
    rt->p2p->send_wait_before_write(rt, &m, mb);
}

void ppdl_rt_send_complete(ppdl_runtime *rt, ppdl_msg m, int mb) { rt->p2p->send_complete(rt, &m, mb); }
