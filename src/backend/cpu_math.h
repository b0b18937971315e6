/* cpu_math.h — small inline helpers of the CPU kernels, written so that the compiler
 * vectorises the loops that use them without fast-math flags.
 *
 * The row reductions keep LANES independent partial results (element j goes to
 * partial j % LANES) and combine them in a fixed tree at the end: the order of every
 * sum is a function of the row length only, never of the thread count or of the
 * vector width the compiler picks, and the partials give the vectoriser independent
 * chains to work on (a plain `s += x[j]` is one serial chain that it may not
 * reorder). */
#ifndef PPDL_CPU_MATH_H
#define PPDL_CPU_MATH_H

#include <stddef.h>
#include <stdint.h>

#define CPU_LANES 8

/* CPU_SIMD on a hot loop's function compiles it also for AVX2 and AVX-512 and picks
 * the widest the CPU has when the program starts (GCC's target_clones): the build
 * flags target the baseline x86-64 (SSE2), 4 floats a vector. The clones compute the
 * same bits as the baseline: C11 mode keeps a*b+c as two roundings (no FMA
 * contraction), and every reduction above has a fixed order, not the vector width's.
 * Empty where the attribute is unknown. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CPU_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_SIMD
#endif


/* e^x, branch-free so that the loops calling it vectorise (glibc's expf is a call per
 * element). x = n ln2 + r with |r| <= ln2/2, e^r by its degree-6 Taylor polynomial
 * (truncation < 2e-8 relative), 2^n built in the exponent bits. Relative error ~1.5e-7
 * (about 2 ulp); x is clamped to [-87, 88], where e^x stays a normal float, so e^-inf
 * is ~1.6e-38 rather than 0 (callers that need an exact 0 say so). */
static inline float cpu_expf(float x)
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

/* combine CPU_LANES partials in a fixed tree */
static inline double cpu_lanes_sum_f64(const double *a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
static inline float cpu_lanes_sum_f32(const float *a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* sum of x[0..n) in double */
static inline double cpu_sum_f64(const float *x, size_t n)
{
    double acc[CPU_LANES] = {0};
    size_t j = 0;
    for (; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) acc[l] += x[j + l];
    for (int l = 0; j < n; j++, l++) acc[l] += x[j];
    return cpu_lanes_sum_f64(acc);
}

/* sum of (x[j] - mu)^2 in double */
static inline double cpu_sumsqdev_f64(const float *x, size_t n, double mu)
{
    double acc[CPU_LANES] = {0};
    size_t j = 0;
    for (; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) {
            double d = x[j + l] - mu;
            acc[l] += d * d;
        }
    for (int l = 0; j < n; j++, l++) {
        double d = x[j] - mu;
        acc[l] += d * d;
    }
    return cpu_lanes_sum_f64(acc);
}

/* largest of x[0..n), n >= 1 (exact whatever the order: max does not round) */
static inline float cpu_max_f32(const float *x, size_t n)
{
    float acc[CPU_LANES];
    for (int l = 0; l < CPU_LANES; l++) acc[l] = x[0];
    size_t j = 0;
    for (; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    for (int l = 0; j < n; j++, l++) acc[l] = x[j] > acc[l] ? x[j] : acc[l];
    float m = acc[0];
    for (int l = 1; l < CPU_LANES; l++) m = acc[l] > m ? acc[l] : m;
    return m;
}

#endif
