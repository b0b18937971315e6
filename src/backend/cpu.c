/* cpu.c — the CPU backend: host memory, OpenBLAS GEMMs, plain C loops.
 *
 * It is the oracle every other backend is tested against, so it favours clear,
 * deterministic code. Everything runs synchronously; "events" are timestamps.
 *
 * Threads. The backend owns be->threads compute threads (cpu_pool.c) and runs OpenBLAS
 * single-threaded inside them: one pool, so that no second set of threads spins
 * against ours on the same cores, and every kernel, not only the GEMMs, uses all the
 * cores. Work is only ever split over independent outputs (elements, rows, columns,
 * GEMM output blocks, matrices of a batch); a sum that spans pieces is formed from
 * per-piece partials in a fixed order that does not depend on the thread count, so
 * the results are bitwise the same with 1 thread or many.
 *
 * A GEMM is split into blocks of rows or columns of C, each an ordinary single-threaded
 * OpenBLAS call on a sub-matrix, cut by the shape alone (gemm_parts); the matrices
 * of a batched GEMM are spread over the threads. */
#include "backend/backend_impl.h"
#include "backend/cpu.h"
#include "backend/cpu_kernels.h"
#include "backend/cpu_math.h"
#include "core/error.h"
#include "core/util.h"

#include <cblas.h>
#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* OpenBLAS's thread control (not in every cblas.h) */
void openblas_set_num_threads(int num_threads);

/* Grains: the least work worth handing to another thread (a batch costs the pool a
 * few microseconds) */
#define GRAIN_ELEMS 16384   /* elementwise kernels, floats */
#define GRAIN_BYTES (1u << 20) /* zeroing and copies */
#define SUMSQ_CHUNK PPDL_SUMSQ_CHUNK /* sumsq partials: fixed chunks, whatever the thread count */

double *cpu_scratch(ppdl_backend *be, size_t n)
{
    cpu_impl *im = be->impl;
    if (n > im->scratch_cap) {
        free(im->scratch);
        im->scratch = malloc(n * sizeof(double));
        PPDL_CHECK(im->scratch, "out of host memory (%zu doubles of kernel scratch)", n);
        im->scratch_cap = n;
    }
    return im->scratch;
}

/* ------------------------------------------------------------------ memory */

/* Buffers of 2 MiB and more (weights, gradients, optimizer state, activations) are
 * aligned to 2 MiB and offered transparent huge pages: the GEMMs' packing and the
 * streaming kernels then take far fewer TLB misses, and first touch takes 1 fault per
 * 2 MiB instead of 512, which makes the gpt-bench preset's step a little faster. Where
 * the kernel does not do it (THP off), nothing changes. */
#define HUGE_BYTES ((size_t)2 << 20)

static void *cpu_alloc(ppdl_backend *be, size_t n)
{
    (void)be;
    void *p = NULL;
    size_t align = n >= HUGE_BYTES ? HUGE_BYTES : 64;
    if (posix_memalign(&p, align, n)) return NULL;
#ifdef MADV_HUGEPAGE
    /* advice only: an error (an old kernel) leaves ordinary pages */
    if (align == HUGE_BYTES) (void)madvise(p, n & ~(HUGE_BYTES - 1), MADV_HUGEPAGE);
#endif
    return p;
}
static void cpu_free(ppdl_backend *be, void *p) { (void)be; free(p); }

typedef struct { char *dst; const char *src; } bytes_args;

static void copy_range(void *arg, size_t lo, size_t hi)
{
    const bytes_args *a = arg;
    memcpy(a->dst + lo, a->src + lo, hi - lo);
}

static void zero_range(void *arg, size_t lo, size_t hi)
{
    const bytes_args *a = arg;
    memset(a->dst + lo, 0, hi - lo);
}

static void cpu_copy(ppdl_backend *be, void *dst, const void *src, size_t n)
{
    if (!n || dst == src) return;
    const char *d = dst, *s = src;
    if (d + n <= s || s + n <= d) { /* disjoint: the pieces can go in parallel */
        bytes_args a = {dst, src};
        cpu_pool_for(cpu_pool_of(be), n, GRAIN_BYTES, copy_range, &a);
    } else {
        memmove(dst, src, n);
    }
}

static void cpu_zero(ppdl_backend *be, void *p, size_t n)
{
    bytes_args a = {p, NULL};
    cpu_pool_for(cpu_pool_of(be), n, GRAIN_BYTES, zero_range, &a);
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

/* -------------------------------------------------------------------- GEMM */

/* A product is cut into blocks along the longer side of C (so that the operand each
 * block packs again is the smaller one), a power of two of them, edges on multiples
 * of GEMM_ALIGN. Every block packs that operand again, which costs (single-threaded,
 * gpt-bench shapes) ~2% for 2 blocks, ~6% for 4, ~12% for 8: so a product is halved
 * when the halves keep GEMM_MIN_HALF rows or columns, and cut further only while the
 * blocks keep GEMM_MIN_BLOCK (and every block GEMM_MIN_PART_FLOPS of work). With more
 * threads than blocks, the extra threads wait through that product.
 * The cut depends on the shape alone. It has to: OpenBLAS's results are not always
 * independent of how a product is cut (with the Haswell kernels a few elements near a
 * block edge come out differently), so a cut chosen by thread count would make the
 * bits depend on it. */
#define GEMM_ALIGN 64
#define GEMM_MIN_HALF 256
#define GEMM_MIN_BLOCK 1024
#define GEMM_MAX_PARTS 8
#define GEMM_MIN_PART_FLOPS 8e6  /* ~80 us of one core: less is not worth a thread */

typedef struct {
    int ta, tb, m, n, k;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int lda, ldb, ldc;
} gemm_args;

/* rows [m0,m1) and columns [n0,n1) of C, on the calling thread. A single row of C
 * (decoding one token: x[1,k] @ W^T) is a matrix-vector product: sgemm would pack all
 * of B for it on every call, which costs more than the product (in a profile
 * of gpt-small's decoding, packing B was a large share of the step), so it goes to
 * sgemv. */
static void gemm_block(const gemm_args *g, int m0, int m1, int n0, int n1)
{
    const float *a = g->ta ? g->a + m0 : g->a + (size_t)m0 * g->lda;
    const float *b = g->tb ? g->b + (size_t)n0 * g->ldb : g->b + n0;
    if (m1 - m0 == 1) {
        /* c[n] = alpha op(B)^T a + beta c: B stored [n,k] (tb) or [k,n]; a's k values
         * are a row (stride 1) or, with ta, a column (stride lda) */
        cblas_sgemv(CblasRowMajor, g->tb ? CblasNoTrans : CblasTrans, g->tb ? n1 - n0 : g->k,
                    g->tb ? g->k : n1 - n0, g->alpha, b, g->ldb, a, g->ta ? g->lda : 1, g->beta,
                    g->c + (size_t)m0 * g->ldc + n0, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,
                m1 - m0, n1 - n0, g->k, g->alpha, a, g->lda, b, g->ldb, g->beta,
                g->c + (size_t)m0 * g->ldc + n0, g->ldc);
}

/* how a product of this shape is cut (see above) */
static int gemm_parts(int m, int n, int k)
{
    int len = m >= n ? m : n;
    double flops = 2.0 * m * n * k;
    int parts = 1;
    while (parts < GEMM_MAX_PARTS && len / (2 * parts) >= (parts == 1 ? GEMM_MIN_HALF : GEMM_MIN_BLOCK) &&
           flops / (2 * parts) >= GEMM_MIN_PART_FLOPS)
        parts *= 2;
    return parts;
}

/* block `part` of `parts` of the product g */
static void gemm_part(const gemm_args *g, int part, int parts)
{
    int split_m = g->m >= g->n, len = split_m ? g->m : g->n;
    int units = (len + GEMM_ALIGN - 1) / GEMM_ALIGN;
    int lo = (int)((long)units * part / parts) * GEMM_ALIGN;
    int hi = (int)((long)units * (part + 1) / parts) * GEMM_ALIGN;
    if (hi > len) hi = len;
    if (hi <= lo) return;
    if (split_m) gemm_block(g, lo, hi, 0, g->n);
    else gemm_block(g, 0, g->m, lo, hi);
}

/* a batch of products of one shape; matrix i starts at a + i*sa (and b, c likewise) */
typedef struct {
    gemm_args g;
    long sa, sb, sc;
    int parts; /* gemm_parts of the shape */
} gemm_batch;

/* task t = block (t % parts) of matrix (t / parts) */
static void gemm_task(void *arg, int t)
{
    const gemm_batch *gb = arg;
    long i = t / gb->parts;
    gemm_args g = gb->g;
    g.a += i * gb->sa;
    g.b += i * gb->sb;
    g.c += i * gb->sc;
    gemm_part(&g, t % gb->parts, gb->parts);
}

static void cpu_gemm_batched(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                             const float *a, int lda, long sa, const float *b, int ldb, long sb,
                             float beta, float *c, int ldc, long sc, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0) return;
    if (be->precision == PPDL_PREC_BF16 && k > 0) {
        /* --precision bf16: the same sgemm on operands rounded to bf16 (cpu_bf16.c) */
        a = cpu_bf16_operand(be, 0, ta, m, k, a, lda, sa, batch);
        b = cpu_bf16_operand(be, 1, tb, n, k, b, ldb, sb, batch);
    }
    gemm_batch gb = {{ta, tb, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc}, sa, sb, sc,
                     gemm_parts(m, n, k)};
    PPDL_CHECK((long)batch * gb.parts <= 0x7fffffff, "gemm_batched: %d matrices", batch);
    cpu_pool_run(cpu_pool_of(be), batch * gb.parts, gemm_task, &gb);
}

static void cpu_gemm(ppdl_backend *be, int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    cpu_gemm_batched(be, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

/* ------------------------------------------------------------- elementwise */

/* the operands of the elementwise kernels; each kernel uses the ones it needs */
typedef struct {
    const float *x, *y;
    float *out;
    float alpha;
    int act;
    size_t rows, cols;
} ew_args;

CPU_SIMD static void add_range(void *arg, size_t lo, size_t hi)
{
    const ew_args *a = arg;
    const float *x = a->x, *y = a->y;
    float *out = a->out;
    for (size_t i = lo; i < hi; i++) out[i] = x[i] + y[i];
}

static void cpu_add(ppdl_backend *be, size_t n, const float *x, const float *y, float *out)
{
    ew_args a = {.x = x, .y = y, .out = out};
    cpu_pool_for(cpu_pool_of(be), n, GRAIN_ELEMS, add_range, &a);
}

CPU_SIMD static void axpy_range(void *arg, size_t lo, size_t hi)
{
    const ew_args *a = arg;
    const float *x = a->x;
    float *y = a->out, alpha = a->alpha;
    for (size_t i = lo; i < hi; i++) y[i] += alpha * x[i];
}

static void cpu_axpy(ppdl_backend *be, size_t n, float alpha, const float *x, float *y)
{
    ew_args a = {.x = x, .out = y, .alpha = alpha};
    cpu_pool_for(cpu_pool_of(be), n, GRAIN_ELEMS, axpy_range, &a);
}

/* rows [lo,hi) of x[rows,cols] += bias[cols] */
CPU_SIMD static void bias_add_rows(void *arg, size_t lo, size_t hi)
{
    const ew_args *a = arg;
    const float *bias = a->x;
    size_t cols = a->cols;
    for (size_t r = lo; r < hi; r++) {
        float *xr = a->out + r * cols;
        for (size_t c = 0; c < cols; c++) xr[c] += bias[c];
    }
}

static void cpu_bias_add(ppdl_backend *be, int rows, int cols, float *x, const float *bias)
{
    if (rows <= 0 || cols <= 0) return;
    ew_args a = {.x = bias, .out = x, .cols = (size_t)cols};
    cpu_pool_for(cpu_pool_of(be), (size_t)rows, GRAIN_ELEMS / (size_t)cols + 1, bias_add_rows, &a);
}

/* columns [lo,hi) of db += the sum over rows of dy[rows,cols], rows in order: the
 * columns are independent, so splitting them keeps every sum's order */
CPU_SIMD static void bias_grad_cols(void *arg, size_t lo, size_t hi)
{
    const ew_args *a = arg;
    size_t rows = a->rows, cols = a->cols;
    float *db = a->out;
    for (size_t r = 0; r < rows; r++) {
        const float *d = a->x + r * cols;
        for (size_t c = lo; c < hi; c++) db[c] += d[c];
    }
}

static void cpu_bias_grad(ppdl_backend *be, int rows, int cols, const float *dy, float *db)
{
    if (rows <= 0 || cols <= 0) return;
    ew_args a = {.x = dy, .out = db, .rows = (size_t)rows, .cols = (size_t)cols};
    /* 16 columns (a cache line) at least per piece */
    size_t grain = 16;
    if ((size_t)rows * 16 < GRAIN_ELEMS) grain = GRAIN_ELEMS / (size_t)rows;
    cpu_pool_for(cpu_pool_of(be), (size_t)cols, grain, bias_grad_cols, &a);
}

/* GELU, tanh approximation (GPT-2, PyTorch approximate='tanh') */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* tanh(u) = 1 - 2/(e^{2u} + 1): exact to a few 1e-8 absolute, which is what GELU needs
 * (it multiplies by 0.5 v); saturates to +-1 through the clamp of cpu_expf. */
static inline float fast_tanhf(float u) { return 1.0f - 2.0f / (cpu_expf(2.0f * u) + 1.0f); }

CPU_SIMD static void act_fwd_range(void *arg, size_t lo, size_t hi)
{
    const ew_args *a = arg;
    const float *x = a->x;
    float *y = a->out;
    switch (a->act) {
    case PPDL_ACT_RELU:
        for (size_t i = lo; i < hi; i++) y[i] = x[i] > 0 ? x[i] : 0.0f;
        break;
    case PPDL_ACT_GELU:
        for (size_t i = lo; i < hi; i++) {
            float v = x[i];
            y[i] = 0.5f * v * (1.0f + fast_tanhf(GELU_K * (v + 0.044715f * v * v * v)));
        }
        break;
    default:
        if (x != y) memcpy(y + lo, x + lo, (hi - lo) * sizeof(float));
    }
}

static void cpu_act_fwd(ppdl_backend *be, int act, size_t n, const float *x, float *y)
{
    ew_args a = {.x = x, .out = y, .act = act};
    cpu_pool_for(cpu_pool_of(be), n, GRAIN_ELEMS, act_fwd_range, &a);
}

CPU_SIMD static void act_bwd_range(void *arg, size_t lo, size_t hi)
{
    const ew_args *a = arg;
    const float *x = a->x, *dy = a->y;
    float *dx = a->out;
    switch (a->act) {
    case PPDL_ACT_RELU:
        for (size_t i = lo; i < hi; i++) {
            float g = dy[i]; /* loaded unconditionally, so the select vectorises */
            dx[i] = x[i] > 0 ? g : 0.0f;
        }
        break;
    case PPDL_ACT_GELU:
        for (size_t i = lo; i < hi; i++) {
            float v = x[i];
            float u = GELU_K * (v + 0.044715f * v * v * v);
            float t = fast_tanhf(u);
            float sech2 = 1.0f - t * t;
            float du = GELU_K * (1.0f + 3.0f * 0.044715f * v * v);
            dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * sech2 * du);
        }
        break;
    default:
        if (dx != dy) memcpy(dx + lo, dy + lo, (hi - lo) * sizeof(float));
    }
}

static void cpu_act_bwd(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx)
{
    ew_args a = {.x = x, .y = dy, .out = dx, .act = act};
    cpu_pool_for(cpu_pool_of(be), n, GRAIN_ELEMS, act_bwd_range, &a);
}

/* ------------------------------------------------------------- reductions */

typedef struct {
    const float *x;
    size_t n;
    double *part; /* one partial per SUMSQ_CHUNK elements */
} sumsq_args;

CPU_SIMD static void sumsq_chunks(void *arg, size_t lo, size_t hi)
{
    const sumsq_args *a = arg;
    for (size_t c = lo; c < hi; c++) {
        size_t i0 = c * SUMSQ_CHUNK, i1 = i0 + SUMSQ_CHUNK < a->n ? i0 + SUMSQ_CHUNK : a->n;
        double acc[CPU_LANES] = {0};
        size_t i = i0;
        for (; i + CPU_LANES <= i1; i += CPU_LANES)
            for (int l = 0; l < CPU_LANES; l++) acc[l] += (double)a->x[i + l] * a->x[i + l];
        for (int l = 0; i < i1; i++, l++) acc[l] += (double)a->x[i] * a->x[i];
        a->part[c] = cpu_lanes_sum_f64(acc);
    }
}

/* sum of squares: partials over fixed chunks, added in chunk order */
static void cpu_sumsq(ppdl_backend *be, size_t n, const float *x, double *out)
{
    size_t chunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    sumsq_args a = {x, n, cpu_scratch(be, chunks ? chunks : 1)};
    cpu_pool_for(cpu_pool_of(be), chunks, 1, sumsq_chunks, &a);
    double s = 0;
    for (size_t c = 0; c < chunks; c++) s += a.part[c];
    *out = s;
}

/* ------------------------------------------------------------------- loss */

typedef struct {
    const float *logits;
    const int32_t *targets;
    float *dlogits;
    double *row_loss;
    int V;
    float scale;
} xent_args;

/* rows [lo,hi): row_loss[r] = -log softmax(z_r)[t_r], dlogits = scale*(softmax - onehot).
 * The exponentials are computed once, in float (cpu_expf), and summed in double. */
CPU_SIMD static void xent_rows(void *arg, size_t lo, size_t hi)
{
    const xent_args *a = arg;
    size_t V = (size_t)a->V;
    for (size_t r = lo; r < hi; r++) {
        const float *z = a->logits + r * V;
        float *d = a->dlogits + r * V; /* may be z itself: element j is read before written */
        int t = a->targets[r];
        float mx = cpu_max_f32(z, V);
        float zt = z[t] - mx;
        double acc[CPU_LANES] = {0};
        size_t j = 0;
        for (; j + CPU_LANES <= V; j += CPU_LANES)
            for (int l = 0; l < CPU_LANES; l++) {
                float e = cpu_expf(z[j + l] - mx);
                d[j + l] = e;
                acc[l] += e;
            }
        for (int l = 0; j < V; j++, l++) {
            float e = cpu_expf(z[j] - mx);
            d[j] = e;
            acc[l] += e;
        }
        double sum = cpu_lanes_sum_f64(acc);
        a->row_loss[r] = log(sum) - (double)zt;
        float f = a->scale * (float)(1.0 / sum);
        for (size_t i = 0; i < V; i++) d[i] *= f;
        d[t] -= a->scale;
    }
}

static void cpu_softmax_xent(ppdl_backend *be, int rows, int V, const float *logits,
                             const int32_t *targets, float scale, float *loss_sum, float *dlogits)
{
    if (rows <= 0) return;
    xent_args a = {logits, targets, dlogits, cpu_scratch(be, (size_t)rows), V, scale};
    cpu_pool_for(cpu_pool_of(be), (size_t)rows, GRAIN_ELEMS / (size_t)V + 1, xent_rows, &a);
    double loss = 0; /* rows in order */
    for (int r = 0; r < rows; r++) loss += a.row_loss[r];
    *loss_sum += (float)loss;
}

/* -------------------------------------------------------------- optimizer */

typedef struct {
    float *p, *m, *v;
    const float *g;
    float decay, b1, b2, a1, a2, eps, step, c2s;
} adamw_args;

/* one weight's update; the vector path below does the same operations lane by lane */
static inline void adamw_one(const adamw_args *a, float *p, float *m, float *v, float g)
{
    float pi = *p * a->decay;
    float mi = a->b1 * *m + a->a1 * g;
    float vi = a->b2 * *v + a->a2 * g * g;
    *m = mi;
    *v = vi;
    *p = pi - a->step * mi / (sqrtf(vi) / a->c2s + a->eps);
}

/* C's sqrtf may set errno, a branch that keeps the compiler from vectorising the loop
 * (and the build has no -fno-math-errno), so on x86-64 the loop is written with SSE2,
 * whose sqrtps rounds exactly as sqrtf: the bits are those of adamw_one. */
static void adamw_range(void *arg, size_t lo, size_t hi)
{
    const adamw_args *a = arg;
    size_t i = lo;
#if defined(__SSE2__)
    const __m128 decay = _mm_set1_ps(a->decay), b1 = _mm_set1_ps(a->b1), b2 = _mm_set1_ps(a->b2);
    const __m128 a1 = _mm_set1_ps(a->a1), a2 = _mm_set1_ps(a->a2), step = _mm_set1_ps(a->step);
    const __m128 c2s = _mm_set1_ps(a->c2s), eps = _mm_set1_ps(a->eps);
    for (; i + 4 <= hi; i += 4) {
        __m128 g = _mm_loadu_ps(a->g + i);
        __m128 p = _mm_mul_ps(_mm_loadu_ps(a->p + i), decay);
        __m128 m = _mm_add_ps(_mm_mul_ps(b1, _mm_loadu_ps(a->m + i)), _mm_mul_ps(a1, g));
        __m128 v = _mm_add_ps(_mm_mul_ps(b2, _mm_loadu_ps(a->v + i)), _mm_mul_ps(_mm_mul_ps(a2, g), g));
        __m128 den = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(v), c2s), eps);
        p = _mm_sub_ps(p, _mm_div_ps(_mm_mul_ps(step, m), den));
        _mm_storeu_ps(a->m + i, m);
        _mm_storeu_ps(a->v + i, v);
        _mm_storeu_ps(a->p + i, p);
    }
#endif
    for (; i < hi; i++) adamw_one(a, a->p + i, a->m + i, a->v + i, a->g[i]);
}

static void cpu_adamw(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v,
                      double lr, double b1, double b2, double eps, double wd, int t)
{
    /* scalars formed in double and rounded once, as PyTorch does on the host */
    adamw_args a = {
        .p = p, .m = m, .v = v, .g = g,
        .decay = (float)(1.0 - lr * wd), .b1 = (float)b1, .b2 = (float)b2,
        .a1 = (float)(1.0 - b1), .a2 = (float)(1.0 - b2), .eps = (float)eps,
        .step = (float)(lr / (1.0 - pow(b1, t))), .c2s = (float)sqrt(1.0 - pow(b2, t)),
    };
    cpu_pool_for(cpu_pool_of(be), n, GRAIN_ELEMS, adamw_range, &a);
}

static void cpu_destroy(ppdl_backend *be)
{
    cpu_impl *im = be->impl;
    if (!im) return;
    cpu_pool_destroy(im->pool);
    free(im->scratch);
    free(im->bf16[0]);
    free(im->bf16[1]);
    free(im);
    be->impl = NULL;
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
    .causal_softmax_tail_fwd = cpu_causal_softmax_tail_fwd,
    .softmax_xent = cpu_softmax_xent,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .maxpool_fwd = cpu_maxpool_fwd,
    .maxpool_bwd = cpu_maxpool_bwd,
    .adamw = cpu_adamw,
    .round_bf16 = cpu_round_bf16,
    .pack_bf16 = cpu_pack_bf16,
    .unpack_bf16 = cpu_unpack_bf16,
    .bf16_gemm_name = cpu_bf16_gemm_name,
    .destroy = cpu_destroy,
};

ppdl_backend *ppdl_backend_cpu_create(int threads)
{
    ppdl_backend *be = ppdl_xcalloc(1, sizeof *be);
    be->ops = &cpu_ops;
    be->threads = threads > 0 ? threads : 1;
    /* OpenBLAS runs inside our threads, one core each (see the top of this file) */
    openblas_set_num_threads(1);
    cpu_impl *im = ppdl_xcalloc(1, sizeof *im);
    char err[256];
    im->pool = cpu_pool_create(be->threads, err, sizeof err);
    if (!im->pool) ppdl_fail(3, "cpu backend: %s", err);
    be->impl = im;
    return be;
}
