/* grad_sum.c — the gradients of a stage summed across its replicas (data parallelism
 * inside a stage, runtime.h: n_replicas), in place, before the update; then a tied
 * weight's two gradients combined (pipe/tie.h).
 *
 * Four ways, one per runtime: NCCL on the GPUs (cfg.nccl_replicas); under --netem a
 * ring per layer through the comm layer, its own tag per layer, so that every message
 * pays its emulated link (MPI's collectives would bypass the emulation); otherwise
 * MPI_Iallreduce on the stage's communicator, per layer on a backend whose messages
 * are staged through host memory, else in buckets of layers. On one machine
 * MPI_Iallreduce is as fast as the ring, and across nodes MPICH's all-reduce sends
 * less over the slow links than the flat ring and beats it (data parallelism on
 * perf/bench-headline's emulated cluster of 2 nodes x 2 ranks). */
#include "config.h"

#include "pipe/runtime_impl.h"
#include "core/error.h"
#include "core/util.h"

#include <limits.h>
#include <stdlib.h>

/* by the model's layer: a rank's stages (chunks) all-reduce different layers */
static int tag_allreduce(const ppdl_runtime *rt, int i) { return rt_tag_base(rt) + rt->st->first + i; }

void ppdl_rt_grad_sum_init(ppdl_runtime *rt, const int *members)
{
    rt->rings = ppdl_xcalloc((size_t)rt->nl, sizeof *rt->rings);
    for (int i = 0; i < rt->nl; i++)
        ppdl_ring_init(&rt->rings[i], rt->comm, members, rt->k, rt->cfg.replica, tag_allreduce(rt, i));
    rt->grad_reqs = ppdl_xcalloc((size_t)rt->nl, sizeof *rt->grad_reqs);
    for (int i = 0; i < rt->nl; i++) rt->grad_reqs[i] = MPI_REQUEST_NULL;
    rt->bucket_lo = rt->bucket_hi = -1;
    rt->grad_x = ppdl_xcalloc((size_t)rt->nl, sizeof *rt->grad_x);
    rt->grad_nreq = ppdl_xcalloc((size_t)rt->nl, sizeof *rt->grad_nreq);
}

void ppdl_rt_grad_sum_begin(ppdl_runtime *rt)
{
    rt->grads_posted = 0;
    rt->bucket_lo = rt->bucket_hi = -1;
    rt->bucket_n = 0;
}

/* MPI's sums of host gradients go in buckets of consecutive layers (the gradient
 * arena holds the layers in order): one MPI_Iallreduce per bucket instead of one per
 * layer, because outstanding non-blocking all-reduces slow each other: the same bytes
 * as several calls at once take about twice as long as one call. A bucket starts once it
 * holds this many floats, or at the stage's first layer. */
#define GRAD_BUCKET_FLOATS ((size_t)4 << 20) /* 16 MiB */

static int bucketed(const ppdl_runtime *rt)
{
    return !rt->use_ring && !rt->nc_replicas && !ppdl_xfer_staged(rt->be);
}

/* layer i's gradients are final: add them to the bucket, and start it when full or at
 * layer 0; every replica forms the same buckets (they depend on the layers alone) */
static void bucket_layer(ppdl_runtime *rt, int i)
{
    size_t n = rt_layer_grad_floats(rt, i);
    if (n) {
        if (rt->bucket_hi < 0) rt->bucket_hi = i;
        rt->bucket_lo = i;
        rt->bucket_n += n;
    }
    if (rt->bucket_hi < 0 || (rt->bucket_n < GRAD_BUCKET_FLOATS && i > 0)) return;
    const ppdl_layer *lo = rt_layer(rt, rt->bucket_lo), *hi = rt_layer(rt, rt->bucket_hi);
    const ppdl_param *top = &hi->params[hi->n_params - 1];
    PPDL_CHECK(lo->params[0].grad + rt->bucket_n == top->grad + top->numel,
               "the gradients of layers %d..%d are not contiguous", lo->index, hi->index);
    PPDL_CHECK(rt->bucket_n <= INT_MAX, "layers %d..%d have too many parameters for one allreduce", lo->index,
               hi->index);
    PPDL_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, lo->params[0].grad, (int)rt->bucket_n, MPI_FLOAT, MPI_SUM,
                                  rt->cfg.replica_comm, &rt->grad_reqs[rt->bucket_lo]));
    rt->bucket_lo = rt->bucket_hi = -1;
    rt->bucket_n = 0;
}

/* Start summing layer i's gradients across the stage's replicas (in place). Every
 * replica starts them in the same order, last layer first, as collectives require.
 * Started layer by layer during the last backward (MPI's in buckets, above), completed
 * at the OPTIMIZER op. The ring (net/ring.h; under --netem) is advanced between the
 * layers below (progress_allreduce) and sums in a fixed order: the same bits on every
 * replica. */
static void allreduce_layer_grads(ppdl_runtime *rt, int i)
{
    const ppdl_layer *l = rt_layer(rt, i);
    if (rt->k <= 1) return;
    if (bucketed(rt)) {
        bucket_layer(rt, i);
        return;
    }
    if (l->n_params == 0) return;
    size_t n = rt_layer_grad_floats(rt, i);
#if HAVE_CUDA
    if (rt->nc_replicas) { /* in place on the GPU, after the backward queued so far */
        ppdl_nccl_iallreduce_sum(rt->nc_replicas, l->params[0].grad, n, &rt->grad_nreq[i]);
        return;
    }
#endif
    /* in place on the gradients, or on their host copy when the backend stages */
    float *buf = (float *)ppdl_xfer_send_buf(rt->be, &rt->grad_x[i], l->params[0].grad, n * sizeof(float));
    if (rt->use_ring) {
        ppdl_ring_start(&rt->rings[i], buf, n);
        return;
    }
    PPDL_CHECK(n <= INT_MAX, "layer %d has too many parameters for one allreduce", l->index);
    PPDL_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, rt->cfg.replica_comm,
                                  &rt->grad_reqs[i]));
}

static void allreduce_all_pending(ppdl_runtime *rt)
{
    if (rt->grads_posted) return;
    for (int i = rt->nl - 1; i >= 0; i--) allreduce_layer_grads(rt, i);
    rt->grads_posted = 1;
}

/* Advance every started all-reduce as far as the messages in allow, without blocking:
 * called between the layers of the last backward, so the sums of the layers above
 * move while the layers below compute. */
static void progress_allreduce(ppdl_runtime *rt)
{
    for (int i = rt->nl - 1; i >= 0; i--) ppdl_ring_poll(&rt->rings[i]);
}

/* Complete every all-reduce (at the OPTIMIZER op). Rings whose messages are in advance
 * without waiting; when none can, wait for the highest unfinished layer, the one every
 * replica started first. Deadlock-free: a replica blocks only at its OPTIMIZER, every
 * replica gets there (it waits on nothing from this stage before), and a ring's step
 * needs only the step before it on the neighbour. */
static void finish_allreduce(ppdl_runtime *rt)
{
#if HAVE_CUDA
    /* the host waits, as for MPI's: the update and all work queued after it follow the sums */
    if (rt->nc_replicas) {
        for (int i = rt->nl - 1; i >= 0; i--)
            ppdl_rt_nccl_host_wait(rt, rt->nc_replicas, &rt->grad_nreq[i], -1, PPDL_EV_ALLREDUCE);
        return;
    }
#endif
    for (int i = rt->nl - 1; i >= 0; i--) ppdl_rt_wait(rt, &rt->grad_reqs[i], -1, PPDL_EV_ALLREDUCE); /* MPI's, if any */
    for (;;) {
        progress_allreduce(rt);
        int i = rt->nl - 1;
        while (i >= 0 && !ppdl_ring_active(&rt->rings[i])) i--;
        if (i < 0) break;
        double t0 = ppdl_now_s();
        ppdl_ring_finish(&rt->rings[i]);
        double t1 = ppdl_now_s();
        if (t1 - t0 > 20e-6) ppdl_rt_record(rt, PPDL_EV_ALLREDUCE, -1, t0, t1);
    }
    for (int i = rt->nl - 1; i >= 0; i--) {
        if (rt->k <= 1 || rt_layer(rt, i)->n_params == 0) continue;
        ppdl_xfer_recv_done(rt->be, &rt->grad_x[i], rt_layer(rt, i)->params[0].grad,
                            rt_layer_grad_floats(rt, i) * sizeof(float));
    }
}

void ppdl_rt_grad_sum_tie(ppdl_runtime **rts, int n)
{
    for (int c = 0; c < n; c++) ppdl_tie_start(&rts[c]->tie, rts[c]->be, rts[c]->comm);
    for (int c = 0; c < n; c++) {
        double t0 = ppdl_now_s(), waited = 0;
        ppdl_tie_finish(&rts[c]->tie, rts[c]->be, rts[c]->comm, &waited);
        if (waited > 20e-6) ppdl_rt_record(rts[c], PPDL_EV_WAIT, -1, t0, t0 + waited);
    }
}

void ppdl_rt_grad_sum_layer(ppdl_runtime *rt, int i)
{
    allreduce_layer_grads(rt, i);
    progress_allreduce(rt);
}

void ppdl_rt_grad_sum_finish(ppdl_runtime *rt)
{
    allreduce_all_pending(rt); /* a replica without micro-batches this step still joins */
    finish_allreduce(rt);
}

void ppdl_rt_grad_sum_free(ppdl_runtime *rt)
{
    for (int i = 0; i < rt->nl; i++) {
        ppdl_ring_free(&rt->rings[i]);
        ppdl_xfer_free(rt->be, &rt->grad_x[i]);
#if HAVE_CUDA
        ppdl_rt_nccl_req_release(rt->nc_replicas, &rt->grad_nreq[i]);
#endif
    }
    free(rt->rings);
    free(rt->grad_reqs);
    free(rt->grad_x);
    free(rt->grad_nreq);
}
