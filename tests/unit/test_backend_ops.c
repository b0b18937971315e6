/* test_backend_ops.c — every op of ppdl_backend_ops on a device backend against the CPU
 * backend (the oracle), on random inputs (ggml's test-backend-ops idea).
 *
 * One harness compares a "device under test" (dut) with the CPU reference (ref):
 *  - fresh random inputs for every case (the RNG runs on from case to case), the same
 *    bytes on both backends; several shapes per op, odd sizes, sizes past one block;
 *  - outputs the op overwrites are poisoned with NaN on both sides first, so an
 *    element the dut leaves unwritten fails; outputs the op adds into start from the
 *    same random values, and the error is measured on the increment;
 *  - error = max|dut - ref| / max|ref| (for accumulators: / max|ref - initial|), a NaN
 *    in one output and not the other fails;
 *  - tolerances, per op:
 *      0      copies, index maps, maxima, sums the dut adds in the CPU's order, and
 *             arithmetic the dut rounds operation by operation as the CPU does
 *             (reshapes, embedding, im2col/col2im, max-pool, add, bias_add, ReLU,
 *             axpy, AdamW): bitwise equal, or there is a bug;
 *      1e-5   fp32 arithmetic in another order, or with another exp/tanh (GEMM,
 *             layernorm, softmaxes, loss, GELU, bias_grad): the error of a
 *             float sum of n terms grows like sqrt(n) ulp, ~1e-6 for these sizes;
 *      1e-4   cuDNN convolution: its Winograd/FFT algorithms transform the operands,
 *             which costs about an order of magnitude of fp32 rounding;
 *      1e-12  sumsq (a double result);
 *      2e-3   GEMMs and convolutions with TF32 tensor cores (10-bit mantissas: each
 *             product is off by up to 2^-11 ~ 5e-4 relative);
 *      bits   the bf16 conversions (round, pack, unpack): every byte equal, NaN
 *             patterns included (backend/bf16.h's NaN is 0x7fc0, nothing else);
 *  - in bf16 mode (--precision bf16, both backends): GEMMs 1e-4 on a GPU (the products
 *    of bf16 operands are exact in fp32 on both sides, only the order of the fp32 sums
 *    differs, but how tensor cores round their fp32 accumulation is not documented:
 *    allow k*2^-23 ~ 4e-5 for k = 300 terms, rounded up), exact where the dut's GEMMs
 *    are the CPU's (the emulation); the layers 1e-2: a value within fp32 noise of the
 *    midpoint between two bf16 numbers rounds up on one side and down on the other, one
 *    bf16 ulp apart (<= 2^-7 of the value), and every layer rounds GEMM operands and
 *    its output;
 *  - every dut output of the fp32 pass is hashed, and a second pass on the same
 *    inputs must give the same hashes: the device ops are deterministic;
 *  - then every layer of gpt-tiny, mlp-tiny and cnn-tiny, forward and backward, from the
 *    same weights (1e-4: about twenty fp32 ops composed).
 *
 * Parts, each visible in the TAP output:
 *  1. CPU against CPU through the harness: proves the harness wires every op and
 *     every buffer (a poisoned output nobody wrote would fail here).
 *  2. a sabotaged CPU backend (an unwritten row, a GEMM off by 2e-5, an accumulator
 *     overwritten, a causal mask ignored, col2im overwriting): the harness must catch
 *     each and pass the other ops.
 *  2b. the kernels of kernels.cu run by a CPU emulation of CUDA (tests/cuda_emu.h)
 *     against the CPU (builds with nvcc only); and the host staging of backend/xfer.h.
 *     The emulated kernels run twice: fp32, then the whole suite in bf16 mode.
 *  3. CUDA against CPU, fp32, twice (determinism), then the GEMMs and convolutions in
 *     TF32, then the whole suite in bf16 mode (both backends --precision bf16). Without a usable device (or without CUDA in the build) part 3 is a SKIP
 *     line with the reason, e.g. "CUDA error 35: ...".
 * PPDL_OPS_REPORT=FILE writes the per-op table (op, cases, max error, tolerance).
 * `test_backend_ops.t --probe` prints whether CUDA is usable and exits 0, or 77 with the
 * reason (for the shell tests). */
#include "config.h"

#include "backend/backend.h"
/* the inside of a backend: this harness wraps a backend's table of operations to
 * inject faults and to run the CPU through the staged message paths */
#include "backend/backend_impl.h"
#include "backend/cpu.h"
#include "backend/xfer.h"
#include "core/error.h"
#include "core/util.h"
#include "nn/model.h"
#include "nn/stage.h"
#include "tap.h"
#if HAVE_CUDA
#include "backend/cuda/cuda_api.h"
#endif
/* the launchers of kernels.cu compiled for the CPU emulation (cuda_emu.h), renamed; in
 * the GPU double's build (tests/gpudouble) the kernels serve cuda.c under their names */
#if HAVE_CUDA && !defined(PPDL_GPU_DOUBLE)
#define EMULATED_KERNELS 1
#else
#define EMULATED_KERNELS 0
#endif
#if EMULATED_KERNELS
#include "cuda_emu_names.h"
#include "backend/cuda/cuda_backend.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum { IN, OUT, ACC };

typedef struct tb {            /* one buffer of a case, on both backends */
    size_t n;                  /* elements of 4 bytes (float or int32) */
    int kind;                  /* IN, OUT (poisoned), ACC (initial values kept) */
    float *init;               /* host copy of the initial content */
    void *r, *d;               /* on ref, on dut */
} tb;

#define MAX_OPS 64
#define MAX_BUFS 32
#define MAX_HASHES 4096

typedef struct op_stat { const char *op; int cases, fails; double max_err, tol; } op_stat;

typedef struct harness {
    ppdl_backend *ref, *dut;
    const char *label;
    ppdl_rng rng;
    int quiet;                 /* no TAP lines: failures are only counted */
    int tf32;                  /* dut GEMMs use TF32 */
    int bf16;                  /* both backends in bf16 mode (ppdl_be_set_precision) */
    int exact_gemm;            /* the dut's GEMMs are the CPU's (the emulation) */
    int gemm_only;             /* run only the GEMM and convolution cases */
    int no_layers;             /* skip the whole-layer cases */
    int hash_mode;             /* 0: off, 1: record dut hashes, 2: verify them */
    uint64_t hashes[MAX_HASHES];
    int n_hash, hash_mismatch;
    op_stat st[MAX_OPS];
    int n_st;
    tb bufs[MAX_BUFS];
    int nb;
    char shape[96];            /* the case's shape, for messages */
} harness;

/* ------------------------------------------------------------------ buffers */

static tb *mk_host(harness *H, size_t n, int kind, const float *init)
{
    PPDL_CHECK(H->nb < MAX_BUFS, "test case uses more than %d buffers", MAX_BUFS);
    tb *b = &H->bufs[H->nb++];
    b->n = n;
    b->kind = kind;
    b->init = ppdl_xmalloc((n ? n : 1) * sizeof(float));
    memcpy(b->init, init, n * sizeof(float));
    b->r = ppdl_be_alloc(H->ref, (n ? n : 1) * 4, "test ref");
    b->d = ppdl_be_alloc(H->dut, (n ? n : 1) * 4, "test dut");
    ppdl_be_copy_h2d(H->ref, b->r, init, n * 4);
    ppdl_be_copy_h2d(H->dut, b->d, init, n * 4);
    return b;
}

/* floats: N(0, scale^2) for IN/ACC, NaN for OUT */
static tb *mk(harness *H, size_t n, int kind, double scale)
{
    float *h = ppdl_xmalloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = kind == OUT ? NAN : (float)(scale * ppdl_rng_normal(&H->rng));
    tb *b = mk_host(H, n, kind, h);
    free(h);
    return b;
}

/* int32 inputs uniform in [lo, hi) */
static tb *mk_int(harness *H, size_t n, int lo, int hi)
{
    float *h = ppdl_xmalloc((n ? n : 1) * sizeof(float));
    int32_t *hi32 = (int32_t *)h;
    for (size_t i = 0; i < n; i++) hi32[i] = lo + (int32_t)(ppdl_rng_uniform(&H->rng) * (hi - lo));
    tb *b = mk_host(H, n, IN, h);
    free(h);
    return b;
}

static void case_end(harness *H)
{
    for (int i = 0; i < H->nb; i++) {
        ppdl_be_free(H->ref, H->bufs[i].r);
        ppdl_be_free(H->dut, H->bufs[i].d);
        free(H->bufs[i].init);
    }
    H->nb = 0;
}

/* pointers on side k (0 ref, 1 dut) */
#define F(b) ((float *)(k ? (b)->d : (b)->r))
#define I(b) ((int32_t *)(k ? (b)->d : (b)->r))
/* run a statement on both backends; `be` is the backend of the side */
#define BOTH(...)                                                                        \
    for (int k = 0; k < 2; k++) {                                                        \
        ppdl_backend *be = k ? H->dut : H->ref;                                          \
        __VA_ARGS__;                                                                     \
    }

/* ------------------------------------------------------------------ comparison */

static op_stat *stat_of(harness *H, const char *op, double tol)
{
    for (int i = 0; i < H->n_st; i++)
        if (!strcmp(H->st[i].op, op)) return &H->st[i];
    PPDL_CHECK(H->n_st < MAX_OPS, "more than %d ops", MAX_OPS);
    op_stat *s = &H->st[H->n_st++];
    memset(s, 0, sizeof *s);
    s->op = op;
    s->tol = tol;
    return s;
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *c = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

static void note_hash(harness *H, const void *dut_host, size_t bytes)
{
    if (H->hash_mode == 0) return;
    uint64_t h = fnv(dut_host, bytes);
    if (H->hash_mode == 1) {
        if (H->n_hash < MAX_HASHES) H->hashes[H->n_hash] = h;
    } else if (H->n_hash < MAX_HASHES && H->hashes[H->n_hash] != h) {
        H->hash_mismatch++;
    }
    H->n_hash++;
}

/* compare output b of op `op` (its part `what`); tol 0 demands bitwise equality */
static void check(harness *H, const char *op, const char *what, tb *b, double tol)
{
    ppdl_be_sync(H->ref);
    ppdl_be_sync(H->dut);
    float *r = ppdl_xmalloc((b->n ? b->n : 1) * 4), *d = ppdl_xmalloc((b->n ? b->n : 1) * 4);
    ppdl_be_copy_d2h(H->ref, r, b->r, b->n * 4);
    ppdl_be_copy_d2h(H->dut, d, b->d, b->n * 4);
    note_hash(H, d, b->n * 4);
    double num = 0, den = 0;
    size_t nan_mismatch = 0, first_bad = (size_t)-1;
    int bitwise = memcmp(r, d, b->n * 4) == 0;
    for (size_t i = 0; i < b->n; i++) {
        if (isnan(r[i]) || isnan(d[i])) {
            if (isnan(r[i]) != isnan(d[i])) {
                nan_mismatch++;
                if (first_bad == (size_t)-1) first_bad = i;
            }
            continue;
        }
        double e = fabs((double)d[i] - r[i]);
        if (e > num) {
            num = e;
            if (tol == 0 && first_bad == (size_t)-1) first_bad = i;
        }
        double m = b->kind == ACC ? fabs((double)r[i] - b->init[i]) : fabs((double)r[i]);
        if (m > den) den = m;
    }
    if (den == 0) den = 1e-30;
    double err = nan_mismatch ? INFINITY : num / den;
    int pass = tol == 0 ? (bitwise || (nan_mismatch == 0 && num == 0)) : err <= tol;
    op_stat *s = stat_of(H, op, tol);
    s->cases++;
    if (!pass) s->fails++;
    if (err > s->max_err) s->max_err = err;
    if (!H->quiet) {
        if (!ok(pass, "%s: %s %s %s [%s]: max rel error %.2g (tolerance %s%.0e)", H->label, op, what,
                tol == 0 ? "bitwise" : "close", H->shape, err, tol == 0 ? "exact, " : "", tol)) {
            if (nan_mismatch)
                diag("  %zu elements NaN on one side only (unwritten?), first at %zu", nan_mismatch, first_bad);
            else if (first_bad != (size_t)-1)
                diag("  first difference at %zu: dut %.9g, ref %.9g", first_bad, d[first_bad], r[first_bad]);
        }
    }
    free(r);
    free(d);
}

/* Buffers a and b hold the same bits on each side (ref and dut alike): a result each
 * backend computes twice in two ways, e.g. a backward pass fused and split in two */
static void check_same(harness *H, const char *op, const char *what, tb *a, tb *b)
{
    ppdl_be_sync(H->ref);
    ppdl_be_sync(H->dut);
    size_t n = (a->n ? a->n : 1) * 4;
    float *x = ppdl_xmalloc(n), *y = ppdl_xmalloc(n);
    int same = a->n == b->n;
    for (int k = 0; k < 2 && same; k++) {
        ppdl_backend *be = k ? H->dut : H->ref;
        ppdl_be_copy_d2h(be, x, k ? a->d : a->r, a->n * 4);
        ppdl_be_copy_d2h(be, y, k ? b->d : b->r, a->n * 4);
        same = memcmp(x, y, a->n * 4) == 0;
    }
    op_stat *s = stat_of(H, op, 0);
    s->cases++;
    if (!same) s->fails++;
    if (!H->quiet) ok(same, "%s: %s %s, the same bits both ways on each backend [%s]", H->label, op, what, H->shape);
    free(x);
    free(y);
}

/* Output b holds the same bytes on both backends in its first `bytes` (tolerance
 * "bits": NaN payloads too) */
static void check_bits(harness *H, const char *op, const char *what, tb *b, size_t bytes)
{
    ppdl_be_sync(H->ref);
    ppdl_be_sync(H->dut);
    unsigned char *r = ppdl_xmalloc(b->n * 4 + 1), *d = ppdl_xmalloc(b->n * 4 + 1);
    ppdl_be_copy_d2h(H->ref, r, b->r, b->n * 4);
    ppdl_be_copy_d2h(H->dut, d, b->d, b->n * 4);
    note_hash(H, d, bytes);
    size_t first = bytes, differ = 0;
    for (size_t i = 0; i < bytes; i++)
        if (r[i] != d[i]) {
            if (first == bytes) first = i;
            differ++;
        }
    op_stat *s = stat_of(H, op, 0);
    s->cases++;
    if (differ) {
        s->fails++;
        s->max_err = INFINITY;
    }
    if (!H->quiet && !ok(!differ, "%s: %s %s bitwise [%s]", H->label, op, what, H->shape)) {
        size_t w = first & ~(size_t)1; /* the 16-bit word of the first difference */
        diag("  %zu of %zu bytes differ, first at byte %zu: dut 0x%02x%02x, ref 0x%02x%02x (16-bit word, little "
             "endian)", differ, bytes, first, d[w + 1], d[w], r[w + 1], r[w]);
    }
    free(r);
    free(d);
}

#define SHAPE(...) snprintf(H->shape, sizeof H->shape, __VA_ARGS__)

static double gemm_tol(const harness *H)
{
    if (H->tf32) return 2e-3;
    if (H->bf16) return H->exact_gemm ? 0 : 1e-4;
    return 1e-5;
}
static double layer_tol(const harness *H) { return H->bf16 ? 1e-2 : 1e-4; }

/* ------------------------------------------------------------------ the cases */

static void case_gemm(harness *H, int ta, int tb_, int m, int n, int kk, float alpha, float beta, int pad)
{
    int lda = (ta ? m : kk) + pad, ldb = (tb_ ? kk : n) + pad, ldc = n + pad;
    SHAPE("%c%c m=%d n=%d k=%d ld+%d alpha=%.2g beta=%.2g", ta ? 'T' : 'N', tb_ ? 'T' : 'N', m, n, kk, pad,
          (double)alpha, (double)beta);
    tb *a = mk(H, (size_t)(ta ? kk : m) * lda, IN, 1), *b = mk(H, (size_t)(tb_ ? n : kk) * ldb, IN, 1);
    /* beta = 0 must not read C: poison it */
    tb *c = mk(H, (size_t)m * ldc, beta == 0 ? OUT : ACC, 1);
    BOTH(ppdl_be_gemm(be, ta, tb_, m, n, kk, alpha, F(a), lda, F(b), ldb, beta, F(c), ldc));
    check(H, "gemm", "C", c, gemm_tol(H));
    case_end(H);
}

static void case_gemm_batched(harness *H, int ta, int tb_, int m, int n, int kk, int batch, int share_a, float beta)
{
    int lda = ta ? m : kk, ldb = tb_ ? kk : n, ldc = n;
    long sa = share_a ? 0 : (long)(ta ? kk : m) * lda + 5, sb = (long)(tb_ ? n : kk) * ldb + 3,
         sc = (long)m * ldc + 7;
    SHAPE("%c%c m=%d n=%d k=%d batch=%d%s beta=%.2g", ta ? 'T' : 'N', tb_ ? 'T' : 'N', m, n, kk, batch,
          share_a ? " A shared" : "", (double)beta);
    tb *a = mk(H, (size_t)(share_a ? 1 : batch) * (size_t)((ta ? kk : m) * lda + 5), IN, 1);
    tb *b = mk(H, (size_t)batch * sb, IN, 1);
    tb *c = mk(H, (size_t)batch * sc, beta == 0 ? OUT : ACC, 1);
    BOTH(ppdl_be_gemm_batched(be, ta, tb_, m, n, kk, 0.9f, F(a), lda, sa, F(b), ldb, sb, beta, F(c), ldc, sc, batch));
    check(H, "gemm_batched", "C", c, gemm_tol(H));
    case_end(H);
}

static void case_elementwise(harness *H, size_t n)
{
    SHAPE("n=%zu", n);
    tb *x = mk(H, n, IN, 1), *y = mk(H, n, IN, 1), *o = mk(H, n, OUT, 1);
    BOTH(ppdl_be_add(be, n, F(x), F(y), F(o)));
    check(H, "add", "out", o, 0);
    tb *acc = mk(H, n, ACC, 1);
    BOTH(ppdl_be_axpy(be, n, -0.37f, F(x), F(acc)));
    check(H, "axpy", "y", acc, 0);
    for (int act = PPDL_ACT_NONE; act <= PPDL_ACT_GELU; act++) {
        static const char *fwd[] = {"act_fwd none", "act_fwd relu", "act_fwd gelu"};
        static const char *bwd[] = {"act_bwd none", "act_bwd relu", "act_bwd gelu"};
        double tol = act == PPDL_ACT_GELU ? 1e-5 : 0;
        tb *a = mk(H, n, IN, 2), *ya = mk(H, n, OUT, 1), *dy = mk(H, n, IN, 1), *dx = mk(H, n, OUT, 1);
        BOTH(ppdl_be_act_fwd(be, act, n, F(a), F(ya)));
        check(H, fwd[act], "y", ya, tol);
        BOTH(ppdl_be_act_bwd(be, act, n, F(a), F(dy), F(dx)));
        check(H, bwd[act], "dx", dx, tol);
        /* in place: dx aliases dy (the block's GELU backward does this), or x (the
         * backward split writes a pre-activation's gradient over it) */
        tb *a2 = mk_host(H, n, ACC, a->init);
        BOTH(ppdl_be_act_bwd(be, act, n, F(a2), F(dy), F(a2)));
        check(H, bwd[act], "dx (over x)", a2, tol);
        check_same(H, bwd[act], "dx over x and elsewhere", a2, dx);
        BOTH(ppdl_be_act_bwd(be, act, n, F(a), F(dy), F(dy)));
        check(H, bwd[act], "dx (in place)", dy, tol);
    }
    /* sumsq: a host double */
    double sr = 0, sd = 0;
    ppdl_be_sumsq(H->ref, n, x->r, &sr);
    ppdl_be_sumsq(H->dut, n, x->d, &sd);
    note_hash(H, &sd, sizeof sd);
    double err = fabs(sd - sr) / (sr > 0 ? sr : 1e-300);
    op_stat *s = stat_of(H, "sumsq", 1e-12);
    s->cases++;
    if (err > s->max_err) s->max_err = err;
    if (!(err <= 1e-12)) s->fails++;
    if (!H->quiet) ok(err <= 1e-12, "%s: sumsq close [n=%zu]: rel error %.2g (tolerance 1e-12)", H->label, n, err);
    case_end(H);
}

static void case_bias(harness *H, int rows, int cols)
{
    SHAPE("rows=%d cols=%d", rows, cols);
    tb *x = mk(H, (size_t)rows * cols, ACC, 1), *bias = mk(H, (size_t)cols, IN, 1);
    BOTH(ppdl_be_bias_add(be, rows, cols, F(x), F(bias)));
    check(H, "bias_add", "x", x, 0);
    tb *dy = mk(H, (size_t)rows * cols, IN, 1), *db = mk(H, (size_t)cols, ACC, 1);
    BOTH(ppdl_be_bias_grad(be, rows, cols, F(dy), F(db)));
    check(H, "bias_grad", "dbias", db, 1e-5);
    case_end(H);
}

static void case_layernorm(harness *H, int rows, int C)
{
    SHAPE("rows=%d C=%d", rows, C);
    /* an offset mean: a variance computed as E[x^2] - E[x]^2 would fail */
    tb *x = mk(H, (size_t)rows * C, IN, 1);
    for (size_t i = 0; i < x->n; i++) x->init[i] += 3.0f;
    BOTH(ppdl_be_copy_h2d(be, F(x), x->init, x->n * 4));
    tb *w = mk(H, C, IN, 0.5), *b = mk(H, C, IN, 0.5);
    tb *y = mk(H, (size_t)rows * C, OUT, 1), *mean = mk(H, rows, OUT, 1), *rstd = mk(H, rows, OUT, 1);
    BOTH(ppdl_be_layernorm_fwd(be, rows, C, 1e-5f, F(x), F(w), F(b), F(y), F(mean), F(rstd)));
    check(H, "layernorm_fwd", "y", y, 1e-5);
    check(H, "layernorm_fwd", "mean", mean, 1e-5);
    check(H, "layernorm_fwd", "rstd", rstd, 1e-5);
    tb *dy = mk(H, (size_t)rows * C, IN, 1), *dx = mk(H, (size_t)rows * C, ACC, 1);
    tb *dw = mk(H, C, ACC, 1), *db = mk(H, C, ACC, 1);
    /* backward from the reference's statistics on both sides: it tests backward alone */
    tb *m2 = mk(H, rows, IN, 1), *r2 = mk(H, rows, IN, 1);
    ppdl_be_copy_d2h(H->ref, m2->init, mean->r, (size_t)rows * 4);
    ppdl_be_copy_d2h(H->ref, r2->init, rstd->r, (size_t)rows * 4);
    BOTH(ppdl_be_copy_h2d(be, F(m2), m2->init, (size_t)rows * 4);
         ppdl_be_copy_h2d(be, F(r2), r2->init, (size_t)rows * 4));
    BOTH(ppdl_be_layernorm_bwd(be, rows, C, F(x), F(w), F(m2), F(r2), F(dy), F(dx), F(dw), F(db)));
    check(H, "layernorm_bwd", "dx", dx, 1e-5);
    check(H, "layernorm_bwd", "dw", dw, 1e-5);
    check(H, "layernorm_bwd", "db", db, 1e-5);
    /* the two halves alone (the backward split), from the same starting values: each
     * close to the CPU's, and on every backend bitwise the whole call's */
    tb *dx_b = mk_host(H, dx->n, ACC, dx->init), *dw_w = mk_host(H, C, ACC, dw->init);
    tb *db_w = mk_host(H, C, ACC, db->init);
    BOTH(ppdl_be_layernorm_bwd(be, rows, C, F(x), F(w), F(m2), F(r2), F(dy), F(dx_b), NULL, NULL));
    BOTH(ppdl_be_layernorm_bwd(be, rows, C, F(x), F(w), F(m2), F(r2), F(dy), NULL, F(dw_w), F(db_w)));
    check(H, "layernorm_bwd input half", "dx", dx_b, 1e-5);
    check(H, "layernorm_bwd params half", "dw", dw_w, 1e-5);
    check(H, "layernorm_bwd params half", "db", db_w, 1e-5);
    check_same(H, "layernorm_bwd halves", "dx", dx_b, dx);
    check_same(H, "layernorm_bwd halves", "dw", dw_w, dw);
    check_same(H, "layernorm_bwd halves", "db", db_w, db);
    case_end(H);
}

static void case_embedding(harness *H, int B, int T, int C, int V)
{
    SHAPE("B=%d T=%d C=%d V=%d", B, T, C, V);
    /* V small against B*T: tokens repeat, so accumulation order matters */
    tb *tok = mk_int(H, (size_t)B * T, 0, V), *wte = mk(H, (size_t)V * C, IN, 1), *wpe = mk(H, (size_t)T * C, IN, 1);
    tb *y = mk(H, (size_t)B * T * C, OUT, 1);
    BOTH(ppdl_be_embedding_fwd(be, B, T, C, I(tok), F(wte), F(wpe), F(y)));
    check(H, "embedding_fwd", "y", y, 0);
    tb *dy = mk(H, (size_t)B * T * C, IN, 1);
    tb *dwte = mk(H, (size_t)V * C, ACC, 1), *dwpe = mk(H, (size_t)T * C, ACC, 1);
    BOTH(ppdl_be_embedding_bwd(be, B, T, C, I(tok), F(dy), F(dwte), F(dwpe)));
    check(H, "embedding_bwd", "dwte", dwte, 0);
    check(H, "embedding_bwd", "dwpe", dwpe, 0);
    case_end(H);
}

static void case_reshapes(harness *H, int B, int T, int C, int Hh)
{
    SHAPE("B=%d T=%d C=%d H=%d", B, T, C, Hh);
    size_t n = (size_t)B * T * C;
    tb *qkv = mk(H, 3 * n, IN, 1), *q = mk(H, n, OUT, 1), *kq = mk(H, n, OUT, 1), *v = mk(H, n, OUT, 1);
    BOTH(ppdl_be_qkv_split(be, B, T, C, Hh, F(qkv), F(q), F(kq), F(v)));
    check(H, "qkv_split", "q", q, 0);
    check(H, "qkv_split", "k", kq, 0);
    check(H, "qkv_split", "v", v, 0);
    tb *dq = mk(H, n, IN, 1), *dk = mk(H, n, IN, 1), *dv = mk(H, n, IN, 1), *dqkv = mk(H, 3 * n, OUT, 1);
    BOTH(ppdl_be_qkv_merge(be, B, T, C, Hh, F(dq), F(dk), F(dv), F(dqkv)));
    check(H, "qkv_merge", "dqkv", dqkv, 0);
    tb *x = mk(H, n, IN, 1), *ys = mk(H, n, OUT, 1), *yh = mk(H, n, OUT, 1);
    BOTH(ppdl_be_heads_to_seq(be, B, T, C, Hh, F(x), F(ys)));
    check(H, "heads_to_seq", "y", ys, 0);
    BOTH(ppdl_be_seq_to_heads(be, B, T, C, Hh, F(x), F(yh)));
    check(H, "seq_to_heads", "y", yh, 0);
    case_end(H);
}

static void case_causal_softmax(harness *H, int BH, int T)
{
    SHAPE("BH=%d T=%d", BH, T);
    size_t n = (size_t)BH * T * T;
    float scale = 0.35f;
    tb *s = mk(H, n, IN, 3), *p = mk(H, n, OUT, 1);
    BOTH(ppdl_be_causal_softmax_fwd(be, BH, T, scale, F(s), F(p)));
    check(H, "causal_softmax_fwd", "p", p, 1e-5);
    /* in place, as attention_probs does not but may */
    BOTH(ppdl_be_causal_softmax_fwd(be, BH, T, scale, F(s), F(s)));
    check(H, "causal_softmax_fwd", "p (in place)", s, 1e-5);
    /* backward from the reference's probabilities on both sides */
    tb *pr = mk(H, n, IN, 1);
    ppdl_be_copy_d2h(H->ref, pr->init, p->r, n * 4);
    BOTH(ppdl_be_copy_h2d(be, F(pr), pr->init, n * 4));
    tb *dp = mk(H, n, IN, 1), *ds = mk(H, n, OUT, 1);
    BOTH(ppdl_be_causal_softmax_bwd(be, BH, T, scale, F(pr), F(dp), F(ds)));
    check(H, "causal_softmax_bwd", "ds", ds, 1e-5);
    BOTH(ppdl_be_causal_softmax_bwd(be, BH, T, scale, F(pr), F(dp), F(dp)));
    check(H, "causal_softmax_bwd", "ds (in place)", dp, 1e-5);
    case_end(H);
}

/* the last n rows of an L-position causal softmax (decoding with a key/value cache) */
static void case_causal_softmax_tail(harness *H, int BH, int n, int L)
{
    SHAPE("BH=%d n=%d L=%d", BH, n, L);
    size_t sz = (size_t)BH * n * L;
    float scale = 0.35f;
    tb *s = mk(H, sz, IN, 3), *p = mk(H, sz, OUT, 1);
    BOTH(ppdl_be_causal_softmax_tail_fwd(be, BH, n, L, scale, F(s), F(p)));
    check(H, "causal_softmax_tail_fwd", "p", p, 1e-5);
    BOTH(ppdl_be_causal_softmax_tail_fwd(be, BH, n, L, scale, F(s), F(s)));
    check(H, "causal_softmax_tail_fwd", "p (in place)", s, 1e-5);
    case_end(H);
}

static void case_xent(harness *H, int rows, int V, int in_place)
{
    SHAPE("rows=%d V=%d%s", rows, V, in_place ? " in place" : "");
    tb *z = mk(H, (size_t)rows * V, IN, 3), *t = mk_int(H, rows, 0, V), *loss = mk(H, 1, ACC, 10);
    tb *d = in_place ? z : mk(H, (size_t)rows * V, OUT, 1);
    float scale = 1.0f / (float)rows;
    BOTH(ppdl_be_softmax_xent(be, rows, V, F(z), I(t), scale, F(loss), F(d)));
    check(H, "softmax_xent", "loss_sum", loss, 1e-5);
    check(H, "softmax_xent", in_place ? "dlogits (in place)" : "dlogits", d, 1e-5);
    case_end(H);
}

/* fp32 patterns for the bf16 conversions (backend/bf16.h): NaNs of both signs and
 * several payloads, infinities, zeros, exact ties with an even and with an odd kept
 * part, one below and one above a tie, the largest floats (0x7f7f8000 is a tie that
 * rounds to infinity), subnormals and subnormal ties (0x007f8000 rounds up to the
 * smallest normal) */
static const uint32_t bf16_specials[] = {
    0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345, 0x7fffffff, 0x7f800000, 0xff800000, 0x00000000,
    0x80000000, 0x3f808000, 0x3f818000, 0xbf808000, 0xbf818000, 0x3f807fff, 0x3f808001, 0x7f7fffff,
    0x7f7f8000, 0x7f7f7fff, 0xff7fffff, 0x00000001, 0x00008000, 0x00018000, 0x807fffff, 0x007f8000,
};

static uint32_t rng_bits(ppdl_rng *r) { return (uint32_t)(ppdl_rng_uniform(r) * 4294967296.0); }

/* round, pack and unpack against the CPU backend, every byte: n fp32 values, one in
 * four a special pattern, one in four uniformly random bits (every exponent), the rest
 * N(0,1); unpack on random 16-bit patterns (NaNs widen as they are: a shift) */
static void case_bf16(harness *H, size_t n)
{
    if (!H->dut->ops->round_bf16) return;
    SHAPE("n=%zu", n);
    const size_t ns = sizeof bf16_specials / sizeof bf16_specials[0];
    uint32_t *h = ppdl_xmalloc((n ? n : 1) * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        float f = (float)ppdl_rng_normal(&H->rng);
        memcpy(&h[i], &f, sizeof f);
        if (i % 4 == 1) h[i] = bf16_specials[(i / 4) % ns];
        if (i % 4 == 3) h[i] = rng_bits(&H->rng);
    }
    tb *x = mk_host(H, n, ACC, (const float *)h), *p = mk_host(H, n, ACC, (const float *)h);
    BOTH(ppdl_be_round_bf16(be, n, F(x)); ppdl_be_pack_bf16(be, n, F(p)));
    check_bits(H, "round_bf16", "x", x, n * 4);
    check_bits(H, "pack_bf16", "the first 2n bytes", p, n * 2);
    uint16_t *h16 = (uint16_t *)h;
    for (size_t i = 0; i < n; i++) h16[i] = (uint16_t)(rng_bits(&H->rng) >> 16);
    tb *u = mk_host(H, n, ACC, (const float *)h);
    BOTH(ppdl_be_unpack_bf16(be, n, F(u)));
    check_bits(H, "unpack_bf16", "x", u, n * 4);
    free(h);
    case_end(H);
}

static int conv_out(int n, int k, int s, int p) { return (n + 2 * p - k) / s + 1; }

static void case_im2col(harness *H, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad)
{
    SHAPE("Ci=%d %dx%d k=%dx%d stride=%d pad=%d", Ci, Hh, Ww, kh, kw, stride, pad);
    size_t P = (size_t)conv_out(Hh, kh, stride, pad) * conv_out(Ww, kw, stride, pad), K = (size_t)Ci * kh * kw;
    tb *x = mk(H, (size_t)Ci * Hh * Ww, IN, 1), *col = mk(H, K * P, OUT, 1);
    BOTH(ppdl_be_im2col(be, Ci, Hh, Ww, kh, kw, stride, pad, F(x), F(col)));
    check(H, "im2col", "col", col, 0);
    tb *c2 = mk(H, K * P, IN, 1), *dx = mk(H, (size_t)Ci * Hh * Ww, ACC, 1);
    BOTH(ppdl_be_col2im(be, Ci, Hh, Ww, kh, kw, stride, pad, F(c2), F(dx)));
    check(H, "col2im", "dx", dx, 0);
    case_end(H);
}

static void case_maxpool(harness *H, int N, int C, int Hh, int Ww, int kk, int stride, int with_nan)
{
    SHAPE("N=%d C=%d %dx%d k=%d stride=%d%s", N, C, Hh, Ww, kk, stride, with_nan ? " NaN inputs" : "");
    size_t on = (size_t)N * C * ((Hh - kk) / stride + 1) * ((Ww - kk) / stride + 1), in = (size_t)N * C * Hh * Ww;
    tb *x = mk(H, in, IN, 1);
    /* ties: quantised values make equal maxima common (the first one must win) */
    for (size_t i = 0; i < in; i++) x->init[i] = roundf(x->init[i] * 2.0f);
    if (with_nan)
        for (size_t i = 0; i < in; i += 7) x->init[i] = NAN;
    BOTH(ppdl_be_copy_h2d(be, F(x), x->init, in * 4));
    tb *y = mk(H, on, OUT, 1), *arg = mk(H, on, OUT, 1);
    BOTH(ppdl_be_maxpool_fwd(be, N, C, Hh, Ww, kk, stride, F(x), F(y), I(arg)));
    check(H, "maxpool_fwd", "y", y, 0);
    check(H, "maxpool_fwd", "argmax", arg, 0);
    /* backward from the reference's argmax on both sides */
    tb *a2 = mk(H, on, IN, 1);
    ppdl_be_copy_d2h(H->ref, a2->init, arg->r, on * 4);
    BOTH(ppdl_be_copy_h2d(be, F(a2), a2->init, on * 4));
    tb *dy = mk(H, on, IN, 1), *dx = mk(H, in, OUT, 1);
    BOTH(ppdl_be_maxpool_bwd(be, N, C, Hh, Ww, kk, stride, I(a2), F(dy), F(dx)));
    check(H, "maxpool_bwd", "dx", dx, 0);
    case_end(H);
}

static void case_adamw(harness *H, size_t n, int t)
{
    SHAPE("n=%zu t=%d", n, t);
    tb *p = mk(H, n, ACC, 1), *g = mk(H, n, IN, 0.1), *m = mk(H, n, ACC, 0.01), *v = mk(H, n, IN, 0.01);
    for (size_t i = 0; i < n; i++) v->init[i] = v->init[i] * v->init[i]; /* a second moment is >= 0 */
    v->kind = ACC;
    BOTH(ppdl_be_copy_h2d(be, F(v), v->init, n * 4));
    BOTH(ppdl_be_adamw(be, n, F(p), F(g), F(m), F(v), 1e-3, 0.9, 0.95, 1e-8, 0.1, t));
    check(H, "adamw", "p", p, 0);
    check(H, "adamw", "m", m, 0);
    check(H, "adamw", "v", v, 0);
    case_end(H);
}

/* the reference of conv2d on `be` (the CPU): im2col + gemm per image, as layer_basic.c */
static void ref_conv2d_fwd(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw, int st, int pad,
                           const float *x, const float *w, float *y, float *col)
{
    int P = conv_out(Hh, kh, st, pad) * conv_out(Ww, kw, st, pad), K = Ci * kh * kw;
    for (int n = 0; n < N; n++) {
        ppdl_be_im2col(be, Ci, Hh, Ww, kh, kw, st, pad, x + (size_t)n * Ci * Hh * Ww, col);
        ppdl_be_gemm(be, 0, 0, Co, P, K, 1.0f, w, K, col, P, 0.0f, y + (size_t)n * Co * P, P);
    }
}

static void ref_conv2d_bwd(ppdl_backend *be, int N, int Ci, int Hh, int Ww, int Co, int kh, int kw, int st, int pad,
                           const float *x, const float *w, const float *dy, float *dx, float *dw, float *col)
{
    int P = conv_out(Hh, kh, st, pad) * conv_out(Ww, kw, st, pad), K = Ci * kh * kw;
    size_t xi = (size_t)Ci * Hh * Ww;
    ppdl_be_zero(be, dx, (size_t)N * xi * 4);
    for (int n = 0; n < N; n++) {
        const float *dyn = dy + (size_t)n * Co * P;
        ppdl_be_im2col(be, Ci, Hh, Ww, kh, kw, st, pad, x + n * xi, col);
        ppdl_be_gemm(be, 0, 1, Co, K, P, 1.0f, dyn, P, col, P, 1.0f, dw, K);
        ppdl_be_gemm(be, 1, 0, K, P, Co, 1.0f, w, K, dyn, P, 0.0f, col, P);
        ppdl_be_col2im(be, Ci, Hh, Ww, kh, kw, st, pad, col, dx + n * xi);
    }
}

static void case_conv2d(harness *H, int N, int Ci, int Hh, int Ww, int Co, int kk, int st, int pad)
{
    if (!ppdl_be_has_conv2d(H->dut)) return;
    SHAPE("N=%d Ci=%d %dx%d Co=%d k=%d stride=%d pad=%d", N, Ci, Hh, Ww, Co, kk, st, pad);
    int P = conv_out(Hh, kk, st, pad) * conv_out(Ww, kk, st, pad), K = Ci * kk * kk;
    tb *x = mk(H, (size_t)N * Ci * Hh * Ww, IN, 1), *w = mk(H, (size_t)Co * K, IN, 0.3);
    tb *y = mk(H, (size_t)N * Co * P, OUT, 1), *col = mk(H, (size_t)K * P, OUT, 1);
    double tol = H->tf32 ? 2e-3 : 1e-4;
    ref_conv2d_fwd(H->ref, N, Ci, Hh, Ww, Co, kk, kk, st, pad, x->r, w->r, y->r, col->r);
    ppdl_be_conv2d_fwd(H->dut, N, Ci, Hh, Ww, Co, kk, kk, st, pad, x->d, w->d, y->d);
    check(H, "conv2d_fwd", "y", y, tol);
    tb *dy = mk(H, (size_t)N * Co * P, IN, 1), *dx = mk(H, (size_t)N * Ci * Hh * Ww, OUT, 1);
    tb *dw = mk(H, (size_t)Co * K, ACC, 1);
    ref_conv2d_bwd(H->ref, N, Ci, Hh, Ww, Co, kk, kk, st, pad, x->r, w->r, dy->r, dx->r, dw->r, col->r);
    ppdl_be_conv2d_bwd(H->dut, N, Ci, Hh, Ww, Co, kk, kk, st, pad, x->d, w->d, dy->d, dx->d, dw->d);
    check(H, "conv2d_bwd", "dx", dx, tol);
    check(H, "conv2d_bwd", "dw", dw, tol);
    case_end(H);
}

/* Every layer of a preset's model, forward then backward, on both backends from the
 * same weights and inputs: the ops as the layers compose them (in-place uses, adds
 * into gradients, the selective recompute option of the block). Tolerance 1e-4: about
 * twenty fp32 ops in a row, each within 1e-5 (bf16 mode: 1e-2, top of file). */
static void case_layers(harness *H, const char *preset, int b)
{
    char err[PPDL_ERR_LEN];
    ppdl_model mr, md;
    PPDL_CHECK(!ppdl_model_preset(&mr, preset, err, sizeof err) && !ppdl_model_build(&mr, err, sizeof err) &&
                   !ppdl_model_preset(&md, preset, err, sizeof err) && !ppdl_model_build(&md, err, sizeof err),
               "model %s: %s", preset, err);
    /* bf16 mode: blocks keep their saved tensors packed, through the dut's pack/unpack */
    ppdl_model_set_precision(&mr, H->bf16);
    ppdl_model_set_precision(&md, H->bf16);
    for (int li = 0; li < mr.L; li++)
        for (int opt = 0; opt < mr.layers[li].kind->n_options; opt += 2) { /* 1 (full) is the runtime's */
            ppdl_layer *lr = &mr.layers[li], *ld = &md.layers[li];
            SHAPE("%s layer %d %s, b=%d, option %d", preset, li, lr->kind->name, b, opt);
            ppdl_stage sr, sd;
            ppdl_stage_alloc_params(&sr, &mr, H->ref, li, li);
            ppdl_stage_alloc_params(&sd, &md, H->dut, li, li);
            float *w = ppdl_xmalloc((sr.n_params ? sr.n_params : 1) * sizeof(float));
            for (size_t i = 0; i < sr.n_params; i++) w[i] = (float)(0.2 * ppdl_rng_normal(&H->rng));
            ppdl_be_copy_h2d(H->ref, sr.params, w, sr.n_params * sizeof(float));
            ppdl_be_copy_h2d(H->dut, sd.params, w, sr.n_params * sizeof(float));
            free(w);
            size_t in_n = (size_t)b * lr->in_bytes / 4, out_n = (size_t)b * lr->out_bytes / 4;
            tb *in = !strcmp(lr->kind->name, "embedding") ? mk_int(H, in_n, 0, lr->cfg.V) : mk(H, in_n, IN, 1);
            tb *out = mk(H, out_n, OUT, 1);
            tb *saved = mk(H, lr->kind->saved_floats(lr, b, opt) + 1, OUT, 1);
            tb *work = mk(H, lr->kind->work_floats(lr, b) + 1, OUT, 1);
            BOTH(ppdl_layer *ly = k ? ld : lr;
                 ly->kind->forward(ly, be, b, k ? in->d : in->r, F(out), F(saved), F(work), opt));
            check(H, "layers forward", lr->kind->name, out, layer_tol(H));
            tb *dout = mk(H, out_n, IN, 1), *din = li > 0 ? mk(H, in_n, OUT, 1) : NULL;
            tb *dout2 = mk_host(H, out_n, IN, dout->init); /* the fused pass clobbers dout */
            BOTH(ppdl_layer *ly = k ? ld : lr; float *dx = din ? F(din) : NULL;
                 ppdl_layer_backward(ly, be, b, k ? in->d : in->r, F(saved), F(dout), dx, F(work), opt));
            if (din) check(H, "layers backward", lr->kind->name, din, layer_tol(H));
            tb grads = {.n = sr.n_params, .kind = OUT, .r = sr.grads, .d = sd.grads};
            if (sr.n_params) check(H, "layers backward", "(parameter gradients)", &grads, layer_tol(H));
            /* split: B, then W into gradients saved and zeroed, as a schedule with a
             * delayed W runs it (nothing but keep, saved and dout between them) */
            tb *fused = mk(H, sr.n_params, OUT, 1), *keep = mk(H, lr->kind->keep_floats(lr, b, opt) + 1, OUT, 1);
            tb *din2 = li > 0 ? mk(H, in_n, OUT, 1) : NULL;
            BOTH(ppdl_be_copy_d2d(be, F(fused), F(&grads), sr.n_params * 4);
                 ppdl_be_zero(be, F(&grads), sr.n_params * 4));
            BOTH(ppdl_layer *ly = k ? ld : lr; const void *x = k ? in->d : in->r;
                 ly->kind->backward(ly, be, PPDL_BWD_INPUT, b, x, F(saved), F(dout2), din2 ? F(din2) : NULL, F(keep),
                                    F(work), opt);
                 ly->kind->backward(ly, be, PPDL_BWD_WEIGHT, b, x, F(saved), F(dout2), NULL, F(keep), F(work), opt));
            if (din) check_same(H, "layers split backward", "din", din2, din);
            if (sr.n_params) check_same(H, "layers split backward", "(parameter gradients)", &grads, fused);
            case_end(H);
            ppdl_stage_free(&sr);
            ppdl_stage_free(&sd);
        }
    ppdl_model_free(&mr);
    ppdl_model_free(&md);
}

static void run_suite(harness *H, uint64_t seed)
{
    ppdl_rng_seed(&H->rng, seed);
    H->n_hash = 0;
    static const int tt[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
    for (int i = 0; i < 4; i++) {
        case_gemm(H, tt[i][0], tt[i][1], 37, 45, 29, 0.7f, 0.0f, 3);
        case_gemm(H, tt[i][0], tt[i][1], 130, 96, 300, 1.0f, 1.3f, 0);
    }
    case_gemm(H, 0, 1, 1, 77, 64, 1.0f, 0.0f, 0); /* a single row */
    case_gemm_batched(H, 0, 1, 33, 33, 16, 6, 0, 0.0f);  /* attention scores */
    case_gemm_batched(H, 1, 0, 33, 16, 33, 6, 0, 1.0f);  /* dv = p^T dy */
    case_gemm_batched(H, 0, 0, 5, 49, 1, 4, 1, 1.0f);    /* conv bias: A shared, k = 1 */
    case_conv2d(H, 3, 2, 11, 9, 5, 3, 1, 1);
    case_conv2d(H, 2, 4, 16, 16, 8, 3, 2, 0);
    case_conv2d(H, 2, 3, 13, 13, 6, 5, 1, 2);
    if (H->gemm_only) return;
    case_elementwise(H, 1);
    case_elementwise(H, 1000);
    case_elementwise(H, 70001);
    case_bias(H, 1, 5);
    case_bias(H, 67, 50);
    case_bias(H, 301, 770);
    case_layernorm(H, 1, 7);
    case_layernorm(H, 67, 50);
    case_layernorm(H, 130, 768);
    case_embedding(H, 3, 17, 33, 20);
    case_embedding(H, 5, 300, 260, 97); /* 1500 positions: past one chunk of the device kernel */
    case_reshapes(H, 2, 5, 12, 3);
    case_reshapes(H, 3, 33, 96, 4);
    case_causal_softmax(H, 3, 1);
    case_causal_softmax(H, 4, 37);
    case_causal_softmax(H, 2, 130);
    case_causal_softmax_tail(H, 3, 1, 37);
    case_causal_softmax_tail(H, 2, 5, 130);
    case_causal_softmax_tail(H, 4, 33, 33);
    case_xent(H, 5, 11, 0);
    case_xent(H, 37, 1000, 1);
    case_xent(H, 3, 50257, 0);
    case_im2col(H, 2, 7, 9, 3, 3, 1, 1);
    case_im2col(H, 3, 11, 8, 3, 2, 2, 0);
    case_im2col(H, 2, 6, 6, 5, 5, 1, 2);
    case_im2col(H, 1, 10, 10, 1, 1, 3, 0);
    case_maxpool(H, 2, 3, 8, 8, 2, 2, 0);
    case_maxpool(H, 2, 2, 9, 7, 3, 2, 1); /* overlapping windows, NaN inputs */
    case_maxpool(H, 1, 3, 6, 6, 3, 1, 0);
    case_adamw(H, 1, 1);
    case_adamw(H, 5000, 1);
    case_adamw(H, 5000, 10);
    case_bf16(H, 1);
    case_bf16(H, 255); /* below one block of 256 threads */
    case_bf16(H, 257); /* one past */
    case_bf16(H, 70001);
    if (H->no_layers) return;
    case_layers(H, "gpt-tiny", 3);
    case_layers(H, "mlp-tiny", 5);
    case_layers(H, "cnn-tiny", 4);
}

#if HAVE_CUDA
static void print_table(harness *H, const char *title)
{
    diag("%s: max error per op (over %s)", title, "all cases and outputs");
    diag("  %-20s %6s %12s %10s", "op", "cases", "max error", "tolerance");
    for (int i = 0; i < H->n_st; i++)
        diag("  %-20s %6d %12.3g %10.0e%s", H->st[i].op, H->st[i].cases, H->st[i].max_err, H->st[i].tol,
             H->st[i].fails ? "  FAILED" : "");
    const char *path = getenv("PPDL_OPS_REPORT");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) {
        diag("cannot write PPDL_OPS_REPORT=%s", path);
        return;
    }
    for (int i = 0; i < H->n_st; i++)
        fprintf(f, "%s\t%s\t%d\t%.3g\t%.0e\t%s\n", title, H->st[i].op, H->st[i].cases, H->st[i].max_err, H->st[i].tol,
                H->st[i].fails ? "FAIL" : "ok");
    fclose(f);
}

static void reset_stats(harness *H)
{
    H->n_st = 0;
    H->n_hash = 0;
    H->hash_mismatch = 0;
}

/* the whole suite with both backends in bf16 mode (--precision bf16), then fp32 again */
static void run_bf16_suite(harness *H, const char *label, uint64_t seed)
{
    H->label = label;
    H->bf16 = 1;
    PPDL_CHECK(!ppdl_be_set_precision(H->ref, PPDL_PREC_BF16) && !ppdl_be_set_precision(H->dut, PPDL_PREC_BF16),
               "%s: a backend refuses bf16", label);
    diag("%s: bf16 GEMMs of %s", label, ppdl_be_bf16_gemm_name(H->dut));
    run_suite(H, seed);
    print_table(H, label);
    ppdl_be_set_precision(H->ref, PPDL_PREC_FP32);
    ppdl_be_set_precision(H->dut, PPDL_PREC_FP32);
    H->bf16 = 0;
}
#endif

/* ------------------------------------------------------------------ 2. sabotage */

static const ppdl_backend_ops *cpu_ops;

static void bad_layernorm_fwd(ppdl_backend *be, int rows, int C, float eps, const float *x, const float *w,
                              const float *b, float *y, float *mean, float *rstd)
{
    cpu_ops->layernorm_fwd(be, rows, C, eps, x, w, b, y, mean, rstd);
    for (int i = 0; i < C; i++) y[(size_t)(rows - 1) * C + i] = NAN; /* the last row left unwritten */
}
static void bad_gemm(ppdl_backend *be, int ta, int tb_, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
    cpu_ops->gemm(be, ta, tb_, m, n, k, alpha * (1.0f + 2e-5f), a, lda, b, ldb, beta, c, ldc);
}
static void bad_embedding_bwd(ppdl_backend *be, int B, int T, int C, const int32_t *tok, const float *dy,
                              float *dwte, float *dwpe)
{
    memset(dwpe, 0, (size_t)T * C * sizeof(float)); /* overwrites instead of adding */
    cpu_ops->embedding_bwd(be, B, T, C, tok, dy, dwte, dwpe);
}
static void bad_causal_softmax_fwd(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p)
{
    cpu_ops->causal_softmax_fwd(be, BH, T, scale, s, p);
    for (size_t row = 0; row < (size_t)BH * T; row++)
        if ((int)(row % T) < T - 1) p[row * T + T - 1] = 1e-3f; /* above the diagonal */
}
static void bad_col2im(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int st, int pad, const float *col,
                       float *dx)
{
    memset(dx, 0, (size_t)Ci * Hh * Ww * sizeof(float));
    cpu_ops->col2im(be, Ci, Hh, Ww, kh, kw, st, pad, col, dx);
}

/* truncation instead of rounding to nearest even */
static void bad_round_bf16(ppdl_backend *be, size_t n, float *x)
{
    (void)be;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u &= 0xffff0000u;
        memcpy(&x[i], &u, sizeof u);
    }
}
/* right but for NaNs, whose sign and payload it keeps (what cuda_bf16.h's conversion does) */
static void bad_pack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    uint32_t *x = buf;
    uint16_t keep[64];
    size_t m = 0;
    for (size_t i = 0; i < n && m < 64; i++)
        if ((x[i] & 0x7fffffffu) > 0x7f800000u) keep[m++] = (uint16_t)(x[i] >> 16 | 0x0040u);
    cpu_ops->pack_bf16(be, n, buf);
    uint16_t *y = buf;
    for (size_t i = 0, j = 0; i < n && j < m; i++)
        if ((y[i] & 0x7fffu) > 0x7f80u) y[i] = keep[j++];
}

static void test_sabotage(ppdl_backend *ref)
{
    static ppdl_backend_ops bad;
    ppdl_backend *dut = ppdl_backend_cpu_create(1);
    cpu_ops = dut->ops;
    bad = *dut->ops;
    bad.name = "cpu-sabotaged";
    bad.layernorm_fwd = bad_layernorm_fwd;
    bad.gemm = bad_gemm;
    bad.embedding_bwd = bad_embedding_bwd;
    bad.causal_softmax_fwd = bad_causal_softmax_fwd;
    bad.col2im = bad_col2im;
    bad.round_bf16 = bad_round_bf16;
    bad.pack_bf16 = bad_pack_bf16;
    dut->ops = &bad;
    harness *H = ppdl_xcalloc(1, sizeof *H);
    H->ref = ref;
    H->dut = dut;
    H->label = "sabotaged";
    H->quiet = 1;
    H->no_layers = 1; /* a sabotaged op breaks every layer that uses it */
    run_suite(H, 2);
    static const char *broken[] = {"layernorm_fwd", "gemm", "embedding_bwd", "causal_softmax_fwd", "col2im",
                                   "round_bf16", "pack_bf16"};
    static const char *how[] = {"an unwritten row", "a GEMM off by 2e-5 relative", "an accumulator overwritten",
                                "the causal mask ignored", "col2im overwriting dx",
                                "bf16 by truncation instead of to nearest even",
                                "bf16 NaNs keeping sign and payload instead of 0x7fc0"};
    int other_fails = 0;
    for (int i = 0; i < H->n_st; i++) {
        int is_broken = 0;
        for (size_t j = 0; j < sizeof broken / sizeof broken[0]; j++) is_broken |= !strcmp(H->st[i].op, broken[j]);
        if (!is_broken) other_fails += H->st[i].fails;
    }
    for (size_t j = 0; j < sizeof broken / sizeof broken[0]; j++) {
        op_stat *s = stat_of(H, broken[j], 0);
        ok(s->fails > 0, "the harness catches %s (%s: %d of %d checks fail)", how[j], broken[j], s->fails, s->cases);
    }
    ok(other_fails == 0, "the harness passes the ops that were not sabotaged (%d false alarms)", other_fails);
    free(H);
    ppdl_backend_destroy(dut);
}

/* ------------------------------------------------------------------ 2b. emulation */

#if EMULATED_KERNELS
/* A backend made of the CPU backend's memory, copies and GEMMs and of the CUDA
 * kernels of kernels.cu run by the CPU emulation of tests/cuda_emu.h: the same
 * wrappers as cuda.c, with host pointers as "device" pointers. */
#define EMU(call)                                                                        \
    do {                                                                                 \
        if (call) ppdl_die("%s failed", #call);                                          \
    } while (0)

static void emu_add(ppdl_backend *be, size_t n, const float *x, const float *y, float *o)
{
    EMU(ppdl_cu_add(NULL, n, x, y, o));
}
static void emu_axpy(ppdl_backend *be, size_t n, float a, const float *x, float *y)
{
    EMU(ppdl_cu_axpy(NULL, n, a, x, y));
}
static void emu_bias_add(ppdl_backend *be, int r, int c, float *x, const float *b)
{
    EMU(ppdl_cu_bias_add(NULL, r, c, x, b));
}
static void emu_bias_grad(ppdl_backend *be, int r, int c, const float *dy, float *db)
{
    EMU(ppdl_cu_bias_grad(NULL, r, c, dy, db));
}
static void emu_act_fwd(ppdl_backend *be, int act, size_t n, const float *x, float *y)
{
    EMU(ppdl_cu_act_fwd(NULL, act, n, x, y));
}
static void emu_act_bwd(ppdl_backend *be, int act, size_t n, const float *x, const float *dy, float *dx)
{
    EMU(ppdl_cu_act_bwd(NULL, act, n, x, dy, dx));
}
static void emu_sumsq(ppdl_backend *be, size_t n, const float *x, double *out)
{
    double part[1024];
    int np = 0;
    EMU(ppdl_cu_sumsq_partials(NULL, n, x, part, 1024, &np));
    double s = 0;
    for (int i = 0; i < np; i++) s += part[i];
    *out = s;
}
static void emu_layernorm_fwd(ppdl_backend *be, int rows, int C, float eps, const float *x, const float *w,
                              const float *b, float *y, float *mean, float *rstd)
{
    EMU(ppdl_cu_layernorm_fwd(NULL, rows, C, eps, x, w, b, y, mean, rstd));
}
static void emu_layernorm_bwd(ppdl_backend *be, int rows, int C, const float *x, const float *w, const float *mean,
                              const float *rstd, const float *dy, float *dx, float *dw, float *db)
{
    EMU(ppdl_cu_layernorm_bwd(NULL, rows, C, x, w, mean, rstd, dy, dx, dw, db));
}
static void emu_embedding_fwd(ppdl_backend *be, int B, int T, int C, const int32_t *tok, const float *wte,
                              const float *wpe, float *y)
{
    EMU(ppdl_cu_embedding_fwd(NULL, B, T, C, tok, wte, wpe, y));
}
static void emu_embedding_bwd(ppdl_backend *be, int B, int T, int C, const int32_t *tok, const float *dy,
                              float *dwte, float *dwpe)
{
    EMU(ppdl_cu_embedding_bwd(NULL, B, T, C, tok, dy, dwte, dwpe));
}
static void emu_qkv_split(ppdl_backend *be, int B, int T, int C, int Hh, const float *qkv, float *q, float *k,
                          float *v)
{
    EMU(ppdl_cu_qkv_split(NULL, B, T, C, Hh, qkv, q, k, v));
}
static void emu_qkv_merge(ppdl_backend *be, int B, int T, int C, int Hh, const float *dq, const float *dk,
                          const float *dv, float *dqkv)
{
    EMU(ppdl_cu_qkv_merge(NULL, B, T, C, Hh, dq, dk, dv, dqkv));
}
static void emu_heads_to_seq(ppdl_backend *be, int B, int T, int C, int Hh, const float *x, float *y)
{
    EMU(ppdl_cu_heads_seq(NULL, B, T, C, Hh, 1, x, y));
}
static void emu_seq_to_heads(ppdl_backend *be, int B, int T, int C, int Hh, const float *x, float *y)
{
    EMU(ppdl_cu_heads_seq(NULL, B, T, C, Hh, 0, x, y));
}
static void emu_softmax_fwd(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p)
{
    EMU(ppdl_cu_causal_softmax_fwd(NULL, BH, T, scale, s, p));
}
static void emu_softmax_tail_fwd(ppdl_backend *be, int BH, int n, int L, float scale, const float *s, float *p)
{
    EMU(ppdl_cu_causal_softmax_tail_fwd(NULL, BH, n, L, scale, s, p));
}
static void emu_softmax_bwd(ppdl_backend *be, int BH, int T, float scale, const float *p, const float *dp, float *ds)
{
    EMU(ppdl_cu_causal_softmax_bwd(NULL, BH, T, scale, p, dp, ds));
}
static void emu_xent(ppdl_backend *be, int rows, int V, const float *z, const int32_t *t, float scale, float *loss,
                     float *d)
{
    double *row_loss = ppdl_xmalloc((size_t)(rows > 0 ? rows : 1) * sizeof(double));
    EMU(ppdl_cu_softmax_xent(NULL, rows, V, z, t, scale, row_loss, loss, d));
    free(row_loss);
}
static void emu_im2col(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int st, int pad, const float *x,
                       float *col)
{
    EMU(ppdl_cu_im2col(NULL, Ci, Hh, Ww, kh, kw, st, pad, x, col));
}
static void emu_col2im(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int st, int pad, const float *col,
                       float *dx)
{
    EMU(ppdl_cu_col2im(NULL, Ci, Hh, Ww, kh, kw, st, pad, col, dx));
}
static void emu_maxpool_fwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int kk, int st, const float *x, float *y,
                            int32_t *arg)
{
    EMU(ppdl_cu_maxpool_fwd(NULL, N, C, Hh, Ww, kk, st, x, y, arg));
}
static void emu_maxpool_bwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int kk, int st, const int32_t *arg,
                            const float *dy, float *dx)
{
    EMU(ppdl_cu_maxpool_bwd(NULL, N, C, Hh, Ww, kk, st, arg, dy, dx));
}
static void emu_adamw(ppdl_backend *be, size_t n, float *p, const float *g, float *m, float *v, double lr, double b1,
                      double b2, double eps, double wd, int t)
{
    /* cuda.c's scalars */
    EMU(ppdl_cu_adamw(NULL, n, p, g, m, v, (float)(1.0 - lr * wd), (float)b1, (float)b2, (float)(1.0 - b1),
                      (float)(1.0 - b2), (float)eps, (float)(lr / (1.0 - pow(b1, t))), (float)sqrt(1.0 - pow(b2, t))));
}

static void emu_round_bf16(ppdl_backend *be, size_t n, float *x)
{
    EMU(ppdl_cu_round_bf16(NULL, n, x, x));
}
/* cuda.c's packing, with a host scratch for its device one */
static void emu_pack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    uint16_t *scratch = ppdl_xmalloc((n ? n : 1) * sizeof *scratch);
    EMU(ppdl_cu_pack_bf16(NULL, n, buf, scratch));
    free(scratch);
}
static void emu_unpack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    uint16_t *scratch = ppdl_xmalloc((n ? n : 1) * sizeof *scratch);
    EMU(ppdl_cu_unpack_bf16(NULL, n, buf, scratch));
    free(scratch);
}

static ppdl_backend *emu_backend_create(void)
{
    static ppdl_backend_ops ops;
    ppdl_backend *be = ppdl_backend_cpu_create(1);
    ops = *be->ops;
    ops.name = "cuda-emulated";
    ops.add = emu_add, ops.axpy = emu_axpy, ops.bias_add = emu_bias_add, ops.bias_grad = emu_bias_grad;
    ops.act_fwd = emu_act_fwd, ops.act_bwd = emu_act_bwd, ops.sumsq = emu_sumsq;
    ops.layernorm_fwd = emu_layernorm_fwd, ops.layernorm_bwd = emu_layernorm_bwd;
    ops.embedding_fwd = emu_embedding_fwd, ops.embedding_bwd = emu_embedding_bwd;
    ops.qkv_split = emu_qkv_split, ops.qkv_merge = emu_qkv_merge;
    ops.heads_to_seq = emu_heads_to_seq, ops.seq_to_heads = emu_seq_to_heads;
    ops.causal_softmax_fwd = emu_softmax_fwd, ops.causal_softmax_bwd = emu_softmax_bwd;
    ops.causal_softmax_tail_fwd = emu_softmax_tail_fwd;
    ops.softmax_xent = emu_xent, ops.im2col = emu_im2col, ops.col2im = emu_col2im;
    ops.maxpool_fwd = emu_maxpool_fwd, ops.maxpool_bwd = emu_maxpool_bwd, ops.adamw = emu_adamw;
    ops.round_bf16 = emu_round_bf16, ops.pack_bf16 = emu_pack_bf16, ops.unpack_bf16 = emu_unpack_bf16;
    be->ops = &ops;
    return be;
}

static void test_emulated(ppdl_backend *ref)
{
    diag("part 2b: the CUDA kernels of kernels.cu, run by a CPU emulation (tests/cuda_emu.h), against the "
         "CPU backend (GEMMs are the CPU's here)");
    harness *H = ppdl_xcalloc(1, sizeof *H);
    H->ref = ref;
    H->dut = emu_backend_create();
    H->label = "cuda-emulated";
    /* no determinism pass: the emulation runs threads in one fixed order */
    run_suite(H, 5);
    print_table(H, "cuda-emulated");
    /* bf16 mode: the layers round through the emulated kernels (GEMMs: the CPU's) */
    reset_stats(H);
    H->exact_gemm = 1;
    run_bf16_suite(H, "cuda-emulated-bf16", 6);
    ppdl_backend_destroy(H->dut);
    free(H);
}
#endif

/* ------------------------------------------------------------------ one-row GEMMs */

/* The CPU backend computes a product with one row of C by sgemv, any other by sgemm:
 * check the sgemv mapping of each (trans_a, trans_b), with alpha and beta, against the
 * same row inside a 3-row product (sgemm), to fp32 rounding (1e-5 relative). */
static void test_gemm_single_row(ppdl_backend *cpu)
{
    enum { M = 3, N = 70, K = 45 };
    ppdl_rng rng;
    ppdl_rng_seed(&rng, 12);
    float A[M * K], B[K * N], C0[M * N], C3[M * N], C1[N];
    for (int i = 0; i < M * K; i++) A[i] = (float)ppdl_rng_normal(&rng);
    for (int i = 0; i < K * N; i++) B[i] = (float)ppdl_rng_normal(&rng);
    for (int i = 0; i < M * N; i++) C0[i] = (float)ppdl_rng_normal(&rng);
    for (int t_a = 0; t_a < 2; t_a++)
        for (int t_b = 0; t_b < 2; t_b++) {
            int lda = t_a ? M : K, ldb = t_b ? K : N; /* A stored [M,K] or [K,M]; B [K,N] or [N,K] */
            memcpy(C3, C0, sizeof C3);
            ppdl_be_gemm(cpu, t_a, t_b, M, N, K, 0.7f, A, lda, B, ldb, 0.4f, C3, N);
            double worst = 0, big = 0;
            for (int r = 0; r < M; r++) {
                memcpy(C1, C0 + r * N, sizeof C1);
                const float *ar = t_a ? A + r : A + (size_t)r * K; /* row r of op(A) */
                ppdl_be_gemm(cpu, t_a, t_b, 1, N, K, 0.7f, ar, lda, B, ldb, 0.4f, C1, N);
                for (int j = 0; j < N; j++) {
                    worst = fmax(worst, fabs((double)C1[j] - C3[r * N + j]));
                    big = fmax(big, fabs((double)C3[r * N + j]));
                }
            }
            ok(worst <= 1e-5 * big, "gemm of one row (sgemv), trans_a %d trans_b %d: the rows of the 3-row product "
               "(sgemm), max error %.2g of %.2g", t_a, t_b, worst, big);
        }
}

/* ------------------------------------------------------------------ the tail softmax */

/* what causal_softmax_tail_fwd means, on the CPU: its rows are the last n rows of the
 * full [L,L] causal softmax of the same scores, bit for bit (the same row kernel) */
static void test_tail_is_square_rows(ppdl_backend *cpu)
{
    enum { BH = 3, L = 45 };
    static const int ns[] = {1, 7, L};
    ppdl_rng rng;
    ppdl_rng_seed(&rng, 11);
    float *s = ppdl_xmalloc(BH * L * L * sizeof *s), *full = ppdl_xmalloc(BH * L * L * sizeof *full);
    float *ts = ppdl_xmalloc(BH * L * L * sizeof *ts), *tp = ppdl_xmalloc(BH * L * L * sizeof *tp);
    for (size_t i = 0; i < BH * L * L; i++) s[i] = (float)(3 * ppdl_rng_normal(&rng));
    ppdl_be_causal_softmax_fwd(cpu, BH, L, 0.35f, s, full);
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int n = ns[k], same = 1;
        for (int h = 0; h < BH; h++) /* the last n rows of each head's square */
            memcpy(ts + (size_t)h * n * L, s + ((size_t)h * L + L - n) * L, (size_t)n * L * sizeof *s);
        ppdl_be_causal_softmax_tail_fwd(cpu, BH, n, L, 0.35f, ts, tp);
        for (int h = 0; h < BH; h++)
            same &= !memcmp(tp + (size_t)h * n * L, full + ((size_t)h * L + L - n) * L, (size_t)n * L * sizeof *tp);
        ok(same, "causal_softmax_tail_fwd (n=%d, L=%d) gives the last %d rows of causal_softmax_fwd's square, "
           "bitwise", n, L, n);
    }
    free(s);
    free(full);
    free(ts);
    free(tp);
}

/* ------------------------------------------------------------------ host staging */

/* backend/xfer.h: on the CPU backend MPI gets the buffer itself; on a backend that
 * declares device memory (here a CPU backend marked so, whose copies are real copies)
 * it gets a host copy, and a received payload lands in device memory only through
 * recv_done. */
static void test_xfer(void)
{
    static ppdl_backend_ops staged;
    ppdl_backend *cpu = ppdl_backend_cpu_create(1), *dev = ppdl_backend_cpu_create(1);
    staged = *dev->ops;
    staged.device_memory = 1;
    dev->ops = &staged;
    enum { N = 1000 };
    float *a = ppdl_be_alloc(cpu, N * 4, "xfer test"), *b = ppdl_be_alloc(dev, N * 4, "xfer test");
    for (int i = 0; i < N; i++) a[i] = b[i] = (float)i;
    ppdl_xfer xc = {0}, xd = {0};
    ok(ppdl_xfer_send_buf(cpu, &xc, a, N * 4) == a && ppdl_xfer_recv_buf(cpu, &xc, a, N * 4) == a && !xc.host,
       "xfer: on the CPU backend MPI uses the buffer itself, nothing is staged");
    const void *s = ppdl_xfer_send_buf(dev, &xd, b, N * 4);
    ok(s != b && xd.host == s && !memcmp(s, b, N * 4), "xfer: a staged send hands MPI a host copy of the payload");
    float *r = ppdl_xfer_recv_buf(dev, &xd, b, N * 4);
    for (int i = 0; i < N; i++) r[i] = -1.0f; /* "MPI" writes the host buffer */
    ok(b[0] == 0.0f && b[N - 1] == (float)(N - 1), "xfer: a staged receive leaves device memory alone until done");
    ppdl_xfer_recv_done(dev, &xd, b, N * 4);
    ok(b[0] == -1.0f && b[N - 1] == -1.0f, "xfer: recv_done moves the payload to device memory");
    ppdl_xfer_free(dev, &xd);
    ok(!xd.host && !xd.cap, "xfer: free releases the staging buffer");
    ppdl_be_free(cpu, a);
    ppdl_be_free(dev, b);
    ppdl_backend_destroy(cpu);
    ppdl_backend_destroy(dev);
}

/* ------------------------------------------------------------------ main */

static int probe(char *why, size_t len)
{
#if HAVE_CUDA
    return ppdl_cuda_available(why, len);
#else
    snprintf(why, len, "this ppdl was built without CUDA (configure --with-cuda)");
    return 0;
#endif
}

int main(int argc, char **argv)
{
    char why[256] = "";
    if (argc > 1 && !strcmp(argv[1], "--probe")) {
        int up = probe(why, sizeof why);
        printf("%s\n", up ? "CUDA device available" : why);
        return up ? 0 : 77;
    }

    /* 1. the harness on CPU against CPU */
    ppdl_backend *ref = ppdl_backend_cpu_create(1);
    harness *H = ppdl_xcalloc(1, sizeof *H);
    H->ref = ref;
    H->dut = ppdl_backend_cpu_create(1);
    H->label = "cpu-vs-cpu";
    diag("part 1: the harness, CPU against CPU (every comparison must pass, most bitwise)");
    run_suite(H, 1);
    ppdl_backend_destroy(H->dut);

    /* 2. it catches broken ops */
    diag("part 2: a sabotaged CPU backend: the harness must catch each fault");
    test_sabotage(ref);

    test_xfer();
    test_tail_is_square_rows(ref);
    test_gemm_single_row(ref);
#if EMULATED_KERNELS
    test_emulated(ref);
#elif defined(PPDL_GPU_DOUBLE)
    diag("part 2b: the emulated kernels against the CPU run in tests/unit/test_backend_ops.t");
#else
    skip(1, "the CUDA kernels' CPU emulation needs nvcc (this build has no CUDA)");
#endif

    /* 3. CUDA against CPU */
    if (!probe(why, sizeof why)) {
        const char *req = getenv("PPDL_REQUIRE_CUDA");
        if (req && !strcmp(req, "1")) {
            /* on the GPU machine (tests/gpu/run) a device that does not work fails */
            ok(0, "PPDL_REQUIRE_CUDA=1: the CUDA backend is usable (%s)", why);
        } else {
            diag("part 3: CUDA against CPU: skipped (%s)", why);
            skip(1, why);
        }
        free(H);
        ppdl_backend_destroy(ref);
        done_testing();
        return exit_status();
    }
#if HAVE_CUDA
    char err[PPDL_ERR_LEN];
    ppdl_backend *cu = ppdl_backend_create("cuda", 1, 0, err, sizeof err);
    if (!ok(cu != NULL, "the CUDA backend starts")) {
        diag("  %s", err);
        done_testing();
        return exit_status();
    }
    char desc[256];
    diag("part 3: CUDA against CPU on %s", ppdl_cuda_describe(cu, desc, sizeof desc));
    memset(H, 0, sizeof *H);
    H->ref = ref;
    H->dut = cu;
    H->label = "cuda-fp32";
    ppdl_cuda_set_tf32(cu, 0);
    H->hash_mode = 1;
    run_suite(H, 3);
    print_table(H, "cuda-fp32");
    int outputs = H->n_hash;
    /* the same inputs again: every device output must repeat bitwise */
    H->quiet = 1;
    H->hash_mode = 2;
    reset_stats(H);
    run_suite(H, 3);
    ok(H->hash_mismatch == 0 && H->n_hash == outputs,
       "cuda-fp32: a second run on the same inputs repeats all %d outputs bitwise (%d differ)", outputs,
       H->hash_mismatch);
    /* TF32 tensor cores for the GEMMs and convolutions */
    reset_stats(H);
    H->quiet = 0;
    H->hash_mode = 0;
    H->label = "cuda-tf32";
    H->tf32 = 1;
    H->gemm_only = 1;
    ppdl_cuda_set_tf32(cu, 1);
    run_suite(H, 4);
    print_table(H, "cuda-tf32");
    ppdl_cuda_set_tf32(cu, 0);
    /* bf16 mode: cuBLAS bf16 GEMMs, cuDNN on rounded operands, the bf16 kernels */
    reset_stats(H);
    H->tf32 = 0;
    H->gemm_only = 0;
    run_bf16_suite(H, "cuda-bf16", 7);
    ppdl_backend_destroy(cu); /* runs cu->ops->destroy, once */
#endif
    free(H);
    ppdl_backend_destroy(ref);
    done_testing();
    return exit_status();
}
