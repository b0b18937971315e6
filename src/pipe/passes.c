/* passes.c — a micro-batch's forward and backward through the stage's layers, on the
 * buffers of its slot (runtime.c's top says which holds what): the bf16 rounding at
 * every layer boundary and the packed stash, recompute, the split backward's W
 * buffers, and the start of the replicas' gradient sums during the step's last
 * backward (grad_sum.c). */
#include "config.h"

#include "pipe/runtime_impl.h"
#include "core/error.h"
#include "core/util.h"
#include "prof/papi.h"
#include "prof/range.h"

/* layer i's fp32 input `x` (the forward's, no longer read) into the slot's stash, packed */
static void stash_pack(ppdl_runtime *rt, slot *sl, int i, void *x)
{
    size_t n = (size_t)rt->b * rt_layer(rt, i)->in_bytes / sizeof(float);
    ppdl_be_pack_bf16(rt->be, n, x);
    ppdl_be_copy_d2d(rt->be, sl->act[i], x, n * 2);
}

/* layer i's input from the slot's stash, widened exactly to fp32 in rt->widened */
static const float *stash_widen(ppdl_runtime *rt, slot *sl, int i)
{
    size_t n = (size_t)rt->b * rt_layer(rt, i)->in_bytes / sizeof(float);
    ppdl_be_copy_d2d(rt->be, rt->widened, sl->act[i], n * 2);
    ppdl_be_unpack_bf16(rt->be, n, rt->widened);
    return rt->widened;
}

static void load_batch(ppdl_runtime *rt, long step, int mb, slot *sl)
{
    char err[PPDL_ERR_LEN];
    if (rt->src.read(rt->src.ctx, step, mb, rt->b, rt->first_stage ? rt->host_in : NULL,
                     rt->last_stage ? rt->host_tg : NULL, err, sizeof err))
        ppdl_fail(1, "%s", err);
    if (rt->first_stage) ppdl_be_copy_h2d(rt->be, sl->act[0], rt->host_in, rt->in_bytes);
    if (rt->last_stage)
        ppdl_be_copy_h2d(rt->be, sl->targets, rt->host_tg, (size_t)rt->b * rt->loss_rows * sizeof(int32_t));
}

void ppdl_rt_forward(ppdl_runtime *rt, long step, int mb)
{
    ppdl_backend *be = rt->be;
    slot *sl = rt_slot_of(rt, mb);
    PPDL_CHECK(sl->mb == -1 || sl->mb == mb, "slot of micro-batch %d still holds %d", mb, sl->mb);
    sl->mb = mb;
    ppdl_rt_send_wait_before_write(rt, ppdl_rt_out_of(rt, sl, mb, 1), mb); /* the send buffer's previous message is gone */
    ppdl_papi_begin(rt->cfg.papi, PPDL_PAPI_FORWARD);
    ppdl_range_push("forward", mb);
    /* reading the micro-batch is the end stages' own work, not idle time: it counts
     * in the forward (and so in the busy time the bubble is computed from) */
    double t0 = ppdl_now_s();
    if (rt->first_stage || rt->last_stage) load_batch(rt, step, mb, sl);
    void *in = sl->act[0];
    for (int i = 0; i < rt->nl; i++) {
        const ppdl_layer *l = rt_layer(rt, i);
        float *out = i + 1 < rt->nl ? (rt->stash_bf16 ? rt->grad[i % 2] : (float *)sl->act[i + 1])
                   : rt->logits_bf16 ? rt->scratch_out : sl->out;
        float *saved = sl->saved[i] ? sl->saved[i] : rt->scratch_saved;
        int option = rt->recompute[i] == PPDL_RC_FULL ? 0 : rt->recompute[i];
        l->kind->forward(l, be, rt->b, in, out, saved, rt->work, option);
        if (rt->bf16_layers) ppdl_be_round_bf16(be, (size_t)rt->b * l->out_bytes / sizeof(float), out);
        if (rt->stash_bf16 && i > 0) stash_pack(rt, sl, i, in); /* read by its layer: keep it packed */
        in = out;
        ppdl_comm_progress(rt->comm); /* the messages in flight move while we compute */
    }
    if (rt->last_stage) {
        /* loss = mean over every row of the mini-batch, so each micro-batch's
         * gradient is scaled by 1/(B * rows) and the sum over micro-batches is exact */
        int rows = rt->b * rt->loss_rows;
        float scale = 1.0f / ((float)rt->cfg.batch_size * (float)rt->loss_rows);
        float *logits = rt->logits_bf16 ? rt->scratch_out : sl->out;
        ppdl_be_softmax_xent(be, rows, rt->classes, logits, sl->targets, scale, rt->loss_dev, logits);
        if (rt->logits_bf16) { /* keep the gradient packed (exact for the head's GEMMs) */
            size_t n = rt->out_bytes / sizeof(float);
            ppdl_be_pack_bf16(be, n, logits);
            ppdl_be_copy_d2d(be, sl->out, logits, n * 2);
        }
    }
    ppdl_rt_record(rt, PPDL_OP_FORWARD, mb, t0, ppdl_now_s());
    ppdl_range_pop();
    ppdl_papi_end(rt->cfg.papi, PPDL_PAPI_FORWARD);
}

/* Where layer i's output gradient is during a backward of the micro-batch in slot sl:
 * the slot's own buffer for the stage's last layer, a W buffer's where a later W reads
 * it (wb NULL: the fused pass), else one of the two buffers between layers */
static float *dout_of(ppdl_runtime *rt, slot *sl, const wbuf *wb, int i)
{
    if (i == rt->nl - 1 && rt->logits_bf16) { /* widened where layer i-1's gradient is not */
        size_t n = rt->out_bytes / sizeof(float);
        float *dlogits = rt->grad[rt->nl % 2];
        ppdl_be_copy_d2d(rt->be, dlogits, sl->out, n * 2);
        ppdl_be_unpack_bf16(rt->be, n, dlogits);
        return dlogits;
    }
    if (i == rt->nl - 1) return rt->last_stage ? sl->out : sl->dout;
    if (wb && wb->dout[i]) return wb->dout[i];
    return rt->grad[(i + 1) % 2];
}

/* layer i's input gradient: the output gradient of layer i-1, or the stage's */
static float *din_of(ppdl_runtime *rt, slot *sl, const wbuf *wb, int i)
{
    if (i > 0) return dout_of(rt, sl, wb, i - 1);
    return rt->model_first ? NULL : sl->din;
}

/* the W buffer of micro-batch mb (a replica's local index, as slots) */
static wbuf *wbuf_of(ppdl_runtime *rt, int mb) { return &rt->wbufs[(mb / rt->k) % rt->n_wbufs]; }

/* A backward op of micro-batch mb: BACKWARD (both parts), BACKWARD_INPUT (B) or
 * BACKWARD_WEIGHT (W) through the stage's layers, last first. `last`: the step's last
 * op adding parameter gradients, which finalises them (the replicas' sums start). */
void ppdl_rt_backward(ppdl_runtime *rt, int mb, int kind, int last)
{
    ppdl_backend *be = rt->be;
    slot *sl = rt_slot_of(rt, mb);
    int part = kind == PPDL_OP_BACKWARD_INPUT ? PPDL_BWD_INPUT
             : kind == PPDL_OP_BACKWARD_WEIGHT ? PPDL_BWD_WEIGHT : PPDL_BWD_FUSED;
    PPDL_CHECK(sl->mb == mb, "backward of micro-batch %d before its forward", mb);
    wbuf *wb = NULL;
    if (part != PPDL_BWD_FUSED) {
        wb = wbuf_of(rt, mb);
        PPDL_CHECK(part == PPDL_BWD_INPUT ? wb->mb == -1 : wb->mb == mb,
                   "%s of micro-batch %d: its W buffer holds micro-batch %d", ppdl_op_name(kind), mb, wb->mb);
        wb->mb = mb;
    }
    if (part & PPDL_BWD_INPUT) ppdl_rt_send_wait_before_write(rt, ppdl_rt_out_of(rt, sl, mb, 0), mb); /* din's previous message */
    ppdl_papi_begin(rt->cfg.papi, PPDL_PAPI_BACKWARD);
    ppdl_range_push(ppdl_op_name(kind), mb);
    double t0 = ppdl_now_s();
    for (int i = rt->nl - 1; i >= 0; i--) {
        ppdl_layer *l = &rt->st->model->layers[rt->st->first + i];
        if (part == PPDL_BWD_WEIGHT && l->n_params == 0) continue; /* nothing to do in W */
        float *saved = sl->saved[i];
        int option = rt->recompute[i];
        const void *in = rt->stash_bf16 && i > 0 ? stash_widen(rt, sl, i) : sl->act[i];
        if (option == PPDL_RC_FULL &&
            (part != PPDL_BWD_WEIGHT || (l->kind->weight_reads(l, option) & PPDL_W_SAVED))) {
            /* the recompute hook: run forward again from the kept input */
            double r0 = ppdl_now_s();
            ppdl_range_push("recompute", mb);
            l->kind->forward(l, be, rt->b, in, rt->scratch_out, rt->scratch_saved, rt->work, 0);
            ppdl_range_pop();
            ppdl_rt_record(rt, PPDL_EV_RECOMPUTE, mb, r0, ppdl_now_s());
            saved = rt->scratch_saved;
        }
        /* the fused pass runs a recomputed layer as option 0; a part needs to know that
         * `saved` is scratch (it keeps for W elsewhere) */
        float *din = part == PPDL_BWD_WEIGHT ? NULL : din_of(rt, sl, wb, i);
        l->kind->backward(l, be, part, rt->b, in, saved, dout_of(rt, sl, wb, i), din,
                          wb ? wb->keep[i] : NULL, rt->work, part == PPDL_BWD_FUSED && option == PPDL_RC_FULL ? 0 : option);
        if (rt->bf16_layers && din) ppdl_be_round_bf16(be, (size_t)rt->b * l->in_bytes / sizeof(float), din);
        /* the last backward of the step finalises this layer's gradients: sum them
         * across replicas while the layers below are still computing */
        if (last && rt->test.grad_scale != 1.0f && l->n_params)
            ppdl_be_axpy(be, rt_layer_grad_floats(rt, i), rt->test.grad_scale - 1.0f, l->params[0].grad,
                         l->params[0].grad);
        if (last) ppdl_rt_grad_sum_layer(rt, i);
        ppdl_comm_progress(rt->comm);
    }
    if (last) rt->grads_posted = 1;
    if (part == PPDL_BWD_WEIGHT) wb->mb = -1;
    ppdl_rt_record(rt, kind, mb, t0, ppdl_now_s());
    ppdl_range_pop();
    ppdl_papi_end(rt->cfg.papi, PPDL_PAPI_BACKWARD);
}
