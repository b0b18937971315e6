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
    double ss = 0;
    ppdl_be_sumsq(be, st->n_grads, st->grads, &ss);
    if (isfinite(ss)) return 0;
    for (int l = st->first; l <= st->last; l++) {
        const ppdl_layer *ly = &st->model->layers[l];
        for (int i = 0; i < ly->n_params; i++) {
            ppdl_be_sumsq(be, ly->params[i].numel, ly->params[i].grad, &ss);
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

/* With clipping, the agreement above and the model's gradient norm share one pass over
 * the gradients and one all-reduce, so clipping adds no reduction of its own
 * (runtime.h: clip_grad_norm). The norm is the same bits on every rank and for any
 * plan: per layer the sum of its tensors' sums of squares, in parameter order, from the
 * first replica of each stage (a tied copy counted once, as layer 0's wte); an
 * all-reduce of [2L] in which each layer has one non-zero contribution, and each rank
 * that saw a non-finite value puts a 1 at L + its stage (a stage index is below L);
 * then every rank sums the layers in order. Returns the lowest stage with a non-finite
 * value, or -1, as agree_nonfinite. */
static int agree_nonfinite_and_norm(ppdl_runtime **rts, int n, double *norm)
{
    int L = rts[0]->st->model->L;
    double t0 = ppdl_now_s();
    double *sums = rts[0]->layer_sumsq;
    memset(sums, 0, 2 * (size_t)L * sizeof(double));
    for (int c = 0; c < n; c++) {
        ppdl_runtime *rt = rts[c];
        ppdl_stage *st = rt->st;
        int bad = loss_nonfinite(rt);
        for (int l = st->first; l <= st->last; l++) {
            const ppdl_layer *ly = &st->model->layers[l];
            double layer = 0;
            for (int i = 0; i < ly->n_params; i++) {
                double ss = 0;
                if (ppdl_model_is_tied(st->model, l, i)) continue;
                size_t a = 0, b = ly->params[i].numel;
                if (rt->test.shard_norm_one && st->opt_k > 1) { /* the planted bug: this replica's slice only */
                    size_t off = ly->params[i].offset, lo = st->opt_lo, hi = st->opt_lo + st->opt_n;
                    a = lo > off ? lo - off : 0;
                    b = hi < off ? 0 : hi - off < b ? hi - off : b;
                    if (a > b) a = b;
                }
                ppdl_be_sumsq(rt->be, b - a, ly->params[i].grad + a, &ss);
                layer += ss;
            }
            if (rt->cfg.replica == 0) sums[l] = layer;
            /* the rare case: local_nonfinite names the first offender */
            if (!bad && !isfinite(layer)) bad = local_nonfinite(rt);
        }
        if (bad) sums[L + rt->cfg.stage] = 1;
    }
    ppdl_rt_record(rts[0], PPDL_OP_OPTIMIZER, -1, t0, ppdl_now_s());
    MPI_Request req;
    PPDL_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, sums, 2 * L, MPI_DOUBLE, MPI_SUM, rts[0]->comm->comm, &req));
    ppdl_rt_wait(rts[0], &req, -1, PPDL_EV_ALLREDUCE); /* the stages that finished first idle here */
    double total = 0;
    for (int l = 0; l < L; l++) total += sums[l];
    *norm = sqrt(total);
    for (int s = 0; s < L; s++)
        if (sums[L + s] > 0) return s;
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
