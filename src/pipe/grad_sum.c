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
 * perf/bench-headline's emulated cluster of 2 nodes x 2 ranks).
 *
 * With the optimizer state sharded (nn/stage.h), MPI's buckets are reduce-scattered
 * instead: each replica gets the sum of its own slice, the gradients it updates, at
 * the bytes of half an all-reduce. One MPI_Ireduce per slice to its owner, in place:
 * MPICH's in-place MPI_Ireduce_scatter copies a rank's part to the buffer's start
 * (overlapping ranges, which it refuses), and not in place it needs a receive buffer. */
#include "config.h"

#include "pipe/runtime_impl.h"
#include "core/error.h"
#include "core/util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* by the model's layer: a rank's stages (chunks) all-reduce different layers */
static int tag_allreduce(const ppdl_runtime *rt, int i) { return rt_tag_base(rt) + rt->st->first + i; }

static int bucketed(const ppdl_runtime *rt);

/* The chunks of the gradient norm (update.c: PPDL_SUMSQ_CHUNK floats from a tensor's
 * start) that an inner slice bound cuts, outside the tied weight's whole sums: each is
 * all-reduced whole into cut_buf besides the reduce-scatter, so that one replica (the
 * owner of the chunk's start) has its whole sum for the norm. At most k - 1 chunks. */
static void find_cut_chunks(ppdl_runtime *rt)
{
    ppdl_stage *st = rt->st;
    rt->cut_off = ppdl_xcalloc((size_t)st->opt_k, sizeof *rt->cut_off);
    rt->cut_n = ppdl_xcalloc((size_t)st->opt_k, sizeof *rt->cut_n);
    rt->cut_at = ppdl_xcalloc((size_t)st->opt_k, sizeof *rt->cut_at);
    rt->cut_reqs = ppdl_xcalloc((size_t)st->opt_k, sizeof *rt->cut_reqs);
    size_t total = 0;
    for (int r = 1; r < st->opt_k; r++) {
        size_t b = st->opt_bounds[r];
        if (b < rt->tie_head || b >= rt->tie_tail) continue;
        for (int l = st->first; l <= st->last; l++)
            for (int i = 0; i < st->model->layers[l].n_params; i++) {
                const ppdl_param *p = &st->model->layers[l].params[i];
                size_t off = (size_t)(p->grad - st->grads);
                if (b <= off || b >= off + p->numel || (b - off) % PPDL_SUMSQ_CHUNK == 0) continue;
                size_t c0 = off + (b - off) / PPDL_SUMSQ_CHUNK * PPDL_SUMSQ_CHUNK;
                size_t c1 = c0 + PPDL_SUMSQ_CHUNK < off + p->numel ? c0 + PPDL_SUMSQ_CHUNK : off + p->numel;
                if (rt->n_cut && rt->cut_off[rt->n_cut - 1] == c0) continue; /* cut twice */
                rt->cut_off[rt->n_cut] = c0;
                rt->cut_n[rt->n_cut] = c1 - c0;
                rt->cut_at[rt->n_cut] = total;
                rt->cut_reqs[rt->n_cut++] = MPI_REQUEST_NULL;
                total += c1 - c0;
            }
    }
    rt->cut_buf = ppdl_xmalloc((total ? total : 1) * sizeof(float));
}

const float *ppdl_rt_cut_chunk(const ppdl_runtime *rt, size_t at)
{
    for (int j = 0; j < rt->n_cut; j++)
        if (rt->cut_off[j] == at) return rt->cut_buf + rt->cut_at[j];
    return NULL;
}

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
    ppdl_stage *st = rt->st;
    const ppdl_model *m = st->model;
    rt->rs = st->opt_k > 1 && bucketed(rt);
    rt->tie_head = m->tie_embeddings && st->first == 0 ? ppdl_model_tied_floats(m) : 0;
    rt->tie_tail = m->tie_embeddings && st->last == m->L - 1 ? st->n_grads - ppdl_model_tied_floats(m) : st->n_grads;
    rt->rs_reqs = ppdl_xmalloc((size_t)rt->nl * (size_t)rt->k * sizeof *rt->rs_reqs);
    for (size_t i = 0; i < (size_t)rt->nl * (size_t)rt->k; i++) rt->rs_reqs[i] = MPI_REQUEST_NULL;
    rt->tie_reqs = ppdl_xmalloc(2 * (size_t)rt->nl * sizeof *rt->tie_reqs);
    for (int i = 0; i < 2 * rt->nl; i++) rt->tie_reqs[i] = MPI_REQUEST_NULL;
    if (rt->rs) find_cut_chunks(rt);
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

/* The bucket of arena floats [a, a + n), lowest layer lo, summed across the replicas
 * for a sharded optimizer state: the tied gradients at the arena's ends all-reduced
 * whole, the rest reduced to the owner of each slice (st->opt_bounds), in place.
 * Every replica posts the same calls in the same order. */
static void reduce_scatter_bucket(ppdl_runtime *rt, size_t a, size_t n, int lo)
{
    ppdl_stage *st = rt->st;
    size_t b = a + n, ca = a < rt->tie_head ? rt->tie_head : a, cb = b > rt->tie_tail ? rt->tie_tail : b;
    if (cb < ca) cb = ca;
    if (ca > a)
        PPDL_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, st->grads + a, (int)(ca - a), MPI_FLOAT, MPI_SUM,
                                      rt->cfg.replica_comm, &rt->tie_reqs[2 * lo]));
    if (b > cb)
        PPDL_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, st->grads + cb, (int)(b - cb), MPI_FLOAT, MPI_SUM,
                                      rt->cfg.replica_comm, &rt->tie_reqs[2 * lo + 1]));
    if (cb == ca) return;
    /* the cut chunks in it, copied before the reductions overwrite them */
    for (int j = 0; j < rt->n_cut; j++) {
        if (rt->cut_off[j] < ca || rt->cut_off[j] >= cb) continue;
        memcpy(rt->cut_buf + rt->cut_at[j], st->grads + rt->cut_off[j], rt->cut_n[j] * sizeof(float));
        PPDL_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, rt->cut_buf + rt->cut_at[j], (int)rt->cut_n[j], MPI_FLOAT, MPI_SUM,
                                      rt->cfg.replica_comm, &rt->cut_reqs[j]));
    }
    for (int r = 0; r < rt->k; r++) {
        size_t s0 = st->opt_bounds[r] > ca ? st->opt_bounds[r] : ca;
        size_t s1 = st->opt_bounds[r + 1] < cb ? st->opt_bounds[r + 1] : cb;
        if (s1 <= s0) continue;
        float *x = st->grads + s0;
        int mine = r == st->opt_r; /* the owner sums in place, the others send theirs */
        PPDL_CHECK_MPI(MPI_Ireduce(mine ? MPI_IN_PLACE : x, mine ? x : NULL, (int)(s1 - s0), MPI_FLOAT, MPI_SUM, r,
                                   rt->cfg.replica_comm, &rt->rs_reqs[(size_t)lo * (size_t)rt->k + (size_t)r]));
    }
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
    if (rt->rs)
        reduce_scatter_bucket(rt, (size_t)(lo->params[0].grad - rt->st->grads), rt->bucket_n, rt->bucket_lo);
    else
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
    for (int i = rt->nl - 1; i >= 0; i--) { /* MPI's, if any */
        ppdl_rt_wait(rt, &rt->grad_reqs[i], -1, PPDL_EV_ALLREDUCE);
        ppdl_rt_wait(rt, &rt->tie_reqs[2 * i], -1, PPDL_EV_ALLREDUCE);
        ppdl_rt_wait(rt, &rt->tie_reqs[2 * i + 1], -1, PPDL_EV_ALLREDUCE);
        for (int r = 0; r < rt->k; r++)
            ppdl_rt_wait(rt, &rt->rs_reqs[(size_t)i * (size_t)rt->k + (size_t)r], -1, PPDL_EV_ALLREDUCE);
    }
    for (int j = 0; j < rt->n_cut; j++) ppdl_rt_wait(rt, &rt->cut_reqs[j], -1, PPDL_EV_ALLREDUCE);
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
    free(rt->rs_reqs);
    free(rt->tie_reqs);
    free(rt->cut_off);
    free(rt->cut_n);
    free(rt->cut_at);
    free(rt->cut_reqs);
    free(rt->cut_buf);
}
