/* cuda.c — the CUDA backend, host side: device memory, one stream, events, cuBLAS
 * GEMMs, and the launchers of kernels.cu.
 *
 * Status: memory, copies, events, GEMMs, elementwise ops and AdamW are here; the
 * transformer, loss and convolution kernels come with the CUDA backend issue. Until
 * then ppdl_backend_cuda_create() refuses to hand out a backend with missing ops and
 * says which, rather than failing later. */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "core/util.h"

typedef struct cuda_impl {
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
} cuda_impl;

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) ppdl_die("%s: CUDA error %d: %s", #call, (int)e_, cudaGetErrorString(e_)); \
    } while (0)
#define CUBLAS_CHECK(call)                                                                \
    do {                                                                                  \
        cublasStatus_t s_ = (call);                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) ppdl_die("%s: cuBLAS error %d: %s", #call, (int)s_, cublasGetStatusString(s_)); \
    } while (0)
#define LAUNCH_CHECK(call)                                                                \
    do {                                                                                  \
        int e_ = (call);                                                                  \
        if (e_) ppdl_die("%s: CUDA error %d: %s", #call, e_, cudaGetErrorString((cudaError_t)e_)); \
    } while (0)

static cuda_impl *impl(ppdl_backend *be) { return be->impl; }



static void *cu_alloc(ppdl_backend *be, size_t n)
{
    (void)be;
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free error so the caller can report */
        return NULL;
    }
    return p;
}
static void cu_free(ppdl_backend *be, void *p) { (void)be; CUDA_CHECK(cudaFree(p)); }
static void cu_h2d(ppdl_backend *be, void *d, const void *s, size_t n)
{
    CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, impl(be)->stream));
    CUDA_CHECK(cudaStreamSynchronize(impl(be)->stream)); /* host buffer may be reused at once */
}
static void cu_d2h(ppdl_backend *be, void *d, const void *s, size_t n)
{
    CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, impl(be)->stream));
    CUDA_CHECK(cudaStreamSynchronize(impl(be)->stream));
}
static void cu_d2d(ppdl_backend *be, void *d, const void *s, size_t n)
{
    CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, impl(be)->stream));
}
static void cu_zero(ppdl_backend *be, void *p, size_t n) { CUDA_CHECK(cudaMemsetAsync(p, 0, n, impl(be)->stream)); }
static void cu_sync(ppdl_backend *be) { CUDA_CHECK(cudaStreamSynchronize(impl(be)->stream)); }

static void *cu_event_create(ppdl_backend *be)
{
    (void)be;
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    return (void *)e;
}
static void cu_event_record(ppdl_backend *be, void *e) { CUDA_CHECK(cudaEventRecord((cudaEvent_t)e, impl(be)->stream)); }
static void cu_event_sync(ppdl_backend *be, void *e) { (void)be; CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)e)); }
static double cu_event_elapsed(ppdl_backend *be, void *a, void *b)
{
    (void)be;
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
    return ms;
}
static void cu_event_destroy(ppdl_backend *be, void *e) { (void)be; CUDA_CHECK(cudaEventDestroy((cudaEvent_t)e)); }

/* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands */
static void cu_gemm(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    CUBLAS_CHECK(cublasSgemm(impl(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                             n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}
static void cu_gemm_batched(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                            const float *a, int lda, long sa, const float *b, int ldb, long sb,
                            float beta, float *c, int ldc, long sc, int batch)
{
    CUBLAS_CHECK(cublasSgemmStridedBatched(impl(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, sb,
                                           a, lda, sa, &beta, c, ldc, sc, batch));
}
static void cu_add(ppdl_backend *be, size_t n, const float *x, const float *y, float *o)
{
    LAUNCH_CHECK(ppdl_cu_add(impl(be)->stream, n, x, y, o));
}
static void cu_axpy(ppdl_backend *be, size_t n, float al, const float *x, float *y)
{
    LAUNCH_CHECK(ppdl_cu_axpy(impl(be)->stream, n, al, x, y));
}
static void cu_bias_add(ppdl_backend *be, int r, int c, float *x, const float *bias)
{
    LAUNCH_CHECK(ppdl_cu_bias_add(impl(be)->stream, r, c, x, bias));
}
static void cu_act_fwd(ppdl_backend *be, int act, size_t n, const float *x, float *y)
{
    LAUNCH_CHECK(ppdl_cu_act_fwd(impl(be)->stream, act, n, x, y));
}
static void cu_act_bwd(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx)
{
    LAUNCH_CHECK(ppdl_cu_act_bwd(impl(be)->stream, act, n, x, dy, dx));
}
static void cu_adamw(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v, double lr,
                     double b1, double b2, double eps, double wd, int t)
{
    /* the scalars of cpu.c's AdamW, formed the same way */
    LAUNCH_CHECK(ppdl_cu_adamw(impl(be)->stream, n, p, g, m, v, (float)(1.0 - lr * wd), (float)b1, (float)b2,
                               (float)(1.0 - b1), (float)(1.0 - b2), (float)eps,
                               (float)(lr / (1.0 - pow(b1, t))), (float)sqrt(1.0 - pow(b2, t))));
}

static const ppdl_backend_ops cuda_ops = {
    .name = "cuda",
    .alloc = cu_alloc, .free = cu_free, .copy_h2d = cu_h2d, .copy_d2h = cu_d2h, .copy_d2d = cu_d2d,
    .zero = cu_zero, .sync = cu_sync,
    .event_create = cu_event_create, .event_record = cu_event_record, .event_sync = cu_event_sync,
    .event_elapsed_ms = cu_event_elapsed, .event_destroy = cu_event_destroy,
    .gemm = cu_gemm, .gemm_batched = cu_gemm_batched,
    .add = cu_add, .axpy = cu_axpy, .bias_add = cu_bias_add, .act_fwd = cu_act_fwd, .act_bwd = cu_act_bwd,
    .adamw = cu_adamw,
};

/* the ops a training run needs that this backend does not implement yet */
static int missing_ops(char *buf, size_t len)
{
    const struct { const char *name; const void *fn; } need[] = {
        {"bias_grad", (const void *)cuda_ops.bias_grad}, {"sumsq", (const void *)cuda_ops.sumsq},
        {"layernorm", (const void *)cuda_ops.layernorm_fwd}, {"embedding", (const void *)cuda_ops.embedding_fwd},
        {"attention", (const void *)cuda_ops.causal_softmax_fwd}, {"softmax_xent", (const void *)cuda_ops.softmax_xent},
        {"im2col", (const void *)cuda_ops.im2col}, {"maxpool", (const void *)cuda_ops.maxpool_fwd},
    };
    int n = 0;
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!need[i].fn) {
            off += (size_t)snprintf(buf + off, len > off ? len - off : 0, "%s%s", n ? ", " : "", need[i].name);
            n++;
        }
    return n;
}

ppdl_backend *ppdl_backend_cuda_create(int rank, char *err, size_t errlen)
{
    int count = 0; /* cudaGetDeviceCount leaves it unwritten on failure */
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        ppdl_errf(err, errlen, "--backend cuda: no usable CUDA device on rank %d (CUDA error %d: %s)", rank,
                  (int)e, cudaGetErrorString(e));
        return NULL;
    }
    if (count < 1) {
        ppdl_errf(err, errlen, "--backend cuda: rank %d sees no CUDA device", rank);
        return NULL;
    }
    char missing[256];
    if (missing_ops(missing, sizeof missing)) {
        ppdl_errf(err, errlen, "--backend cuda: this build's CUDA backend does not implement %s yet; "
                               "use --backend cpu", missing);
        return NULL;
    }
    cuda_impl *ci = ppdl_xcalloc(1, sizeof *ci);
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaStreamCreateWithFlags(&ci->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ci->cublas));
    CUBLAS_CHECK(cublasSetStream(ci->cublas, ci->stream));
    ppdl_backend *be = ppdl_xcalloc(1, sizeof *be);
    be->ops = &cuda_ops;
    be->impl = ci;
    be->threads = 1;
    return be;
}
