/* backend.h — one interface for a compute device (the ggml / yaksa idea).
 *
 * A backend owns device memory, a stream of work and the kernels the layers need.
 * The CPU backend (cpu.c) is always built and is the oracle; a CUDA backend
 * (cuda/) fits behind the same table. Layers only ever call the ppdl_be_* wrappers
 * below and never dereference a device pointer on the host.
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

typedef struct ppdl_backend_ops {
    const char *name;

    /* ---- memory (raw; byte accounting and limits live in the wrappers) ---- */
    void *(*alloc)(ppdl_backend *be, size_t n_bytes);      /* NULL on failure */
    void (*free)(ppdl_backend *be, void *p);
    void (*copy_h2d)(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
    void (*copy_d2h)(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
    void (*copy_d2d)(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
    void (*zero)(ppdl_backend *be, void *p, size_t n_bytes);
    void (*sync)(ppdl_backend *be);                         /* wait for the stream */
    /* events: an opaque handle marking a point in the stream; elapsed in ms */
    void *(*event_create)(ppdl_backend *be);
    void (*event_record)(ppdl_backend *be, void *ev);
    void (*event_sync)(ppdl_backend *be, void *ev);
    double (*event_elapsed_ms)(ppdl_backend *be, void *start, void *end);
    void (*event_destroy)(ppdl_backend *be, void *ev);

    /* ---- dense linear algebra ---- */
    /* C[m,n] = alpha * op(A)[m,k] @ op(B)[k,n] + beta * C[m,n]; op(X) = X or X^T.
     * lda/ldb/ldc are the row strides of A, B, C as stored. */
    void (*gemm)(ppdl_backend *be, int trans_a, int trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);
    /* batch of independent GEMMs; matrix i starts at a + i*stride_a (strides in
     * elements; a stride of 0 reuses one matrix for the whole batch) */
    void (*gemm_batched)(ppdl_backend *be, int trans_a, int trans_b, int m, int n, int k,
                         float alpha, const float *a, int lda, long stride_a,
                         const float *b, int ldb, long stride_b, float beta, float *c,
                         int ldc, long stride_c, int batch);

    /* ---- elementwise and reductions ---- */
    void (*add)(ppdl_backend *be, size_t n, const float *x, const float *y, float *out); /* out = x + y */
    void (*axpy)(ppdl_backend *be, size_t n, float alpha, const float *x, float *y);    /* y += alpha x */
    void (*bias_add)(ppdl_backend *be, int rows, int cols, float *x, const float *bias); /* x[r,c] += bias[c] */
    void (*bias_grad)(ppdl_backend *be, int rows, int cols, const float *dy, float *dbias); /* adds into dbias[c] the sum over r of dy[r,c] */
    /* activations: act is PPDL_ACT_*; backward: dx = dy * act'(x), given the input x
     * (dx may alias dy) */
    void (*act_fwd)(ppdl_backend *be, int act, size_t n, const float *x, float *y);
    void (*act_bwd)(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx);
    /* sum of squares of x into *out_host (a host double); used for non-finite checks
     * and norms */
    void (*sumsq)(ppdl_backend *be, size_t n, const float *x, double *out_host);

    /* ---- transformer kernels ---- */
    /* x[rows,C] -> y[rows,C]; mean[rows], rstd[rows] saved for backward */
    void (*layernorm_fwd)(ppdl_backend *be, int rows, int C, float eps, const float *x,
                          const float *w, const float *b, float *y, float *mean, float *rstd);
    /* adds into dx[rows,C], dw[C], db[C] */
    void (*layernorm_bwd)(ppdl_backend *be, int rows, int C, const float *x, const float *w,
                          const float *mean, const float *rstd, const float *dy, float *dx,
                          float *dw, float *db);
    /* tokens[B,T] -> y[B,T,C] = wte[tok] + wpe[t] */
    void (*embedding_fwd)(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                          const float *wte, const float *wpe, float *y);
    /* adds into dwte[V,C], dwpe[T,C] */
    void (*embedding_bwd)(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                          const float *dy, float *dwte, float *dwpe);
    /* qkv[B,T,3C] -> q,k,v each [B,H,T,hs] */
    void (*qkv_split)(ppdl_backend *be, int B, int T, int C, int H, const float *qkv,
                      float *q, float *k, float *v);
    /* dq,dk,dv [B,H,T,hs] -> dqkv[B,T,3C] (overwrites) */
    void (*qkv_merge)(ppdl_backend *be, int B, int T, int C, int H, const float *dq,
                      const float *dk, const float *dv, float *dqkv);
    /* x[B,H,T,hs] -> y[B,T,C] ; and its inverse */
    void (*heads_to_seq)(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y);
    void (*seq_to_heads)(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y);
    /* row-wise causal softmax of scale*s over [BH,T,T]: p[r,t,u] = 0 for u > t */
    void (*causal_softmax_fwd)(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p);
    /* ds = scale * p * (dp - sum_u dp*p)  (overwrites ds; ds may alias dp) */
    void (*causal_softmax_bwd)(ppdl_backend *be, int BH, int T, float scale, const float *p,
                               const float *dp, float *ds);

    /* ---- loss ---- */
    /* Fused softmax cross-entropy over rows of logits[rows,V] with integer targets:
     * adds sum_r -log softmax(logits_r)[t_r] into *loss_sum (a device float),
     * writes dlogits = scale * (softmax - onehot). dlogits may alias logits.
     * A target outside [0,V) is a caller bug (validated on load). */
    void (*softmax_xent)(ppdl_backend *be, int rows, int V, const float *logits,
                         const int32_t *targets, float scale, float *loss_sum, float *dlogits);

    /* ---- convolution helpers (NCHW) ---- */
    /* one image x[Ci,Hh,Ww] -> col[Ci*kh*kw, OH*OW] */
    void (*im2col)(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride,
                   int pad, const float *x, float *col);
    /* adds col[Ci*kh*kw, OH*OW] back into dx[Ci,Hh,Ww] */
    void (*col2im)(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride,
                   int pad, const float *col, float *dx);
    /* x[N,C,Hh,Ww] -> y[N,C,OH,OW], argmax[N,C,OH,OW] (flat index into the plane) */
    void (*maxpool_fwd)(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                        const float *x, float *y, int32_t *argmax);
    /* dx (overwritten, [N,C,Hh,Ww]) from dy and argmax */
    void (*maxpool_bwd)(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                        const int32_t *argmax, const float *dy, float *dx);

    /* ---- optimizer ---- */
    /* AdamW (PyTorch semantics), step t counts from 1:
     * p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
     * p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) */
    /* (hyperparameters in double, as PyTorch's Python floats: 1-beta2 is formed
     * before rounding to float) */
    void (*adamw)(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v,
                  double lr, double beta1, double beta2, double eps, double wd, int t);

    /* ---- optional: 0 / NULL on backends that do not need them (the CPU) ---- */
    /* 1 when the host cannot address device memory (CUDA): MPI cannot read or write
     * device buffers, so messages between stages are staged through host buffers
     * (backend/xfer.h) */
    int device_memory;
    /* page-locked host memory for those staging buffers (NULL on failure); when NULL,
     * plain malloc is used */
    void *(*host_alloc)(ppdl_backend *be, size_t n_bytes);
    void (*host_free)(ppdl_backend *be, void *p);
    /* release the backend's handles and streams (before ppdl_backend_destroy frees it) */
    void (*destroy)(ppdl_backend *be);
    /* Whole-batch convolution through a vendor library (cuDNN), NCHW, PyTorch's
     * Conv2d without bias: x[N,Ci,Hh,Ww], w[Co,Ci,kh,kw] -> y[N,Co,OH,OW] (overwrites).
     * When NULL, layers lower a convolution to im2col + gemm per image. */
    void (*conv2d_fwd)(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw,
                       int stride, int pad, const float *x, const float *w, float *y);
    /* its backward given dy[N,Co,OH,OW]: adds into dw[Co,Ci,kh,kw]; overwrites
     * dx[N,Ci,Hh,Ww] unless dx is NULL */
    void (*conv2d_bwd)(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw,
                       int stride, int pad, const float *x, const float *w, const float *dy,
                       float *dx, float *dw);
} ppdl_backend_ops;

enum { PPDL_ACT_NONE = 0, PPDL_ACT_RELU = 1, PPDL_ACT_GELU = 2 };

struct ppdl_backend {
    const ppdl_backend_ops *ops;
    void *impl;               /* backend-private state */
    int threads;              /* compute threads (CPU) */
    /* byte accounting, maintained by ppdl_be_alloc / ppdl_be_free */
    size_t bytes_in_use;
    size_t bytes_peak;
    size_t bytes_limit;       /* 0: no limit */
    int rank;                 /* for messages */
    int stage;                /* -1 when not yet known */
    /* 1: MPI messages are staged through host memory (xfer.h) even where MPI could use
     * the backend's memory itself. Set by PPDL_STAGE_MESSAGES=1 in the environment: on
     * a machine without a GPU it runs the CPU backend through the runtime's staged
     * paths, which otherwise only a GPU run takes (tests/pipeline_equiv.sh) */
    int stage_messages;
};

/* Create a backend by name ("cpu" or "cuda"). On failure returns NULL and writes
 * a reason into err. */
ppdl_backend *ppdl_backend_create(const char *name, int threads, int rank, char *err, size_t errlen);
void ppdl_backend_destroy(ppdl_backend *be);

/* Allocation with accounting. `what` names the buffer in the error message that is
 * printed (naming rank, stage, request and bytes in use) when the limit would be
 * exceeded or the device is out of memory; the job then aborts. Sizes are rounded up
 * to 256 bytes, as device allocators do, and the rounded size is what is counted. */
void *ppdl_be_alloc(ppdl_backend *be, size_t n_bytes, const char *what);
/* Like ppdl_be_alloc but returns NULL instead of aborting. */
void *ppdl_be_try_alloc(ppdl_backend *be, size_t n_bytes, const char *what);
void ppdl_be_free(ppdl_backend *be, void *p);
size_t ppdl_be_alloc_size(size_t n_bytes); /* the rounded size that is counted */

#endif
