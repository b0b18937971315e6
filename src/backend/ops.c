/* ops.c — the ppdl_be_* wrapper of each operation: code outside src/backend/ reaches
 * a backend's table (backend_impl.h) only through these, so that the table can grow
 * or change (a check, a count, a trace) in one place. Each is a plain forward; the
 * semantics are documented at the prototypes in backend.h. */
#include "backend/backend_impl.h"

int ppdl_be_has_conv2d(const ppdl_backend *be)
{
    return be->ops->conv2d_fwd && be->ops->conv2d_bwd;
}

void ppdl_be_copy_h2d(ppdl_backend *be, void *dst, const void *src, size_t n_bytes)
{
    be->ops->copy_h2d(be, dst, src, n_bytes);
}

void ppdl_be_copy_d2h(ppdl_backend *be, void *dst, const void *src, size_t n_bytes)
{
    be->ops->copy_d2h(be, dst, src, n_bytes);
}

void ppdl_be_copy_d2d(ppdl_backend *be, void *dst, const void *src, size_t n_bytes)
{
    be->ops->copy_d2d(be, dst, src, n_bytes);
}

void ppdl_be_zero(ppdl_backend *be, void *p, size_t n_bytes)
{
    be->ops->zero(be, p, n_bytes);
}

void ppdl_be_sync(ppdl_backend *be)
{
    be->ops->sync(be);
}

void *ppdl_be_event_create(ppdl_backend *be)
{
    return be->ops->event_create(be);
}

void ppdl_be_event_record(ppdl_backend *be, void *ev)
{
    be->ops->event_record(be, ev);
}

void ppdl_be_event_sync(ppdl_backend *be, void *ev)
{
    be->ops->event_sync(be, ev);
}

double ppdl_be_event_elapsed_ms(ppdl_backend *be, void *start, void *end)
{
    return be->ops->event_elapsed_ms(be, start, end);
}

void ppdl_be_event_destroy(ppdl_backend *be, void *ev)
{
    be->ops->event_destroy(be, ev);
}

void ppdl_be_gemm(ppdl_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    be->ops->gemm(be, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void ppdl_be_gemm_batched(ppdl_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                          const float *a, int lda, long stride_a, const float *b, int ldb, long stride_b,
                          float beta, float *c, int ldc, long stride_c, int batch)
{
    be->ops->gemm_batched(be, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                          ldc, stride_c, batch);
}

void ppdl_be_add(ppdl_backend *be, size_t n, const float *x, const float *y, float *out)
{
    be->ops->add(be, n, x, y, out);
}

void ppdl_be_axpy(ppdl_backend *be, size_t n, float alpha, const float *x, float *y)
{
    be->ops->axpy(be, n, alpha, x, y);
}

void ppdl_be_bias_add(ppdl_backend *be, int rows, int cols, float *x, const float *bias)
{
    be->ops->bias_add(be, rows, cols, x, bias);
}

void ppdl_be_bias_grad(ppdl_backend *be, int rows, int cols, const float *dy, float *dbias)
{
    be->ops->bias_grad(be, rows, cols, dy, dbias);
}

void ppdl_be_act_fwd(ppdl_backend *be, int act, size_t n, const float *x, float *y)
{
    be->ops->act_fwd(be, act, n, x, y);
}

void ppdl_be_act_bwd(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx)
{
    be->ops->act_bwd(be, act, n, x, dy, dx);
}

void ppdl_be_sumsq(ppdl_backend *be, size_t n, const float *x, double *out_host)
{
    be->ops->sumsq(be, n, x, out_host);
}

void ppdl_be_layernorm_fwd(ppdl_backend *be, int rows, int C, float eps, const float *x, const float *w,
                           const float *b, float *y, float *mean, float *rstd)
{
    be->ops->layernorm_fwd(be, rows, C, eps, x, w, b, y, mean, rstd);
}

void ppdl_be_layernorm_bwd(ppdl_backend *be, int rows, int C, const float *x, const float *w,
                           const float *mean, const float *rstd, const float *dy, float *dx, float *dw,
                           float *db)
{
    be->ops->layernorm_bwd(be, rows, C, x, w, mean, rstd, dy, dx, dw, db);
}

void ppdl_be_embedding_fwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens, const float *wte,
                           const float *wpe, float *y)
{
    be->ops->embedding_fwd(be, B, T, C, tokens, wte, wpe, y);
}

void ppdl_be_embedding_bwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens, const float *dy,
                           float *dwte, float *dwpe)
{
    be->ops->embedding_bwd(be, B, T, C, tokens, dy, dwte, dwpe);
}

void ppdl_be_qkv_split(ppdl_backend *be, int B, int T, int C, int H, const float *qkv, float *q, float *k,
                       float *v)
{
    be->ops->qkv_split(be, B, T, C, H, qkv, q, k, v);
}

void ppdl_be_qkv_merge(ppdl_backend *be, int B, int T, int C, int H, const float *dq, const float *dk,
                       const float *dv, float *dqkv)
{
    be->ops->qkv_merge(be, B, T, C, H, dq, dk, dv, dqkv);
}

void ppdl_be_heads_to_seq(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y)
{
    be->ops->heads_to_seq(be, B, T, C, H, x, y);
}

void ppdl_be_seq_to_heads(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y)
{
    be->ops->seq_to_heads(be, B, T, C, H, x, y);
}

void ppdl_be_causal_softmax_fwd(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p)
{
    be->ops->causal_softmax_fwd(be, BH, T, scale, s, p);
}

void ppdl_be_causal_softmax_tail_fwd(ppdl_backend *be, int BH, int n, int L, float scale, const float *s,
                                     float *p)
{
    be->ops->causal_softmax_tail_fwd(be, BH, n, L, scale, s, p);
}

void ppdl_be_causal_softmax_bwd(ppdl_backend *be, int BH, int T, float scale, const float *p, const float *dp,
                                float *ds)
{
    be->ops->causal_softmax_bwd(be, BH, T, scale, p, dp, ds);
}

void ppdl_be_softmax_xent(ppdl_backend *be, int rows, int V, const float *logits, const int32_t *targets,
                          float scale, float *loss_sum, float *dlogits)
{
    be->ops->softmax_xent(be, rows, V, logits, targets, scale, loss_sum, dlogits);
}

void ppdl_be_im2col(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                    const float *x, float *col)
{
    be->ops->im2col(be, Ci, Hh, Ww, kh, kw, stride, pad, x, col);
}

void ppdl_be_col2im(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                    const float *col, float *dx)
{
    be->ops->col2im(be, Ci, Hh, Ww, kh, kw, stride, pad, col, dx);
}

void ppdl_be_maxpool_fwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride, const float *x,
                         float *y, int32_t *argmax)
{
    be->ops->maxpool_fwd(be, N, C, Hh, Ww, k, stride, x, y, argmax);
}

void ppdl_be_maxpool_bwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                         const int32_t *argmax, const float *dy, float *dx)
{
    be->ops->maxpool_bwd(be, N, C, Hh, Ww, k, stride, argmax, dy, dx);
}

void ppdl_be_conv2d_fwd(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw, int stride,
                        int pad, const float *x, const float *w, float *y)
{
    be->ops->conv2d_fwd(be, N, Ci, Hh, Ww, Co, kh, kw, stride, pad, x, w, y);
}

void ppdl_be_conv2d_bwd(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw, int stride,
                        int pad, const float *x, const float *w, const float *dy, float *dx, float *dw)
{
    be->ops->conv2d_bwd(be, N, Ci, Hh, Ww, Co, kh, kw, stride, pad, x, w, dy, dx, dw);
}

void ppdl_be_adamw(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v, double lr,
                   double beta1, double beta2, double eps, double wd, int t)
{
    be->ops->adamw(be, n, p, g, m, v, lr, beta1, beta2, eps, wd, t);
}

int ppdl_be_set_precision(ppdl_backend *be, int precision)
{
    if (precision == PPDL_PREC_BF16 && !(be->ops->round_bf16 && be->ops->pack_bf16 && be->ops->unpack_bf16))
        return -1;
    be->precision = precision;
    return 0;
}

int ppdl_be_precision(const ppdl_backend *be) { return be->precision; }

const char *ppdl_be_bf16_gemm_name(ppdl_backend *be)
{
    return be->ops->bf16_gemm_name ? be->ops->bf16_gemm_name(be) : "bf16 GEMMs";
}

void ppdl_be_round_bf16(ppdl_backend *be, size_t n, float *x)
{
    be->ops->round_bf16(be, n, x);
}

void ppdl_be_pack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    be->ops->pack_bf16(be, n, buf);
}

void ppdl_be_unpack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    be->ops->unpack_bf16(be, n, buf);
}
