/* test_bf16.c — bf16 conversions (backend/bf16.h), the CPU backend's bf16 kernels
 * (round, pack, unpack) and its bf16 GEMM (--precision bf16).
 *
 * The scalar cases are derived by hand from round-to-nearest-even on the bit patterns;
 * tests/unit/bf16_torch.sh checks a million more against torch's own conversion, from
 * the file `test_bf16.t --dump FILE` writes (pairs: fp32 bits, our bf16 bits). */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/bf16.h"
#include "backend/cpu.h"
#include "tap.h"

typedef struct { uint32_t in; uint16_t want; const char *why; } bf16_case;

static const bf16_case cases[] = {
    {0x3f800000u, 0x3f80, "1.0 is exact"},
    {0x3f807fffu, 0x3f80, "below half rounds down"},
    {0x3f808001u, 0x3f81, "above half rounds up"},
    {0x3f808000u, 0x3f80, "a tie with an even kept part stays"},
    {0x3f818000u, 0x3f82, "a tie with an odd kept part rounds up to even"},
    {0xbf818000u, 0xbf82, "negative ties round by magnitude"},
    {0x3fffffffu, 0x4000, "a carry into the exponent"},
    {0x00000000u, 0x0000, "+0"},
    {0x80000000u, 0x8000, "-0 keeps its sign"},
    {0x00000001u, 0x0000, "the smallest subnormal rounds to 0"},
    {0x00008000u, 0x0000, "a subnormal tie, even: down"},
    {0x00018000u, 0x0002, "a subnormal tie, odd: up"},
    {0x00008001u, 0x0001, "a subnormal above half: the smallest bf16 subnormal"},
    {0x007fffffu, 0x0080, "the largest subnormal rounds to the smallest normal"},
    {0x7f800000u, 0x7f80, "+inf"},
    {0xff800000u, 0xff80, "-inf"},
    {0x7f7f0000u, 0x7f7f, "the largest bf16 is exact"},
    {0x7f7f7fffu, 0x7f7f, "just below the halfway point past it stays finite"},
    {0x7f7f8000u, 0x7f80, "the tie past the largest bf16 (odd) overflows to inf"},
    {0x7f7fffffu, 0x7f80, "FLT_MAX rounds to inf"},
    {0xff7fffffu, 0xff80, "-FLT_MAX rounds to -inf"},
    {0x7fc00000u, 0x7fc0, "a quiet NaN"},
    {0x7f800001u, 0x7fc0, "a NaN with only low mantissa bits stays NaN (not inf)"},
    {0x7fffffffu, 0x7fc0, "a NaN whose rounding would carry into the sign stays NaN"},
    {0xffc00000u, 0x7fc0, "a negative NaN becomes torch's 0x7fc0"},
};

static uint32_t xorshift(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* the bits the dump checks: the cases above, every exponent with a few mantissas
 * around the tie points, then random patterns */
static int dump(const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); return 1; }
    size_t n_cases = sizeof cases / sizeof cases[0];
    uint32_t s = 12345;
    for (size_t i = 0; i < n_cases + (1u << 20); i++) {
        uint32_t u;
        if (i < n_cases) u = cases[i].in;
        else if (i < n_cases + 512 * 8) {
            uint32_t j = (uint32_t)(i - n_cases), e = j / 8, which = j % 8;
            static const uint32_t low[8] = {0, 1, 0x7fff, 0x8000, 0x8001, 0x18000, 0xffff, 0x7fffff};
            u = (e << 23) | low[which];
        } else u = xorshift(&s);
        uint16_t h = ppdl_bf16_from_f32(ppdl_f32_of_bits(u));
        if (fwrite(&u, sizeof u, 1, f) != 1 || fwrite(&h, sizeof h, 1, f) != 1) { perror(path); return 1; }
    }
    return fclose(f) ? 1 : 0;
}

static void test_scalar(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = ppdl_bf16_from_f32(ppdl_f32_of_bits(cases[i].in));
        if (got != cases[i].want)
            fail("0x%08x -> 0x%04x, expected 0x%04x (%s)", (unsigned)cases[i].in, got, cases[i].want, cases[i].why);
    }
    report("fp32 -> bf16: ties to even, subnormals, inf, NaN, the largest values (25 hand-derived cases)");
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = ppdl_f32_from_bf16((uint16_t)h);
        if (ppdl_f32_bits(f) != h << 16) fail("widen 0x%04x", (unsigned)h);
        uint16_t back = ppdl_bf16_from_f32(f);
        int nan = (h & 0x7fffu) > 0x7f80u;
        if (back != (nan ? 0x7fc0 : h)) fail("0x%04x widened and narrowed gives 0x%04x", (unsigned)h, back);
    }
    report("bf16 -> fp32 -> bf16 is the identity on all 65536 patterns (NaNs -> 0x7fc0)");
}

/* the backend's round, pack and unpack against the scalar conversions, on sizes around
 * the packing's block of 1024 */
static void test_kernels(ppdl_backend *be)
{
    static const size_t sizes[] = {0, 1, 7, 1023, 1024, 1025, 2048, 5000, 70000};
    uint32_t s = 777;
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t];
        float *x = malloc((n + 1) * sizeof *x), *buf = malloc((n + 1) * sizeof *buf);
        for (size_t i = 0; i < n; i++) x[i] = ppdl_f32_of_bits(xorshift(&s) & 0xbfffffffu); /* finite-ish */
        memcpy(buf, x, n * sizeof *x);
        ppdl_be_round_bf16(be, n, buf);
        for (size_t i = 0; i < n; i++)
            if (ppdl_f32_bits(buf[i]) != ppdl_f32_bits(ppdl_bf16_round(x[i]))) { fail("round n=%zu i=%zu", n, i); break; }
        memcpy(buf, x, n * sizeof *x);
        ppdl_be_pack_bf16(be, n, buf);
        const uint16_t *h = (const uint16_t *)buf;
        for (size_t i = 0; i < n; i++)
            if (h[i] != ppdl_bf16_from_f32(x[i])) { fail("pack n=%zu i=%zu", n, i); break; }
        ppdl_be_unpack_bf16(be, n, buf);
        for (size_t i = 0; i < n; i++)
            if (ppdl_f32_bits(buf[i]) != ppdl_f32_bits(ppdl_bf16_round(x[i]))) { fail("unpack n=%zu i=%zu", n, i); break; }
        free(x);
        free(buf);
    }
    report("the backend's round, in-place pack and unpack equal the scalar conversions (n = 0 .. 70000)");
}

/* ppdl_be_gemm(_batched) in bf16 equals cblas_sgemm on operands rounded by hand, bit for
 * bit, for every transpose and a strided batch; and differs from the fp32 product */
static void test_gemm(ppdl_backend *be)
{
    enum { M = 37, N = 29, K = 300, BATCH = 3, LD = K + 5 };
    size_t na = (size_t)BATCH * M * LD, nb = (size_t)BATCH * N * LD;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *ar = malloc(na * sizeof *a),
          *br = malloc(nb * sizeof *b);
    float *c = calloc((size_t)BATCH * M * N, sizeof *c), *want = calloc((size_t)BATCH * M * N, sizeof *c),
          *c32 = calloc((size_t)BATCH * M * N, sizeof *c);
    uint32_t s = 99;
    for (size_t i = 0; i < na; i++) a[i] = (float)(xorshift(&s) % 20001) / 10000.0f - 1.0f;
    for (size_t i = 0; i < nb; i++) b[i] = (float)(xorshift(&s) % 20001) / 10000.0f - 1.0f;
    for (size_t i = 0; i < na; i++) ar[i] = ppdl_bf16_round(a[i]);
    for (size_t i = 0; i < nb; i++) br[i] = ppdl_bf16_round(b[i]);
    int differs = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* A stored [M,K] (ld LD) or [K,M] with ta; B [K,N] or [N,K] with tb */
            int lda = ta ? M : LD, ldb = tb ? LD : N;
            long sa = (long)M * LD, sb = (long)N * LD, sc = (long)M * N;
            for (int i = 0; i < BATCH; i++)
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                            0.5f, ar + i * sa, lda, br + i * sb, ldb, 0.0f, want + i * sc, N);
            ppdl_be_set_precision(be, PPDL_PREC_BF16);
            ppdl_be_gemm_batched(be, ta, tb, M, N, K, 0.5f, a, lda, sa, b, ldb, sb, 0.0f, c, N, sc, BATCH);
            ppdl_be_set_precision(be, PPDL_PREC_FP32);
            ppdl_be_gemm_batched(be, ta, tb, M, N, K, 0.5f, a, lda, sa, b, ldb, sb, 0.0f, c32, N, sc, BATCH);
            for (size_t i = 0; i < (size_t)BATCH * M * N; i++) {
                if (ppdl_f32_bits(c[i]) != ppdl_f32_bits(want[i])) {
                    fail("ta %d tb %d: C[%zu] = %.9g, sgemm on rounded operands %.9g", ta, tb, i, c[i], want[i]);
                    break;
                }
                differs += c[i] != c32[i];
            }
        }
    report("bf16 GEMM = fp32 sgemm on bf16-rounded operands, bitwise (4 transposes, a strided batch)");
    ok(differs > 0, "and it differs from the fp32 GEMM (%d of %d entries): the precision is applied", differs,
       4 * BATCH * M * N);
    free(a), free(b), free(ar), free(br), free(c), free(want), free(c32);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--dump")) return dump(argv[2]);
    plan(5);
    test_scalar();
    ppdl_backend *be = ppdl_backend_cpu_create(2);
    test_kernels(be);
    test_gemm(be);
    ppdl_backend_destroy(be);
    return exit_status();
}
