/* cpu_bf16.c — the CPU backend's bf16 kernels (backend/bf16.h for the rounding):
 * rounding in place, packing to and from 16-bit messages, and the rounded copies of
 * GEMM operands that --precision bf16 multiplies (docs/precision.md).
 *
 * Why fp32 sgemm on rounded copies: OpenBLAS's bf16 GEMM (sbgemm) is only fast on CPUs
 * with AVX512-BF16 or AMX; elsewhere multiplying the bf16 values in fp32 gives the
 * same products (a product of two 8-bit mantissas is exact in fp32's 24 bits), summed
 * in fp32, which is what sbgemm does too. The sum's order is OpenBLAS's sgemm's, the
 * same on every rank count, so the bitwise promise holds. */
#include "config.h"

#include "backend/bf16.h"
#include "backend/cpu_kernels.h"
#include "backend/cpu_math.h"
#include "core/error.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BF16_GRAIN 16384  /* floats per task of the rounding loops */
#define PACK_BLOCK 1024   /* elements per block of the in-place packing (below) */

typedef struct {
    const float *x;
    float *y;
} round_args;

CPU_SIMD static void round_range(void *arg, size_t lo, size_t hi)
{
    const round_args *a = arg;
    const float *x = a->x;
    float *y = a->y;
    for (size_t i = lo; i < hi; i++) y[i] = ppdl_bf16_round(x[i]);
}

/* y[i] = bf16(x[i]) for n floats, over the pool; y may be x */
static void round_copy(ppdl_backend *be, size_t n, const float *x, float *y)
{
    round_args a = {x, y};
    cpu_pool_for(cpu_pool_of(be), n, BF16_GRAIN, round_range, &a);
}

void cpu_round_bf16(ppdl_backend *be, size_t n, float *x) { round_copy(be, n, x, x); }

CPU_SIMD static void narrow_block(const float *x, uint16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = ppdl_bf16_from_f32(x[i]);
}

CPU_SIMD static void widen_block(const uint16_t *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = ppdl_f32_from_bf16(x[i]);
}

/* In place: the n fp32 at buf become n bf16 in its first 2n bytes. Blocks go front to
 * back through a small buffer on the stack: block j's bf16 land below its own fp32
 * (and over blocks already read), so no value is overwritten before it is read; the
 * inner loops vectorise. One thread: a message is small next to the step's compute. */
void cpu_pack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    (void)be;
    uint16_t tmp[PACK_BLOCK];
    for (size_t lo = 0; lo < n; lo += PACK_BLOCK) {
        size_t len = n - lo < PACK_BLOCK ? n - lo : PACK_BLOCK;
        narrow_block((const float *)buf + lo, tmp, len);
        memcpy((uint16_t *)buf + lo, tmp, len * sizeof *tmp);
    }
}

/* the inverse, back to front: block j's fp32 land over bf16 of later blocks, already
 * widened */
void cpu_unpack_bf16(ppdl_backend *be, size_t n, void *buf)
{
    (void)be;
    float tmp[PACK_BLOCK];
    size_t lo = n - n % PACK_BLOCK;
    if (lo == n && n) lo -= PACK_BLOCK;
    for (;;) {
        size_t len = n - lo < PACK_BLOCK ? n - lo : PACK_BLOCK;
        widen_block((const uint16_t *)buf + lo, tmp, len);
        memcpy((float *)buf + lo, tmp, len * sizeof *tmp);
        if (lo == 0) break;
        lo -= PACK_BLOCK;
    }
}

/* a grown host scratch of n floats, slot 0 for A, 1 for B (not counted against
 * --mem-limit, as cpu_scratch) */
static float *operand_scratch(ppdl_backend *be, int which, size_t n)
{
    cpu_impl *im = be->impl;
    if (n > im->bf16_cap[which]) {
        free(im->bf16[which]);
        im->bf16[which] = malloc(n * sizeof(float));
        PPDL_CHECK(im->bf16[which], "out of host memory for a bf16 GEMM operand of %zu floats", n);
        im->bf16_cap[which] = n;
    }
    return im->bf16[which];
}

const float *cpu_bf16_operand(ppdl_backend *be, int which, int trans, int m_or_n, int k, const float *x,
                              int ld, long stride, int batch)
{
    PPDL_CHECK(stride >= 0, "bf16 GEMM: negative matrix stride %ld", stride);
    size_t n = ppdl_gemm_operand_extent(which, trans, m_or_n, k, ld, stride, batch);
    float *y = operand_scratch(be, which, n);
    round_copy(be, n, x, y);
    return y;
}

/* 1 when /proc/cpuinfo lists a bf16 GEMM instruction set (AVX512-BF16 or AMX-BF16) */
static int cpu_has_bf16_instructions(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) found = strstr(line, " avx512_bf16") || strstr(line, " amx_bf16");
    fclose(f);
    return found;
}

/* The bf16 GEMM runs as fp32 sgemm on rounded operands. OpenBLAS's own bf16 GEMM
 * (cblas_sbgemm) would only be faster with the CPU's bf16 instructions; calling it is
 * not built yet (no machine here has them to test it on), so the line says which of
 * the two is missing, or that both are there and unused. */
const char *cpu_bf16_gemm_name(ppdl_backend *be)
{
    (void)be;
#ifdef HAVE_CBLAS_SBGEMM
    const int lib = 1;
#else
    const int lib = 0;
#endif
    int cpu = cpu_has_bf16_instructions();
    if (lib && cpu) return "sgemm on bf16-rounded operands; this OpenBLAS and CPU have sbgemm, not used yet";
    if (lib) return "sgemm on bf16-rounded operands; this CPU has no avx512_bf16/amx_bf16 for sbgemm";
    if (cpu) return "sgemm on bf16-rounded operands; this OpenBLAS has no sbgemm";
    return "sgemm on bf16-rounded operands; neither this OpenBLAS nor this CPU has bf16 GEMMs";
}
