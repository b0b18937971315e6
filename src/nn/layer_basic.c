/* layer_basic.c — the MLP and CNN layer kinds: linear, conv, maxpool, flatten.
 *
 * Semantics are PyTorch's (nn.Linear, nn.Conv2d, nn.MaxPool2d, nn.Flatten), each followed
 * by the activation cfg.act where the kind has one. Shapes, parameter tables and byte
 * sizes are set by ppdl_layer_setup (layer.c); here is only the arithmetic, all of it
 * through the backend (no loop ever touches device data).
 *
 * Shape letters (backend.h): B samples (the `b` argument), Ci/Co channels, Hh/Ww input
 * height/width, OH/OW output height/width, kh/kw kernel size; for linear, IN/OUT are
 * cfg.in_f/cfg.out_f; K = Ci*kh*kw is the length of one im2col column.
 *
 * What each kind writes into `saved` during forward (the runtime keeps the input):
 *   linear, conv  the pre-activation z (same shape as the output) when cfg.act is not
 *                 NONE; nothing otherwise (backward needs only the input and weights)
 *   maxpool       argmax int32 [B, C, OH, OW] stored in the float slots
 *   flatten       nothing
 * Recompute option 1 (full) is carried out by the runtime, which re-runs forward before
 * backward, so the kinds treat option 1 exactly like option 0.
 *
 * The backward split (layer.h), for linear and conv: B computes the pre-activation's
 * gradient dz and din; W reads dz from where B left it:
 *   activation none    dz is dout (W reads dout; B leaves it alone);
 *   else, option 0     dz over the saved pre-activation z (B's alone): no bytes added;
 *   else, full         dz in keep (the runtime's `saved` is scratch then).
 * The fused pass computes dz in place over dout. */
#include "nn/layer.h"
#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>

_Static_assert(sizeof(int32_t) == sizeof(float), "maxpool stores int32 argmax in float slots");

/* ------------------------------------------------------------------------------------ */
/* helpers */

static size_t act_saved(int act, size_t out_floats) { return act == PPDL_ACT_NONE ? 0 : out_floats; }

static size_t no_keep(const ppdl_layer *l, int b, int option)
{
    (void)l;
    (void)b;
    (void)option;
    return 0;
}

static int reads_nothing(const ppdl_layer *l, int option)
{
    (void)l;
    (void)option;
    return 0;
}

/* linear and conv: where W finds dz (the comment at the top) */
static int act_weight_reads(const ppdl_layer *l, int option)
{
    if (l->cfg.act == PPDL_ACT_NONE) return PPDL_W_DOUT;
    return option == PPDL_RC_FULL ? 0 : PPDL_W_SAVED;
}

static size_t act_keep(const ppdl_layer *l, int option, size_t out_floats)
{
    return l->cfg.act != PPDL_ACT_NONE && option == PPDL_RC_FULL ? out_floats : 0;
}

static float *act_dz(const ppdl_layer *l, int part, int option, float *dout, float *saved, float *keep)
{
    if (l->cfg.act == PPDL_ACT_NONE || part == PPDL_BWD_FUSED) return dout;
    return option == PPDL_RC_FULL ? keep : saved;
}

/* dev[n] = 1 (a device vector of ones, for bias broadcasts and reductions by GEMM) */
static void put_ones(ppdl_backend *be, float *dev, int n)
{
    float *host = ppdl_xmalloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) host[i] = 1.0f;
    ppdl_be_copy_h2d(be, dev, host, (size_t)n * sizeof(float));
    ppdl_be_sync(be); /* the host buffer must outlive the copy */
    free(host);
}

/* ------------------------------------------------------------------------------------ */
/* linear: y[B, OUT] = act(x[B, IN] @ W[OUT, IN]^T + b[OUT]) */

static size_t linear_saved_floats(const ppdl_layer *l, int b, int option)
{
    (void)option;
    return act_saved(l->cfg.act, (size_t)b * l->cfg.out_f); /* z [B, OUT] */
}

static size_t linear_keep_floats(const ppdl_layer *l, int b, int option)
{
    return act_keep(l, option, (size_t)b * l->cfg.out_f);
}

static size_t linear_work_floats(const ppdl_layer *l, int b)
{
    (void)l;
    (void)b;
    return 0;
}

static void linear_forward(const ppdl_layer *l, ppdl_backend *be, int b, const void *in,
                           float *out, float *saved, float *work, int option)
{
    (void)work;
    (void)option;
    const int IN = l->cfg.in_f, OUT = l->cfg.out_f, act = l->cfg.act;
    const float *x = in;                               /* [B, IN] */
    const float *w = l->params[0].value;               /* [OUT, IN] */
    const float *bias = l->params[1].value;            /* [OUT] */
    float *z = act == PPDL_ACT_NONE ? out : saved;     /* [B, OUT] pre-activation */
    ppdl_be_gemm(be, 0, 1, b, OUT, IN, 1.0f, x, IN, w, IN, 0.0f, z, OUT);
    ppdl_be_bias_add(be, b, OUT, z, bias);
    if (act != PPDL_ACT_NONE) ppdl_be_act_fwd(be, act, (size_t)b * OUT, z, out); /* out [B, OUT] */
}

static void linear_backward(ppdl_layer *l, ppdl_backend *be, int part, int b, const void *in, float *saved,
                            float *dout, float *din, float *keep, float *work, int option)
{
    (void)work;
    const int IN = l->cfg.in_f, OUT = l->cfg.out_f, act = l->cfg.act;
    const float *x = in;                               /* [B, IN] */
    const float *w = l->params[0].value;               /* [OUT, IN] */
    float *dw = l->params[0].grad;                     /* [OUT, IN] */
    float *dbias = l->params[1].grad;                  /* [OUT] */
    float *dz = act_dz(l, part, option, dout, saved, keep); /* [B, OUT] */
    int bi = part & PPDL_BWD_INPUT;
    if (bi && act != PPDL_ACT_NONE) ppdl_be_act_bwd(be, act, (size_t)b * OUT, saved, dout, dz);
    if (part & PPDL_BWD_WEIGHT) {
        /* dW[OUT, IN] += dz^T @ x ; db[OUT] += sum over B of dz */
        ppdl_be_gemm(be, 1, 0, OUT, IN, b, 1.0f, dz, OUT, x, IN, 1.0f, dw, IN);
        ppdl_be_bias_grad(be, b, OUT, dz, dbias);
    }
    /* dx[B, IN] = dz @ W */
    if (bi && din) ppdl_be_gemm(be, 0, 0, b, IN, OUT, 1.0f, dz, OUT, w, IN, 0.0f, din, IN);
}

static double linear_flops(const ppdl_layer *l, int b)
{
    return 2.0 * b * l->cfg.in_f * l->cfg.out_f;
}

const ppdl_layer_kind ppdl_kind_linear = {
    .name = "linear",
    .n_options = 2,
    .saved_floats = linear_saved_floats,
    .work_floats = linear_work_floats,
    .forward = linear_forward,
    .backward = linear_backward,
    .keep_floats = linear_keep_floats,
    .weight_reads = act_weight_reads,
    .flops_fwd = linear_flops,
};

/* ------------------------------------------------------------------------------------ */
/* conv: y[B, Co, OH, OW] = act(conv2d(x[B, Ci, Hh, Ww], W[Co, Ci, kh, kw]) + b[Co])
 * One image at a time: col[K, OH*OW] = im2col(x_n), then z_n[Co, OH*OW] = W[Co, K] @ col.
 * work = col [K, OH*OW] followed by ones [OH*OW] (for the bias broadcast and reduction). */

typedef struct {
    int Ci, Hh, Ww, Co, OH, OW, kh, kw, stride, pad;
    int K;      /* Ci*kh*kw */
    int P;      /* OH*OW, output pixels per channel */
} conv_dims;

static conv_dims conv_get_dims(const ppdl_layer *l)
{
    const ppdl_layer_cfg *c = &l->cfg;
    conv_dims d = {
        .Ci = c->cin, .Hh = c->in_h, .Ww = c->in_w, .Co = c->cout, .OH = c->out_h,
        .OW = c->out_w, .kh = c->kh, .kw = c->kw, .stride = c->stride, .pad = c->pad,
    };
    d.K = d.Ci * d.kh * d.kw;
    d.P = d.OH * d.OW;
    return d;
}

static size_t conv_saved_floats(const ppdl_layer *l, int b, int option)
{
    (void)option;
    conv_dims d = conv_get_dims(l);
    return act_saved(l->cfg.act, (size_t)b * d.Co * d.P); /* z [B, Co, OH, OW] */
}

static size_t conv_keep_floats(const ppdl_layer *l, int b, int option)
{
    conv_dims d = conv_get_dims(l);
    return act_keep(l, option, (size_t)b * d.Co * d.P);
}

static size_t conv_work_floats(const ppdl_layer *l, int b)
{
    (void)b;
    conv_dims d = conv_get_dims(l);
    return (size_t)d.K * d.P + (size_t)d.P;               /* col [K, P] + ones [P] */
}

static void conv_forward(const ppdl_layer *l, ppdl_backend *be, int b, const void *in, float *out,
                         float *saved, float *work, int option)
{
    (void)option;
    const conv_dims d = conv_get_dims(l);
    const int act = l->cfg.act;
    const size_t x_img = (size_t)d.Ci * d.Hh * d.Ww, y_img = (size_t)d.Co * d.P;
    const float *x = in;                               /* [B, Ci, Hh, Ww] */
    const float *w = l->params[0].value;               /* [Co, K] (= [Co, Ci, kh, kw]) */
    const float *bias = l->params[1].value;            /* [Co] */
    float *z = act == PPDL_ACT_NONE ? out : saved;     /* [B, Co, OH, OW] pre-activation */
    float *col = work;                                 /* [K, P] */
    float *ones = work + (size_t)d.K * d.P;            /* [P] */
    for (int n = 0; n < b; n++) {
        ppdl_be_im2col(be, d.Ci, d.Hh, d.Ww, d.kh, d.kw, d.stride, d.pad, x + n * x_img, col);
        /* z_n[Co, P] = W[Co, K] @ col[K, P] */
        ppdl_be_gemm(be, 0, 0, d.Co, d.P, d.K, 1.0f, w, d.K, col, d.P, 0.0f, z + n * y_img, d.P);
    }
    /* z_n[Co, P] += bias[Co, 1] @ ones[1, P], for every image n */
    put_ones(be, ones, d.P);
    ppdl_be_gemm_batched(be, 0, 0, d.Co, d.P, 1, 1.0f, bias, 1, 0, ones, d.P, 0, 1.0f, z, d.P,
                          (long)y_img, b);
    if (act != PPDL_ACT_NONE) ppdl_be_act_fwd(be, act, (size_t)b * y_img, z, out);
}

static void conv_backward(ppdl_layer *l, ppdl_backend *be, int part, int b, const void *in, float *saved,
                          float *dout, float *din, float *keep, float *work, int option)
{
    const conv_dims d = conv_get_dims(l);
    const int act = l->cfg.act;
    const size_t x_img = (size_t)d.Ci * d.Hh * d.Ww, y_img = (size_t)d.Co * d.P;
    const float *x = in;                               /* [B, Ci, Hh, Ww] */
    const float *w = l->params[0].value;               /* [Co, K] */
    float *dw = l->params[0].grad;                     /* [Co, K] */
    float *dbias = l->params[1].grad;                  /* [Co] */
    float *dz = act_dz(l, part, option, dout, saved, keep); /* [B, Co, OH, OW] */
    float *col = work;                                 /* [K, P]: im2col(x_n), then dcol */
    float *ones = work + (size_t)d.K * d.P;            /* [P] */
    int bi = part & PPDL_BWD_INPUT, bw = part & PPDL_BWD_WEIGHT;
    if (bi && act != PPDL_ACT_NONE) ppdl_be_act_bwd(be, act, (size_t)b * y_img, saved, dout, dz);
    if (bw) put_ones(be, ones, d.P);
    if (!bi) din = NULL;
    if (din) ppdl_be_zero(be, din, (size_t)b * x_img * sizeof(float)); /* col2im adds */
    for (int n = 0; n < b; n++) {
        const float *dz_n = dz + n * y_img;            /* [Co, P] */
        if (bw) {
            ppdl_be_im2col(be, d.Ci, d.Hh, d.Ww, d.kh, d.kw, d.stride, d.pad, x + n * x_img, col);
            /* dW[Co, K] += dz_n[Co, P] @ col^T ; db[Co] += dz_n[Co, P] @ ones[P] */
            ppdl_be_gemm(be, 0, 1, d.Co, d.K, d.P, 1.0f, dz_n, d.P, col, d.P, 1.0f, dw, d.K);
            ppdl_be_gemm(be, 0, 0, d.Co, 1, d.P, 1.0f, dz_n, d.P, ones, 1, 1.0f, dbias, 1);
        }
        if (!din) continue;
        /* dcol[K, P] = W^T @ dz_n, folded back into dx_n[Ci, Hh, Ww] */
        ppdl_be_gemm(be, 1, 0, d.K, d.P, d.Co, 1.0f, w, d.K, dz_n, d.P, 0.0f, col, d.P);
        ppdl_be_col2im(be, d.Ci, d.Hh, d.Ww, d.kh, d.kw, d.stride, d.pad, col, din + n * x_img);
    }
}

static double conv_flops(const ppdl_layer *l, int b)
{
    conv_dims d = conv_get_dims(l);
    return 2.0 * b * d.Co * (double)d.K * d.P;
}

const ppdl_layer_kind ppdl_kind_conv = {
    .name = "conv",
    .n_options = 2,
    .saved_floats = conv_saved_floats,
    .work_floats = conv_work_floats,
    .forward = conv_forward,
    .backward = conv_backward,
    .keep_floats = conv_keep_floats,
    .weight_reads = act_weight_reads,
    .flops_fwd = conv_flops,
};

/* ------------------------------------------------------------------------------------ */
/* maxpool: y[B, C, OH, OW] = max over k x k windows (stride cfg.stride, no padding) of
 * x[B, C, Hh, Ww]; saved = argmax int32 [B, C, OH, OW] */

static size_t maxpool_saved_floats(const ppdl_layer *l, int b, int option)
{
    (void)option;
    const ppdl_layer_cfg *c = &l->cfg;
    return (size_t)b * c->out_c * c->out_h * c->out_w;   /* argmax [B, C, OH, OW] */
}

static size_t maxpool_work_floats(const ppdl_layer *l, int b)
{
    (void)l;
    (void)b;
    return 0;
}

static void maxpool_forward(const ppdl_layer *l, ppdl_backend *be, int b, const void *in,
                            float *out, float *saved, float *work, int option)
{
    (void)work;
    (void)option;
    const ppdl_layer_cfg *c = &l->cfg;
    ppdl_be_maxpool_fwd(be, b, c->in_c, c->in_h, c->in_w, c->k, c->stride, in, out,
                         (int32_t *)saved);
}

static void maxpool_backward(ppdl_layer *l, ppdl_backend *be, int part, int b, const void *in, float *saved,
                             float *dout, float *din, float *keep, float *work, int option)
{
    (void)in;
    (void)keep;
    (void)work;
    (void)option;
    const ppdl_layer_cfg *c = &l->cfg;
    if (!din || !(part & PPDL_BWD_INPUT)) return;
    ppdl_be_maxpool_bwd(be, b, c->in_c, c->in_h, c->in_w, c->k, c->stride,
                         (const int32_t *)saved, dout, din);
}

/* no multiply-adds: the comparisons are not counted */
static double maxpool_flops(const ppdl_layer *l, int b)
{
    (void)l;
    (void)b;
    return 0.0;
}

const ppdl_layer_kind ppdl_kind_maxpool = {
    .name = "maxpool",
    .n_options = 2,
    .saved_floats = maxpool_saved_floats,
    .work_floats = maxpool_work_floats,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .keep_floats = no_keep,
    .weight_reads = reads_nothing,
    .flops_fwd = maxpool_flops,
};

/* ------------------------------------------------------------------------------------ */
/* flatten: x[B, C, Hh, Ww] -> y[B, C*Hh*Ww], the same bytes (NCHW is already row-major) */

static size_t flatten_saved_floats(const ppdl_layer *l, int b, int option)
{
    (void)l;
    (void)b;
    (void)option;
    return 0;
}

static size_t flatten_work_floats(const ppdl_layer *l, int b)
{
    (void)l;
    (void)b;
    return 0;
}

static void flatten_forward(const ppdl_layer *l, ppdl_backend *be, int b, const void *in,
                            float *out, float *saved, float *work, int option)
{
    (void)saved;
    (void)work;
    (void)option;
    ppdl_be_copy_d2d(be, out, in, (size_t)b * l->out_bytes);
}

static void flatten_backward(ppdl_layer *l, ppdl_backend *be, int part, int b, const void *in, float *saved,
                             float *dout, float *din, float *keep, float *work, int option)
{
    (void)in;
    (void)saved;
    (void)keep;
    (void)work;
    (void)option;
    if (din && (part & PPDL_BWD_INPUT)) ppdl_be_copy_d2d(be, din, dout, (size_t)b * l->in_bytes);
}

static double flatten_flops(const ppdl_layer *l, int b)
{
    (void)l;
    (void)b;
    return 0.0;
}

const ppdl_layer_kind ppdl_kind_flatten = {
    .name = "flatten",
    .n_options = 2,
    .saved_floats = flatten_saved_floats,
    .work_floats = flatten_work_floats,
    .forward = flatten_forward,
    .backward = flatten_backward,
    .keep_floats = no_keep,
    .weight_reads = reads_nothing,
    .flops_fwd = flatten_flops,
};
