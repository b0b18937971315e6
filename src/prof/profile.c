/* profile.c — time each layer alone on the device: the costs the planner plans with. */
#include "prof/profile.h"
#include "core/error.h"
#include "core/util.h"
#include "nn/stage.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ppdl_profile_opts_default(ppdl_profile_opts *o)
{
    o->reps = 5;
    o->warmup = 1;
    o->seed = 1;
}

void ppdl_costs_from_model(const ppdl_model *m, int b, ppdl_costs *out)
{
    ppdl_costs_alloc(out, m->L);
    out->micro_batch_size = b;
    out->state_multiplier = 4; /* values, gradients, AdamW m and v */
    out->buffer_bytes_given = 1;
    out->tied_bytes = (double)(ppdl_model_tied_floats(m) * sizeof(float)); /* a gpt's wte = lm_head.weight */
    if (!strcmp(m->family, "gpt")) out->vocab_size = m->vocab_size; /* the head's rows (plan/vocab.h) */
    for (int l = 0; l < m->L; l++) {
        const ppdl_layer *ly = &m->layers[l];
        ppdl_layer_cost *lc = &out->layers[l];
        snprintf(lc->name, sizeof lc->name, "%s", ly->kind->name);
        lc->param_bytes = (double)(ppdl_layer_param_count(ly) * sizeof(float));
        lc->out_bytes = (double)b * (double)ly->out_bytes;
        /* the runtime's buffers (plan/reserve.h), as runtime.c allocates them */
        lc->in_bytes = (double)b * (double)ly->in_bytes;
        lc->saved_bytes = 4.0 * (double)ly->kind->saved_floats(ly, b, 0);
        lc->work_bytes = 4.0 * (double)ly->kind->work_floats(ly, b);
        lc->n_opts = ly->kind->n_options < PPDL_MAX_RC_OPTS ? ly->kind->n_options : PPDL_MAX_RC_OPTS;
        for (int o = 0; o < lc->n_opts; o++) {
            lc->stash_bytes[o] = (double)ppdl_model_stash_bytes(m, l, b, o);
            lc->weight_keep_bytes[o] = (double)ppdl_layer_weight_keep_bytes(ly, b, o);
        }
    }
    out->split_given = 1; /* the profile times B and W too */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* the buffers one layer needs, on the device */
/* Micro-batch slots the profile cycles through: in the pipeline a layer writes each
 * micro-batch's output and saved tensors to that micro-batch's own buffers, and its
 * backward reads them after the other micro-batches' forwards have passed through the
 * caches. Timing one buffer over and over keeps it all in cache, and a small layer
 * then times faster than it runs in a step. */
#define PROFILE_SLOTS 4

typedef struct layer_bufs {
    void *in;
    float *out[PROFILE_SLOTS], *saved[PROFILE_SLOTS], *work, *dout, *dout_ref, *din, *loss;
    float *keep;               /* what a split backward's B keeps for its W */
    int32_t *targets;
    int n_slots;
} layer_bufs;

static void *try_alloc(ppdl_backend *be, size_t n, const char *what, int *failed)
{
    if (*failed) return NULL;
    void *p = ppdl_be_try_alloc(be, n ? n : 1, what);
    if (!p) *failed = 1;
    return p;
}

static void bufs_free(ppdl_backend *be, layer_bufs *B)
{
    void *all[] = {B->in, B->work, B->dout, B->dout_ref, B->din, B->loss, B->targets, B->keep};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (all[k]) ppdl_be_free(be, all[k]);
    for (int q = 0; q < PROFILE_SLOTS; q++) {
        if (B->out[q]) ppdl_be_free(be, B->out[q]);
        if (B->saved[q]) ppdl_be_free(be, B->saved[q]);
    }
    memset(B, 0, sizeof *B);
}

static double now_synced(ppdl_backend *be)
{
    ppdl_be_sync(be);
    return ppdl_now_s();
}

/* Timed runs of a measurement whose warm-up run took tw seconds: opts->reps, or
 * SLOW_REPS where that run took SLOW_S or more. Timer and scheduler noise is a few
 * microseconds to a millisecond, small against such a run, and the median of 3 is as
 * steady as that of 5; a gpt-small block (seconds per run on one CPU core) would
 * otherwise spend most of the profile repeating itself. */
#define SLOW_S 0.02
#define SLOW_REPS 3

static int timed_runs(const ppdl_profile_opts *o, double tw)
{
    return o->warmup > 0 && tw >= SLOW_S && o->reps > SLOW_REPS ? SLOW_REPS : o->reps;
}

static int profile_one(const ppdl_model *m, ppdl_model *mc, int l, const float *host, ppdl_backend *be, int b,
                       const ppdl_profile_opts *o, ppdl_layer_cost *lc, char *err, size_t errlen)
{
    ppdl_layer *ly = &mc->layers[l];
    const ppdl_layer_kind *k = ly->kind;
    int last = l == m->L - 1, first = l == 0, failed = 0;
    int rows = b * ppdl_model_loss_rows(m), classes = ppdl_model_classes(m);
    size_t in_b = (size_t)b * ly->in_bytes, out_b = (size_t)b * ly->out_bytes;
    size_t saved_n = 0, keep_n = 0;
    for (int option = 0; option < k->n_options; option++) {
        if (k->saved_floats(ly, b, option) > saved_n) saved_n = k->saved_floats(ly, b, option);
        if (k->keep_floats(ly, b, option) > keep_n) keep_n = k->keep_floats(ly, b, option);
    }

    /* parameters: this layer alone in a stage arena, initialised as the model would be */
    ppdl_stage st;
    ppdl_stage_alloc_params(&st, mc, be, l, l);
    ppdl_be_copy_h2d(be, st.params, host, st.n_params * sizeof(float));

    layer_bufs B;
    memset(&B, 0, sizeof B);
    B.in = try_alloc(be, in_b, "profile: layer input", &failed);
    B.out[0] = try_alloc(be, out_b, "profile: layer output", &failed);
    B.saved[0] = try_alloc(be, saved_n * sizeof(float), "profile: saved tensors", &failed);
    B.n_slots = 1;
    B.work = try_alloc(be, k->work_floats(ly, b) * sizeof(float), "profile: work space", &failed);
    B.dout = try_alloc(be, out_b, "profile: output gradient", &failed);
    B.dout_ref = try_alloc(be, out_b, "profile: output gradient", &failed);
    if (!first) B.din = try_alloc(be, in_b, "profile: input gradient", &failed);
    B.keep = try_alloc(be, keep_n * sizeof(float), "profile: kept for W", &failed);
    if (last) {
        B.targets = try_alloc(be, (size_t)rows * sizeof(int32_t), "profile: targets", &failed);
        B.loss = try_alloc(be, sizeof(float), "profile: loss", &failed);
    }
    if (failed) {
        bufs_free(be, &B);
        ppdl_stage_free(&st);
        char a[32];
        return ppdl_errf(err, errlen, "profiling layer %d (%s) at micro-batch size %d: the device has no room "
                                      "for its buffers (%s in use); try a smaller micro-batch",
                         l, k->name, b, ppdl_fmt_bytes(ppdl_be_in_use(be), a, sizeof a));
    }

    /* more slots where the device has room for them (a tight device profiles with one) */
    while (!failed && B.n_slots < PROFILE_SLOTS) {
        int q = B.n_slots;
        B.out[q] = ppdl_be_try_alloc(be, out_b ? out_b : 1, "profile: layer output");
        B.saved[q] = B.out[q] ? ppdl_be_try_alloc(be, saved_n ? saved_n * sizeof(float) : 1, "profile: saved tensors")
                              : NULL;
        if (!B.saved[q]) break;
        B.n_slots++;
    }
    /* touched once, so that no timed call pays first-touch page faults the runtime's
     * long-lived buffers never pay */
    for (int q = 0; q < B.n_slots && !failed; q++) {
        ppdl_be_zero(be, B.out[q], out_b);
        ppdl_be_zero(be, B.saved[q], saved_n * sizeof(float));
    }

    /* inputs: token ids for the embedding, N(0,1) floats otherwise; a gradient of the
     * output scaled like a loss gradient; random targets */
    ppdl_rng rng;
    ppdl_rng_seed(&rng, o->seed * 7919 + (unsigned long long)l);
    size_t nmax = in_b > out_b ? in_b : out_b;
    if ((size_t)rows * sizeof(int32_t) > nmax) nmax = (size_t)rows * sizeof(int32_t);
    void *h = ppdl_xmalloc(nmax ? nmax : 1);
    if (first && !strcmp(m->family, "gpt")) {
        int32_t *t = h;
        for (size_t i = 0; i < in_b / sizeof(int32_t); i++) t[i] = (int32_t)(ppdl_rng_u64(&rng) % (uint64_t)m->vocab_size);
    } else {
        float *f = h;
        for (size_t i = 0; i < in_b / sizeof(float); i++) f[i] = (float)ppdl_rng_normal(&rng);
    }
    ppdl_be_copy_h2d(be, B.in, h, in_b);
    float *f = h;
    for (size_t i = 0; i < out_b / sizeof(float); i++) f[i] = (float)(1e-3 * ppdl_rng_normal(&rng));
    ppdl_be_copy_h2d(be, B.dout_ref, h, out_b);
    if (last) {
        int32_t *t = h;
        for (int i = 0; i < rows; i++) t[i] = (int32_t)(ppdl_rng_u64(&rng) % (uint64_t)classes);
        ppdl_be_copy_h2d(be, B.targets, h, (size_t)rows * sizeof(int32_t));
    }
    ppdl_be_sync(be);
    free(h);

    int n = o->reps > 0 ? o->reps : 1;
    double *tf = ppdl_xmalloc((size_t)n * sizeof(double)), *tx = ppdl_xmalloc((size_t)n * sizeof(double));
    double *tb = ppdl_xmalloc((size_t)n * sizeof(double));
    double *tbi = ppdl_xmalloc((size_t)n * sizeof(double)), *tbw = ppdl_xmalloc((size_t)n * sizeof(double));
    double fwd0 = 0, xent = 0, bwd[3] = {0, 0, 0}, bi[3] = {0, 0, 0}, bw[3] = {0, 0, 0};
    /* option 0, then the kind's own option 2 (selective) when it has one */
    for (int option = 0; option < k->n_options; option++) {
        if (option == PPDL_RC_FULL) continue; /* the runtime's full recompute: forward again */
        /* the warm-up, untimed but for its length, which sets the timed runs */
        double tw = 0;
        for (int r = 0; r < o->warmup; r++) {
            double t0 = now_synced(be);
            k->forward(ly, be, b, B.in, B.out[0], B.saved[0], B.work, option);
            if (last)
                ppdl_be_softmax_xent(be, rows, classes, B.out[0], B.targets, 1.0f / (float)rows, B.loss, B.dout_ref);
            ppdl_be_copy_d2d(be, B.dout, B.dout_ref, out_b);
            ppdl_layer_backward(ly, be, b, B.in, B.saved[0], B.dout, B.din, B.work, option);
            if (r == 0) tw = now_synced(be) - t0;
        }
        int reps = timed_runs(o, tw);
        /* GPipe-like groups: the forwards of n_slots micro-batches, then their backwards */
        for (int r0 = 0; r0 < reps; r0 += B.n_slots) {
            int r1 = r0 + B.n_slots < reps ? r0 + B.n_slots : reps;
            for (int r = r0; r < r1; r++) {
                int q = r - r0;
                double t0 = now_synced(be);
                k->forward(ly, be, b, B.in, B.out[q], B.saved[q], B.work, option);
                double t1 = now_synced(be);
                if (last) {
                    ppdl_be_softmax_xent(be, rows, classes, B.out[q], B.targets, 1.0f / (float)rows, B.loss,
                                          B.dout_ref);
                    tx[r] = now_synced(be) - t1;
                }
                tf[r] = t1 - t0;
            }
            for (int r = r0; r < r1; r++) {
                int q = r - r0;
                ppdl_be_copy_d2d(be, B.dout, B.dout_ref, out_b); /* backward may clobber dout */
                double t2 = now_synced(be);
                ppdl_layer_backward(ly, be, b, B.in, B.saved[q], B.dout, B.din, B.work, option);
                tb[r] = now_synced(be) - t2;
            }
            /* the same backwards split in two (B may write into saved: after the fused ones) */
            for (int r = r0; r < r1; r++) {
                int q = r - r0;
                ppdl_be_copy_d2d(be, B.dout, B.dout_ref, out_b);
                double t2 = now_synced(be);
                k->backward(ly, be, PPDL_BWD_INPUT, b, B.in, B.saved[q], B.dout, B.din, B.keep, B.work, option);
                double t3 = now_synced(be);
                k->backward(ly, be, PPDL_BWD_WEIGHT, b, B.in, B.saved[q], B.dout, NULL, B.keep, B.work, option);
                tbw[r] = now_synced(be) - t3;
                tbi[r] = t3 - t2;
            }
        }
        bwd[option] = 1e3 * median(tb, reps);
        bi[option] = 1e3 * median(tbi, reps);
        bw[option] = 1e3 * median(tbw, reps);
        if (option == 0) {
            fwd0 = 1e3 * median(tf, reps);
            if (last) xent = 1e3 * median(tx, reps);
        }
    }
    lc->fwd_ms = fwd0 + xent;
    lc->bwd_ms = bwd[0];
    lc->bwd_input_ms = bi[0];
    lc->bwd_weight_ms = bw[0];
    /* the optimizer's step over this layer's parameters, timed like the layer: the
     * runtime's pass that checks the gradients are finite, then AdamW (once per
     * training step; the runtime updates each layer's parameters in its own call).
     * In a step it runs after the whole backward has passed through the caches, so on
     * the CPU each run follows a sweep of the last-level cache: timed back to back,
     * the parameters, gradients and moments stay in cache and the update times well
     * short of what it takes in a step (perf/bench-default-plan's mlp preset) */
    lc->opt_ms = 0;
    if (st.n_params) {
        size_t sweep_n = ppdl_be_device_memory(be) ? 0 : ppdl_llc_bytes();
        unsigned char *sweep = sweep_n ? ppdl_xmalloc(sweep_n) : NULL;
        size_t pb = st.n_params * sizeof(float);
        float *g = try_alloc(be, pb, "profile: gradients", &failed);
        float *mm = try_alloc(be, pb, "profile: AdamW m", &failed);
        float *vv = try_alloc(be, pb, "profile: AdamW v", &failed);
        if (!failed) {
            /* zero gradients and moments: the same arithmetic per element as any */
            ppdl_be_zero(be, g, pb);
            ppdl_be_zero(be, mm, pb);
            ppdl_be_zero(be, vv, pb);
            double tw = 0;
            int reps = n;
            for (int r = -o->warmup; r < reps; r++) {
                if (sweep) memset(sweep, r & 0xff, sweep_n);
                double t0 = now_synced(be), ss = 0;
                /* the runtime's check that every gradient is finite, then the update */
                ppdl_be_sumsq(be, st.n_params, g, &ss);
                ppdl_be_adamw(be, st.n_params, st.params, g, mm, vv, 1e-4, 0.9, 0.999, 1e-8, 0.01,
                              r + o->warmup + 1);
                double t = now_synced(be) - t0;
                if (r >= 0) tf[r] = t;
                else if (r == -o->warmup) reps = timed_runs(o, tw = t);
            }
            lc->opt_ms = 1e3 * median(tf, reps);
        }
        void *all[] = {g, mm, vv};
        for (int q = 0; q < 3; q++)
            if (all[q]) ppdl_be_free(be, all[q]);
        free(sweep);
        failed = 0; /* no room for the optimizer's buffers: its time stays 0 */
    }
    /* A recompute option always costs time. Measured as a difference of two noisy
     * medians it can come out <= 0 on a shared machine, and the planner would then
     * recompute for free even with memory to spare: at least 1% of the layer's
     * forward (and 1 ns) */
    double floor_ms = fmax(0.01 * fwd0, 1e-6);
    if (lc->n_opts > PPDL_RC_FULL) lc->extra_ms[PPDL_RC_FULL] = fmax(fwd0, floor_ms);
    if (lc->n_opts > PPDL_RC_SELECTIVE)
        lc->extra_ms[PPDL_RC_SELECTIVE] = fmax(bwd[PPDL_RC_SELECTIVE] - bwd[0], floor_ms);
    /* what a W recomputes on its own: the whole forward again under full recompute
     * where it reads the saved tensors (the runtime's hook), the MLP's hidden layer
     * under the block's selective option (timed) */
    if (lc->n_opts > PPDL_RC_FULL)
        lc->weight_extra_ms[PPDL_RC_FULL] =
            k->weight_reads(ly, PPDL_RC_FULL) & PPDL_W_SAVED ? lc->extra_ms[PPDL_RC_FULL] : 0;
    if (lc->n_opts > PPDL_RC_SELECTIVE) lc->weight_extra_ms[PPDL_RC_SELECTIVE] = fmax(bw[PPDL_RC_SELECTIVE] - bw[0], 0);
    free(tf);
    free(tx);
    free(tb);
    free(tbi);
    free(tbw);
    bufs_free(be, &B);
    ppdl_stage_free(&st);
    return 0;
}

/* ---- the layers in their order ------------------------------------------------------
 * Alone, a layer runs with its weights and buffers hot in the caches, which it does not
 * have in a step: there the other layers' weights and micro-batches pass through the
 * caches between two calls of it, and a layer whose weights the others evict (the cnn
 * preset's linear layer after the convolutions) runs well above its isolated time in
 * a step. So, where the device holds the whole model, its forward
 * and backward times are taken again the way the runtime runs them: the forwards of
 * n_slots micro-batches through every layer, each with its own output and saved
 * tensors, then their backwards in reverse order, each layer's call timed. */

typedef struct chain_bufs {
    void *in[PROFILE_SLOTS];                            /* model input per slot */
    float *act[PROFILE_SLOTS], *saved[PROFILE_SLOTS];   /* all layers' outputs / saved */
    size_t *act_off, *saved_off;                        /* per layer, in floats */
    float *work, *grad[2], *loss;
    int32_t *targets;
} chain_bufs;

static void chain_free(ppdl_backend *be, chain_bufs *C, int n_slots)
{
    for (int q = 0; q < n_slots; q++) {
        if (C->in[q]) ppdl_be_free(be, C->in[q]);
        if (C->act[q]) ppdl_be_free(be, C->act[q]);
        if (C->saved[q]) ppdl_be_free(be, C->saved[q]);
    }
    void *all[] = {C->work, C->grad[0], C->grad[1], C->loss, C->targets};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        if (all[k]) ppdl_be_free(be, all[k]);
    free(C->act_off);
    free(C->saved_off);
    memset(C, 0, sizeof *C);
}

/* 1: times in out->layers[].fwd_ms/bwd_ms replaced; 0: the device has no room for the
 * whole model and its buffers (the isolated times stand) */
static int profile_chain(const ppdl_model *m, ppdl_model *mc, float *const *host, ppdl_backend *be, int b,
                         const ppdl_profile_opts *o, ppdl_costs *out)
{
    const int L = m->L, n_slots = PROFILE_SLOTS;
    int rows = b * ppdl_model_loss_rows(m), classes = ppdl_model_classes(m), failed = 0;
    size_t n_par = 0, act_n = 0, saved_n = 0, work_n = 1, grad_b = 1;
    chain_bufs C;
    memset(&C, 0, sizeof C);
    C.act_off = ppdl_xmalloc((size_t)L * sizeof *C.act_off);
    C.saved_off = ppdl_xmalloc((size_t)L * sizeof *C.saved_off);
    for (int l = 0; l < L; l++) {
        const ppdl_layer *ly = &mc->layers[l];
        n_par += ppdl_layer_param_count(ly);
        C.act_off[l] = act_n;
        act_n += (size_t)b * ly->out_bytes / sizeof(float);
        C.saved_off[l] = saved_n;
        saved_n += ly->kind->saved_floats(ly, b, 0);
        if (ly->kind->work_floats(ly, b) > work_n) work_n = ly->kind->work_floats(ly, b);
        if ((size_t)b * ly->in_bytes > grad_b) grad_b = (size_t)b * ly->in_bytes;
    }
    /* parameters and gradients come from ppdl_stage_alloc_params, which cannot fail
     * softly: check the device's limit for them first */
    size_t par_b = 2 * (n_par ? n_par : 1) * sizeof(float);
    if (ppdl_be_limit(be) && ppdl_be_in_use(be) + par_b > ppdl_be_limit(be)) {
        chain_free(be, &C, 0);
        return 0;
    }
    size_t in_b = (size_t)b * mc->layers[0].in_bytes;
    for (int q = 0; q < n_slots; q++) {
        C.in[q] = try_alloc(be, in_b, "profile: model input", &failed);
        C.act[q] = try_alloc(be, act_n * sizeof(float), "profile: layer outputs", &failed);
        C.saved[q] = try_alloc(be, (saved_n ? saved_n : 1) * sizeof(float), "profile: saved tensors", &failed);
    }
    C.work = try_alloc(be, work_n * sizeof(float), "profile: work space", &failed);
    C.grad[0] = try_alloc(be, grad_b, "profile: input gradient", &failed);
    C.grad[1] = try_alloc(be, grad_b, "profile: input gradient", &failed);
    C.targets = try_alloc(be, (size_t)rows * sizeof(int32_t), "profile: targets", &failed);
    C.loss = try_alloc(be, sizeof(float), "profile: loss", &failed);
    if (failed || (ppdl_be_limit(be) && ppdl_be_in_use(be) + par_b > ppdl_be_limit(be))) {
        chain_free(be, &C, n_slots);
        return 0;
    }
    ppdl_stage st;
    ppdl_stage_alloc_params(&st, mc, be, 0, L - 1);
    for (int l = 0; l < L; l++) {
        const ppdl_layer *ly = &mc->layers[l];
        size_t np = ppdl_layer_param_count(ly);
        if (!np) continue;
        /* the layer's initial values (lent to its twins); a tied weight is wte, held once here */
        const float *p = host[l];
        for (int i = 0; i < ly->n_params; p += ly->params[i++].numel)
            if (!ppdl_model_is_tied(mc, l, i))
                ppdl_be_copy_h2d(be, ly->params[i].value, p, ly->params[i].numel * sizeof(float));
    }

    /* inputs as the isolated profile makes them; targets at random */
    ppdl_rng rng;
    ppdl_rng_seed(&rng, o->seed * 104729 + 17);
    size_t hn = in_b > (size_t)rows * sizeof(int32_t) ? in_b : (size_t)rows * sizeof(int32_t);
    void *h = ppdl_xmalloc(hn ? hn : 1);
    for (int q = 0; q < n_slots; q++) {
        if (!strcmp(m->family, "gpt")) {
            int32_t *t = h;
            for (size_t i = 0; i < in_b / sizeof(int32_t); i++)
                t[i] = (int32_t)(ppdl_rng_u64(&rng) % (uint64_t)m->vocab_size);
        } else {
            float *f = h;
            for (size_t i = 0; i < in_b / sizeof(float); i++) f[i] = (float)ppdl_rng_normal(&rng);
        }
        ppdl_be_copy_h2d(be, C.in[q], h, in_b);
        ppdl_be_zero(be, C.act[q], act_n * sizeof(float));
        ppdl_be_zero(be, C.saved[q], (saved_n ? saved_n : 1) * sizeof(float));
    }
    int32_t *t = h;
    for (int i = 0; i < rows; i++) t[i] = (int32_t)(ppdl_rng_u64(&rng) % (uint64_t)classes);
    ppdl_be_copy_h2d(be, C.targets, h, (size_t)rows * sizeof(int32_t));
    ppdl_be_sync(be);
    free(h);

    /* rounds of n_slots micro-batches: the first warms up, then enough for `reps`
     * samples of every layer, and more (up to 64 rounds) until 0.1 s has passed: a
     * small model's layers take a fraction of a millisecond, and a few samples taken
     * within a few ms move its predicted step a lot from run to run */
    int min_rounds = (o->reps + n_slots - 1) / n_slots, max_rounds = min_rounds > 64 ? min_rounds : 64;
    /* A round that the isolated times say takes 0.1 s or more: the layers are slow
     * enough to be warm after the isolated profile and steady in one round's n_slots
     * samples (SLOW_S above), and 0.1 s would end the rounds after the first anyway:
     * no warm-up round, one round (a round of gpt-small is 4 of its training passes) */
    double round_s = 0;
    for (int l = 0; l < L; l++) round_s += n_slots * (out->layers[l].fwd_ms + out->layers[l].bwd_ms) / 1e3;
    int warm = o->warmup > 0;
    if (round_s >= 0.1) min_rounds = 1, warm = 0;
    size_t cap = (size_t)max_rounds * (size_t)n_slots;
    double *tf = ppdl_xmalloc((size_t)L * cap * sizeof(double));
    double *tb = ppdl_xmalloc((size_t)L * cap * sizeof(double));
    double *tr = ppdl_xmalloc((size_t)L * cap * sizeof(double)); /* forward without the loss */
    int rounds = 0;
    double t_first = 0;
    for (int r = -warm; r < max_rounds; r++) {
        if (r == 0) t_first = ppdl_now_s();
        if (r >= min_rounds && ppdl_now_s() - t_first >= 0.1) break;
        if (r >= 0) rounds = r + 1;
        for (int q = 0; q < n_slots; q++) {
            const void *x = C.in[q];
            for (int l = 0; l < L; l++) {
                const ppdl_layer *ly = &mc->layers[l];
                float *y = C.act[q] + C.act_off[l];
                double t0 = now_synced(be);
                ly->kind->forward(ly, be, b, x, y, C.saved[q] + C.saved_off[l], C.work, 0);
                double t1 = now_synced(be);
                if (l == L - 1) /* the loss and its gradient, into the logits */
                    ppdl_be_softmax_xent(be, rows, classes, y, C.targets, 1.0f / (float)rows, C.loss, y);
                size_t k = (size_t)l * cap + (size_t)(r * n_slots + q);
                if (r >= 0) {
                    tr[k] = t1 - t0;
                    tf[k] = now_synced(be) - t0;
                }
                x = y;
            }
        }
        for (int q = 0; q < n_slots; q++) {
            float *dout = C.act[q] + C.act_off[L - 1];
            for (int l = L - 1; l >= 0; l--) {
                ppdl_layer *ly = &mc->layers[l];
                const void *x = l ? (const void *)(C.act[q] + C.act_off[l - 1]) : C.in[q];
                float *din = l ? C.grad[l % 2] : NULL;
                double t0 = now_synced(be);
                ppdl_layer_backward(ly, be, b, x, C.saved[q] + C.saved_off[l], dout, din, C.work, 0);
                if (r >= 0) tb[(size_t)l * cap + (size_t)(r * n_slots + q)] = now_synced(be) - t0;
                dout = din;
            }
        }
    }
    int n = rounds * n_slots;
    for (int l = 0; l < L; l++) {
        ppdl_layer_cost *lc = &out->layers[l];
        lc->fwd_ms = 1e3 * median(tf + (size_t)l * cap, n);
        double alone = lc->bwd_ms;
        lc->bwd_ms = 1e3 * median(tb + (size_t)l * cap, n);
        /* B and W as timed alone, scaled as the fused backward was (their ratio as
         * timed alone) */
        if (alone > 0) {
            lc->bwd_input_ms *= lc->bwd_ms / alone;
            lc->bwd_weight_ms *= lc->bwd_ms / alone;
        }
        /* full recompute runs the forward (without the loss) again before backward */
        if (lc->n_opts > PPDL_RC_FULL)
            lc->extra_ms[PPDL_RC_FULL] = fmax(1e3 * median(tr + (size_t)l * cap, n), 1e-6);
        /* a W that recomputes (profile_one) recomputes this forward */
        if (lc->n_opts > PPDL_RC_FULL && lc->weight_extra_ms[PPDL_RC_FULL] > 0)
            lc->weight_extra_ms[PPDL_RC_FULL] = lc->extra_ms[PPDL_RC_FULL];
    }
    free(tr);
    free(tf);
    free(tb);
    chain_free(be, &C, n_slots);
    ppdl_stage_free(&st);
    return 1;
}

/* An earlier layer that runs exactly as layer l does, or -1: the same kind and
 * hyperparameters (so the same shapes, parameters and options), neither of them the
 * first layer (which computes no input gradient) or the last (which adds the loss).
 * A GPT's blocks are all alike: gpt-small's 12 are profiled once. */
static int same_layer_before(const ppdl_model *m, int l)
{
    if (l == 0 || l == m->L - 1) return -1;
    const ppdl_layer *a = &m->layers[l];
    for (int k = 1; k < l; k++) {
        const ppdl_layer *t = &m->layers[k];
        if (t->kind == a->kind && !memcmp(&t->cfg, &a->cfg, sizeof a->cfg) && t->in_bytes == a->in_bytes &&
            t->out_bytes == a->out_bytes && ppdl_layer_param_count(t) == ppdl_layer_param_count(a))
            return k;
    }
    return -1;
}

/* Parameter values to time a layer with: the model's own initialisation up to
 * EXACT_VALUES parameters; above, a block of TILE_VALUES uniform values of standard
 * deviation 0.02 (GPT-2's; PyTorch's linear default is of that order for 500-1000
 * inputs) repeated. The kernels' times do not depend on the values (no data-dependent
 * branch in a GEMM, a gather or a norm; these stay far from overflow and from
 * denormals), and the model's initialisation of gpt-small's embedding, one block and
 * head (85 M normal draws, tens of ns each on a CPU core) takes seconds: more than the
 * whole start-up may take on a GPU. */
#define EXACT_VALUES ((size_t)1 << 20)
#define TILE_VALUES ((size_t)1 << 16)

static void profile_values(const ppdl_model *m, const ppdl_layer *ly, unsigned long long seed, size_t np,
                           float *host)
{
    if (np <= EXACT_VALUES) {
        ppdl_layer_init_params(m, ly, seed, host);
        return;
    }
    ppdl_rng rng;
    ppdl_rng_seed(&rng, seed * 7001 + (unsigned long long)ly->index);
    const double a = 0.02 * sqrt(3.0); /* U(-a, a) has standard deviation 0.02 */
    for (size_t i = 0; i < TILE_VALUES; i++) host[i] = (float)(a * (2 * ppdl_rng_uniform(&rng) - 1));
    for (size_t i = TILE_VALUES; i < np; i += TILE_VALUES)
        memcpy(host + i, host, (np - i < TILE_VALUES ? np - i : TILE_VALUES) * sizeof(float));
}

/* the profiled times of a layer given to its twin (the bytes are its own already) */
static void copy_times(const ppdl_layer_cost *from, ppdl_layer_cost *to)
{
    to->fwd_ms = from->fwd_ms;
    to->bwd_ms = from->bwd_ms;
    to->opt_ms = from->opt_ms;
    memcpy(to->extra_ms, from->extra_ms, sizeof to->extra_ms);
    /* and the split backward's: without them a twin's B and W were 0, and the
     * zero-bubble cost model saw stages of many blocks as nearly free */
    to->bwd_input_ms = from->bwd_input_ms;
    to->bwd_weight_ms = from->bwd_weight_ms;
    memcpy(to->weight_extra_ms, from->weight_extra_ms, sizeof to->weight_extra_ms);
}

int ppdl_profile_layers(const ppdl_model *m, ppdl_backend *be, int b, const ppdl_profile_opts *opts,
                        ppdl_costs *out, char *err, size_t errlen)
{
    ppdl_profile_opts def;
    if (!opts) {
        ppdl_profile_opts_default(&def);
        opts = &def;
    }
    if (b < 1 || opts->reps < 1 || opts->warmup < 0)
        return ppdl_errf(err, errlen, "profile: micro-batch size %d, %d repetitions: expected >= 1", b, opts->reps);
    ppdl_costs_from_model(m, b, out);
    /* a private copy of the layer table: the stage allocator points the copy's
     * parameters at its arenas, and the caller's model is left as it was */
    ppdl_model mc = *m;
    mc.layers = ppdl_xmalloc((size_t)m->L * sizeof *mc.layers);
    memcpy(mc.layers, m->layers, (size_t)m->L * sizeof *mc.layers);
    /* Each distinct layer's parameters, initialised once as the model would be (a
     * gpt-small embedding or head is 38.6 M normal draws, seconds on a CPU), and
     * lent to its twins: the values do not change a layer's time, and the twins' in
     * the chain below are then the same too. */
    float **host = ppdl_xcalloc((size_t)m->L, sizeof *host);
    int *twin = ppdl_xmalloc((size_t)m->L * sizeof(int)), rc = 0;
    for (int l = 0; l < m->L; l++) twin[l] = same_layer_before(m, l);
    for (int l = 0; l < m->L && !rc; l++) {
        if (twin[l] >= 0) {
            host[l] = host[twin[l]];
            copy_times(&out->layers[twin[l]], &out->layers[l]);
            continue;
        }
        size_t np = ppdl_layer_param_count(&m->layers[l]);
        host[l] = np <= SIZE_MAX / sizeof(float) ? malloc((np ? np : 1) * sizeof(float)) : NULL;
        if (!host[l]) {
            char a[32];
            rc = ppdl_errf(err, errlen, "profiling layer %d (%s): out of memory: its parameters need %s of host "
                                        "memory", l, m->layers[l].kind->name,
                           ppdl_fmt_bytes(np > SIZE_MAX / sizeof(float) ? SIZE_MAX : np * sizeof(float), a,
                                          sizeof a));
            break;
        }
        profile_values(m, &m->layers[l], opts->seed, np, host[l]);
        rc = profile_one(m, &mc, l, host[l], be, b, opts, &out->layers[l], err, errlen);
    }
    if (!rc) out->ordered = profile_chain(m, &mc, host, be, b, opts, out);
    for (int l = 0; l < m->L; l++)
        if (twin[l] < 0) free(host[l]);
    free(host);
    free(twin);
    free(mc.layers);
    if (rc) ppdl_costs_free(out);
    return rc;
}

int ppdl_costs_check_model(const ppdl_costs *c, const ppdl_model *m, int b, const char *what, char *err,
                           size_t errlen)
{
    if (c->L != m->L)
        return ppdl_errf(err, errlen, "%s: costs of %d layers, but the model has %d: profile this model with "
                                      "--costs-out", what, c->L, m->L);
    if (c->micro_batch_size != b)
        return ppdl_errf(err, errlen, "%s: profiled at micro-batch size %d, but this run uses %d (batch size / "
                                      "micro-batches): profile again with --costs-out", what, c->micro_batch_size, b);
    ppdl_costs ref;
    ppdl_costs_from_model(m, b, &ref);
    int rc = 0, run_bf16 = 0;
    for (int l = 0; l < m->L; l++) run_bf16 |= m->layers[l].bf16_saved;
    for (int l = 0; l < m->L && !rc; l++) {
        const ppdl_layer_cost *a = &c->layers[l], *r = &ref.layers[l];
        int bytes_differ = a->param_bytes != r->param_bytes || a->out_bytes != r->out_bytes ||
                           (c->buffer_bytes_given && (a->in_bytes != r->in_bytes || a->saved_bytes != r->saved_bytes ||
                                                      a->work_bytes != r->work_bytes));
        if (bytes_differ && a->param_bytes == r->param_bytes && c->bf16_messages != run_bf16)
            /* a block keeps its saved tensors packed in bf16 (nn/layer.h): other bytes */
            rc = ppdl_errf(err, errlen, "%s: profiled under --precision %s, but this run is %s: layers[%d]'s saved "
                                        "and work bytes differ (a bf16 block keeps its saved tensors packed): profile "
                                        "again with --costs-out under --precision %s", what,
                           c->bf16_messages ? "bf16" : "fp32", run_bf16 ? "bf16" : "fp32", l, run_bf16 ? "bf16" : "fp32");
        else if (a->name[0] && strcmp(a->name, r->name))
            rc = ppdl_errf(err, errlen, "%s: layers[%d] is \"%s\" but the model's layer %d is a %s", what, l, a->name,
                           l, r->name);
        else if (a->n_opts != r->n_opts)
            rc = ppdl_errf(err, errlen, "%s: layers[%d] has %d recompute options, the model's %s layer has %d", what,
                           l, a->n_opts - 1, r->name, r->n_opts - 1);
        else if (bytes_differ)
            rc = ppdl_errf(err, errlen, "%s: layers[%d]: param_bytes/out_bytes/in_bytes/saved_bytes/work_bytes "
                                        "%.0f/%.0f/%.0f/%.0f/%.0f, but the model's layer has %.0f/%.0f/%.0f/%.0f/%.0f: "
                                        "these costs are of another model (or of an older ppdl: profile again with "
                                        "--costs-out)", what, l, a->param_bytes, a->out_bytes, a->in_bytes,
                           a->saved_bytes, a->work_bytes, r->param_bytes, r->out_bytes, r->in_bytes, r->saved_bytes,
                           r->work_bytes);
    }
    if (!rc && c->tied_bytes != ref.tied_bytes)
        rc = ppdl_errf(err, errlen, "%s: tied bytes %.0f (\"tied\"), but the model %s: these costs are of another "
                       "model (or from before ppdl knew tied embeddings: profile again with --costs-out)", what,
                       c->tied_bytes, m->tie_embeddings ? "ties its embeddings (tie_embeddings = 1)"
                                                        : "does not tie its embeddings");
    ppdl_costs_free(&ref);
    return rc;
}
