/* layer_gpt.c — the three layer kinds of the GPT-2 family (docs/formats.md, model.h5):
 *
 *   embedding  tokens[B,T] (int32)  -> x[B,T,C] = wte[tok] + wpe[t]
 *   block      x[B,T,C] -> x1 = x + attn(ln1(x)),  out = x1 + mlp(ln2(x1))   (pre-LN)
 *   head       x[B,T,C] -> logits[B*T,V] = ln_f(x) @ lm_head^T   (the runtime applies
 *              the softmax cross-entropy to the logits; the head has no loss)
 *
 * Attention: qkv = ln1 @ Wqkv^T + bqkv, q/k/v are the three C-wide thirds, head h uses
 * their columns h*hs .. (h+1)*hs-1; causal softmax of q k^T / sqrt(hs); the heads are
 * merged back and projected. MLP: C -> 4C, GELU (tanh approximation), 4C -> C.
 *
 * Everything runs through the ppdl_be_* wrappers (no host loop touches device data). In the shape
 * comments N = B*T rows and P = B*H*T*T attention entries; "B" is the b samples of the
 * micro-batch the runtime passes in.
 *
 * Recompute options (layer.h): 0 keeps everything; 1 (full) is done by the runtime,
 * which calls forward() again right before backward(), so here it behaves like 0; the
 * block's option 2 (selective) keeps neither the attention probabilities nor the MLP
 * hidden tensors, and backward() recomputes them with the same operations in the same
 * order, so its results are bitwise those of option 0.
 */
#include "nn/layer.h"
#include "core/error.h"

#include <math.h>

/* y[rows,out] = x[rows,in] @ W[out,in]^T (+ bias[out] when bias is not NULL) */
static void linear_fwd(ppdl_backend *be, int rows, int in, int out, const float *x,
                       const float *W, const float *bias, float *y)
{
    ppdl_be_gemm(be, 0, 1, rows, out, in, 1.0f, x, in, W, in, 0.0f, y, out);
    if (bias) ppdl_be_bias_add(be, rows, out, y, bias);
}

/* Backward of linear_fwd given dy[rows,out]: adds into dW[out,in] (and dbias[out] when
 * not NULL); overwrites dx[rows,in] = dy @ W. dW NULL: no parameter gradients (B of the
 * split), dx NULL: no input gradient (W). */
static void linear_bwd(ppdl_backend *be, int rows, int in, int out, const float *x,
                       const float *W, const float *dy, float *dW, float *dbias, float *dx)
{
    /* dW[out,in] += dy^T[out,rows] @ x[rows,in] */
    if (dW) ppdl_be_gemm(be, 1, 0, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dW, in);
    if (dbias) ppdl_be_bias_grad(be, rows, out, dy, dbias);
    /* dx[rows,in] = dy[rows,out] @ W[out,in] */
    if (dx) ppdl_be_gemm(be, 0, 0, rows, in, out, 1.0f, dy, out, W, in, 0.0f, dx, in);
}

/* a parameter's gradient where the part computes parameter gradients (W), else NULL */
static float *grad_if(int part, ppdl_param *p) { return part & PPDL_BWD_WEIGHT ? p->grad : NULL; }

/* W reads `saved` and dout (the block, the head), or dout alone (the embedding) */
static int reads_saved_dout(const ppdl_layer *l, int option)
{
    (void)l; (void)option;
    return PPDL_W_SAVED | PPDL_W_DOUT;
}

static int reads_dout(const ppdl_layer *l, int option)
{
    (void)l; (void)option;
    return PPDL_W_DOUT;
}

static size_t no_keep(const ppdl_layer *l, int b, int option)
{
    (void)l; (void)b; (void)option;
    return 0;
}

static void check_option(const ppdl_layer *l, int option)
{
    PPDL_CHECK(option >= 0 && option < l->kind->n_options,
               "layer %d (%s): recompute option %d, expected 0..%d", l->index, l->kind->name,
               option, l->kind->n_options - 1);
}

/* ================================================================== embedding */

enum { EMB_WTE, EMB_WPE, EMB_N_PARAMS };

static size_t emb_saved_floats(const ppdl_layer *l, int b, int option)
{
    (void)l; (void)b; (void)option;
    return 0;
}

static size_t emb_work_floats(const ppdl_layer *l, int b)
{
    (void)l; (void)b;
    return 0;
}

/* in: tokens[b,T] (int32); out: [b,T,C] */
static void emb_forward(const ppdl_layer *l, ppdl_backend *be, int b, const void *in,
                        float *out, float *saved, float *work, int option)
{
    (void)saved; (void)work;
    check_option(l, option);
    const ppdl_layer_cfg *c = &l->cfg;
    ppdl_be_embedding_fwd(be, b, c->T, c->C, (const int32_t *)in, l->params[EMB_WTE].value,
                           l->params[EMB_WPE].value, out);
}

/* Tokens have no gradient: din is NULL (the embedding is the first layer) and is
 * left alone if given; B has nothing to do, W reads dout. */
static void emb_backward(ppdl_layer *l, ppdl_backend *be, int part, int b, const void *in, float *saved,
                         float *dout, float *din, float *keep, float *work, int option)
{
    (void)saved; (void)din; (void)keep; (void)work;
    check_option(l, option);
    const ppdl_layer_cfg *c = &l->cfg;
    if (part & PPDL_BWD_WEIGHT)
        ppdl_be_embedding_bwd(be, b, c->T, c->C, (const int32_t *)in, dout, l->params[EMB_WTE].grad,
                              l->params[EMB_WPE].grad);
}

/* no multiply-adds; counted as the b*T*C additions so that rates stay finite */
static double emb_flops_fwd(const ppdl_layer *l, int b)
{
    return (double)b * l->cfg.T * l->cfg.C;
}

const ppdl_layer_kind ppdl_kind_embedding = {
    .name = "embedding",
    .n_options = 2,
    .saved_floats = emb_saved_floats,
    .work_floats = emb_work_floats,
    .forward = emb_forward,
    .backward = emb_backward,
    .keep_floats = no_keep,
    .weight_reads = reads_dout,
    .flops_fwd = emb_flops_fwd,
};

/* ====================================================================== block */

/* parameter table order of ppdl_layer_setup (layer.c) */
enum {
    BLK_LN1_W, BLK_LN1_B,       /* [C], [C] */
    BLK_QKV_W, BLK_QKV_B,       /* [3C,C], [3C] */
    BLK_ATTPROJ_W, BLK_ATTPROJ_B, /* [C,C], [C] */
    BLK_LN2_W, BLK_LN2_B,       /* [C], [C] */
    BLK_FC_W, BLK_FC_B,         /* [4C,C], [4C] */
    BLK_FCPROJ_W, BLK_FCPROJ_B, /* [C,4C], [C] */
    BLK_N_PARAMS
};

/* What forward keeps in `saved`, at these offsets (floats; N = b*T, P = b*H*T*T). The
 * big tensors come first so that every one starts at a multiple of N*C or P floats
 * (aligned for vector loads on devices); the [N] statistics come last.
 *
 *   options 0, 1:                                    option 2:
 *   offset      tensor     shape                      offset   (K = 0)
 *   0           fch        [N,4C]     MLP pre-activation       -
 *   4NC         fcg        [N,4C]     gelu(fch)                -
 *   8NC         att        [b,H,T,T]  attention probabilities  -
 *   K = 8NC+P   ln1        [N,C]                               0
 *   K+NC        q          [b,H,T,hs]                          NC
 *   K+2NC       k          [b,H,T,hs]                          2NC
 *   K+3NC       v          [b,H,T,hs]                          3NC
 *   K+4NC       atty       [N,C]      attention output, heads merged
 *   K+5NC       ln2        [N,C]
 *   K+6NC       x1         [N,C]      x + attn proj (the residual)
 *   K+7NC       ln1_mean, ln1_rstd, ln2_mean, ln2_rstd   [N] each
 *   total: 15NC + 4N + P under options 0 and 1, 7NC + 4N under option 2.
 *
 * Under option 2, fch, fcg and att live in the work space instead (see block_work).
 *
 * Under --precision bf16 (l->bf16_saved) everything before x1 — the "packed part", K+6NC
 * values — is kept packed as bf16, followed by x1 and the statistics in fp32: `saved`
 * holds ceil((K+6NC)/2) + NC + 4N floats. Packing loses nothing, because each of those
 * tensors is a bf16 value or is only ever read as a GEMM operand (which bf16 GEMMs round
 * anyway): fch and att are rounded where they are made (as autocast's bf16 linear and
 * softmax outputs are), fcg, ln1, q, k, v, atty and ln2 feed GEMMs alone, and what B
 * leaves over fch and q, k, v for W (d fch, d qkv) is rounded where it is made. x1 (the
 * residual stream, read by layer norm's backward) and the statistics stay fp32. The
 * layer computes in an fp32 copy in its work space (block_unpacked) and packs it into
 * `saved` at the end of forward (and of B), widening it back before backward.
 */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;
    float *q, *k, *v;
    float *atty, *x1;
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fcg, *att;
} block_saved;

/* The work space, shared by forward and backward (floats):
 *
 *   offset    forward            backward                       shape
 *   0         qkv                dqkv                           [N,3C]
 *   3NC       yh (att @ v)       dyh (d of yh)                  [b,H,T,hs]
 *   4NC       preatt (q k^T)     preatt, then datt / dpreatt    [b,H,T,T]
 *   4NC+P     -                  dfc (d fcg, then d fch)        [N,4C]
 *                                then dq, dk, dv                3 x [b,H,T,hs]
 *   8NC+P     -                  dln (d ln2, d atty, d ln1)     [N,C]
 *   9NC+P     fch, fcg, att under option 2 (written by forward, recomputed by
 *             backward)                                         [N,4C], [N,4C], [b,H,T,T]
 *   total: 17NC + 2P
 */
typedef struct {
    float *qkv, *yh, *preatt;
    float *dfc, *dln, *dq, *dk, *dv;
    float *fch, *fcg, *att;
} block_work;

/* The gradients inside the block that W needs, and where the backward keeps them: in
 * the work space (and dout) for the fused pass, as above. Split, B leaves them for W:
 *
 *   gradient   shape    option 0            option 2 (selective)   option 1 (full)
 *   d x1       [N,C]    keep 0              keep 0                 keep 0
 *   d ln2      [N,C]    keep NC             keep NC                keep NC
 *   d ln1      [N,C]    keep 2NC            keep 2NC               keep 2NC
 *   d fch      [N,4C]   saved, over fch     keep 3NC               keep 3NC
 *   d qkv      [N,3C]   saved, over q,k,v   saved, over q,k,v      keep 7NC
 *   keep:               3NC                 7NC                    10NC
 * fch and q, k, v are read by B alone; under full recompute `saved` is the runtime's
 * scratch, so everything goes to keep. W also reads dout as it came (d of the MLP's
 * projection; the fused pass accumulates d x1 in it) and the rest of `saved`. */
typedef struct {
    float *dx1, *dfch, *dln2, *dqkv, *dln1;
} block_grads;

static size_t block_grads_floats(const ppdl_layer *l, int b, int option)
{
    size_t NC = (size_t)b * l->cfg.T * l->cfg.C;
    return NC * (3 + (option != PPDL_RC_NONE ? 4 : 0) + (option == PPDL_RC_FULL ? 3 : 0));
}

static block_grads block_grad_views(const ppdl_layer *l, int b, int option, int part, float *keep,
                                    const block_saved *s, const block_work *w, float *dout)
{
    if (part == PPDL_BWD_FUSED)
        return (block_grads){.dx1 = dout, .dfch = w->dfc, .dln2 = w->dln, .dqkv = w->qkv, .dln1 = w->dln};
    size_t NC = (size_t)b * l->cfg.T * l->cfg.C;
    return (block_grads){.dx1 = keep, .dln2 = keep + NC, .dln1 = keep + 2 * NC,
                         .dfch = option == PPDL_RC_NONE ? s->fch : keep + 3 * NC,
                         .dqkv = option == PPDL_RC_FULL ? keep + 7 * NC : s->q};
}

static size_t block_keep_floats(const ppdl_layer *l, int b)
{
    size_t N = (size_t)b * l->cfg.T, C = (size_t)l->cfg.C;
    return 7 * N * C + 4 * N;
}

static size_t block_att_floats(const ppdl_layer *l, int b)
{
    return (size_t)b * l->cfg.H * l->cfg.T * l->cfg.T;
}

/* the fp32 layout's size (the table above) */
static size_t block_fp32_saved_floats(const ppdl_layer *l, int b, int option)
{
    size_t N = (size_t)b * l->cfg.T, C = (size_t)l->cfg.C;
    size_t n = block_keep_floats(l, b);
    if (option != PPDL_RC_SELECTIVE) n += 8 * N * C + block_att_floats(l, b);
    return n;
}

/* bf16: the values kept packed (everything before x1) and what follows in fp32 */
static size_t block_packed_values(const ppdl_layer *l, int b, int option)
{
    size_t N = (size_t)b * l->cfg.T, C = (size_t)l->cfg.C;
    return block_fp32_saved_floats(l, b, option) - N * C - 4 * N;
}

static size_t block_saved_floats(const ppdl_layer *l, int b, int option)
{
    size_t n = block_fp32_saved_floats(l, b, option);
    if (!l->bf16_saved) return n;
    size_t packed = block_packed_values(l, b, option);
    return (packed + 1) / 2 + (n - packed);
}

static size_t block_work_floats(const ppdl_layer *l, int b)
{
    size_t N = (size_t)b * l->cfg.T, C = (size_t)l->cfg.C;
    size_t n = 17 * N * C + 2 * block_att_floats(l, b);
    return l->bf16_saved ? n + block_fp32_saved_floats(l, b, PPDL_RC_NONE) : n;
}

/* bf16: where the layer works on its saved tensors in fp32 (the work space's end) */
static float *block_unpacked(const ppdl_layer *l, int b, float *work)
{
    size_t N = (size_t)b * l->cfg.T, C = (size_t)l->cfg.C;
    return work + 17 * N * C + 2 * block_att_floats(l, b);
}

/* bf16: n fp32 values at u into dst packed (ceil(n/2) floats); packs u in place first,
 * so u is lost. And back: n packed values at src widened into u. */
static void pack_into(ppdl_backend *be, size_t n, float *u, float *dst)
{
    ppdl_be_pack_bf16(be, n, u);
    ppdl_be_copy_d2d(be, dst, u, n * 2);
}
static void widen_from(ppdl_backend *be, size_t n, const float *src, float *u)
{
    ppdl_be_copy_d2d(be, u, src, n * 2);
    ppdl_be_unpack_bf16(be, n, u);
}

/* bf16: u (fp32, the layout above) into saved (packed part, then the fp32 rest); u's
 * packed part is lost */
static void block_pack_saved(const ppdl_layer *l, ppdl_backend *be, int b, int option, float *u, float *saved)
{
    size_t packed = block_packed_values(l, b, option), n = block_fp32_saved_floats(l, b, option);
    pack_into(be, packed, u, saved);
    ppdl_be_copy_d2d(be, saved + (packed + 1) / 2, u + packed, (n - packed) * sizeof(float));
}

/* bf16: saved back into the fp32 layout at u */
static void block_widen_saved(const ppdl_layer *l, ppdl_backend *be, int b, int option, const float *saved,
                              float *u)
{
    size_t packed = block_packed_values(l, b, option), n = block_fp32_saved_floats(l, b, option);
    widen_from(be, packed, saved, u);
    ppdl_be_copy_d2d(be, u + packed, saved + (packed + 1) / 2, (n - packed) * sizeof(float));
}

/* under --precision bf16, x[n] rounded to bf16 where the recipe makes it a bf16 value */
static void round_if_bf16(ppdl_backend *be, size_t n, float *x)
{
    if (ppdl_be_precision(be) == PPDL_PREC_BF16) ppdl_be_round_bf16(be, n, x);
}

static void block_views(const ppdl_layer *l, int b, int option, float *saved, float *work,
                        block_saved *s, block_work *w)
{
    size_t N = (size_t)b * l->cfg.T, NC = N * l->cfg.C, P = block_att_floats(l, b);
    float *keep = option == PPDL_RC_SELECTIVE ? saved : saved + 8 * NC + P;
    s->ln1 = keep;
    s->q = s->ln1 + NC;
    s->k = s->q + NC;
    s->v = s->k + NC;
    s->atty = s->v + NC;
    s->ln2 = s->atty + NC;
    s->x1 = s->ln2 + NC;
    s->ln1_mean = s->x1 + NC;
    s->ln1_rstd = s->ln1_mean + N;
    s->ln2_mean = s->ln1_rstd + N;
    s->ln2_rstd = s->ln2_mean + N;

    w->qkv = work;
    w->yh = w->qkv + 3 * NC;
    w->preatt = w->yh + NC;
    w->dfc = w->preatt + P;
    w->dq = w->dfc; /* dfc is dead once the MLP's backward is done */
    w->dk = w->dq + NC;
    w->dv = w->dk + NC;
    w->dln = w->dfc + 4 * NC;
    w->fch = w->dln + NC;
    w->fcg = w->fch + 4 * NC;
    w->att = w->fcg + 4 * NC;

    s->fch = option == PPDL_RC_SELECTIVE ? w->fch : saved;
    s->fcg = s->fch + 4 * NC;
    s->att = s->fcg + 4 * NC;
}

/* ---- the causal products, by blocks of rows ----
 * Row t of the attention reads only positions u <= t: the scores above the diagonal are
 * never read, and the probabilities there are 0. So each [T,T] product is done in R
 * blocks of rows (a function of T alone, so every run of a model does the same), block
 * r covering rows [t0,t1) and only columns [0,t1): 1/2 + 1/(2R) of the square's work
 * (R = 4: 62%). Where a block's sum would run over positions whose probability is 0, it
 * stops (or starts) at the block's edge: the terms left out are exact zeros, and an
 * exact zero added first or last changes no sum. */
static int causal_blocks(int T)
{
    int R = T / 32;
    return R < 1 ? 1 : R > 8 ? 8 : R;
}
static int block_edge(int T, int R, int r) { return (int)((long)T * r / R); }

/* s[t,u] = q[t,:] . k[u,:] for u <= t (at least; blocks may compute a little above) */
static void causal_scores(ppdl_backend *be, int BH, int T, int hs, const float *q, const float *k, float *s)
{
    long sh = (long)T * hs, sp = (long)T * T;
    int R = causal_blocks(T);
    for (int r = 0; r < R; r++) {
        int t0 = block_edge(T, R, r), t1 = block_edge(T, R, r + 1);
        ppdl_be_gemm_batched(be, 0, 1, t1 - t0, t1, hs, 1.0f, q + (long)t0 * hs, hs, sh, k, hs, sh, 0.0f,
                              s + (long)t0 * T, T, sp, BH);
    }
}

/* trans 0: y[t,:] = sum_{u <= t} p[t,u] x[u,:]   (p x)
 * trans 1: y[u,:] = sum_{t >= u} p[t,u] x[t,:]   (p^T x)
 * p zero above the diagonal; block r makes rows [a0,a1) of y from p's rows (or, with
 * trans, columns) a0..a1-1 and the part of x their sums run over */
static void causal_apply(ppdl_backend *be, int BH, int T, int hs, int trans, const float *p, const float *x,
                         float *y)
{
    long sh = (long)T * hs, sp = (long)T * T;
    int R = causal_blocks(T);
    for (int r = 0; r < R; r++) {
        int a0 = block_edge(T, R, r), a1 = block_edge(T, R, r + 1);
        if (trans)
            ppdl_be_gemm_batched(be, 1, 0, a1 - a0, hs, T - a0, 1.0f, p + (long)a0 * T + a0, T, sp,
                                  x + (long)a0 * hs, hs, sh, 0.0f, y + (long)a0 * hs, hs, sh, BH);
        else
            ppdl_be_gemm_batched(be, 0, 0, a1 - a0, hs, a1, 1.0f, p + (long)a0 * T, T, sp, x, hs, sh, 0.0f,
                                  y + (long)a0 * hs, hs, sh, BH);
    }
}

/* att[b,H,T,T] = causal_softmax(q k^T / sqrt(hs)), with preatt[b,H,T,T] as scratch */
static void attention_probs(const ppdl_layer *l, ppdl_backend *be, int b, const float *q,
                            const float *k, float *preatt, float *att)
{
    int T = l->cfg.T, H = l->cfg.H, hs = l->cfg.C / l->cfg.H, BH = b * H;
    /* preatt[T,T] = q[T,hs] @ k[T,hs]^T, for each of the BH heads, its causal part (the
     * softmax reads only that) */
    causal_scores(be, BH, T, hs, q, k, preatt);
    ppdl_be_causal_softmax_fwd(be, BH, T, 1.0f / sqrtf((float)hs), preatt, att);
    round_if_bf16(be, (size_t)BH * T * T, att);
}

/* fch[N,4C] = ln2 @ Wfc^T + bfc;  fcg[N,4C] = gelu(fch) */
static void mlp_hidden(const ppdl_layer *l, ppdl_backend *be, int N, const float *ln2,
                       float *fch, float *fcg)
{
    int C = l->cfg.C;
    linear_fwd(be, N, C, 4 * C, ln2, l->params[BLK_FC_W].value, l->params[BLK_FC_B].value, fch);
    round_if_bf16(be, (size_t)N * 4 * C, fch);
    ppdl_be_act_fwd(be, PPDL_ACT_GELU, (size_t)N * 4 * C, fch, fcg);
}

/* in: x[b,T,C]; out: [b,T,C] */
static void block_forward(const ppdl_layer *l, ppdl_backend *be, int b, const void *in,
                          float *out, float *saved, float *work, int option)
{
    check_option(l, option);
    PPDL_CHECK(l->n_params == BLK_N_PARAMS, "layer %d: a block has %d parameters, not %d",
               l->index, BLK_N_PARAMS, l->n_params);
    const ppdl_param *p = l->params;
    int T = l->cfg.T, C = l->cfg.C, H = l->cfg.H, hs = C / H, N = b * T;
    size_t NC = (size_t)N * C;
    const float *x = in; /* [N,C] */
    block_saved s;
    block_work w;
    float *kept = l->bf16_saved ? block_unpacked(l, b, work) : saved;
    block_views(l, b, option, kept, work, &s, &w);

    /* ---- attention: x1 = x + proj(attn(ln1(x))) ---- */
    ppdl_be_layernorm_fwd(be, N, C, l->cfg.eps, x, p[BLK_LN1_W].value, p[BLK_LN1_B].value, s.ln1,
                       s.ln1_mean, s.ln1_rstd);
    linear_fwd(be, N, C, 3 * C, s.ln1, p[BLK_QKV_W].value, p[BLK_QKV_B].value, w.qkv); /* [N,3C] */
    ppdl_be_qkv_split(be, b, T, C, H, w.qkv, s.q, s.k, s.v);
    attention_probs(l, be, b, s.q, s.k, w.preatt, s.att);
    /* yh[T,hs] = att[T,T] @ v[T,hs], for each head */
    causal_apply(be, b * H, T, hs, 0, s.att, s.v, w.yh);
    ppdl_be_heads_to_seq(be, b, T, C, H, w.yh, s.atty);
    linear_fwd(be, N, C, C, s.atty, p[BLK_ATTPROJ_W].value, p[BLK_ATTPROJ_B].value, out);
    ppdl_be_add(be, NC, x, out, s.x1);

    /* ---- MLP: out = x1 + proj(gelu(fc(ln2(x1)))) ---- */
    ppdl_be_layernorm_fwd(be, N, C, l->cfg.eps, s.x1, p[BLK_LN2_W].value, p[BLK_LN2_B].value,
                       s.ln2, s.ln2_mean, s.ln2_rstd);
    mlp_hidden(l, be, N, s.ln2, s.fch, s.fcg);
    linear_fwd(be, N, 4 * C, C, s.fcg, p[BLK_FCPROJ_W].value, p[BLK_FCPROJ_B].value, out);
    ppdl_be_axpy(be, NC, 1.0f, s.x1, out);
    if (l->bf16_saved) block_pack_saved(l, be, b, option, kept, saved);
}

/* in: x[b,T,C]; dout: [b,T,C]; din: [b,T,C]. The fused pass accumulates d x1 in dout;
 * B leaves dout as it came (W reads it) and the rest where block_grads says. Every step
 * below runs its B half and its W half, each where the part asks for it, in the fused
 * pass's order. */
static void block_backward(ppdl_layer *l, ppdl_backend *be, int part, int b, const void *in, float *saved,
                           float *dout, float *din, float *keep, float *work, int option)
{
    check_option(l, option);
    ppdl_param *p = l->params;
    int T = l->cfg.T, C = l->cfg.C, H = l->cfg.H, hs = C / H, N = b * T, BH = b * H;
    size_t NC = (size_t)N * C;
    int bi = part & PPDL_BWD_INPUT;
    const float *x = in; /* [N,C] */
    block_saved s;
    block_work w;
    float *kept = saved;
    if (l->bf16_saved) {
        kept = block_unpacked(l, b, work);
        block_widen_saved(l, be, b, option, saved, kept);
    }
    block_views(l, b, option, kept, work, &s, &w);
    block_grads g = block_grad_views(l, b, option, part, keep, &s, &w, dout);

    /* selective: recompute what forward did not keep, exactly as forward computed it
     * (B needs the attention probabilities and the MLP pre-activation, W its output) */
    if (option == PPDL_RC_SELECTIVE) {
        if (bi) attention_probs(l, be, b, s.q, s.k, w.preatt, s.att);
        mlp_hidden(l, be, N, s.ln2, s.fch, s.fcg);
    }

    /* ---- MLP ---- */
    linear_bwd(be, N, 4 * C, C, s.fcg, p[BLK_FCPROJ_W].value, dout, grad_if(part, &p[BLK_FCPROJ_W]),
               grad_if(part, &p[BLK_FCPROJ_B]), bi ? w.dfc : NULL);           /* d fcg [N,4C] */
    if (bi) {
        ppdl_be_act_bwd(be, PPDL_ACT_GELU, (size_t)N * 4 * C, s.fch, w.dfc, g.dfch); /* d fch */
        round_if_bf16(be, (size_t)N * 4 * C, g.dfch);
    }
    linear_bwd(be, N, C, 4 * C, s.ln2, p[BLK_FC_W].value, g.dfch, grad_if(part, &p[BLK_FC_W]),
               grad_if(part, &p[BLK_FC_B]), bi ? g.dln2 : NULL);              /* d ln2 [N,C] */
    /* the residual: d x1 = dout + ln2'(d ln2) */
    if (bi && g.dx1 != dout) ppdl_be_copy_d2d(be, g.dx1, dout, NC * sizeof(float));
    ppdl_be_layernorm_bwd(be, N, C, s.x1, p[BLK_LN2_W].value, s.ln2_mean, s.ln2_rstd, g.dln2, bi ? g.dx1 : NULL,
                          grad_if(part, &p[BLK_LN2_W]), grad_if(part, &p[BLK_LN2_B]));

    /* ---- attention ---- */
    linear_bwd(be, N, C, C, s.atty, p[BLK_ATTPROJ_W].value, g.dx1, grad_if(part, &p[BLK_ATTPROJ_W]),
               grad_if(part, &p[BLK_ATTPROJ_B]), bi ? w.dln : NULL);          /* d atty [N,C] */
    if (bi) {
        ppdl_be_seq_to_heads(be, b, T, C, H, w.dln, w.yh);                   /* dyh [b,H,T,hs] */
        /* datt[T,T] = dyh[T,hs] @ v[T,hs]^T  (into preatt; its causal part, all the
         * softmax's backward reads) */
        causal_scores(be, BH, T, hs, w.yh, s.v, w.preatt);
        /* dv[T,hs] = att[T,T]^T @ dyh[T,hs] */
        causal_apply(be, BH, T, hs, 1, s.att, w.yh, w.dv);
        /* dpreatt (in place), includes the 1/sqrt(hs) scale; 0 above the diagonal */
        ppdl_be_causal_softmax_bwd(be, BH, T, 1.0f / sqrtf((float)hs), s.att, w.preatt, w.preatt);
        /* dq[T,hs] = dpreatt[T,T] @ k[T,hs];  dk[T,hs] = dpreatt^T @ q[T,hs] */
        causal_apply(be, BH, T, hs, 0, w.preatt, s.k, w.dq);
        causal_apply(be, BH, T, hs, 1, w.preatt, s.q, w.dk);
        ppdl_be_qkv_merge(be, b, T, C, H, w.dq, w.dk, w.dv, g.dqkv);         /* dqkv [N,3C] */
        round_if_bf16(be, (size_t)N * 3 * C, g.dqkv);
    }
    linear_bwd(be, N, C, 3 * C, s.ln1, p[BLK_QKV_W].value, g.dqkv, grad_if(part, &p[BLK_QKV_W]),
               grad_if(part, &p[BLK_QKV_B]), bi ? g.dln1 : NULL);            /* d ln1 [N,C] */

    /* din = d x1 + ln1'(d ln1); without din (never for a block in a GPT chain) only the
     * parameter gradients are left to compute */
    float *dx = bi && din ? din : NULL;
    if (dx) ppdl_be_copy_d2d(be, din, g.dx1, NC * sizeof(float));
    ppdl_be_layernorm_bwd(be, N, C, x, p[BLK_LN1_W].value, s.ln1_mean, s.ln1_rstd, g.dln1, dx,
                          grad_if(part, &p[BLK_LN1_W]), grad_if(part, &p[BLK_LN1_B]));
    /* B left d fch and d qkv over parts of the saved tensors, for W */
    if (l->bf16_saved && part == PPDL_BWD_INPUT && option != PPDL_RC_FULL)
        block_pack_saved(l, be, b, option, kept, saved);
}

/* 2 x multiply-adds: the four linear layers (24 N C^2) and the two attention GEMMs as
 * computed, by causal blocks (2 x 2 b C x the block areas: 62% of T^2 at T = 128) */
static double block_flops_fwd(const ppdl_layer *l, int b)
{
    int T = l->cfg.T, R = causal_blocks(T);
    double N = (double)b * T, C = l->cfg.C, area = 0;
    for (int r = 0; r < R; r++)
        area += (double)(block_edge(T, R, r + 1) - block_edge(T, R, r)) * block_edge(T, R, r + 1);
    return 24.0 * N * C * C + 4.0 * b * area * C;
}

const ppdl_layer_kind ppdl_kind_block = {
    .name = "block",
    .n_options = 3,
    .saved_floats = block_saved_floats,
    .work_floats = block_work_floats,
    .forward = block_forward,
    .backward = block_backward,
    .keep_floats = block_grads_floats,
    .weight_reads = reads_saved_dout,
    .flops_fwd = block_flops_fwd,
};

/* ======================================================================= head */

enum { HEAD_LNF_W, HEAD_LNF_B, HEAD_LM_W, HEAD_N_PARAMS };

/* saved (all options): lnf [N,C] at 0, lnf_mean [N] at NC, lnf_rstd [N] at NC+N.
 * bf16 (l->bf16_saved): lnf packed as bf16 in the first ceil(NC/2) floats, the statistics
 * after it; lnf is only ever a GEMM operand (the logits and W's gradient), which bf16
 * GEMMs round anyway, so packing it loses nothing. */
static size_t head_lnf_floats(const ppdl_layer *l, int b)
{
    size_t NC = (size_t)b * l->cfg.T * l->cfg.C;
    return l->bf16_saved ? (NC + 1) / 2 : NC;
}

static size_t head_saved_floats(const ppdl_layer *l, int b, int option)
{
    (void)option;
    return head_lnf_floats(l, b) + 2 * (size_t)b * l->cfg.T;
}

/* work: dlnf [N,C] (the fused pass; B keeps it for W in `keep` instead); bf16: then
 * lnf [N,C] in fp32 */
static size_t head_work_floats(const ppdl_layer *l, int b)
{
    return (size_t)b * l->cfg.T * l->cfg.C * (l->bf16_saved ? 2 : 1);
}

/* keep: dlnf [N,C]; W also reads lnf and the statistics (saved) and d logits (dout) */
static size_t head_keep_floats(const ppdl_layer *l, int b, int option)
{
    (void)option;
    return (size_t)b * l->cfg.T * l->cfg.C;
}

/* in: x[b,T,C]; out: logits [b*T,V] */
static void head_forward(const ppdl_layer *l, ppdl_backend *be, int b, const void *in,
                         float *out, float *saved, float *work, int option)
{
    check_option(l, option);
    const ppdl_param *p = l->params;
    int N = b * l->cfg.T, C = l->cfg.C, V = l->cfg.V;
    size_t NC = (size_t)N * C;
    float *mean = saved + head_lnf_floats(l, b), *rstd = mean + N; /* [N], [N] */
    float *lnf = l->bf16_saved ? work + NC : saved;                 /* [N,C] */
    ppdl_be_layernorm_fwd(be, N, C, l->cfg.eps, (const float *)in, p[HEAD_LNF_W].value,
                           p[HEAD_LNF_B].value, lnf, mean, rstd);
    linear_fwd(be, N, C, V, lnf, p[HEAD_LM_W].value, NULL, out);
    if (l->bf16_saved) pack_into(be, NC, lnf, saved);
}

/* dout: d logits [b*T,V] (read, never written); din: [b,T,C] */
static void head_backward(ppdl_layer *l, ppdl_backend *be, int part, int b, const void *in, float *saved,
                          float *dout, float *din, float *keep, float *work, int option)
{
    check_option(l, option);
    ppdl_param *p = l->params;
    int N = b * l->cfg.T, C = l->cfg.C, V = l->cfg.V;
    size_t NC = (size_t)N * C;
    int bi = part & PPDL_BWD_INPUT;
    float *mean = saved + head_lnf_floats(l, b), *rstd = mean + N;
    float *lnf = saved;
    if (l->bf16_saved) {
        lnf = work + NC;
        widen_from(be, NC, saved, lnf);
    }
    float *dlnf = part == PPDL_BWD_FUSED ? work : keep; /* [N,C] */
    float *dx = bi ? din : NULL;                        /* [N,C] */
    linear_bwd(be, N, C, V, lnf, p[HEAD_LM_W].value, dout, grad_if(part, &p[HEAD_LM_W]), NULL, bi ? dlnf : NULL);
    if (dx) ppdl_be_zero(be, dx, NC * sizeof(float));
    ppdl_be_layernorm_bwd(be, N, C, (const float *)in, p[HEAD_LNF_W].value, mean, rstd, dlnf, dx,
                          grad_if(part, &p[HEAD_LNF_W]), grad_if(part, &p[HEAD_LNF_B]));
}

static double head_flops_fwd(const ppdl_layer *l, int b)
{
    return 2.0 * b * l->cfg.T * l->cfg.C * l->cfg.V;
}

const ppdl_layer_kind ppdl_kind_head = {
    .name = "head",
    .n_options = 2,
    .saved_floats = head_saved_floats,
    .work_floats = head_work_floats,
    .forward = head_forward,
    .backward = head_backward,
    .keep_floats = head_keep_floats,
    .weight_reads = reads_saved_dout,
    .flops_fwd = head_flops_fwd,
};
