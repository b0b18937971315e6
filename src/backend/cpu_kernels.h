/* cpu_kernels.h — the CPU backend's kernels, one file per family of ops:
 *   cpu.c       memory, GEMM (OpenBLAS), elementwise, loss, AdamW
 *   cpu_pool.c  the compute threads every kernel splits its work over
 *   cpu_gpt.c   layernorm, embedding, attention reshapes and causal softmax
 *   cpu_conv.c  im2col/col2im, max-pool
 *   cpu_bf16.c  bf16 rounding, message packing, rounded GEMM operands (--precision bf16)
 * Signatures are those of ppdl_backend_ops (backend_impl.h); each is documented at
 * its ppdl_be_* wrapper in backend.h. */
#ifndef PPDL_CPU_KERNELS_H
#define PPDL_CPU_KERNELS_H

#include "backend/backend_impl.h"
#include "backend/cpu_pool.h"

/* be->impl of the CPU backend */
typedef struct {
    cpu_pool *pool;      /* the compute threads (be->threads of them, the caller included) */
    double *scratch;     /* partial sums of the reductions, grown on demand */
    size_t scratch_cap;  /* in doubles */
    float *bf16[2];      /* bf16-rounded copies of a GEMM's A [0] and B [1], grown on demand */
    size_t bf16_cap[2];  /* in floats */
} cpu_impl;

static inline cpu_pool *cpu_pool_of(ppdl_backend *be)
{
    return be->impl ? ((cpu_impl *)be->impl)->pool : NULL;
}

/* a scratch array of at least n doubles (dies when out of memory); it is reused by the
 * next kernel, and grows only when a larger one is asked for, so that steady-state
 * steps allocate nothing */
double *cpu_scratch(ppdl_backend *be, size_t n);

void cpu_layernorm_fwd(ppdl_backend *be, int rows, int C, float eps, const float *x,
                       const float *w, const float *b, float *y, float *mean, float *rstd);
void cpu_layernorm_bwd(ppdl_backend *be, int rows, int C, const float *x, const float *w,
                       const float *mean, const float *rstd, const float *dy, float *dx,
                       float *dw, float *db);
void cpu_embedding_fwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                       const float *wte, const float *wpe, float *y);
void cpu_embedding_bwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                       const float *dy, float *dwte, float *dwpe);
void cpu_qkv_split(ppdl_backend *be, int B, int T, int C, int H, const float *qkv, float *q,
                   float *k, float *v);
void cpu_qkv_merge(ppdl_backend *be, int B, int T, int C, int H, const float *dq,
                   const float *dk, const float *dv, float *dqkv);
void cpu_heads_to_seq(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y);
void cpu_seq_to_heads(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y);
void cpu_causal_softmax_fwd(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p);
void cpu_causal_softmax_tail_fwd(ppdl_backend *be, int BH, int n, int L, float scale, const float *s,
                                 float *p);
void cpu_causal_softmax_bwd(ppdl_backend *be, int BH, int T, float scale, const float *p,
                            const float *dp, float *ds);

void cpu_im2col(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                const float *x, float *col);
void cpu_col2im(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                const float *col, float *dx);
void cpu_maxpool_fwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                     const float *x, float *y, int32_t *argmax);
void cpu_maxpool_bwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                     const int32_t *argmax, const float *dy, float *dx);

/* bf16 (cpu_bf16.c): the ops of the same names (backend.h), and the rounded copy of a
 * GEMM operand: which 0 is A (op(A) is m x k), 1 is B (op(B) is k x n; m_or_n is n),
 * `batch` matrices `stride` floats apart. The copy lives in the backend's scratch for
 * that operand until the next GEMM. */
void cpu_round_bf16(ppdl_backend *be, size_t n, float *x);
void cpu_pack_bf16(ppdl_backend *be, size_t n, void *buf);
void cpu_unpack_bf16(ppdl_backend *be, size_t n, void *buf);
const char *cpu_bf16_gemm_name(ppdl_backend *be);
const float *cpu_bf16_operand(ppdl_backend *be, int which, int trans, int m_or_n, int k, const float *x,
                              int ld, long stride, int batch);

#endif
