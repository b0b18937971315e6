/* cuda.c — the CUDA backend, host side: the GPU a rank uses, device memory, one compute
 * stream, events, cuBLAS GEMMs, cuDNN convolutions, and the launchers of kernels.cu.
 *
 * Every op of ppdl_backend_ops is implemented; the CPU backend (cpu.c, cpu_gpt.c,
 * cpu_conv.c) is the reference each is tested against (tests/unit/test_backend_ops.c). Work is
 * queued on the compute stream; copies to the host and ops that return a host value
 * (sumsq) wait for it. Every CUDA, cuBLAS and cuDNN call is checked and a failure aborts
 * the job with the library's own error string.
 *
 * Memory: device buffers come from cudaMallocAsync on the compute stream (cu_alloc)
 * through ppdl_be_alloc, so the backend's own scratch (per-row losses, sumsq partials,
 * the cuDNN workspace, the bf16 copies of GEMM and convolution operands) is counted
 * against --mem-limit like everything else. The libraries' own memory (cuBLAS's work
 * space, cuDNN's handle, NCCL's buffers) is not: cu_free_memory sets a reserve aside
 * for it (library_reserve).
 *
 * --precision bf16 (docs/precision.md): a GEMM converts A and B to bf16 (kernels.cu,
 * backend/bf16.h's rounding) and calls cublasGemmEx / cublasGemmStridedBatchedEx with
 * bf16 operands, an fp32 C and fp32 compute. A convolution runs cuDNN in fp32 on
 * operands rounded to bf16 (why: at bf16_rounded). */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend_impl.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "core/util.h"
#include "core/test_hooks.h"

#define MAX_CONV_PLANS 16
#define SUMSQ_PARTIALS 1024
#define CUDNN_WORKSPACE_CAP ((size_t)256 << 20) /* algorithms needing more are passed over */

/* one convolution shape: cuDNN descriptors and the algorithms chosen for it */
typedef struct conv_plan {
    int key[10];               /* N, Ci, Hh, Ww, Co, kh, kw, stride, pad, tf32 */
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t fwd_desc, data_desc, filter_desc; /* one per math type chosen */
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_fwd, ws_data, ws_filter;
    int have_bwd;
} conv_plan;

typedef struct cuda_impl {
    int device, n_devices, local_rank, local_size, tf32;
    int sharing;               /* the node's ranks on this GPU, this one included */
    char bus_id[PPDL_CUDA_BUS_ID_LEN];
    cudaStream_t stream;
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;       /* created at the first convolution */
    void *scratch;             /* per-row losses / sumsq partials */
    size_t scratch_bytes;
    void *workspace;           /* cuDNN */
    size_t workspace_bytes;
    void *bf16[3];             /* bf16 copies of operands: GEMM A, B; convolution x, w, dy; packing: 0 */
    size_t bf16_bytes[3];
    conv_plan plans[MAX_CONV_PLANS];
    int n_plans, next_evict;
    double *host_partials;     /* page-locked, SUMSQ_PARTIALS */
    struct {                   /* checks run while the host waits for the stream (host_wait) */
        ppdl_cuda_watch_fn fn;
        void *arg;
    } watch[PPDL_CUDA_MAX_WATCH];
} cuda_impl;

#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) ppdl_die("%s: CUDA error %d: %s", #call, (int)e_, cudaGetErrorString(e_)); \
    } while (0)
/* cuBLAS is opened when the first CUDA backend is created, not linked: its start-up
 * (libcublasLt's, about 0.15 s of CPU) would otherwise be paid by every start of every
 * program of the build, runs on the CPU and ppdl-plan included. The soname is the one
 * the headers were built for, found as a linked library would be (the program's
 * RUNPATH); the GPU double's build defines PPDL_CUBLAS_LIB as NULL: its cuBLAS is part
 * of the program (dlopen(NULL)). */
#ifndef PPDL_CUBLAS_LIB
#define PPDL_CUBLAS_STR(x) #x
#define PPDL_CUBLAS_SONAME(major) "libcublas.so." PPDL_CUBLAS_STR(major)
#define PPDL_CUBLAS_LIB PPDL_CUBLAS_SONAME(CUBLAS_VER_MAJOR)
#endif
static struct {
    __typeof__(cublasCreate_v2) *create;
    __typeof__(cublasDestroy_v2) *destroy;
    __typeof__(cublasSetStream_v2) *set_stream;
    __typeof__(cublasSetMathMode) *set_math_mode;
    __typeof__(cublasGetStatusString) *status_string;
    __typeof__(cublasSgemm_v2) *sgemm;
    __typeof__(cublasSgemmStridedBatched) *sgemm_batched;
    __typeof__(cublasGemmEx) *gemm_ex;
    __typeof__(cublasGemmStridedBatchedEx) *gemm_batched_ex;
} blas;

/* blas's functions from the library; 0, or -1 with why in err */
static int load_cublas(char *err, size_t errlen)
{
    if (blas.create) return 0;
    const char *lib = PPDL_CUBLAS_LIB;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) return ppdl_errf(err, errlen, "cannot open cuBLAS (%s): %s", lib ? lib : "the program", dlerror());
    struct {
        void **fn;
        const char *name;
    } want[] = {{(void **)&blas.destroy, "cublasDestroy_v2"},
                {(void **)&blas.set_stream, "cublasSetStream_v2"},
                {(void **)&blas.set_math_mode, "cublasSetMathMode"},
                {(void **)&blas.status_string, "cublasGetStatusString"},
                {(void **)&blas.sgemm, "cublasSgemm_v2"},
                {(void **)&blas.sgemm_batched, "cublasSgemmStridedBatched"},
                {(void **)&blas.gemm_ex, "cublasGemmEx"},
                {(void **)&blas.gemm_batched_ex, "cublasGemmStridedBatchedEx"},
                {(void **)&blas.create, "cublasCreate_v2"}}; /* last: set means loaded */
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!(*want[i].fn = dlsym(h, want[i].name)))
            return ppdl_errf(err, errlen, "cuBLAS (%s) has no %s", lib ? lib : "the program", want[i].name);
    return 0;
}

#define CUBLAS_CHECK(call)                                                                        \
    do {                                                                                          \
        cublasStatus_t s_ = (call);                                                               \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                          \
            ppdl_die("%s: cuBLAS error %d: %s", #call, (int)s_, blas.status_string(s_));          \
    } while (0)
#define CUDNN_CHECK(call)                                                                         \
    do {                                                                                          \
        cudnnStatus_t s_ = (call);                                                                \
        if (s_ != CUDNN_STATUS_SUCCESS)                                                           \
            ppdl_die("%s: cuDNN error %d: %s", #call, (int)s_, cudnnGetErrorString(s_));          \
    } while (0)
/* a kernel launcher's return: cudaGetLastError() after the launch */
#define LAUNCH_CHECK(call)                                                                        \
    do {                                                                                          \
        int e_ = (call);                                                                          \
        if (e_) ppdl_die("%s: CUDA error %d: %s", #call, e_, cudaGetErrorString((cudaError_t)e_)); \
    } while (0)

static cuda_impl *impl(ppdl_backend *be) { return be->impl; }
static cudaStream_t stream(ppdl_backend *be) { return impl(be)->stream; }

/* ------------------------------------------------------------------ memory, events */

/* A failed allocation: NULL (the caller reports "out of memory") only when the memory
 * ran out; any other error, e.g. a sticky cudaErrorIllegalAddress left by an earlier
 * kernel's fault, ends the job as what it is */
static void *alloc_failed(const char *call, size_t n, cudaError_t e)
{
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* not sticky: cleared so that the caller can report and later calls work */
        return NULL;
    }
    ppdl_die("%s of %zu bytes: CUDA error %d (%s): %s", call, n, (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Device memory is stream-ordered: allocated and freed on the compute stream from the
 * device's default memory pool (cudaMallocAsync / cudaFreeAsync), so that nothing in a
 * step synchronises the device, as cudaFree does (it would wait for NCCL's pending
 * transfers too). A buffer is usable by the work queued on the compute stream after
 * its allocation, and by other streams ordered after that work (NCCL's: nccl_p2p.c
 * records an event on the compute stream before each transfer, which its streams
 * wait for). Its free is ordered after the work queued on the compute stream before
 * it, and the pool hands the memory out again only to later work on that stream; a
 * buffer that other streams use (NCCL's) must be freed only after they are done with
 * it, which the runtime guarantees by waiting on its NCCL requests before it frees its
 * buffers and destroys the backend. */
static void *cu_alloc(ppdl_backend *be, size_t n)
{
    void *p = NULL;
    cudaError_t e = cudaMallocAsync(&p, n, stream(be));
    return e == cudaSuccess ? p : alloc_failed("cudaMallocAsync", n, e);
}
static void cu_free(ppdl_backend *be, void *p) { CUDA_CHECK(cudaFreeAsync(p, stream(be))); }

/* Device memory the libraries take for a rank outside ppdl's accounting, after the
 * probe reads the free memory: set aside by cu_free_memory so that a full plan does not
 * run out inside cuBLAS, cuDNN or NCCL (docs/gpus.md, the memory).
 * Estimates with the sources of their numbers: */
/* cuBLAS's work space, per handle (one here, on one stream): NVIDIA's cuBLAS docs,
 * cublasSetWorkspace: 32 MiB on Hopper (sm_90) and later, 4 MiB before */
#define CUBLAS_WORKSPACE_SM90 ((size_t)32 << 20)
#define CUBLAS_WORKSPACE_OLDER ((size_t)4 << 20)
/* cuDNN's handle and the code of the engines it loads (lazily, CUDA_MODULE_LOADING=LAZY,
 * the default since CUDA 12.2): NVIDIA publishes no figure; an allowance. Its
 * workspace is ppdl's own buffer (workspace()), counted already */
#define CUDNN_HANDLE_RESERVE ((size_t)64 << 20)
/* NCCL's connection buffers: NCCL_BUFFSIZE (NCCL docs, "Environment Variables": 4 MiB
 * by default; read from the environment when set) per channel and direction of each
 * connection; up to 3 communicators a rank (activations, gradients, replicas:
 * run_stage.c), each connecting it to 2 peers (the stages before and after, or a
 * ring's neighbours), over 2 channels each. An all-reduce ring over NVLink may use
 * more channels (NCCL_MAX_NCHANNELS bounds them) */
#define NCCL_BUFFSIZE_DEFAULT ((size_t)4 << 20)
#define NCCL_COMMS 3
#define NCCL_PEERS_PER_COMM 2
#define NCCL_CHANNELS_PER_PEER 2
#define NCCL_DIRECTIONS 2
/* allocation granularity: the memory pools of cudaMalloc and cudaMallocAsync map
 * device memory in 2 MiB pages, while ppdl counts 256-byte units (ppdl_be_alloc_size);
 * a buffer can leave up to a page unused, and the pool's pages fragment as scratch
 * grows: 1/64 of the rank's memory */
#define POOL_SLACK_DIVISOR 64

static size_t library_reserve(const cuda_impl *ci)
{
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, ci->device));
    size_t cublas = prop.major >= 9 ? CUBLAS_WORKSPACE_SM90 : CUBLAS_WORKSPACE_OLDER;
    size_t buffsize = NCCL_BUFFSIZE_DEFAULT;
    const char *env = getenv("NCCL_BUFFSIZE");
    if (env && *env) {
        char *end = NULL;
        unsigned long long v = strtoull(env, &end, 0);
        if (end && !*end && v > 0) buffsize = (size_t)v;
    }
    size_t nccl = (size_t)NCCL_COMMS * NCCL_PEERS_PER_COMM * NCCL_CHANNELS_PER_PEER * NCCL_DIRECTIONS * buffsize;
    return cublas + CUDNN_HANDLE_RESERVE + nccl;
}

/* the memory this rank may plan with: the GPU's free memory, shared evenly by the
 * node's ranks whose chosen device is this GPU (by PCI bus id: ppdl_cuda_choose_gpu),
 * less what the libraries will take for it and the pools' slack */
static size_t cu_free_memory(ppdl_backend *be)
{
    const cuda_impl *ci = be->impl;
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    size_t share = free_bytes / (size_t)(ci->sharing > 1 ? ci->sharing : 1);
    size_t reserve = library_reserve(ci) + share / POOL_SLACK_DIVISOR;
    return share > reserve ? share - reserve : 0;
}
/* The host waits for the compute stream (or an event on it). The stream may wait on
 * NCCL transfers (ppdl_nccl_stream_wait), and a peer that failed or stopped would hold
 * a blocking cudaStreamSynchronize for ever: so the host polls, and between polls runs
 * the checks NCCL's objects registered (ppdl_cuda_watch: their asynchronous errors and
 * PPDL_NCCL_TIMEOUT), which end the job with the reason. */
static void host_wait(ppdl_backend *be, cudaEvent_t ev)
{
    cuda_impl *ci = impl(be);
    double t0 = ppdl_now_s();
    for (long i = 0;; i++) {
        cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(ci->stream);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) ppdl_die("waiting for the GPU: CUDA error %d: %s", (int)e, cudaGetErrorString(e));
        if (i < 1000) {
            sched_yield();
            continue;
        }
        for (int k = 0; k < PPDL_CUDA_MAX_WATCH; k++)
            if (ci->watch[k].fn) ci->watch[k].fn(ci->watch[k].arg, ppdl_now_s() - t0);
        nanosleep(&(struct timespec){0, 20000}, NULL);
    }
}

void ppdl_cuda_watch(ppdl_backend *be, ppdl_cuda_watch_fn fn, void *arg, int on)
{
    cuda_impl *ci = impl(be);
    for (int k = 0; k < PPDL_CUDA_MAX_WATCH; k++)
        if (on ? !ci->watch[k].fn : ci->watch[k].fn == fn && ci->watch[k].arg == arg) {
            ci->watch[k].fn = on ? fn : NULL;
            ci->watch[k].arg = on ? arg : NULL;
            return;
        }
    PPDL_CHECK(!on, "ppdl_cuda_watch: more than %d watchers", PPDL_CUDA_MAX_WATCH);
}

static void cu_h2d(ppdl_backend *be, void *d, const void *s, size_t n)
{
    if (!n) return;
    CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, stream(be)));
    host_wait(be, NULL); /* the host buffer may be reused at once */
}
static void cu_d2h(ppdl_backend *be, void *d, const void *s, size_t n)
{
    if (!n) return;
    CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, stream(be)));
    host_wait(be, NULL);
}
static void cu_d2d(ppdl_backend *be, void *d, const void *s, size_t n)
{
    if (n && d != s) CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, stream(be)));
}
static void cu_zero(ppdl_backend *be, void *p, size_t n)
{
    if (n) CUDA_CHECK(cudaMemsetAsync(p, 0, n, stream(be)));
}
static void cu_sync(ppdl_backend *be) { host_wait(be, NULL); }

static void *cu_event_create(ppdl_backend *be)
{
    (void)be;
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    return (void *)e;
}
static void cu_event_record(ppdl_backend *be, void *e) { CUDA_CHECK(cudaEventRecord((cudaEvent_t)e, stream(be))); }
static void cu_event_sync(ppdl_backend *be, void *e) { host_wait(be, (cudaEvent_t)e); }
static double cu_event_elapsed(ppdl_backend *be, void *a, void *b)
{
    (void)be;
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
    return ms;
}
static void cu_event_destroy(ppdl_backend *be, void *e) { (void)be; CUDA_CHECK(cudaEventDestroy((cudaEvent_t)e)); }

static void *cu_host_alloc(ppdl_backend *be, size_t n)
{
    (void)be;
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, n ? n : 1);
    return e == cudaSuccess ? p : alloc_failed("cudaMallocHost", n ? n : 1, e); /* NULL: ppdl_be_host_alloc mallocs */
}
static void cu_host_free(ppdl_backend *be, void *p)
{
    (void)be;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* a device buffer of the backend's own, grown on demand (at least doubling) and
 * counted like any buffer; used on the compute stream only */
static void *grown(ppdl_backend *be, void **buf, size_t *cap, size_t bytes, const char *what)
{
    if (bytes > *cap) {
        /* stream-ordered (cu_alloc): the old buffer goes after the work queued on it, and
         * neither the host nor the device waits */
        ppdl_be_free(be, *buf);
        size_t want = bytes > 2 * *cap ? bytes : 2 * *cap;
        *buf = ppdl_be_alloc(be, want, what);
        *cap = want;
    }
    return *buf;
}

static void *scratch(ppdl_backend *be, size_t bytes)
{
    cuda_impl *ci = impl(be);
    return grown(be, &ci->scratch, &ci->scratch_bytes, bytes, "CUDA backend scratch (loss rows, reductions)");
}

/* bf16 scratch slot `slot` (0..2) of at least `bytes`: every user queues on the one
 * stream, so a slot is free again for the next op as soon as this one is queued */
static void *bf16_scratch(ppdl_backend *be, int slot, size_t bytes)
{
    cuda_impl *ci = impl(be);
    return grown(be, &ci->bf16[slot], &ci->bf16_bytes[slot], bytes, "CUDA backend bf16 operand copies");
}

static int bf16_on(const ppdl_backend *be) { return be->precision == PPDL_PREC_BF16; }

/* ------------------------------------------------------------------ cuBLAS */

/* operand `which` (0: A, 1: B) of a GEMM converted to bf16 in its scratch slot, in the
 * same layout (ld and stride in elements unchanged) */
static const uint16_t *bf16_operand(ppdl_backend *be, int which, int trans, int m_or_n, int k, const float *x,
                                    int ld, long stride, int batch)
{
    PPDL_CHECK(stride >= 0, "bf16 GEMM: negative matrix stride %ld", stride);
    size_t n = ppdl_gemm_operand_extent(which, trans, m_or_n, k, ld, stride, batch);
    uint16_t *y = bf16_scratch(be, which, n * sizeof(uint16_t));
    LAUNCH_CHECK(ppdl_cu_narrow_bf16(stream(be), n, x, y));
    return y;
}

/* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
 * Under bf16 (k > 0; k = 0 only scales C) the operands go to cuBLAS in bf16, C and the
 * sums stay fp32. */
static void cu_gemm(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    if (bf16_on(be) && k > 0) {
        const uint16_t *a16 = bf16_operand(be, 0, ta, m, k, a, lda, 0, 1);
        const uint16_t *b16 = bf16_operand(be, 1, tb, n, k, b, ldb, 0, 1);
        CUBLAS_CHECK(blas.gemm_ex(impl(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  n, m, k, &alpha, b16, CUDA_R_16BF, ldb, a16, CUDA_R_16BF, lda, &beta, c,
                                  CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    CUBLAS_CHECK(blas.sgemm(impl(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                             n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}
static void cu_gemm_batched(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                            const float *a, int lda, long sa, const float *b, int ldb, long sb,
                            float beta, float *c, int ldc, long sc, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0) return;
    if (bf16_on(be) && k > 0) {
        const uint16_t *a16 = bf16_operand(be, 0, ta, m, k, a, lda, sa, batch);
        const uint16_t *b16 = bf16_operand(be, 1, tb, n, k, b, ldb, sb, batch);
        CUBLAS_CHECK(blas.gemm_batched_ex(impl(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b16, CUDA_R_16BF,
                                                ldb, sb, a16, CUDA_R_16BF, lda, sa, &beta, c, CUDA_R_32F, ldc, sc,
                                                batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    CUBLAS_CHECK(blas.sgemm_batched(impl(be)->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, sb,
                                           a, lda, sa, &beta, c, ldc, sc, batch));
}

/* ------------------------------------------------------------------ kernels */

static void cu_add(ppdl_backend *be, size_t n, const float *x, const float *y, float *o)
{
    LAUNCH_CHECK(ppdl_cu_add(stream(be), n, x, y, o));
}
static void cu_axpy(ppdl_backend *be, size_t n, float al, const float *x, float *y)
{
    LAUNCH_CHECK(ppdl_cu_axpy(stream(be), n, al, x, y));
}
static void cu_bias_add(ppdl_backend *be, int r, int c, float *x, const float *bias)
{
    LAUNCH_CHECK(ppdl_cu_bias_add(stream(be), r, c, x, bias));
}
static void cu_bias_grad(ppdl_backend *be, int r, int c, const float *dy, float *db)
{
    LAUNCH_CHECK(ppdl_cu_bias_grad(stream(be), r, c, dy, db));
}
static void cu_act_fwd(ppdl_backend *be, int act, size_t n, const float *x, float *y)
{
    LAUNCH_CHECK(ppdl_cu_act_fwd(stream(be), act, n, x, y));
}
static void cu_act_bwd(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx)
{
    LAUNCH_CHECK(ppdl_cu_act_bwd(stream(be), act, n, x, dy, dx));
}

/* partial sums in double on the device, added in order on the host */
static void cu_sumsq(ppdl_backend *be, size_t n, const float *x, double *out)
{
    cuda_impl *ci = impl(be);
    double *part = scratch(be, SUMSQ_PARTIALS * sizeof(double));
    int np = 0;
    LAUNCH_CHECK(ppdl_cu_sumsq_partials(ci->stream, n, x, part, SUMSQ_PARTIALS, &np));
    CUDA_CHECK(cudaMemcpyAsync(ci->host_partials, part, (size_t)np * sizeof(double), cudaMemcpyDeviceToHost,
                               ci->stream));
    /* the test hook SKIP_STREAM_WAIT, a negative control of the GPU double's tests: the
     * host reads before the copy */
    if (!ppdl_test_hook("SKIP_STREAM_WAIT"))
    host_wait(be, NULL);
    double s = 0;
    for (int i = 0; i < np; i++) s += ci->host_partials[i];
    *out = s;
}

static void cu_layernorm_fwd(ppdl_backend *be, int rows, int C, float eps, const float *x, const float *w,
                             const float *b, float *y, float *mean, float *rstd)
{
    LAUNCH_CHECK(ppdl_cu_layernorm_fwd(stream(be), rows, C, eps, x, w, b, y, mean, rstd));
}
static void cu_layernorm_bwd(ppdl_backend *be, int rows, int C, const float *x, const float *w, const float *mean,
                             const float *rstd, const float *dy, float *dx, float *dw, float *db)
{
    LAUNCH_CHECK(ppdl_cu_layernorm_bwd(stream(be), rows, C, x, w, mean, rstd, dy, dx, dw, db));
}
static void cu_embedding_fwd(ppdl_backend *be, int B, int T, int C, const int32_t *tok, const float *wte,
                             const float *wpe, float *y)
{
    LAUNCH_CHECK(ppdl_cu_embedding_fwd(stream(be), B, T, C, tok, wte, wpe, y));
}
static void cu_embedding_bwd(ppdl_backend *be, int B, int T, int C, const int32_t *tok, const float *dy,
                             float *dwte, float *dwpe)
{
    LAUNCH_CHECK(ppdl_cu_embedding_bwd(stream(be), B, T, C, tok, dy, dwte, dwpe));
}
static void cu_qkv_split(ppdl_backend *be, int B, int T, int C, int H, const float *qkv, float *q, float *k,
                         float *v)
{
    LAUNCH_CHECK(ppdl_cu_qkv_split(stream(be), B, T, C, H, qkv, q, k, v));
}
static void cu_qkv_merge(ppdl_backend *be, int B, int T, int C, int H, const float *dq, const float *dk,
                         const float *dv, float *dqkv)
{
    LAUNCH_CHECK(ppdl_cu_qkv_merge(stream(be), B, T, C, H, dq, dk, dv, dqkv));
}
static void cu_heads_to_seq(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y)
{
    LAUNCH_CHECK(ppdl_cu_heads_seq(stream(be), B, T, C, H, 1, x, y));
}
static void cu_seq_to_heads(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y)
{
    LAUNCH_CHECK(ppdl_cu_heads_seq(stream(be), B, T, C, H, 0, x, y));
}
static void cu_causal_softmax_fwd(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p)
{
    LAUNCH_CHECK(ppdl_cu_causal_softmax_fwd(stream(be), BH, T, scale, s, p));
}
static void cu_causal_softmax_tail_fwd(ppdl_backend *be, int BH, int n, int L, float scale, const float *s, float *p)
{
    LAUNCH_CHECK(ppdl_cu_causal_softmax_tail_fwd(stream(be), BH, n, L, scale, s, p));
}
static void cu_causal_softmax_bwd(ppdl_backend *be, int BH, int T, float scale, const float *p, const float *dp,
                                  float *ds)
{
    LAUNCH_CHECK(ppdl_cu_causal_softmax_bwd(stream(be), BH, T, scale, p, dp, ds));
}
static void cu_softmax_xent(ppdl_backend *be, int rows, int V, const float *logits, const int32_t *targets,
                            float scale, float *loss_sum, float *dlogits)
{
    double *row_loss = scratch(be, (size_t)(rows > 0 ? rows : 1) * sizeof(double));
    LAUNCH_CHECK(ppdl_cu_softmax_xent(stream(be), rows, V, logits, targets, scale, row_loss, loss_sum, dlogits));
}
static void cu_im2col(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int st, int pad, const float *x,
                      float *col)
{
    LAUNCH_CHECK(ppdl_cu_im2col(stream(be), Ci, Hh, Ww, kh, kw, st, pad, x, col));
}
static void cu_col2im(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int st, int pad, const float *col,
                      float *dx)
{
    LAUNCH_CHECK(ppdl_cu_col2im(stream(be), Ci, Hh, Ww, kh, kw, st, pad, col, dx));
}
static void cu_maxpool_fwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int st, const float *x, float *y,
                           int32_t *argmax)
{
    LAUNCH_CHECK(ppdl_cu_maxpool_fwd(stream(be), N, C, Hh, Ww, k, st, x, y, argmax));
}
static void cu_maxpool_bwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int st, const int32_t *argmax,
                           const float *dy, float *dx)
{
    LAUNCH_CHECK(ppdl_cu_maxpool_bwd(stream(be), N, C, Hh, Ww, k, st, argmax, dy, dx));
}
static void cu_adamw(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v, double lr,
                     double b1, double b2, double eps, double wd, int t)
{
    /* the scalars of cpu.c's AdamW, formed the same way (double, rounded once) */
    LAUNCH_CHECK(ppdl_cu_adamw(stream(be), n, p, g, m, v, (float)(1.0 - lr * wd), (float)b1, (float)b2,
                               (float)(1.0 - b1), (float)(1.0 - b2), (float)eps,
                               (float)(lr / (1.0 - pow(b1, t))), (float)sqrt(1.0 - pow(b2, t))));
}

/* ------------------------------------------------------------------ bf16 */

static void cu_round_bf16(ppdl_backend *be, size_t n, float *x)
{
    LAUNCH_CHECK(ppdl_cu_round_bf16(stream(be), n, x, x));
}
/* in place through scratch slot 0 (kernels.cu says why a scratch) */
static void cu_pack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    if (n) LAUNCH_CHECK(ppdl_cu_pack_bf16(stream(be), n, buf, bf16_scratch(be, 0, n * sizeof(uint16_t))));
}
static void cu_unpack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    if (n) LAUNCH_CHECK(ppdl_cu_unpack_bf16(stream(be), n, buf, bf16_scratch(be, 0, n * sizeof(uint16_t))));
}
static const char *cu_bf16_gemm_name(ppdl_backend *be)
{
    (void)be;
    return "cuBLAS bf16 GEMMs (cublasGemmEx, fp32 compute); cuDNN fp32 convolutions on bf16-rounded operands, "
           "TF32 off";
}

/* x[n] rounded to bf16 into scratch slot `slot` (fp32 storage): a convolution operand.
 * Under bf16 a convolution runs cuDNN in fp32 (FMA math, TF32 off) on copies of x, w
 * and dy rounded to bf16, not on cuDNN's bf16 descriptors: those take x, w and y all in
 * bf16 (fp32 only inside), which would round the outputs (pre-activations, dx) and
 * could not add into the fp32 weight gradient. A product of two bf16 numbers is exact
 * in fp32, so fp32 arithmetic on rounded operands computes what a bf16 convolution with
 * fp32 accumulation computes, with fp32 outputs, as the CPU backend's im2col GEMMs do.
 * TF32 stays off: its 10-bit mantissas would hold bf16 values exactly, but cuDNN's
 * Winograd and FFT algorithms multiply transformed operands, which are not. */
static const float *bf16_rounded(ppdl_backend *be, int slot, size_t n, const float *x)
{
    float *y = bf16_scratch(be, slot, (n ? n : 1) * sizeof(float));
    LAUNCH_CHECK(ppdl_cu_round_bf16(stream(be), n, x, y));
    return y;
}

/* ------------------------------------------------------------------ cuDNN convolution */

/* cuDNN's heuristics do not always honour the descriptor's math type (PyTorch notes
 * the same): in fp32 mode an algorithm that needs tensor-op math is passed over, and
 * the one taken runs with CUDNN_FMA_MATH (DEFAULT_MATH would allow TF32 on sm_80+) */
static int math_ok(cudnnMathType_t mt, int tf32) { return tf32 || mt == CUDNN_FMA_MATH || mt == CUDNN_DEFAULT_MATH; }
static cudnnMathType_t math_for(cudnnMathType_t mt, int tf32) { return tf32 ? mt : CUDNN_FMA_MATH; }

/* Pick the first algorithm of cuDNN's heuristic ranking that is allowed: fp32 math
 * unless TF32 is on, deterministic (backward), and a workspace under the cap. */
static void plan_forward(cuda_impl *ci, conv_plan *p, int tf32)
{
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ci->cudnn, p->x, p->w, p->fwd_desc, p->y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
    for (int i = 0; i < n; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && math_ok(perf[i].mathType, tf32) &&
            perf[i].memory <= CUDNN_WORKSPACE_CAP) {
            p->fwd = perf[i].algo;
            CUDNN_CHECK(cudnnSetConvolutionMathType(p->fwd_desc, math_for(perf[i].mathType, tf32)));
            CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(ci->cudnn, p->x, p->w, p->fwd_desc, p->y, p->fwd,
                                                                &p->ws_fwd));
            return;
        }
    ppdl_die("cuDNN offers no %s forward algorithm for this convolution (N=%d Ci=%d %dx%d Co=%d k=%dx%d)",
             tf32 ? "TF32" : "fp32", p->key[0], p->key[1], p->key[2], p->key[3], p->key[4], p->key[5], p->key[6]);
}

static void plan_backward(cuda_impl *ci, conv_plan *p, int tf32)
{
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t pf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n = 0, found = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ci->cudnn, p->w, p->y, p->data_desc, p->x,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, pd));
    for (int i = 0; i < n && !found; i++)
        if (pd[i].status == CUDNN_STATUS_SUCCESS && pd[i].determinism == CUDNN_DETERMINISTIC &&
            math_ok(pd[i].mathType, tf32) && pd[i].memory <= CUDNN_WORKSPACE_CAP) {
            p->bwd_data = pd[i].algo;
            CUDNN_CHECK(cudnnSetConvolutionMathType(p->data_desc, math_for(pd[i].mathType, tf32)));
            found = 1;
        }
    PPDL_CHECK(found, "cuDNN offers no deterministic %s backward-data algorithm for this convolution",
               tf32 ? "TF32" : "fp32");
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(ci->cudnn, p->w, p->y, p->data_desc, p->x, p->bwd_data,
                                                             &p->ws_data));
    found = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ci->cudnn, p->x, p->y, p->filter_desc, p->w,
                                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, pf));
    for (int i = 0; i < n && !found; i++)
        if (pf[i].status == CUDNN_STATUS_SUCCESS && pf[i].determinism == CUDNN_DETERMINISTIC &&
            math_ok(pf[i].mathType, tf32) && pf[i].memory <= CUDNN_WORKSPACE_CAP) {
            p->bwd_filter = pf[i].algo;
            CUDNN_CHECK(cudnnSetConvolutionMathType(p->filter_desc, math_for(pf[i].mathType, tf32)));
            found = 1;
        }
    PPDL_CHECK(found, "cuDNN offers no deterministic %s backward-filter algorithm for this convolution",
               tf32 ? "TF32" : "fp32");
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(ci->cudnn, p->x, p->y, p->filter_desc, p->w,
                                                               p->bwd_filter, &p->ws_filter));
    p->have_bwd = 1;
}

static void plan_destroy(conv_plan *p)
{
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->x));
    CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->y));
    CUDNN_CHECK(cudnnDestroyFilterDescriptor(p->w));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->fwd_desc));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->data_desc));
    CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->filter_desc));
}

static cudnnConvolutionDescriptor_t conv_desc(int pad, int stride, int tf32)
{
    cudnnConvolutionDescriptor_t d;
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
    /* CUDNN_CROSS_CORRELATION: PyTorch's Conv2d (no kernel flip) */
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(d, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    return d;
}

static conv_plan *get_plan(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw, int stride,
                           int pad, int want_bwd)
{
    cuda_impl *ci = impl(be);
    const int tf32 = ci->tf32 && !bf16_on(be); /* bf16: fp32 math on rounded operands (top of file) */
    int key[10] = {N, Ci, Hh, Ww, Co, kh, kw, stride, pad, tf32};
    conv_plan *p = NULL;
    for (int i = 0; i < ci->n_plans && !p; i++)
        if (!memcmp(ci->plans[i].key, key, sizeof key)) p = &ci->plans[i];
    if (!p) {
        if (!ci->cudnn) {
            CUDNN_CHECK(cudnnCreate(&ci->cudnn));
            CUDNN_CHECK(cudnnSetStream(ci->cudnn, ci->stream));
        }
        if (ci->n_plans < MAX_CONV_PLANS) {
            p = &ci->plans[ci->n_plans++];
        } else { /* many shapes (unusual): recycle the slots in turn */
            p = &ci->plans[ci->next_evict];
            ci->next_evict = (ci->next_evict + 1) % MAX_CONV_PLANS;
            plan_destroy(p);
        }
        memset(p, 0, sizeof *p);
        memcpy(p->key, key, sizeof key);
        const int OH = (Hh + 2 * pad - kh) / stride + 1, OW = (Ww + 2 * pad - kw) / stride + 1;
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
        CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, Ci, Hh, Ww));
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
        CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, Co, OH, OW));
        CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
        CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, Co, Ci, kh, kw));
        p->fwd_desc = conv_desc(pad, stride, tf32);
        p->data_desc = conv_desc(pad, stride, tf32);
        p->filter_desc = conv_desc(pad, stride, tf32);
        plan_forward(ci, p, tf32);
    }
    if (want_bwd && !p->have_bwd) plan_backward(ci, p, tf32);
    return p;
}

static void *workspace(ppdl_backend *be, size_t bytes)
{
    cuda_impl *ci = impl(be);
    if (bytes > ci->workspace_bytes) {
        ppdl_be_free(be, ci->workspace); /* stream-ordered, as in grown() */
        ci->workspace = ppdl_be_alloc(be, bytes, "cuDNN convolution workspace");
        ci->workspace_bytes = bytes;
    }
    return ci->workspace;
}

static void cu_conv2d_fwd(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw, int stride,
                          int pad, const float *x, const float *w, float *y)
{
    if (N <= 0) return;
    conv_plan *p = get_plan(be, N, Ci, Hh, Ww, Co, kh, kw, stride, pad, 0);
    if (bf16_on(be)) {
        x = bf16_rounded(be, 0, (size_t)N * Ci * Hh * Ww, x);
        w = bf16_rounded(be, 1, (size_t)Co * Ci * kh * kw, w);
    }
    void *ws = workspace(be, p->ws_fwd);
    const float one = 1.0f, zero = 0.0f;
    CUDNN_CHECK(cudnnConvolutionForward(impl(be)->cudnn, &one, p->x, x, p->w, w, p->fwd_desc, p->fwd, ws, p->ws_fwd,
                                        &zero, p->y, y));
}

static void cu_conv2d_bwd(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw, int stride,
                          int pad, const float *x, const float *w, const float *dy, float *dx, float *dw)
{
    if (N <= 0) return;
    conv_plan *p = get_plan(be, N, Ci, Hh, Ww, Co, kh, kw, stride, pad, 1);
    if (bf16_on(be)) {
        const size_t OH = (size_t)(Hh + 2 * pad - kh) / stride + 1, OW = (size_t)(Ww + 2 * pad - kw) / stride + 1;
        x = bf16_rounded(be, 0, (size_t)N * Ci * Hh * Ww, x);
        w = bf16_rounded(be, 1, (size_t)Co * Ci * kh * kw, w);
        dy = bf16_rounded(be, 2, (size_t)N * Co * OH * OW, dy);
    }
    size_t need = p->ws_filter > p->ws_data ? p->ws_filter : p->ws_data;
    void *ws = workspace(be, need);
    const float one = 1.0f, zero = 0.0f;
    /* beta = 1: adds into dw (gradient accumulation over micro-batches) */
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(impl(be)->cudnn, &one, p->x, x, p->y, dy, p->filter_desc,
                                               p->bwd_filter, ws, p->ws_filter, &one, p->w, dw));
    if (dx)
        CUDNN_CHECK(cudnnConvolutionBackwardData(impl(be)->cudnn, &one, p->w, w, p->y, dy, p->data_desc,
                                                 p->bwd_data, ws, p->ws_data, &zero, p->x, dx));
}

/* ------------------------------------------------------------------ the table */

static void cu_destroy(ppdl_backend *be);

static const ppdl_backend_ops cuda_ops = {
    .name = "cuda",
    .alloc = cu_alloc, .free = cu_free, .copy_h2d = cu_h2d, .copy_d2h = cu_d2h, .copy_d2d = cu_d2d,
    .zero = cu_zero, .sync = cu_sync,
    .event_create = cu_event_create, .event_record = cu_event_record, .event_sync = cu_event_sync,
    .event_elapsed_ms = cu_event_elapsed, .event_destroy = cu_event_destroy,
    .gemm = cu_gemm, .gemm_batched = cu_gemm_batched,
    .add = cu_add, .axpy = cu_axpy, .bias_add = cu_bias_add, .bias_grad = cu_bias_grad,
    .act_fwd = cu_act_fwd, .act_bwd = cu_act_bwd, .sumsq = cu_sumsq,
    .layernorm_fwd = cu_layernorm_fwd, .layernorm_bwd = cu_layernorm_bwd,
    .embedding_fwd = cu_embedding_fwd, .embedding_bwd = cu_embedding_bwd,
    .qkv_split = cu_qkv_split, .qkv_merge = cu_qkv_merge,
    .heads_to_seq = cu_heads_to_seq, .seq_to_heads = cu_seq_to_heads,
    .causal_softmax_fwd = cu_causal_softmax_fwd, .causal_softmax_bwd = cu_causal_softmax_bwd,
    .causal_softmax_tail_fwd = cu_causal_softmax_tail_fwd,
    .softmax_xent = cu_softmax_xent,
    .im2col = cu_im2col, .col2im = cu_col2im, .maxpool_fwd = cu_maxpool_fwd, .maxpool_bwd = cu_maxpool_bwd,
    .adamw = cu_adamw,
    .device_memory = 1, .free_memory = cu_free_memory, .host_alloc = cu_host_alloc, .host_free = cu_host_free, .destroy = cu_destroy,
    .conv2d_fwd = cu_conv2d_fwd, .conv2d_bwd = cu_conv2d_bwd,
    .round_bf16 = cu_round_bf16, .pack_bf16 = cu_pack_bf16, .unpack_bf16 = cu_unpack_bf16,
    .bf16_gemm_name = cu_bf16_gemm_name,
};

/* The handles, the stream and the page-locked partials: what the live table does not
 * hold (backend_impl.h). The device buffers, the scratch, workspace and bf16 slots
 * among them, belong to the table: ppdl_backend_destroy has freed them before this
 * runs, so they are only forgotten here. Called on its own (a test, a benchmark) it
 * empties the table itself while the stream exists; a second call does nothing. */
static void cu_destroy(ppdl_backend *be)
{
    cuda_impl *ci = impl(be);
    if (!ci || !ci->stream) return; /* released before */
    /* the queued work ends first: an earlier kernel's fault is reported here */
    CUDA_CHECK(cudaStreamSynchronize(ci->stream));
    ppdl_be_free_all(be); /* nothing left when ppdl_backend_destroy called us */
    /* the test hook DOUBLE_FREE, a negative control of the GPU double's tests: the old
     * second free */
    if (ppdl_test_hook("DOUBLE_FREE")) ppdl_be_free(be, ci->scratch);
    ci->scratch = ci->workspace = NULL;
    ci->scratch_bytes = ci->workspace_bytes = 0;
    for (int i = 0; i < 3; i++) {
        ci->bf16[i] = NULL;
        ci->bf16_bytes[i] = 0;
    }
    for (int i = 0; i < ci->n_plans; i++) plan_destroy(&ci->plans[i]);
    ci->n_plans = 0;
    if (ci->cudnn) CUDNN_CHECK(cudnnDestroy(ci->cudnn));
    ci->cudnn = NULL;
    if (ci->cublas) CUBLAS_CHECK(blas.destroy(ci->cublas));
    ci->cublas = NULL;
    if (ci->host_partials) CUDA_CHECK(cudaFreeHost(ci->host_partials));
    ci->host_partials = NULL;
    /* the frees queued on the stream are done before it goes */
    CUDA_CHECK(cudaStreamSynchronize(ci->stream));
    CUDA_CHECK(cudaStreamDestroy(ci->stream));
    ci->stream = NULL;
}

/* ------------------------------------------------------------------ which GPU */

int ppdl_cuda_available(char *why, size_t len)
{
    int count = 0; /* cudaGetDeviceCount leaves it unwritten on failure */
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        ppdl_errf(why, len, "CUDA error %d: %s", (int)e, cudaGetErrorString(e));
        return 0;
    }
    if (count < 1) {
        ppdl_errf(why, len, "no CUDA device is visible (CUDA_VISIBLE_DEVICES=%s)",
                  getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "(unset)");
        return 0;
    }
    return 1;
}

/* The ranks of this node (MPI_Comm_split_type SHARED over MPI_COMM_WORLD; collective):
 * MPI_COMM_NULL, and rank 0 of 1, in a process without MPI */
static MPI_Comm node_comm(int *local_rank, int *local_size, int *world_rank)
{
    int up = 0, down = 0;
    *local_rank = *world_rank = 0;
    *local_size = 1;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (!up || down) return MPI_COMM_NULL;
    MPI_Comm node;
    PPDL_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, world_rank));
    PPDL_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *world_rank, MPI_INFO_NULL, &node));
    PPDL_CHECK_MPI(MPI_Comm_rank(node, local_rank));
    PPDL_CHECK_MPI(MPI_Comm_size(node, local_size));
    return node;
}

/* the visible devices' PCI bus ids, PPDL_CUDA_BUS_ID_LEN bytes each; the count, 0
 * (and why) when CUDA or a device cannot be asked */
static int visible_bus_ids(char **ids, char *why, size_t len)
{
    int count = 0;
    *ids = NULL;
    if (!ppdl_cuda_available(why, len)) return 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    *ids = ppdl_xcalloc((size_t)(count > 0 ? count : 1), PPDL_CUDA_BUS_ID_LEN);
    for (int d = 0; d < count && e == cudaSuccess; d++)
        e = cudaDeviceGetPCIBusId(*ids + (size_t)d * PPDL_CUDA_BUS_ID_LEN, PPDL_CUDA_BUS_ID_LEN, d);
    if (e != cudaSuccess) {
        ppdl_errf(why, len, "CUDA error %d (%s) naming the visible devices: %s", (int)e, cudaGetErrorName(e),
                  cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    return count;
}

/* "rank 3", "ranks 0 and 2", "ranks 0, 1, 2 and 3" (the first 16, then "..."), from
 * world ranks */
static void rank_list(char *buf, size_t len, const int *ranks, int n)
{
    size_t at = (size_t)snprintf(buf, len, "rank%s", n == 1 ? "" : "s");
    for (int i = 0; i < n && at < len; i++) {
        const char *sep = i == 0 ? " " : i + 1 == n ? " and " : ", ";
        if (i == 16) {
            snprintf(buf + at, len - at, ", ... (%d in all)", n);
            return;
        }
        at += (size_t)snprintf(buf + at, len - at, "%s%d", sep, ranks[i]);
    }
}

/* The assignment (see ppdl_cuda_choose_gpu): local rank r sees counts[r] devices,
 * whose bus ids are ids + at[r] + d * PPDL_CUDA_BUS_ID_LEN, d = 0 .. counts[r]-1. Sets
 * chosen[r], the bus id rank r takes (NULL: none), and returns the visible device
 * number `me` takes (-1: none). */
static int assign_gpus(int n, const int *counts, const char *ids, const int *at, const char **chosen, int me)
{
    int device = -1;
    int *order = ppdl_xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) /* insertion sort by (count, local rank): n is a node's ranks */
        for (int j = i; j > 0 && counts[order[j - 1]] > counts[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int k = 0; k < n; k++) {
        const int r = order[k];
        int best_load = -1;
        for (int d = 0; d < counts[r]; d++) {
            const char *id = ids + at[r] + (size_t)d * PPDL_CUDA_BUS_ID_LEN;
            int load = 0;
            for (int j = 0; j < n; j++) load += chosen[j] && !strncmp(chosen[j], id, PPDL_CUDA_BUS_ID_LEN);
            if (best_load < 0 || load < best_load) {
                best_load = load;
                chosen[r] = id;
                if (r == me) device = d;
            }
        }
    }
    free(order);
    return device;
}

/* cuda_api.h. Every local rank gathers every local rank's list of visible bus ids;
 * all then run the same assignment on the same data, so they agree without a second
 * exchange: ranks are taken in order of fewest visible devices first (the most bound),
 * then local rank; each takes, among the devices it sees, the one fewest ranks have
 * taken so far, the first in its own visible order on a tie. Ranks that see the same
 * devices in the same order thus take visible device i % count (i-th among them), as
 * local rank modulo the count did before; ranks bound to one GPU each take their own;
 * differently ordered lists of the same GPUs still spread. The PCI bus id names the
 * physical GPU whatever CUDA_VISIBLE_DEVICES says (MIG instances of one GPU share it:
 * they count as one GPU here). */
int ppdl_cuda_choose_gpu(ppdl_cuda_gpu *g, char *why, size_t len)
{
    memset(g, 0, sizeof *g);
    g->device = -1;
    int world_rank = 0;
    MPI_Comm node = node_comm(&g->local_rank, &g->local_size, &world_rank);
    char *mine = NULL;
    const int count = visible_bus_ids(&mine, why, len), n = g->local_size;
    /* every local rank's count, world rank and bus ids */
    int *counts = ppdl_xcalloc((size_t)n, sizeof(int)), *world = ppdl_xcalloc((size_t)n, sizeof(int));
    int *bytes = ppdl_xcalloc((size_t)n, sizeof(int)), *at = ppdl_xcalloc((size_t)n, sizeof(int));
    counts[0] = count;
    world[0] = world_rank;
    if (node != MPI_COMM_NULL) {
        PPDL_CHECK_MPI(MPI_Allgather(&count, 1, MPI_INT, counts, 1, MPI_INT, node));
        PPDL_CHECK_MPI(MPI_Allgather(&world_rank, 1, MPI_INT, world, 1, MPI_INT, node));
    }
    int total = 0;
    for (int i = 0; i < n; i++) {
        at[i] = total;
        bytes[i] = counts[i] * PPDL_CUDA_BUS_ID_LEN;
        total += counts[i];
    }
    char *ids = ppdl_xcalloc((size_t)(total > 0 ? total : 1), PPDL_CUDA_BUS_ID_LEN);
    for (int i = 0; i < n; i++) at[i] *= PPDL_CUDA_BUS_ID_LEN;
    if (node != MPI_COMM_NULL) {
        PPDL_CHECK_MPI(MPI_Allgatherv(mine ? mine : ids, count * PPDL_CUDA_BUS_ID_LEN, MPI_CHAR, ids, bytes, at,
                                      MPI_CHAR, node));
        PPDL_CHECK_MPI(MPI_Comm_free(&node));
    } else if (count) {
        memcpy(ids, mine, (size_t)count * PPDL_CUDA_BUS_ID_LEN);
    }
    const char **chosen = ppdl_xcalloc((size_t)n, sizeof *chosen);
    g->device = assign_gpus(n, counts, ids, at, chosen, g->local_rank);
    g->usable = count > 0;
    g->n_devices = count;
    if (g->usable) {
        const char *me = chosen[g->local_rank];
        int *sharers = ppdl_xcalloc((size_t)n, sizeof(int));
        for (int j = 0; j < n; j++)
            if (chosen[j] && !strncmp(chosen[j], me, PPDL_CUDA_BUS_ID_LEN)) sharers[g->sharing++] = world[j];
        snprintf(g->bus_id, sizeof g->bus_id, "%.*s", PPDL_CUDA_BUS_ID_LEN - 1, me);
        rank_list(g->sharers, sizeof g->sharers, sharers, g->sharing);
        free(sharers);
    }
    free(chosen);
    free(ids);
    free(at);
    free(bytes);
    free(world);
    free(counts);
    free(mine);
    return g->usable;
}

/* an environment switch: unset or "0" is 0, "1" is 1, anything else an error */
static int env_switch(const char *name, int *on, char *err, size_t errlen)
{
    const char *v = getenv(name);
    *on = 0;
    if (!v || !*v || !strcmp(v, "0")) return 0;
    if (!strcmp(v, "1")) {
        *on = 1;
        return 0;
    }
    return ppdl_errf(err, errlen, "%s=%s: expected 0 or 1", name, v);
}

/* the first calls that need the GPU itself (a context): where a GPU in
 * EXCLUSIVE_PROCESS compute mode refuses a second process. 0, or an error in err */
static int open_device(const cuda_impl *ci, int rank, char *err, size_t errlen, cudaStream_t *s)
{
    cudaError_t e = cudaSetDevice(ci->device);
    const char *call = "cudaSetDevice";
    if (e == cudaSuccess) {
        call = "cudaStreamCreateWithFlags";
        e = cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
    }
    if (e == cudaSuccess) return 0;
    cudaGetLastError();
    return ppdl_errf(err, errlen, "--backend cuda: rank %d cannot open CUDA device %d (PCI %s): %s: CUDA error %d (%s): "
                                  "%s%s",
                     rank, ci->device, ci->bus_id, call, (int)e, cudaGetErrorName(e), cudaGetErrorString(e),
                     ci->sharing > 1 ? "; PPDL_CUDA_SHARE=1 puts several ranks on it, which a GPU in "
                                       "EXCLUSIVE_PROCESS compute mode refuses (nvidia-smi -q -d COMPUTE shows "
                                       "the mode): run one rank per GPU, or use the DEFAULT mode"
                                     : "");
}

ppdl_backend *ppdl_backend_cuda_create(int rank, char *err, size_t errlen)
{
    /* first, on every rank: the collective that chooses the node's GPUs */
    ppdl_cuda_gpu g;
    int share, tf32;
    char why[256];
    if (!ppdl_cuda_choose_gpu(&g, why, sizeof why)) {
        ppdl_errf(err, errlen, "--backend cuda: no usable CUDA device on rank %d (%s)", rank, why);
        return NULL;
    }
    if (env_switch("PPDL_CUDA_SHARE", &share, err, errlen) || env_switch("PPDL_CUDA_TF32", &tf32, err, errlen))
        return NULL;
    if (g.sharing > 1 && !share) {
        ppdl_errf(err, errlen, "--backend cuda: %s of one node would share the GPU at PCI bus %s (rank %d sees %d "
                               "device%s): run at most one rank per GPU (CUDA_VISIBLE_DEVICES, Slurm "
                               "--gpus-per-task=1), or set PPDL_CUDA_SHARE=1 to let ranks share GPUs",
                  g.sharers, g.bus_id, rank, g.n_devices, g.n_devices == 1 ? "" : "s");
        return NULL;
    }
    if (load_cublas(err, errlen)) return NULL;
    cuda_impl *ci = ppdl_xcalloc(1, sizeof *ci);
    ci->device = g.device;
    ci->n_devices = g.n_devices;
    ci->local_rank = g.local_rank;
    ci->local_size = g.local_size;
    ci->sharing = g.sharing;
    memcpy(ci->bus_id, g.bus_id, sizeof ci->bus_id);
    if (open_device(ci, rank, err, errlen, &ci->stream)) {
        free(ci);
        return NULL;
    }
    CUBLAS_CHECK(blas.create(&ci->cublas));
    CUBLAS_CHECK(blas.set_stream(ci->cublas, ci->stream));
    CUDA_CHECK(cudaMallocHost((void **)&ci->host_partials, SUMSQ_PARTIALS * sizeof(double)));
    ppdl_backend *be = ppdl_xcalloc(1, sizeof *be);
    be->ops = &cuda_ops;
    be->impl = ci;
    be->threads = 1;
    ppdl_cuda_set_tf32(be, tf32);
    return be;
}

/* ------------------------------------------------------------------ cuda_api.h */

void ppdl_cuda_set_tf32(ppdl_backend *be, int on)
{
    cuda_impl *ci = impl(be);
    ci->tf32 = on != 0;
    /* CUBLAS_DEFAULT_MATH keeps fp32 products; cuDNN plans are keyed by the flag */
    CUBLAS_CHECK(blas.set_math_mode(ci->cublas, ci->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

int ppdl_cuda_tf32(const ppdl_backend *be) { return ((const cuda_impl *)be->impl)->tf32; }
void *ppdl_cuda_stream(ppdl_backend *be) { return (void *)impl(be)->stream; }
int ppdl_cuda_device(const ppdl_backend *be) { return ((const cuda_impl *)be->impl)->device; }

const char *ppdl_cuda_describe(const ppdl_backend *be, char *buf, size_t len)
{
    const cuda_impl *ci = be->impl;
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, ci->device));
    snprintf(buf, len, "device %d of %d (%s, sm_%d%d, %.1f GiB, PCI %s shared by %d rank%s), node-local rank %d of "
             "%d, %s", ci->device, ci->n_devices, prop.name, prop.major, prop.minor,
             prop.totalGlobalMem / (double)(1u << 30), ci->bus_id, ci->sharing, ci->sharing == 1 ? "" : "s",
             ci->local_rank, ci->local_size, ci->tf32 ? "TF32 GEMMs" : "fp32 GEMMs");
    return buf;
}
