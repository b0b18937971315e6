/* backend_impl.h — the inside of a backend: the table of operations a backend fills in
 * and the struct the wrappers work on (the split of ggml's ggml-backend-impl.h).
 *
 * Only src/backend/ includes this, plus the op-by-op comparison harness
 * (tests/unit/test_backend_ops.c) and the CUDA benchmark (perf/bench-cuda.c), which wrap a
 * backend's table to inject faults or count calls. Everything else sees ppdl_backend
 * as an opaque type and goes through the ppdl_be_* wrappers of backend.h: the byte
 * accounting, the limit and the out-of-memory messages then live in one place, and a
 * backend can change its insides without a layer noticing. The semantics of each
 * member are those of the wrapper of the same name, ppdl_be_<member>, in backend.h. */
#ifndef PPDL_BACKEND_IMPL_H
#define PPDL_BACKEND_IMPL_H

#include "backend/backend.h"

struct ppdl_backend_ops {
    const char *name;

    /* ---- memory (raw: the byte accounting and the limit live in the wrappers) ----
     * Who frees what: every buffer from ppdl_be_alloc / ppdl_be_try_alloc, a backend's
     * own scratch included, is owned by the live table of struct ppdl_backend (below),
     * and leaves it exactly once, through ops->free: by ppdl_be_free, or by
     * ppdl_be_free_all, which ppdl_backend_destroy runs before ops->destroy. A backend
     * keeps pointers to its own scratch only as borrowed references. ops->free must
     * accept a buffer that queued work still uses (it waits for that work, or frees in
     * the order of the queue), and works until ops->destroy has run. */
    void *(*alloc)(ppdl_backend *be, size_t n_bytes); /* NULL when out of memory only */
    void (*free)(ppdl_backend *be, void *p);
    void (*copy_h2d)(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
    void (*copy_d2h)(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
    void (*copy_d2d)(ppdl_backend *be, void *dst, const void *src, size_t n_bytes);
    void (*zero)(ppdl_backend *be, void *p, size_t n_bytes);
    void (*sync)(ppdl_backend *be);
    void *(*event_create)(ppdl_backend *be);
    void (*event_record)(ppdl_backend *be, void *ev);
    void (*event_sync)(ppdl_backend *be, void *ev);
    double (*event_elapsed_ms)(ppdl_backend *be, void *start, void *end);
    void (*event_destroy)(ppdl_backend *be, void *ev);

    /* ---- dense linear algebra ---- */
    void (*gemm)(ppdl_backend *be, int trans_a, int trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);
    void (*gemm_batched)(ppdl_backend *be, int trans_a, int trans_b, int m, int n, int k,
                         float alpha, const float *a, int lda, long stride_a,
                         const float *b, int ldb, long stride_b, float beta, float *c,
                         int ldc, long stride_c, int batch);

    /* ---- elementwise and reductions ---- */
    void (*add)(ppdl_backend *be, size_t n, const float *x, const float *y, float *out);
    void (*axpy)(ppdl_backend *be, size_t n, float alpha, const float *x, float *y);
    void (*bias_add)(ppdl_backend *be, int rows, int cols, float *x, const float *bias);
    void (*bias_grad)(ppdl_backend *be, int rows, int cols, const float *dy, float *dbias);
    void (*act_fwd)(ppdl_backend *be, int act, size_t n, const float *x, float *y);
    void (*act_bwd)(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx);
    void (*sumsq)(ppdl_backend *be, size_t n, const float *x, double *out_host);

    /* ---- transformer kernels ---- */
    void (*layernorm_fwd)(ppdl_backend *be, int rows, int C, float eps, const float *x,
                          const float *w, const float *b, float *y, float *mean, float *rstd);
    void (*layernorm_bwd)(ppdl_backend *be, int rows, int C, const float *x, const float *w,
                          const float *mean, const float *rstd, const float *dy, float *dx,
                          float *dw, float *db);
    void (*embedding_fwd)(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                          const float *wte, const float *wpe, float *y);
    void (*embedding_bwd)(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                          const float *dy, float *dwte, float *dwpe);
    void (*qkv_split)(ppdl_backend *be, int B, int T, int C, int H, const float *qkv,
                      float *q, float *k, float *v);
    void (*qkv_merge)(ppdl_backend *be, int B, int T, int C, int H, const float *dq,
                      const float *dk, const float *dv, float *dqkv);
    void (*heads_to_seq)(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y);
    void (*seq_to_heads)(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y);
    void (*causal_softmax_fwd)(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p);
    void (*causal_softmax_bwd)(ppdl_backend *be, int BH, int T, float scale, const float *p,
                               const float *dp, float *ds);
    void (*causal_softmax_tail_fwd)(ppdl_backend *be, int BH, int n, int L, float scale,
                                    const float *s, float *p);

    /* ---- loss ---- */
    void (*softmax_xent)(ppdl_backend *be, int rows, int V, const float *logits,
                         const int32_t *targets, float scale, float *loss_sum, float *dlogits);

    /* ---- convolution helpers (NCHW) ---- */
    void (*im2col)(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride,
                   int pad, const float *x, float *col);
    void (*col2im)(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride,
                   int pad, const float *col, float *dx);
    void (*maxpool_fwd)(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                        const float *x, float *y, int32_t *argmax);
    void (*maxpool_bwd)(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                        const int32_t *argmax, const float *dy, float *dx);

    /* ---- optimizer ---- */
    void (*adamw)(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v,
                  double lr, double beta1, double beta2, double eps, double wd, int t);

    /* ---- bf16 (--precision bf16); NULL on a backend without it, which then refuses
     * the precision (ppdl_be_set_precision). Its GEMMs read be->precision. ---- */
    void (*round_bf16)(ppdl_backend *be, size_t n, float *x);
    void (*pack_bf16)(ppdl_backend *be, size_t n, void *buf);
    void (*unpack_bf16)(ppdl_backend *be, size_t n, void *buf);
    /* how its bf16 GEMMs run, for the header line (ppdl_be_bf16_gemm_name) */
    const char *(*bf16_gemm_name)(ppdl_backend *be);

    /* ---- optional: 0 / NULL on backends that do not need them (the CPU) ---- */
    int device_memory;
    /* the device memory this rank may use now (ppdl_be_free_memory); NULL: 0 */
    size_t (*free_memory)(ppdl_backend *be);
    /* NULL: ppdl_be_host_alloc falls back to malloc */
    void *(*host_alloc)(ppdl_backend *be, size_t n_bytes);
    void (*host_free)(ppdl_backend *be, void *p);
    /* Release what the live table does not hold: streams, library handles, page-locked
     * buffers of its own. ppdl_backend_destroy calls it once, after ppdl_be_free_all
     * has emptied the table, and frees be->impl after it. It must never free a buffer
     * of the table itself (that would be the second free); it forgets its references.
     * Called on its own (the table not emptied), it must first empty the table with
     * ppdl_be_free_all while its streams still exist, and a second call must do
     * nothing: the CUDA backend's is written so. */
    void (*destroy)(ppdl_backend *be);
    /* NULL: ppdl_be_has_conv2d is 0 and the callers lower a convolution to im2col + gemm */
    void (*conv2d_fwd)(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw,
                       int stride, int pad, const float *x, const float *w, float *y);
    void (*conv2d_bwd)(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw,
                       int stride, int pad, const float *x, const float *w, const float *dy,
                       float *dx, float *dw);
};

/* one live allocation: device pointers cannot carry a size header */
typedef struct ppdl_live_alloc { void *p; size_t bytes; } ppdl_live_alloc;

struct ppdl_backend {
    const ppdl_backend_ops *ops;
    void *impl;               /* backend-private state, freed by ppdl_backend_destroy
                               * after ops->destroy */
    int threads;              /* compute threads (CPU) */
    /* byte accounting, maintained by ppdl_be_alloc / ppdl_be_free; read and set from
     * outside through ppdl_be_in_use, ppdl_be_peak, ppdl_be_set_limit, ... */
    size_t bytes_in_use;
    size_t bytes_peak;
    size_t bytes_limit;       /* 0: no limit */
    /* the live allocations behind bytes_in_use, this backend's only: two backends in
     * one process (the tests hold several, a CPU reference beside the device under
     * test) must not free into or count against each other */
    ppdl_live_alloc *live;
    size_t n_live, cap_live;
    int rank;                 /* for messages */
    int stage;                /* for messages; -1 when not yet known */
    /* 1: MPI messages are staged through host memory (xfer.h) even where MPI could use
     * the backend's memory itself. Set by PPDL_STAGE_MESSAGES=1 in the environment: on
     * a machine without a GPU it runs the CPU backend through the runtime's staged
     * paths, which otherwise only a GPU run takes (tests/mpi/pipeline_equiv.sh) */
    int stage_messages;
    /* PPDL_PREC_*: the arithmetic of the GEMMs (ppdl_be_set_precision) */
    int precision;
};

/* Free every buffer still in the live table through ops->free, once each, and empty
 * it (the accounting drops to 0 in use). ppdl_backend_destroy runs it before
 * ops->destroy; a backend's destroy runs it itself when called without it. */
void ppdl_be_free_all(ppdl_backend *be);

/* The elements a GEMM operand spans, for the backends' rounded copies of A and B
 * under bf16: `which` 0 is A (op(A) is m_or_n x k), 1 is B (op(B) is k x m_or_n);
 * stored row-major with row stride ld, `batch` matrices `stride` elements apart. */
static inline size_t ppdl_gemm_operand_extent(int which, int trans, int m_or_n, int k, int ld, long stride,
                                              int batch)
{
    int rows = which == 0 ? (trans ? k : m_or_n) : (trans ? m_or_n : k);
    int cols = which == 0 ? (trans ? m_or_n : k) : (trans ? k : m_or_n);
    return (size_t)(batch - 1) * (size_t)stride + (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

#endif
