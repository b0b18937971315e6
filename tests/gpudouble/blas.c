/* blas.c — the GPU double's cuBLAS: handles, streams and the GEMMs ppdl calls.
 *
 * Arguments are checked as cuBLAS checks them (CUBLAS_STATUS_INVALID_VALUE), operand
 * ranges must lie in device memory (fatal otherwise), and the arithmetic is queued on
 * the handle's stream, never done at the call. The fp32 products are OpenBLAS's
 * cblas_sgemm on the column-major operands as given, the kernel the CPU backend
 * reaches; bf16 operands are widened to fp32 (exactly) first. */
#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_v2.h"
#include "gpud.h"

#define BLAS_LIVE 0x63426c41u /* a live handle */
#define BLAS_DEAD 0x64456144u /* a destroyed one: kept, so that reuse is detected */

struct cublasContext {
    unsigned magic;
    cudaStream_t stream;
    cublasMath_t math;
    void *workspace; /* charged to the device, never touched */
    struct cublasContext *next_dead;
};

/* destroyed handles stay reachable, so a leak checker does not report them */
static struct cublasContext *dead_handles;

static int handle_ok(cublasHandle_t h) { return h && h->magic == BLAS_LIVE; }

/* cuBLAS's work space: 32 MiB from compute capability 9.0 on, else 4 MiB */
static size_t workspace_bytes(void)
{
    const char *s = getenv("GPUD_SM");
    long sm = 90;
    if (s && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (*end == '\0' && v > 0) sm = v;
    }
    return (size_t)(sm >= 90 ? 32 : 4) << 20;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    gpud_trace("cublasCreate");
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasContext *h = calloc(1, sizeof *h);
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    h->workspace = gpud_lib_alloc(workspace_bytes(), "cuBLAS work space");
    if (!h->workspace) {
        free(h);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    h->magic = BLAS_LIVE;
    h->stream = NULL;
    h->math = CUBLAS_DEFAULT_MATH;
    gpud_handle_open("cuBLAS handle");
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    gpud_trace("cublasDestroy %p", (void *)handle);
    if (!handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    gpud_lib_free(handle->workspace);
    handle->workspace = NULL;
    handle->magic = BLAS_DEAD;
    handle->next_dead = dead_handles;
    dead_handles = handle;
    gpud_handle_close("cuBLAS handle");
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    gpud_trace("cublasSetStream %p %p", (void *)handle, (void *)stream);
    if (!handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!gpud_stream_live(stream)) return CUBLAS_STATUS_INVALID_VALUE;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

/* recorded only: the double's fp32 GEMMs are fp32 whatever the mode */
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    gpud_trace("cublasSetMathMode %p %d", (void *)handle, (int)mode);
    if (!handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    int base = (int)mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base < CUBLAS_DEFAULT_MATH || base > CUBLAS_TF32_TENSOR_OP_MATH) return CUBLAS_STATUS_INVALID_VALUE;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

/* ------------------------------------------------------------------ GEMM */

/* one (possibly batched) GEMM, everything copied at the call */
typedef struct gemm_work {
    int bf16; /* A and B are bf16 bit patterns (uint16_t), else float */
    int ta, tb; /* op(A), op(B) transposed */
    int m, n, k, lda, ldb, ldc, batch;
    long long sa, sb, sc; /* batch strides, elements */
    float alpha, beta;
    const void *a, *b;
    float *c;
} gemm_work;

/* elements a column-major rows x cols matrix with leading dimension ld spans */
static size_t matrix_extent(int rows, int cols, int ld)
{
    if (rows <= 0 || cols <= 0) return 0;
    return (size_t)(cols - 1) * (size_t)ld + (size_t)rows;
}

/* fatal unless the `batch` matrices of `one` elements, `stride` apart, of operand `arg`
 * lie in device memory */
static void require_operand(const void *p, size_t esize, size_t one, long long stride, int batch, const char *who,
                            const char *arg)
{
    if (one == 0 || batch <= 0) return;
    long long last = (long long)(batch - 1) * stride; /* offset of the last matrix */
    long long lo = last < 0 ? last : 0;
    size_t len = (size_t)((last < 0 ? -last : last)) + one;
    gpud_require_device((const char *)p + lo * (long long)esize, len * esize, who, arg);
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* C = beta C, where beta == 0 writes zeros without reading C */
static void scale_c(float *c, int m, int n, int ldc, float beta)
{
    for (int j = 0; j < n; j++) {
        float *col = c + (size_t)j * ldc;
        if (beta == 0.0f)
            for (int i = 0; i < m; i++) col[i] = 0.0f;
        else if (beta != 1.0f)
            for (int i = 0; i < m; i++) col[i] *= beta;
    }
}

static void widen(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
}

/* runs on the stream */
static void gemm_run(void *ctx)
{
    const gemm_work *g = ctx;
    const size_t ea = matrix_extent(g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->lda);
    const size_t eb = matrix_extent(g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->ldb);
    float *wa = NULL, *wb = NULL;
    const int product = g->k > 0 && g->alpha != 0.0f;
    if (g->bf16 && product) {
        wa = malloc(ea * sizeof *wa);
        wb = malloc(eb * sizeof *wb);
        if (!wa || !wb) gpud_fatal("cublasGemmEx: out of host memory widening bf16 operands");
    }
    for (int i = 0; i < g->batch; i++) {
        float *c = g->c + i * g->sc;
        if (!product) { /* A and B are not read */
            scale_c(c, g->m, g->n, g->ldc, g->beta);
            continue;
        }
        const float *a, *b;
        if (g->bf16) {
            widen(wa, (const uint16_t *)g->a + i * g->sa, ea);
            widen(wb, (const uint16_t *)g->b + i * g->sb, eb);
            a = wa;
            b = wb;
        } else {
            a = (const float *)g->a + i * g->sa;
            b = (const float *)g->b + i * g->sb;
        }
        /* beta == 0: C is written, never read (a NaN there must not survive) */
        if (g->beta == 0.0f) scale_c(c, g->m, g->n, g->ldc, 0.0f);
        cblas_sgemm(CblasColMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->m, g->n,
                    g->k, g->alpha, a, g->lda, b, g->ldb, g->beta, c, g->ldc);
    }
    free(wa);
    free(wb);
}

static int op_ok(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

/* the checks and the queueing every GEMM entry point shares */
static cublasStatus_t gemm(const char *who, cublasHandle_t h, int bf16, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha, const void *A,
                           int lda, long long sa, const void *B, int ldb, long long sb, const float *beta, float *C,
                           int ldc, long long sc, int batch)
{
    gpud_trace("%s %p %d %d m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d", who, (void *)h, (int)transa,
               (int)transb, m, n, k, lda, ldb, ldc, batch);
    if (!handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!op_ok(transa) || !op_ok(transb) || m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    const int ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
    const int rows_a = ta ? k : m, rows_b = tb ? n : k;
    if (lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) || ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS; /* nothing to do */

    const size_t esize = bf16 ? sizeof(uint16_t) : sizeof(float);
    if (k > 0) {
        require_operand(A, esize, matrix_extent(rows_a, ta ? m : k, lda), sa, batch, who, "A");
        require_operand(B, esize, matrix_extent(rows_b, tb ? k : n, ldb), sb, batch, who, "B");
    }
    require_operand(C, sizeof(float), matrix_extent(m, n, ldc), sc, batch, who, "C");

    gemm_work *g = malloc(sizeof *g);
    if (!g) return CUBLAS_STATUS_ALLOC_FAILED;
    *g = (gemm_work){.bf16 = bf16, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb,
                     .ldc = ldc, .batch = batch, .sa = sa, .sb = sb, .sc = sc, .alpha = *alpha, .beta = *beta,
                     .a = A, .b = B, .c = C};
    /* the double owns g from here, whether or not it accepts the work */
    if (gpud_enqueue(h->stream, who, gemm_run, g) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                              int n, int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc)
{
    return gemm("cublasSgemm", handle, 0, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float *alpha, const float *A, int lda,
                                         long long int strideA, const float *B, int ldb, long long int strideB,
                                         const float *beta, float *C, int ldc, long long int strideC,
                                         int batchCount)
{
    return gemm("cublasSgemmStridedBatched", handle, 0, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb,
                strideB, beta, C, ldc, strideC, batchCount);
}

/* the one mixed-precision combination ppdl uses */
static int ex_supported(cudaDataType at, cudaDataType bt, cudaDataType ct, cublasComputeType_t compute)
{
    return at == CUDA_R_16BF && bt == CUDA_R_16BF && ct == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    (void)algo;
    if (!handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!ex_supported(Atype, Btype, Ctype, computeType)) return CUBLAS_STATUS_NOT_SUPPORTED;
    /* compute 32F: alpha and beta are floats */
    return gemm("cublasGemmEx", handle, 1, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0,
                1);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void *beta, void *C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    (void)algo;
    if (!handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!ex_supported(Atype, Btype, Ctype, computeType)) return CUBLAS_STATUS_NOT_SUPPORTED;
    return gemm("cublasGemmStridedBatchedEx", handle, 1, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb,
                strideB, beta, C, ldc, strideC, batchCount);
}
