/* backend.h — one interface for a compute device (the ggml / yaksa idea).
 *
 * A backend owns device memory, a stream of work and the kernels the layers need.
 * The CPU backend (cpu.c) is always built and is the oracle; a CUDA backend
 * (cuda/) fits behind the same table. Backends are made by name (registry.c). Code
 * outside src/backend/ only ever calls the ppdl_be_* wrappers below: ppdl_backend is
 * an opaque type here, its table of operations and fields are in backend_impl.h,
 * which only the backends (and the op-by-op test harness) include. Nothing outside
 * dereferences a device pointer on the host.
 *
 * Conventions
 *  - Every float* / int32_t* argument of a kernel is a DEVICE pointer.
 *  - Matrices are row-major. "rows x cols" means rows contiguous records of cols.
 *  - Kernels that say "adds into" accumulate (+=); all others overwrite.
 *  - Work is queued on the backend's stream; ppdl_be_sync waits for it. The CPU
 *    backend runs everything synchronously.
 *
 * Dimension letters used in shape comments across ppdl:
 *   B samples in a micro-batch, T sequence length, C model width, H heads,
 *   hs = C/H head size, V vocabulary (or classes), N images, Ci/Co channels,
 *   kh/kw kernel size, OH/OW output height/width.
 */
#ifndef PPDL_BACKEND_H
#define PPDL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct ppdl_backend ppdl_backend;
typedef struct ppdl_backend_ops ppdl_backend_ops;

enum { PPDL_ACT_NONE = 0, PPDL_ACT_RELU = 1, PPDL_ACT_GELU = 2 };

/* ---- creation (registry.c) ---- */
/* Create a backend by name ("cpu" or "cuda"). On failure returns NULL and writes
 * a reason into err: an unknown name, or a known one this ppdl was built without, is
 * named in it. */
ppdl_backend *ppdl_backend_create(const char *name, int threads, int rank, char *err, size_t errlen);
void ppdl_backend_destroy(ppdl_backend *be);

/* ---- what the backend is ---- */
const char *ppdl_be_name(const ppdl_backend *be);
/* 1 when the host cannot address device memory (CUDA): MPI cannot read or write
 * device buffers, so messages between stages are staged through host buffers
 * (backend/xfer.h), and host copies of device state need ppdl_be_copy_* */
int ppdl_be_device_memory(const ppdl_backend *be);
/* the device memory this rank may use, for the probe's memory per rank: a GPU's free
 * memory now (cudaMemGetInfo) divided among the node's ranks that share that GPU
 * (PPDL_CUDA_SHARE), less a reserve for the libraries' own memory (cuda.c); 0 where
 * the backend has no memory of its own (the CPU: the probe then takes the host's
 * physical memory per rank) */
size_t ppdl_be_free_memory(ppdl_backend *be);

/* ---- memory accounting ---- */
/* Allocation with accounting. `what` names the buffer in the error message that is
 * printed (naming rank, stage, request and bytes in use) when the limit would be
 * exceeded or the device is out of memory; the job then aborts. Sizes are rounded up
 * to 256 bytes, as device allocators do, and the rounded size is what is counted. */
void *ppdl_be_alloc(ppdl_backend *be, size_t n_bytes, const char *what);
/* Like ppdl_be_alloc but returns NULL instead of aborting. */
void *ppdl_be_try_alloc(ppdl_backend *be, size_t n_bytes, const char *what);
void ppdl_be_free(ppdl_backend *be, void *p);
size_t ppdl_be_alloc_size(size_t n_bytes); /* the rounded size that is counted */
size_t ppdl_be_in_use(const ppdl_backend *be);    /* bytes allocated now */
/* the most bytes in use at once since creation. A caller whose allocations should not
 * count (the layer profiler, before training) saves it and puts it back with
 * ppdl_be_restore_peak, which never sets it below what is in use now. */
size_t ppdl_be_peak(const ppdl_backend *be);
void ppdl_be_restore_peak(ppdl_backend *be, size_t saved_peak);
/* the memory limit (--mem-limit) in bytes; 0: none */
size_t ppdl_be_limit(const ppdl_backend *be);
void ppdl_be_set_limit(ppdl_backend *be, size_t n_bytes);
/* the pipeline stage this backend serves, for messages; -1 until known */
void ppdl_be_set_stage(ppdl_backend *be, int stage);
/* 1: stage MPI messages through host memory even where MPI could read the backend's
 * own (PPDL_STAGE_MESSAGES=1, see xfer.h) */
int ppdl_be_stage_messages(const ppdl_backend *be);
/* page-locked host memory where the backend has it (CUDA), else malloc; never NULL.
 * *pinned says which, and must be passed back to ppdl_be_host_free. */
void *ppdl_be_host_alloc(ppdl_backend *be, size_t n_bytes, int *pinned);
void ppdl_be_host_free(ppdl_backend *be, void *p, int pinned);

/* ---- the stream: copies, zeroing, waiting, events ---- */
void ppdl_be_copy_h2d(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
void ppdl_be_copy_d2h(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
void ppdl_be_copy_d2d(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
void ppdl_be_zero(ppdl_backend *be, void *p, size_t n_bytes);
void ppdl_be_sync(ppdl_backend *be); /* wait for the stream */
/* events: an opaque handle marking a point in the stream; elapsed in ms */
void *ppdl_be_event_create(ppdl_backend *be);
void ppdl_be_event_record(ppdl_backend *be, void *ev);
void ppdl_be_event_sync(ppdl_backend *be, void *ev);
double ppdl_be_event_elapsed_ms(ppdl_backend *be, void *start, void *end);
void ppdl_be_event_destroy(ppdl_backend *be, void *ev);

/* ---- dense linear algebra ---- */
/* C[m,n] = alpha * op(A)[m,k] @ op(B)[k,n] + beta * C[m,n]; op(X) = X or X^T.
 * lda/ldb/ldc are the row strides of A, B, C as stored. */
void ppdl_be_gemm(ppdl_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* batch of independent GEMMs; matrix i starts at a + i*stride_a (strides in
 * elements; a stride of 0 reuses one matrix for the whole batch) */
void ppdl_be_gemm_batched(ppdl_backend *be, int trans_a, int trans_b, int m, int n, int k,
                          float alpha, const float *a, int lda, long stride_a, const float *b,
                          int ldb, long stride_b, float beta, float *c, int ldc, long stride_c,
                          int batch);

/* ---- elementwise and reductions ---- */
void ppdl_be_add(ppdl_backend *be, size_t n, const float *x, const float *y, float *out); /* out = x + y */
void ppdl_be_axpy(ppdl_backend *be, size_t n, float alpha, const float *x, float *y);    /* y += alpha x */
void ppdl_be_bias_add(ppdl_backend *be, int rows, int cols, float *x, const float *bias); /* x[r,c] += bias[c] */
/* adds into dbias[c] the sum over r of dy[r,c] */
void ppdl_be_bias_grad(ppdl_backend *be, int rows, int cols, const float *dy, float *dbias);
/* activations: act is PPDL_ACT_*; backward: dx = dy * act'(x), given the input x
 * (elementwise: dx may alias dy or x) */
void ppdl_be_act_fwd(ppdl_backend *be, int act, size_t n, const float *x, float *y);
void ppdl_be_act_bwd(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx);
/* sum of squares of x into *out_host (a host double); used for non-finite checks
 * and norms. The CPU's is a partial per PPDL_SUMSQ_CHUNK floats from x (each alone, a
 * chunk's own order), added in chunk order from 0: the sums of x's chunks one call each,
 * added in order, are its bits (update.c's norm over slices relies on it) */
#define PPDL_SUMSQ_CHUNK ((size_t)65536)
void ppdl_be_sumsq(ppdl_backend *be, size_t n, const float *x, double *out_host);

/* ---- transformer kernels ---- */
/* x[rows,C] -> y[rows,C]; mean[rows], rstd[rows] saved for backward */
void ppdl_be_layernorm_fwd(ppdl_backend *be, int rows, int C, float eps, const float *x,
                           const float *w, const float *b, float *y, float *mean, float *rstd);
/* adds into dx[rows,C], dw[C], db[C]. Two independent halves: dx NULL skips the input
 * gradient, dw and db NULL (both) skip the parameter gradients; each half alone gives
 * the bits it gives in the whole call (the backward split, nn/layer.h) */
void ppdl_be_layernorm_bwd(ppdl_backend *be, int rows, int C, const float *x, const float *w,
                           const float *mean, const float *rstd, const float *dy, float *dx,
                           float *dw, float *db);
/* tokens[B,T] -> y[B,T,C] = wte[tok] + wpe[t] */
void ppdl_be_embedding_fwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                           const float *wte, const float *wpe, float *y);
/* adds into dwte[V,C], dwpe[T,C] */
void ppdl_be_embedding_bwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                           const float *dy, float *dwte, float *dwpe);
/* qkv[B,T,3C] -> q,k,v each [B,H,T,hs] */
void ppdl_be_qkv_split(ppdl_backend *be, int B, int T, int C, int H, const float *qkv, float *q,
                       float *k, float *v);
/* dq,dk,dv [B,H,T,hs] -> dqkv[B,T,3C] (overwrites) */
void ppdl_be_qkv_merge(ppdl_backend *be, int B, int T, int C, int H, const float *dq,
                       const float *dk, const float *dv, float *dqkv);
/* x[B,H,T,hs] -> y[B,T,C] ; and its inverse */
void ppdl_be_heads_to_seq(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y);
void ppdl_be_seq_to_heads(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y);
/* row-wise causal softmax of scale*s over [BH,T,T]: p[r,t,u] = 0 for u > t */
void ppdl_be_causal_softmax_fwd(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p);
/* the last n rows of that softmax over L positions (decoding with a key/value cache:
 * n new queries against L cached keys): s, p [BH,n,L]; row i of each is position
 * t = L-n+i and p[.,i,u] = 0 for u > t; p may alias s. n = L is causal_softmax_fwd. */
void ppdl_be_causal_softmax_tail_fwd(ppdl_backend *be, int BH, int n, int L, float scale, const float *s,
                                     float *p);
/* ds = scale * p * (dp - sum_u dp*p)  (overwrites ds; ds may alias dp) */
void ppdl_be_causal_softmax_bwd(ppdl_backend *be, int BH, int T, float scale, const float *p,
                                const float *dp, float *ds);

/* ---- loss ---- */
/* Fused softmax cross-entropy over rows of logits[rows,V] with integer targets:
 * adds sum_r -log softmax(logits_r)[t_r] into *loss_sum (a device float),
 * writes dlogits = scale * (softmax - onehot). dlogits may alias logits.
 * A target outside [0,V) is a caller bug (validated on load). */
void ppdl_be_softmax_xent(ppdl_backend *be, int rows, int V, const float *logits,
                          const int32_t *targets, float scale, float *loss_sum, float *dlogits);

/* ---- convolution (NCHW) ---- */
/* one image x[Ci,Hh,Ww] -> col[Ci*kh*kw, OH*OW] */
void ppdl_be_im2col(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                    const float *x, float *col);
/* adds col[Ci*kh*kw, OH*OW] back into dx[Ci,Hh,Ww] */
void ppdl_be_col2im(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                    const float *col, float *dx);
/* x[N,C,Hh,Ww] -> y[N,C,OH,OW], argmax[N,C,OH,OW] (flat index into the plane) */
void ppdl_be_maxpool_fwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                         const float *x, float *y, int32_t *argmax);
/* dx (overwritten, [N,C,Hh,Ww]) from dy and argmax */
void ppdl_be_maxpool_bwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                         const int32_t *argmax, const float *dy, float *dx);
/* 1 when the backend convolves whole batches through a vendor library (cuDNN); else
 * the two below must not be called, and a convolution is lowered to im2col + gemm
 * per image */
int ppdl_be_has_conv2d(const ppdl_backend *be);
/* PyTorch's Conv2d without bias: x[N,Ci,Hh,Ww], w[Co,Ci,kh,kw] -> y[N,Co,OH,OW]
 * (overwrites) */
void ppdl_be_conv2d_fwd(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw,
                        int stride, int pad, const float *x, const float *w, float *y);
/* its backward given dy[N,Co,OH,OW]: adds into dw[Co,Ci,kh,kw]; overwrites
 * dx[N,Ci,Hh,Ww] unless dx is NULL */
void ppdl_be_conv2d_bwd(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw,
                        int stride, int pad, const float *x, const float *w, const float *dy,
                        float *dx, float *dw);

/* ---- precision (--precision, docs/precision.md) ---- */
enum { PPDL_PREC_FP32 = 0, PPDL_PREC_BF16 = 1 };
/* PPDL_PREC_BF16: every GEMM from now on multiplies its A and B rounded to bf16 (round
 * to nearest even, backend/bf16.h) and sums in fp32; its C and everything else stay
 * fp32. Returns 0, or -1 when the backend has no bf16 kernels (precision unchanged). */
int ppdl_be_set_precision(ppdl_backend *be, int precision);
int ppdl_be_precision(const ppdl_backend *be);
/* how the backend's bf16 GEMMs run, for the header line: the CPU's "sgemm on bf16-rounded
 * operands; ..." with why OpenBLAS's sbgemm is not used */
const char *ppdl_be_bf16_gemm_name(ppdl_backend *be);
/* x[n] rounded to bf16 in place (the values stay in fp32 storage) */
void ppdl_be_round_bf16(ppdl_backend *be, size_t n, float *x);
/* in place: n fp32 values at buf become n bf16 in its first 2n bytes (each rounded);
 * unpack is the inverse, widening the first 2n bytes back to n fp32. Both need the
 * backend's bf16 kernels (ppdl_be_set_precision succeeded). */
void ppdl_be_pack_bf16(ppdl_backend *be, size_t n, void *buf);
void ppdl_be_unpack_bf16(ppdl_backend *be, size_t n, void *buf);

/* ---- optimizer ---- */
/* AdamW (PyTorch semantics), step t counts from 1:
 * p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
 * (hyperparameters in double, as PyTorch's Python floats: 1-beta2 is formed
 * before rounding to float) */
void ppdl_be_adamw(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v,
                   double lr, double beta1, double beta2, double eps, double wd, int t);

#endif
