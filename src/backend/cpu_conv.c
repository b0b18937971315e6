/* cpu_conv.c — the CPU backend's convolution helpers: im2col/col2im and max-pool (NCHW).
 *
 * A convolution is lowered to one GEMM per image: the kh x kw input patch under each
 * output pixel becomes a column of `col`, so that out[Co, OH*OW] = W[Co, Ci*kh*kw] @ col.
 * Row r = (c*kh + i)*kw + j of col holds input channel c shifted by kernel tap (i, j):
 *   col[r, oh*OW + ow] = x[c, oh*stride - pad + i, ow*stride - pad + j]   (0 outside).
 * For every row and output row oh, the valid ow form one interval [ow_lo, ow_hi), so the
 * inner loops are branch-free strided copies that the compiler can vectorise.
 *
 * Max-pool has no padding; a window's argmax is the flat index h*Ww + w into the input
 * plane, and ties go to the first maximum in row-major window order (as PyTorch). */
#include "backend/cpu_kernels.h"

#include <math.h>
#include <string.h>

static int conv_out(int n, int k, int stride, int pad) { return (n + 2 * pad - k) / stride + 1; }

/* the output columns ow whose input column ow*stride - pad + j lies in [0, Ww):
 * ow in [*lo, *hi) (an empty interval when *lo >= *hi) */
static void valid_range(int j, int Ww, int OW, int stride, int pad, int *lo, int *hi)
{
    int first = pad - j;                           /* smallest valid ow*stride */
    int l = first > 0 ? (first + stride - 1) / stride : 0;
    int last = Ww - 1 + pad - j;                   /* largest valid ow*stride */
    int h = last >= 0 ? last / stride + 1 : 0;
    *lo = l < OW ? l : OW;
    *hi = h < OW ? h : OW;
    if (*hi < *lo) *hi = *lo;
}

/* one image x[Ci, Hh, Ww] -> col[Ci*kh*kw, OH*OW] */
void cpu_im2col(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                const float *x, float *col)
{
    (void)be;
    const int OH = conv_out(Hh, kh, stride, pad), OW = conv_out(Ww, kw, stride, pad);
    for (int c = 0; c < Ci; c++) {
        const float *xc = x + (size_t)c * Hh * Ww;                    /* [Hh, Ww] */
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++) {
                float *row = col + ((size_t)(c * kh + i) * kw + j) * OH * OW; /* [OH, OW] */
                int lo, hi;
                valid_range(j, Ww, OW, stride, pad, &lo, &hi);
                for (int oh = 0; oh < OH; oh++) {
                    float *dst = row + (size_t)oh * OW;               /* [OW] */
                    int ih = oh * stride - pad + i;
                    if (ih < 0 || ih >= Hh) {
                        memset(dst, 0, (size_t)OW * sizeof(float));
                        continue;
                    }
                    const long base = (long)ih * Ww - pad + j;        /* x index of ow = 0 */
                    for (int ow = 0; ow < lo; ow++) dst[ow] = 0.0f;
                    if (stride == 1) /* the common case: one contiguous run */
                        memcpy(dst + lo, xc + base + lo, (size_t)(hi - lo) * sizeof(float));
                    else
                        for (int ow = lo; ow < hi; ow++) dst[ow] = xc[base + (long)ow * stride];
                    for (int ow = hi; ow < OW; ow++) dst[ow] = 0.0f;
                }
            }
    }
}

/* adds col[Ci*kh*kw, OH*OW] back into dx[Ci, Hh, Ww] (the adjoint of cpu_im2col) */
void cpu_col2im(ppdl_backend *be, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad,
                const float *col, float *dx)
{
    (void)be;
    const int OH = conv_out(Hh, kh, stride, pad), OW = conv_out(Ww, kw, stride, pad);
    for (int c = 0; c < Ci; c++) {
        float *dxc = dx + (size_t)c * Hh * Ww;                        /* [Hh, Ww] */
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++) {
                const float *row = col + ((size_t)(c * kh + i) * kw + j) * OH * OW; /* [OH, OW] */
                int lo, hi;
                valid_range(j, Ww, OW, stride, pad, &lo, &hi);
                for (int oh = 0; oh < OH; oh++) {
                    int ih = oh * stride - pad + i;
                    if (ih < 0 || ih >= Hh) continue;
                    const float *src = row + (size_t)oh * OW;         /* [OW] */
                    const long base = (long)ih * Ww - pad + j;        /* dx index of ow = 0 */
                    for (int ow = lo; ow < hi; ow++) dxc[base + (long)ow * stride] += src[ow];
                }
            }
    }
}

/* x[N, C, Hh, Ww] -> y[N, C, OH, OW], argmax[N, C, OH, OW] (flat index h*Ww + w in the plane)
 * One output row at a time: start every window of the row from its top-left element,
 * then fold in the other k*k - 1 elements in row-major window order, each fold a loop
 * over the whole output row (vectorisable: selects, no branches). */
void cpu_maxpool_fwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                     const float *x, float *y, int32_t *argmax)
{
    (void)be;
    const int OH = (Hh - k) / stride + 1, OW = (Ww - k) / stride + 1;
    for (size_t p = 0; p < (size_t)N * C; p++) {
        const float *xp = x + p * Hh * Ww;                            /* [Hh, Ww] */
        for (int oh = 0; oh < OH; oh++) {
            float *yr = y + (p * OH + oh) * OW;                       /* [OW] */
            int32_t *ar = argmax + (p * OH + oh) * OW;                /* [OW] */
            for (int i = 0; i < k; i++) {
                const int h = oh * stride + i;
                const float *xr = xp + (size_t)h * Ww;                /* input row h [Ww] */
                for (int j = 0; j < k; j++) {
                    if (i == 0 && j == 0) {
                        for (int ow = 0; ow < OW; ow++) {
                            yr[ow] = xr[ow * stride];
                            ar[ow] = h * Ww + ow * stride;
                        }
                        continue;
                    }
                    for (int ow = 0; ow < OW; ow++) {
                        float v = xr[ow * stride + j];
                        /* strictly greater: the first maximum wins; a NaN wins (PyTorch) */
                        int take = (v > yr[ow]) | isnan(v);
                        yr[ow] = take ? v : yr[ow];
                        ar[ow] = take ? h * Ww + ow * stride + j : ar[ow];
                    }
                }
            }
        }
    }
}

/* dx[N, C, Hh, Ww] (overwritten) = the scatter-add of dy[N, C, OH, OW] to argmax */
void cpu_maxpool_bwd(ppdl_backend *be, int N, int C, int Hh, int Ww, int k, int stride,
                     const int32_t *argmax, const float *dy, float *dx)
{
    (void)be;
    const int OH = (Hh - k) / stride + 1, OW = (Ww - k) / stride + 1;
    memset(dx, 0, (size_t)N * C * Hh * Ww * sizeof(float));
    for (size_t p = 0; p < (size_t)N * C; p++) {
        float *dxp = dx + p * Hh * Ww;                                /* [Hh, Ww] */
        const float *dyp = dy + p * OH * OW;                          /* [OH, OW] */
        const int32_t *ap = argmax + p * OH * OW;                     /* [OH, OW] */
        /* += because windows overlap when stride < k */
        for (int o = 0; o < OH * OW; o++) dxp[ap[o]] += dyp[o];
    }
}
