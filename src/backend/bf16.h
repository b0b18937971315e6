/* bf16.h — bfloat16 numbers as ppdl stores them: the upper 16 bits of an fp32.
 *
 * bf16 keeps fp32's sign and 8-bit exponent and 7 of its 23 mantissa bits, so every
 * bf16 value is exactly an fp32 and widening is a shift. Narrowing rounds to nearest,
 * ties to even, as PyTorch's c10::BFloat16 does (tests/unit/bf16_torch.sh checks a
 * million patterns bit for bit against torch): a NaN becomes the quiet NaN 0x7fc0
 * (sign dropped, as c10::BFloat16; torch's vectorised CPU path writes 0xffff, also a
 * NaN), numbers past the largest bf16 (0x7f7f...) round to infinity, subnormals round
 * like any other number (no flush to zero).
 *
 * The bulk loops (backend/cpu.c) are plain C the compiler vectorises. */
#ifndef PPDL_BF16_H
#define PPDL_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ppdl_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float ppdl_f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp32 -> bf16, round to nearest even; NaN -> 0x7fc0 */
static inline uint16_t ppdl_bf16_from_f32(float f)
{
    uint32_t u = ppdl_f32_bits(f);
    /* adding 0x7fff plus the lowest kept bit carries into the kept bits exactly when the
     * dropped half is above one half, or equal to it with an odd kept part */
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)rounded;
}

static inline float ppdl_f32_from_bf16(uint16_t h) { return ppdl_f32_of_bits((uint32_t)h << 16); }

/* x rounded to the nearest bf16, kept in fp32 storage */
static inline float ppdl_bf16_round(float f) { return ppdl_f32_from_bf16(ppdl_bf16_from_f32(f)); }

#endif
