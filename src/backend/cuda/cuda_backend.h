/* cuda_backend.h — launchers of the CUDA kernels (kernels.cu), callable from C.
 *
 * Every launcher queues work on `stream` (a cudaStream_t) and returns
 * cudaGetLastError() as an int (0: launched). Arguments are those of the matching
 * member of ppdl_backend_ops (backend_impl.h; the semantics are documented at its
 * ppdl_be_* wrapper in backend.h), plus the scratch a launcher needs. */
#ifndef PPDL_CUDA_BACKEND_H
#define PPDL_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int ppdl_cu_add(void *stream, size_t n, const float *x, const float *y, float *out);
int ppdl_cu_axpy(void *stream, size_t n, float alpha, const float *x, float *y);
int ppdl_cu_bias_add(void *stream, int rows, int cols, float *x, const float *bias);
int ppdl_cu_bias_grad(void *stream, int rows, int cols, const float *dy, float *dbias);
int ppdl_cu_act_fwd(void *stream, int act, size_t n, const float *x, float *y);
int ppdl_cu_act_bwd(void *stream, int act, size_t n, const float *x, const float *dy, float *dx);
/* partial[0 .. *n_partials-1] = sums of squares (double) of a fixed split of x; the
 * caller adds them in order. *n_partials <= max_partials. */
int ppdl_cu_sumsq_partials(void *stream, size_t n, const float *x, double *partial, int max_partials,
                           int *n_partials);
/* p = p*decay; m = b1 m + a1 g; v = b2 v + a2 g^2; p -= step * m / (sqrt(v)/c2s + eps) */
int ppdl_cu_adamw(void *stream, size_t n, float *p, const float *g, float *m, float *v, float decay,
                  float b1, float b2, float a1, float a2, float eps, float step, float c2s);

int ppdl_cu_layernorm_fwd(void *stream, int rows, int C, float eps, const float *x, const float *w,
                          const float *b, float *y, float *mean, float *rstd);
int ppdl_cu_layernorm_bwd(void *stream, int rows, int C, const float *x, const float *w, const float *mean,
                          const float *rstd, const float *dy, float *dx, float *dw, float *db);
int ppdl_cu_embedding_fwd(void *stream, int B, int T, int C, const int32_t *tokens, const float *wte,
                          const float *wpe, float *y);
int ppdl_cu_embedding_bwd(void *stream, int B, int T, int C, const int32_t *tokens, const float *dy,
                          float *dwte, float *dwpe);
int ppdl_cu_qkv_split(void *stream, int B, int T, int C, int H, const float *qkv, float *q, float *k,
                      float *v);
int ppdl_cu_qkv_merge(void *stream, int B, int T, int C, int H, const float *dq, const float *dk,
                      const float *dv, float *dqkv);
/* to_seq = 1: heads_to_seq, x[B,H,T,hs] -> y[B,T,C]; 0: seq_to_heads */
int ppdl_cu_heads_seq(void *stream, int B, int T, int C, int H, int to_seq, const float *x, float *y);
int ppdl_cu_causal_softmax_fwd(void *stream, int BH, int T, float scale, const float *s, float *p);
int ppdl_cu_causal_softmax_tail_fwd(void *stream, int BH, int n, int L, float scale, const float *s, float *p);
int ppdl_cu_causal_softmax_bwd(void *stream, int BH, int T, float scale, const float *p, const float *dp,
                               float *ds);
/* row_loss: device scratch of `rows` doubles */
int ppdl_cu_softmax_xent(void *stream, int rows, int V, const float *logits, const int32_t *targets,
                         float scale, double *row_loss, float *loss_sum, float *dlogits);
int ppdl_cu_im2col(void *stream, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                   const float *x, float *col);
int ppdl_cu_col2im(void *stream, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                   const float *col, float *dx);
int ppdl_cu_maxpool_fwd(void *stream, int N, int C, int Hh, int Ww, int k, int stride, const float *x,
                        float *y, int32_t *argmax);
int ppdl_cu_maxpool_bwd(void *stream, int N, int C, int Hh, int Ww, int k, int stride,
                        const int32_t *argmax, const float *dy, float *dx);

/* bf16 (backend/bf16.h's rounding, bit for bit). round: y[i] = x[i] rounded to bf16, in
 * fp32 storage (y may be x). narrow: y[i] = bf16(x[i]), y not overlapping x. pack and
 * unpack: ppdl_be_pack_bf16 / ppdl_be_unpack_bf16 in place, through `scratch`, a device
 * buffer of n uint16_t that does not overlap buf (kernels.cu says why). */
int ppdl_cu_round_bf16(void *stream, size_t n, const float *x, float *y);
int ppdl_cu_narrow_bf16(void *stream, size_t n, const float *x, uint16_t *y);
int ppdl_cu_pack_bf16(void *stream, size_t n, void *buf, uint16_t *scratch);
int ppdl_cu_unpack_bf16(void *stream, size_t n, void *buf, uint16_t *scratch);

#ifdef __cplusplus
}
#endif

#endif
