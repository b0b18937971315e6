/* cpu_gpt.c — the CPU kernels of the GPT layers: layernorm, embedding, the attention
 * reshapes and the causal softmax. Semantics are those documented on the matching
 * members of ppdl_backend_ops (backend.h).
 *
 * These kernels are the oracle the device backends are tested against, so they are
 * plain loops with a fixed summation order (rows one after the other, elements left
 * to right): the result never depends on the thread count. Row statistics (mean,
 * variance, the dot products of the backward passes) are accumulated in double.
 *
 * Shapes use the letters of backend.h; N = rows (B*T in the layers), BH = B*H.
 */
#include "backend/cpu_kernels.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ layernorm */

/* x[rows,C] -> y[rows,C] = (x - mean) * rstd * w + b; mean[rows], rstd[rows] kept.
 * Biased variance (PyTorch's LayerNorm), two passes in double. */
void cpu_layernorm_fwd(ppdl_backend *be, int rows, int C, float eps, const float *x,
                       const float *w, const float *b, float *y, float *mean, float *rstd)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * C; /* [C] */
        float *yr = y + (size_t)r * C;       /* [C] */
        double sum = 0.0;
        for (int i = 0; i < C; i++) sum += xr[i];
        double mu = sum / C;
        double var = 0.0;
        for (int i = 0; i < C; i++) {
            double d = xr[i] - mu;
            var += d * d;
        }
        var /= C;
        float m = (float)mu;
        float rs = (float)(1.0 / sqrt(var + (double)eps));
        for (int i = 0; i < C; i++) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
        mean[r] = m;
        rstd[r] = rs;
    }
}

/* Given dy[rows,C], adds into dx[rows,C], dw[C], db[C]. With n = (x-mean)*rstd and
 * g = dy*w:  dx = rstd * (g - mean(g) - n * mean(g*n)),  dw = sum_r dy*n,  db = sum_r dy. */
void cpu_layernorm_bwd(ppdl_backend *be, int rows, int C, const float *x, const float *w,
                       const float *mean, const float *rstd, const float *dy, float *dx,
                       float *dw, float *db)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * C;   /* [C] */
        const float *dyr = dy + (size_t)r * C; /* [C] */
        float *dxr = dx + (size_t)r * C;       /* [C] */
        float m = mean[r], rs = rstd[r];
        double sum_g = 0.0, sum_gn = 0.0;
        for (int i = 0; i < C; i++) {
            float n = (xr[i] - m) * rs;
            float g = dyr[i] * w[i];
            sum_g += g;
            sum_gn += (double)g * n;
        }
        float mean_g = (float)(sum_g / C), mean_gn = (float)(sum_gn / C);
        for (int i = 0; i < C; i++) {
            float n = (xr[i] - m) * rs;
            float g = dyr[i] * w[i];
            dxr[i] += (g - mean_g - n * mean_gn) * rs;
            dw[i] += dyr[i] * n;
            db[i] += dyr[i];
        }
    }
}

/* ------------------------------------------------------------------ embedding */

/* tokens[B,T] -> y[B,T,C] = wte[tok] + wpe[t]. Tokens are validated when the data
 * are read (data_io), not here. */
void cpu_embedding_fwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                       const float *wte, const float *wpe, float *y)
{
    (void)be;
    for (int bt = 0; bt < B * T; bt++) {
        const float *e = wte + (size_t)tokens[bt] * C; /* [C] */
        const float *p = wpe + (size_t)(bt % T) * C;   /* [C] */
        float *yr = y + (size_t)bt * C;                /* [C] */
        for (int i = 0; i < C; i++) yr[i] = e[i] + p[i];
    }
}

/* adds dy[B,T,C] into dwte[V,C] (rows of the tokens seen) and dwpe[T,C], positions in
 * order, so repeated tokens accumulate in a fixed order */
void cpu_embedding_bwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                       const float *dy, float *dwte, float *dwpe)
{
    (void)be;
    for (int bt = 0; bt < B * T; bt++) {
        const float *d = dy + (size_t)bt * C;      /* [C] */
        float *de = dwte + (size_t)tokens[bt] * C; /* [C] */
        float *dp = dwpe + (size_t)(bt % T) * C;   /* [C] */
        for (int i = 0; i < C; i++) {
            de[i] += d[i];
            dp[i] += d[i];
        }
    }
}

/* ------------------------------------------------------- attention reshapes */

/* The four reshapes copy runs of hs contiguous floats: element (b,t,h,d) sits at
 * [b,t, h*hs + d] in the sequence layout and at [b,h,t,d] in the head layout. */
static size_t head_offset(int b, int h, int t, int H, int T, int hs)
{
    return (((size_t)b * H + h) * T + t) * hs;
}

/* qkv[B,T,3C] (q, then k, then v along the last axis) -> q,k,v each [B,H,T,hs] */
void cpu_qkv_split(ppdl_backend *be, int B, int T, int C, int H, const float *qkv, float *q,
                   float *k, float *v)
{
    (void)be;
    int hs = C / H;
    size_t run = (size_t)hs * sizeof(float);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = qkv + ((size_t)b * T + t) * 3 * C; /* [3C] */
            for (int h = 0; h < H; h++) {
                size_t o = head_offset(b, h, t, H, T, hs);
                memcpy(q + o, row + (size_t)h * hs, run);
                memcpy(k + o, row + C + (size_t)h * hs, run);
                memcpy(v + o, row + 2 * (size_t)C + (size_t)h * hs, run);
            }
        }
}

/* dq,dk,dv [B,H,T,hs] -> dqkv[B,T,3C] (overwrites) */
void cpu_qkv_merge(ppdl_backend *be, int B, int T, int C, int H, const float *dq,
                   const float *dk, const float *dv, float *dqkv)
{
    (void)be;
    int hs = C / H;
    size_t run = (size_t)hs * sizeof(float);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = dqkv + ((size_t)b * T + t) * 3 * C; /* [3C] */
            for (int h = 0; h < H; h++) {
                size_t o = head_offset(b, h, t, H, T, hs);
                memcpy(row + (size_t)h * hs, dq + o, run);
                memcpy(row + C + (size_t)h * hs, dk + o, run);
                memcpy(row + 2 * (size_t)C + (size_t)h * hs, dv + o, run);
            }
        }
}

/* x[B,H,T,hs] -> y[B,T,C] */
void cpu_heads_to_seq(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y)
{
    (void)be;
    int hs = C / H;
    size_t run = (size_t)hs * sizeof(float);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = y + ((size_t)b * T + t) * C; /* [C] */
            for (int h = 0; h < H; h++)
                memcpy(row + (size_t)h * hs, x + head_offset(b, h, t, H, T, hs), run);
        }
}

/* x[B,T,C] -> y[B,H,T,hs] */
void cpu_seq_to_heads(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y)
{
    (void)be;
    int hs = C / H;
    size_t run = (size_t)hs * sizeof(float);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = x + ((size_t)b * T + t) * C; /* [C] */
            for (int h = 0; h < H; h++)
                memcpy(y + head_offset(b, h, t, H, T, hs), row + (size_t)h * hs, run);
        }
}

/* ------------------------------------------------------------ causal softmax */

/* s[BH,T,T] -> p[BH,T,T]: for each row (r,t), p[u] = softmax_u(scale*s[u]) over
 * u <= t, and 0 for u > t. Only the u <= t part of s is read (the upper triangle may
 * hold anything). p may alias s. */
void cpu_causal_softmax_fwd(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p)
{
    (void)be;
    for (size_t row = 0; row < (size_t)BH * T; row++) {
        int t = (int)(row % (size_t)T);
        const float *sr = s + row * T; /* [T] */
        float *pr = p + row * T;       /* [T] */
        float mx = -INFINITY;
        for (int u = 0; u <= t; u++) {
            float z = scale * sr[u];
            mx = z > mx ? z : mx;
        }
        float sum = 0.0f;
        for (int u = 0; u <= t; u++) {
            float e = expf(scale * sr[u] - mx);
            pr[u] = e;
            sum += e;
        }
        float inv = 1.0f / sum;
        for (int u = 0; u <= t; u++) pr[u] *= inv;
        for (int u = t + 1; u < T; u++) pr[u] = 0.0f;
    }
}

/* ds[u] = scale * p[u] * (dp[u] - sum_{u'<=t} dp[u'] p[u']) for u <= t, 0 above the
 * diagonal (overwrites ds; ds may alias dp). */
void cpu_causal_softmax_bwd(ppdl_backend *be, int BH, int T, float scale, const float *p,
                            const float *dp, float *ds)
{
    (void)be;
    for (size_t row = 0; row < (size_t)BH * T; row++) {
        int t = (int)(row % (size_t)T);
        const float *pr = p + row * T;   /* [T] */
        const float *dpr = dp + row * T; /* [T] */
        float *dsr = ds + row * T;       /* [T] */
        double dot = 0.0;
        for (int u = 0; u <= t; u++) dot += (double)dpr[u] * pr[u];
        float d = (float)dot;
        for (int u = 0; u <= t; u++) dsr[u] = scale * pr[u] * (dpr[u] - d);
        for (int u = t + 1; u < T; u++) dsr[u] = 0.0f;
    }
}
