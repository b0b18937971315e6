/* update.c — the update of a step (runtime_impl.h): every rank agrees whether the step
 * is sound (no non-finite loss or gradient anywhere), then, where it is, clips the
 * gradients to the global norm (runtime.h: clip_grad_norm) and runs AdamW; a broken
 * step drops its gradients and changes no weight. */
#include "config.h"

#include "pipe/runtime_impl.h"
#include "core/error.h"
#include "core/util.h"
#include "prof/papi.h"
#include "prof/range.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* Is anything non-finite this step: the loss (last stage) or a layer's gradient? The
 * first offender is described in rt->nonfinite_what. One pass over the gradients, the
 * cost of reading them once. */
static int loss_nonfinite(ppdl_runtime *rt)
{
    ppdl_stage *st = rt->st;
    if (!rt->last_stage) return 0;
    float loss = 0;
    ppdl_be_copy_d2h(rt->be, &loss, rt->loss_dev, sizeof loss);
    if (isfinite(loss)) return 0;
    snprintf(rt->nonfinite_what, sizeof rt->nonfinite_what, "the loss is %g (layer %d, %s, produced the logits)",
             (double)loss, st->last, st->model->layers[st->last].kind->name);
    return 1;
}

static int local_nonfinite(ppdl_runtime *rt)
{
    ppdl_backend *be = rt->be;
    ppdl_stage *st = rt->st;
    if (loss_nonfinite(rt)) return 1;
    /* the gradients this replica holds summed: all, or its slice when sharded */
    size_t lo = 0, hi = st->n_grads;
    if (st->opt_k > 1) {
        lo = st->opt_lo;
        hi = st->opt_lo + st->opt_n;
    }
    double ss = 0;
    ppdl_be_sumsq(be, hi - lo, st->grads + lo, &ss);
    if (isfinite(ss)) return 0;
    for (int l = st->first; l <= st->last; l++) {
        const ppdl_layer *ly = &st->model->layers[l];
        for (int i = 0; i < ly->n_params; i++) {
            size_t a = (size_t)(ly->params[i].grad - st->grads), b = a + ly->params[i].numel;
            if (a < lo) a = lo;
            if (b > hi) b = hi;
            if (a >= b) continue;
            ppdl_be_sumsq(be, b - a, st->grads + a, &ss);
            if (!isfinite(ss)) {
                snprintf(rt->nonfinite_what, sizeof rt->nonfinite_what,
                         "layer %d (%s): the gradient of %s is not finite", l, ly->kind->name, ly->params[i].name);
                return 1;
            }
        }
    }
    /* the sum of squares overflowed although every gradient is finite */
    return 0;
}

/* All ranks agree whether the step is sound before any weight changes: the lowest
 * stage with a non-finite value, or -1. A yielding wait on a non-blocking allreduce.
 * rts[0..n-1]: the stages this rank holds (one, or several: interleaved, zb-v), one
 * agreement for all of them. */
static int agree_nonfinite(ppdl_runtime **rts, int n)
{
    double t0 = ppdl_now_s();
    int mine = INT_MAX, first = INT_MAX;
    for (int c = 0; c < n; c++)
        if (mine == INT_MAX && local_nonfinite(rts[c])) mine = rts[c]->cfg.stage;
    /* the pass over the gradients is work of the update; the agreement below is a wait */
    ppdl_rt_record(rts[0], PPDL_OP_OPTIMIZER, -1, t0, ppdl_now_s());
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, rts[0]->comm->comm, &req));
    ppdl_rt_wait(rts[0], &req, -1, PPDL_EV_ALLREDUCE); /* the stages that finished first idle here */
    return first == INT_MAX ? -1 : first;
}

const char *ppdl_runtime_nonfinite_what(const ppdl_runtime *rt) { return rt->nonfinite_what; }

/* the norm's slots of a tensor of n floats: one per PPDL_SUMSQ_CHUNK floats (one if empty) */
static size_t norm_chunks(size_t n) { return n ? (n + PPDL_SUMSQ_CHUNK - 1) / PPDL_SUMSQ_CHUNK : 1; }

void ppdl_rt_update_init(ppdl_runtime *rt)
{
    const ppdl_model *m = rt->st->model;
    for (int l = 0; l < m->L; l++) {
        if (l == rt->st->first) rt->norm_slot0 = rt->norm_slots;
        for (int i = 0; i < m->layers[l].n_params; i++) rt->norm_slots += norm_chunks(m->layers[l].params[i].numel);
    }
    PPDL_CHECK(rt->norm_slots + (size_t)m->L <= INT_MAX, "the model has too many parameters for the gradient norm");
    rt->layer_sumsq = ppdl_xcalloc(rt->norm_slots + (size_t)m->L, sizeof(double));
}

/* With clipping, the agreement above and the model's gradient norm share one pass over
 * the gradients and one all-reduce, so clipping adds no reduction of its own
 * (runtime.h: clip_grad_norm). The norm is the same bits on every rank and for any
 * plan, sharded or not: every tensor of the model (a tied copy counted once, as layer
 * 0's wte) has a slot per PPDL_SUMSQ_CHUNK-float chunk; the one replica that holds a
 * tensor's sum (replica 0 of its stage; sharded: the owner of its slice) puts its sum
 * of squares in its first slot, or, for a tensor the slices cut, each chunk's sum in
 * its own slot (the owner of the chunk's start: a chunk a bound cuts is also summed
 * whole, grad_sum.c); an all-reduce of the slots, in which
 * each has one non-zero contribution, and a flag at norm_slots + its stage from each
 * rank that saw a non-finite value; then every rank sums each tensor's slots in order,
 * the tensors of a layer in order, the layers in order. The CPU's sum of squares adds
 * its chunks' partials in order (backend.h), so a cut tensor's sum is its whole sum's
 * bits. Returns the lowest stage with a non-finite value, or -1, as agree_nonfinite. */
static int agree_nonfinite_and_norm(ppdl_runtime **rts, int n, double *norm)
{
    const ppdl_model *m = rts[0]->st->model;
    int L = m->L;
    size_t P = rts[0]->norm_slots;
    double t0 = ppdl_now_s();
    double *sums = rts[0]->layer_sumsq;
    memset(sums, 0, (P + (size_t)L) * sizeof(double));
    for (int c = 0; c < n; c++) {
        ppdl_runtime *rt = rts[c];
        ppdl_stage *st = rt->st;
        int sharded = st->opt_k > 1;
        /* the planted bug: only replica 0's shard counts */
        int put = sharded ? !rt->test.shard_norm_one || rt->cfg.replica == 0 : rt->cfg.replica == 0;
        size_t lo = sharded ? st->opt_lo : 0, hi = sharded ? st->opt_lo + st->opt_n : st->n_grads;
        int bad = loss_nonfinite(rt);
        size_t si = rt->norm_slot0;
        for (int l = st->first; l <= st->last; l++) {
            const ppdl_layer *ly = &m->layers[l];
            for (int i = 0; i < ly->n_params; i++) {
                size_t numel = ly->params[i].numel, nch = norm_chunks(numel);
                size_t off = (size_t)(ly->params[i].grad - st->grads);
                double ss = 0;
                if (ppdl_model_is_tied(m, l, i)) {
                    si += nch;
                    continue;
                }
                if (off >= lo && off + numel <= hi) {
                    ppdl_be_sumsq(rt->be, numel, ly->params[i].grad, &ss);
                    if (put) sums[si] = ss;
                    if (!bad && !isfinite(ss)) bad = local_nonfinite(rt);
                } else {
                    for (size_t k = 0; k < nch; k++) {
                        size_t at = off + k * PPDL_SUMSQ_CHUNK, len = numel - k * PPDL_SUMSQ_CHUNK;
                        if (at < lo || at >= hi) continue;
                        if (len > PPDL_SUMSQ_CHUNK) len = PPDL_SUMSQ_CHUNK;
                        /* a chunk the slice's end cuts: its whole sum (grad_sum.c), where
                         * it is not in the tied weight's, summed whole */
                        const float *x = st->grads + at;
                        if (at + len > hi && at >= rt->tie_head) x = ppdl_rt_cut_chunk(rt, at);
                        PPDL_CHECK(x, "layer %d: no whole sum of the chunk of %s cut by optimizer slice %d", l,
                                   ly->params[i].name, st->opt_r);
                        ppdl_be_sumsq(rt->be, len, x, &ss);
                        if (put) sums[si + k] = ss;
                        if (!bad && !isfinite(ss)) bad = local_nonfinite(rt);
                    }
                }
                si += nch;
            }
        }
        if (bad) sums[P + (size_t)rt->cfg.stage] = 1;
    }
    ppdl_rt_record(rts[0], PPDL_OP_OPTIMIZER, -1, t0, ppdl_now_s());
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, sums, (int)(P + (size_t)L), MPI_DOUBLE, MPI_SUM, rts[0]->comm->comm,
                                  &req));
    ppdl_rt_wait(rts[0], &req, -1, PPDL_EV_ALLREDUCE); /* the stages that finished first idle here */
    double total = 0;
    size_t si = 0;
    for (int l = 0; l < L; l++) {
        double layer = 0;
        for (int i = 0; i < m->layers[l].n_params; i++) {
            size_t nch = norm_chunks(m->layers[l].params[i].numel);
            double t = 0;
            for (size_t k = 0; k < nch; k++) t += sums[si + k];
            si += nch;
            if (!ppdl_model_is_tied(m, l, i)) layer += t;
        }
        total += layer;
    }
    *norm = sqrt(total);
    for (int s = 0; s < L; s++)
        if (sums[P + (size_t)s] > 0) return s;
    return -1;
}

/* AdamW on arena floats [a, b) with weight decay wd, where they meet this replica's
 * slice of the optimizer state (stage.h: the whole arena when unsharded): AdamW is
 * elementwise, so any cut of the arena gives the bits of the whole arena's update */
static void adamw_range(ppdl_runtime *rt, size_t a, size_t b, double wd)
{
    ppdl_stage *st = rt->st;
    size_t lo = st->opt_lo, hi = st->opt_lo + st->opt_n;
    if (a < lo) a = lo;
    if (b > hi) b = hi;
    if (a >= b) return;
    ppdl_be_adamw(rt->be, b - a, st->params + a, st->grads + a, st->adam_m + (a - lo), st->adam_v + (a - lo), rt->lr,
                  rt->cfg.beta1, rt->cfg.beta2, rt->cfg.eps, wd, rt->adam_t);
}

static void optimizer(ppdl_runtime *rt)
{
    ppdl_stage *st = rt->st;
    ppdl_papi_begin(rt->cfg.papi, PPDL_PAPI_OPTIMIZER);
    ppdl_range_push("optimizer", -1);
    double t0 = ppdl_now_s();
    rt->adam_t++;
    if (rt->cfg.decay_all || rt->cfg.weight_decay == 0) {
        adamw_range(rt, 0, st->n_params, rt->cfg.weight_decay);
    } else {
        /* runs of consecutive tensors that decay alike, one update each */
        size_t run0 = 0;
        int run_decays = -1;
        for (int l = st->first; l <= st->last + 1; l++) {
            const ppdl_layer *ly = l <= st->last ? &st->model->layers[l] : NULL;
            for (int i = 0; i < (ly ? ly->n_params : 1); i++) {
                /* a tied weight held once is updated as wte (it is the arena's last) */
                if (ly && ppdl_model_is_tied(st->model, l, i) && ppdl_model_tie_within(st->model, st->first, st->last))
                    continue;
                int decays = ly ? ly->params[i].ndim >= 2 : -2; /* -2: the end */
                size_t at = ly ? ly->params[i].offset : st->n_params;
                if (decays == run_decays) continue;
                if (run_decays >= 0 && at > run0) adamw_range(rt, run0, at, run_decays ? rt->cfg.weight_decay : 0);
                run0 = at;
                run_decays = decays;
            }
        }
    }
    ppdl_be_zero(rt->be, st->grads, st->n_grads * sizeof(float));
    ppdl_rt_record(rt, PPDL_OP_OPTIMIZER, -1, t0, ppdl_now_s());
    ppdl_range_pop();
    ppdl_papi_end(rt->cfg.papi, PPDL_PAPI_OPTIMIZER);
}

/* Sharded optimizer state (stage.h): each replica updated its slice of the weights;
 * every replica gathers the others' slices, in place on the value arena (one
 * MPI_Iallgatherv per stage on its replicas' communicator, all posted before any is
 * waited for: a rank's stages gather on different communicators). The bits are the
 * owner's: every replica then holds the weights of the unsharded update. */
static void gather_params(ppdl_runtime **rts, int n)
{
    MPI_Request *req = ppdl_xmalloc((size_t)n * sizeof *req);
    int **counts = ppdl_xcalloc((size_t)n, sizeof *counts), **displs = ppdl_xcalloc((size_t)n, sizeof *displs);
    for (int c = 0; c < n; c++) {
        ppdl_stage *st = rts[c]->st;
        req[c] = MPI_REQUEST_NULL;
        if (st->opt_k <= 1 || rts[c]->test.shard_no_gather) continue;
        PPDL_CHECK(st->n_params <= INT_MAX, "stage %d has too many parameters for one all-gather", rts[c]->cfg.stage);
        counts[c] = ppdl_xmalloc((size_t)st->opt_k * sizeof(int));
        displs[c] = ppdl_xmalloc((size_t)st->opt_k * sizeof(int));
        for (int r = 0; r < st->opt_k; r++) {
            displs[c][r] = (int)st->opt_bounds[r];
            counts[c][r] = (int)(st->opt_bounds[r + 1] - st->opt_bounds[r]);
        }
        PPDL_CHECK_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, st->params, counts[c], displs[c], MPI_FLOAT,
                                       rts[c]->cfg.replica_comm, &req[c]));
    }
    for (int c = 0; c < n; c++) {
        ppdl_rt_wait(rts[c], &req[c], -1, PPDL_EV_ALLREDUCE);
        free(counts[c]);
        free(displs[c]);
    }
    free(req);
    free(counts);
    free(displs);
}

void ppdl_rt_update(ppdl_runtime **rts, int n, ppdl_step_stats *stats)
{
    stats->lr = rts[0]->lr;
    double t_agree = ppdl_now_s();
    double clip = rts[0]->cfg.clip_grad_norm;
    if (clip > 0) {
        double norm = 0;
        stats->nonfinite_stage = agree_nonfinite_and_norm(rts, n, &norm);
        if (stats->nonfinite_stage < 0) {
            stats->grad_norm = norm;
            double c = clip / (norm + 1e-6);
            if (c < 1)
                for (int k = 0; k < n; k++)
                    ppdl_be_axpy(rts[k]->be, rts[k]->st->n_params, (float)(c - 1.0), rts[k]->st->grads,
                                 rts[k]->st->grads);
        }
    } else {
        stats->nonfinite_stage = agree_nonfinite(rts, n);
    }
    ppdl_be_sync(rts[0]->be);
    stats->agree_ms = 1e3 * (ppdl_now_s() - t_agree);
    for (int c = 0; c < n; c++) {
        ppdl_runtime *rt = rts[c];
        if (stats->nonfinite_stage < 0) {
            optimizer(rt);
        } else {
            /* no update from a broken step: gradients dropped, weights untouched */
            ppdl_be_zero(rt->be, rt->st->grads, rt->st->n_grads * sizeof(float));
            stats->skipped = rt->cfg.skip_nonfinite;
        }
    }
    if (stats->nonfinite_stage < 0) gather_params(rts, n);
}
