/* cpu.c — the CPU backend: host memory, OpenBLAS GEMMs, plain C loops.
 * It is the oracle every other backend is tested against, so it favours clear,
 * deterministic code: no reductions whose order depends on the thread count outside
 * OpenBLAS. Everything runs synchronously; "events" are timestamps. */
#include "backend/backend.h"
#include "backend/cpu_kernels.h"
#include "core/error.h"
#include "core/util.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's thread control (not in every cblas.h) */
void openblas_set_num_threads(int num_threads);

static void *cpu_alloc(ppdl_backend *be, size_t n)
{
    (void)be;
    void *p = NULL;
    if (posix_memalign(&p, 64, n)) return NULL;
    return p;
}
static void cpu_free(ppdl_backend *be, void *p) { (void)be; free(p); }
static void cpu_copy(ppdl_backend *be, void *dst, const void *src, size_t n)
{
    (void)be;
    if (n) memmove(dst, src, n);
}
static void cpu_zero(ppdl_backend *be, void *p, size_t n)
{
    (void)be;
    if (n) memset(p, 0, n);
}
static void cpu_sync(ppdl_backend *be) { (void)be; }

static void *cpu_event_create(ppdl_backend *be)
{
    (void)be;
    return ppdl_xcalloc(1, sizeof(double));
}
static void cpu_event_record(ppdl_backend *be, void *ev) { (void)be; *(double *)ev = ppdl_now_s(); }
static void cpu_event_sync(ppdl_backend *be, void *ev) { (void)be; (void)ev; }
static double cpu_event_elapsed(ppdl_backend *be, void *a, void *b)
{
    (void)be;
    return 1e3 * (*(double *)b - *(double *)a);
}
static void cpu_event_destroy(ppdl_backend *be, void *ev) { (void)be; free(ev); }

static void cpu_gemm(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    (void)be;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_gemm_batched(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                             const float *a, int lda, long sa, const float *b, int ldb, long sb,
                             float beta, float *c, int ldc, long sc, int batch)
{
    for (int i = 0; i < batch; i++)
        cpu_gemm(be, ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, beta, c + i * sc, ldc);
}

static void cpu_add(ppdl_backend *be, size_t n, const float *x, const float *y, float *out)
{
    (void)be;
    for (size_t i = 0; i < n; i++) out[i] = x[i] + y[i];
}

static void cpu_axpy(ppdl_backend *be, size_t n, float alpha, const float *x, float *y)
{
    (void)be;
    for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

static void cpu_bias_add(ppdl_backend *be, int rows, int cols, float *x, const float *bias)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * cols;
        for (int c = 0; c < cols; c++) xr[c] += bias[c];
    }
}

static void cpu_bias_grad(ppdl_backend *be, int rows, int cols, const float *dy, float *db)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float *d = dy + (size_t)r * cols;
        for (int c = 0; c < cols; c++) db[c] += d[c];
    }
}

/* GELU, tanh approximation (GPT-2, PyTorch approximate='tanh') */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* e^x for the activation loops, branch-free so that the compiler vectorises the loops
 * that call it (glibc's expf is a call per element). x = n ln2 + r with |r| <= ln2/2,
 * e^r by its degree-6 Taylor polynomial (truncation < 2e-8 relative), 2^n built in the
 * exponent bits. Relative error ~1.5e-7 (about 2 ulp); x is clamped to [-87, 88], where
 * e^x stays a normal float. */
static inline float vexpf(float x)
{
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    /* round to nearest by the 1.5*2^23 trick: no floorf call, so it vectorises */
    float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693145752f - n * 1.42860677e-6f; /* ln2 split in two: exact n*ln2_hi */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-1f + r * (4.16666679e-2f +
              r * (8.33333377e-3f + r * 1.38888892e-3f)))));
    union { int32_t i; float f; } two_n = {.i = ((int32_t)n + 127) << 23};
    return p * two_n.f;
}

/* tanh(u) = 1 - 2/(e^{2u} + 1): exact to a few 1e-8 absolute, which is what GELU needs
 * (it multiplies by 0.5 v); saturates to +-1 through the clamp of vexpf. */
static inline float fast_tanhf(float u) { return 1.0f - 2.0f / (vexpf(2.0f * u) + 1.0f); }

static void cpu_act_fwd(ppdl_backend *be, int act, size_t n, const float *x, float *y)
{
    (void)be;
    switch (act) {
    case PPDL_ACT_RELU:
        for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0f;
        break;
    case PPDL_ACT_GELU:
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            y[i] = 0.5f * v * (1.0f + fast_tanhf(GELU_K * (v + 0.044715f * v * v * v)));
        }
        break;
    default:
        if (x != y) memcpy(y, x, n * sizeof(float));
    }
}

static void cpu_act_bwd(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx)
{
    (void)be;
    switch (act) {
    case PPDL_ACT_RELU:
        for (size_t i = 0; i < n; i++) {
            float g = dy[i]; /* loaded unconditionally, so the select vectorises */
            dx[i] = x[i] > 0 ? g : 0.0f;
        }
        break;
    case PPDL_ACT_GELU:
        for (size_t i = 0; i < n; i++) {
            float v = x[i];
            float u = GELU_K * (v + 0.044715f * v * v * v);
            float t = fast_tanhf(u);
            float sech2 = 1.0f - t * t;
            float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
            dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * sech2 * du);
        }
        break;
    default:
        if (dx != dy) memcpy(dx, dy, n * sizeof(float));
    }
}

static void cpu_sumsq(ppdl_backend *be, size_t n, const float *x, double *out)
{
    (void)be;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    *out = s;
}

static void cpu_softmax_xent(ppdl_backend *be, int rows, int V, const float *logits,
                             const int32_t *targets, float scale, float *loss_sum, float *dlogits)
{
    (void)be;
    double loss = 0;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (size_t)r * V;
        float *d = dlogits + (size_t)r * V;
        float mx = z[0];
        for (int j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
        double sum = 0;
        for (int j = 0; j < V; j++) sum += exp((double)(z[j] - mx));
        int t = targets[r];
        loss += log(sum) - (double)(z[t] - mx);
        float inv = (float)(1.0 / sum);
        for (int j = 0; j < V; j++) d[j] = scale * (expf(z[j] - mx) * inv);
        d[t] -= scale;
    }
    *loss_sum += (float)loss;
}

static void cpu_adamw(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v,
                      double lr, double b1, double b2, double eps, double wd, int t)
{
    (void)be;
    /* scalars formed in double and rounded once, as PyTorch does on the host */
    const float decay = (float)(1.0 - lr * wd), fb1 = (float)b1, fb2 = (float)b2;
    const float a1 = (float)(1.0 - b1), a2 = (float)(1.0 - b2), feps = (float)eps;
    const float step = (float)(lr / (1.0 - pow(b1, t)));
    const float c2s = (float)sqrt(1.0 - pow(b2, t));
    for (size_t i = 0; i < n; i++) {
        p[i] *= decay;
        m[i] = fb1 * m[i] + a1 * g[i];
        v[i] = fb2 * v[i] + a2 * g[i] * g[i];
        p[i] -= step * m[i] / (sqrtf(v[i]) / c2s + feps);
    }
}

static const ppdl_backend_ops cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_h2d = cpu_copy,
    .copy_d2h = cpu_copy,
    .copy_d2d = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .event_create = cpu_event_create,
    .event_record = cpu_event_record,
    .event_sync = cpu_event_sync,
    .event_elapsed_ms = cpu_event_elapsed,
    .event_destroy = cpu_event_destroy,
    .gemm = cpu_gemm,
    .gemm_batched = cpu_gemm_batched,
    .add = cpu_add,
    .axpy = cpu_axpy,
    .bias_add = cpu_bias_add,
    .bias_grad = cpu_bias_grad,
    .act_fwd = cpu_act_fwd,
    .act_bwd = cpu_act_bwd,
    .sumsq = cpu_sumsq,
    .layernorm_fwd = cpu_layernorm_fwd,
    .layernorm_bwd = cpu_layernorm_bwd,
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .qkv_split = cpu_qkv_split,
    .qkv_merge = cpu_qkv_merge,
    .heads_to_seq = cpu_heads_to_seq,
    .seq_to_heads = cpu_seq_to_heads,
    .causal_softmax_fwd = cpu_causal_softmax_fwd,
    .causal_softmax_bwd = cpu_causal_softmax_bwd,
    .softmax_xent = cpu_softmax_xent,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .maxpool_fwd = cpu_maxpool_fwd,
    .maxpool_bwd = cpu_maxpool_bwd,
    .adamw = cpu_adamw,
};

ppdl_backend *ppdl_backend_cpu_create(int threads)
{
    ppdl_backend *be = ppdl_xcalloc(1, sizeof *be);
    be->ops = &cpu_ops;
    be->threads = threads > 0 ? threads : 1;
    openblas_set_num_threads(be->threads);
    return be;
}
