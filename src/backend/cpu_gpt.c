/* cpu_gpt.c — the CPU kernels of the GPT layers: layernorm, embedding, the attention
 * reshapes and the causal softmax. Semantics are those documented at the matching
 * ppdl_be_* wrappers (backend.h).
 *
 * These kernels are the oracle the device backends are tested against. They run on
 * the backend's threads (cpu_pool.h), split over rows, or over columns where a
 * gradient sums over rows; every sum has a fixed order that depends only on the
 * shapes (rows in order; within a row the CPU_LANES partials of cpu_math.h), so the
 * result never depends on the thread count. Row statistics (mean, variance, the dot
 * products of the backward passes) are accumulated in double.
 *
 * Shapes use the letters of backend.h; N = rows (B*T in the layers), BH = B*H.
 */
#include "backend/cpu_kernels.h"
#include "backend/cpu_math.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ layernorm */

/* the least number of rows of `cols` floats worth a piece of their own */
static size_t grain_rows(size_t cols) { return 16384 / (cols ? cols : 1) + 1; }

typedef struct {
    const float *x, *w, *b, *dy;
    float *y, *mean, *rstd, *dx, *dw, *db;
    size_t C;
    size_t rows;
    float eps;
} ln_args;

CPU_SIMD static void ln_fwd_rows(void *arg, size_t lo, size_t hi)
{
    const ln_args *a = arg;
    size_t C = a->C;
    const float *w = a->w, *b = a->b;
    for (size_t r = lo; r < hi; r++) {
        const float *xr = a->x + r * C; /* [C] */
        float *yr = a->y + r * C;       /* [C] */
        double mu = cpu_sum_f64(xr, C) / (double)C;
        double var = cpu_sumsqdev_f64(xr, C, mu) / (double)C;
        float m = (float)mu;
        float rs = (float)(1.0 / sqrt(var + (double)a->eps));
        for (size_t i = 0; i < C; i++) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
        a->mean[r] = m;
        a->rstd[r] = rs;
    }
}

/* x[rows,C] -> y[rows,C] = (x - mean) * rstd * w + b; mean[rows], rstd[rows] kept.
 * Biased variance (PyTorch's LayerNorm), two passes in double. */
void cpu_layernorm_fwd(ppdl_backend *be, int rows, int C, float eps, const float *x,
                       const float *w, const float *b, float *y, float *mean, float *rstd)
{
    if (rows <= 0 || C <= 0) return;
    ln_args a = {.x = x, .w = w, .b = b, .y = y, .mean = mean, .rstd = rstd, .C = (size_t)C,
                 .eps = eps};
    cpu_pool_for(cpu_pool_of(be), (size_t)rows, grain_rows((size_t)C), ln_fwd_rows, &a);
}

/* dx for rows [lo,hi): with n = (x-mean)*rstd and g = dy*w,
 * dx += rstd * (g - mean(g) - n * mean(g*n)) */
CPU_SIMD static void ln_bwd_rows(void *arg, size_t lo, size_t hi)
{
    const ln_args *a = arg;
    size_t C = a->C;
    const float *w = a->w;
    for (size_t r = lo; r < hi; r++) {
        const float *xr = a->x + r * C;   /* [C] */
        const float *dyr = a->dy + r * C; /* [C] */
        float *dxr = a->dx + r * C;       /* [C] */
        float m = a->mean[r], rs = a->rstd[r];
        double sg[CPU_LANES] = {0}, sgn[CPU_LANES] = {0};
        size_t i = 0;
        for (; i + CPU_LANES <= C; i += CPU_LANES)
            for (int l = 0; l < CPU_LANES; l++) {
                float n = (xr[i + l] - m) * rs;
                float g = dyr[i + l] * w[i + l];
                sg[l] += g;
                sgn[l] += (double)g * n;
            }
        for (int l = 0; i < C; i++, l++) {
            float n = (xr[i] - m) * rs;
            float g = dyr[i] * w[i];
            sg[l] += g;
            sgn[l] += (double)g * n;
        }
        float mean_g = (float)(cpu_lanes_sum_f64(sg) / (double)C);
        float mean_gn = (float)(cpu_lanes_sum_f64(sgn) / (double)C);
        for (i = 0; i < C; i++) {
            float n = (xr[i] - m) * rs;
            float g = dyr[i] * w[i];
            dxr[i] += (g - mean_g - n * mean_gn) * rs;
        }
    }
}

/* dw, db for columns [lo,hi): dw += sum_r dy*n, db += sum_r dy, rows in order (the
 * columns are independent, so any split of them keeps every sum's order) */
CPU_SIMD static void ln_bwd_cols(void *arg, size_t lo, size_t hi)
{
    const ln_args *a = arg;
    size_t C = a->C;
    float *dw = a->dw, *db = a->db;
    for (size_t r = 0; r < a->rows; r++) {
        const float *xr = a->x + r * C;
        const float *dyr = a->dy + r * C;
        float m = a->mean[r], rs = a->rstd[r];
        for (size_t i = lo; i < hi; i++) {
            float n = (xr[i] - m) * rs;
            dw[i] += dyr[i] * n;
            db[i] += dyr[i];
        }
    }
}

/* Given dy[rows,C], adds into dx[rows,C], dw[C], db[C]: rows in parallel for dx, then
 * columns in parallel for dw and db. The two halves read only the inputs, so either
 * runs alone (dx NULL, or dw and db NULL) with the bits it has in the whole call: the
 * backward split of the layers (nn/layer.h) runs them at different times. */
void cpu_layernorm_bwd(ppdl_backend *be, int rows, int C, const float *x, const float *w,
                       const float *mean, const float *rstd, const float *dy, float *dx,
                       float *dw, float *db)
{
    if (rows <= 0 || C <= 0) return;
    /* mean and rstd are only read; the cast lets one argument struct serve both ways */
    ln_args a = {.x = x, .w = w, .dy = dy, .dx = dx, .dw = dw, .db = db,
                 .mean = (float *)mean, .rstd = (float *)rstd, .C = (size_t)C,
                 .rows = (size_t)rows};
    cpu_pool *pool = cpu_pool_of(be);
    if (dx) cpu_pool_for(pool, (size_t)rows, grain_rows((size_t)C), ln_bwd_rows, &a);
    if (dw) cpu_pool_for(pool, (size_t)C, 16, ln_bwd_cols, &a);
}

/* ------------------------------------------------------------------ embedding */

typedef struct {
    const int32_t *tokens;
    const float *wte, *wpe, *dy;
    float *y, *dwte, *dwpe;
    size_t T, C, rows;
} emb_args;

CPU_SIMD static void emb_fwd_rows(void *arg, size_t lo, size_t hi)
{
    const emb_args *a = arg;
    size_t C = a->C;
    for (size_t bt = lo; bt < hi; bt++) {
        const float *e = a->wte + (size_t)a->tokens[bt] * C; /* [C] */
        const float *p = a->wpe + (bt % a->T) * C;           /* [C] */
        float *yr = a->y + bt * C;                           /* [C] */
        for (size_t i = 0; i < C; i++) yr[i] = e[i] + p[i];
    }
}

/* tokens[B,T] -> y[B,T,C] = wte[tok] + wpe[t]. Tokens are validated when the data
 * are read (data_io), not here. */
void cpu_embedding_fwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                       const float *wte, const float *wpe, float *y)
{
    if (B <= 0 || T <= 0 || C <= 0) return;
    emb_args a = {.tokens = tokens, .wte = wte, .wpe = wpe, .y = y, .T = (size_t)T,
                  .C = (size_t)C};
    cpu_pool_for(cpu_pool_of(be), (size_t)B * T, grain_rows((size_t)C), emb_fwd_rows, &a);
}

/* columns [lo,hi) of every gradient row, positions in order */
CPU_SIMD static void emb_bwd_cols(void *arg, size_t lo, size_t hi)
{
    const emb_args *a = arg;
    size_t C = a->C;
    for (size_t bt = 0; bt < a->rows; bt++) {
        const float *d = a->dy + bt * C;                   /* [C] */
        float *de = a->dwte + (size_t)a->tokens[bt] * C;   /* [C] */
        float *dp = a->dwpe + (bt % a->T) * C;             /* [C] */
        for (size_t i = lo; i < hi; i++) {
            de[i] += d[i];
            dp[i] += d[i];
        }
    }
}

/* adds dy[B,T,C] into dwte[V,C] (rows of the tokens seen) and dwpe[T,C], positions in
 * order, so repeated tokens accumulate in a fixed order; the threads split the columns */
void cpu_embedding_bwd(ppdl_backend *be, int B, int T, int C, const int32_t *tokens,
                       const float *dy, float *dwte, float *dwpe)
{
    if (B <= 0 || T <= 0 || C <= 0) return;
    emb_args a = {.tokens = tokens, .dy = dy, .dwte = dwte, .dwpe = dwpe, .T = (size_t)T,
                  .C = (size_t)C, .rows = (size_t)B * T};
    cpu_pool_for(cpu_pool_of(be), (size_t)C, 16, emb_bwd_cols, &a);
}

/* ------------------------------------------------------- attention reshapes */

/* The four reshapes copy runs of hs contiguous floats: element (b,t,h,d) sits at
 * [b,t, h*hs + d] in the sequence layout and at [b,h,t,d] in the head layout. Each
 * piece of work is a range of (b,t) rows. */
static size_t head_offset(size_t b, size_t h, size_t t, size_t H, size_t T, size_t hs)
{
    return ((b * H + h) * T + t) * hs;
}

typedef struct {
    size_t T, C, H;
    const float *src[3];
    float *dst[3];
} reshape_args;

/* qkv[B,T,3C] (q, then k, then v along the last axis) -> q,k,v each [B,H,T,hs] */
static void qkv_split_rows(void *arg, size_t lo, size_t hi)
{
    const reshape_args *a = arg;
    size_t T = a->T, C = a->C, H = a->H, hs = C / H, run = hs * sizeof(float);
    for (size_t bt = lo; bt < hi; bt++) {
        size_t b = bt / T, t = bt % T;
        const float *row = a->src[0] + bt * 3 * C; /* [3C] */
        for (size_t h = 0; h < H; h++) {
            size_t o = head_offset(b, h, t, H, T, hs);
            for (int j = 0; j < 3; j++) memcpy(a->dst[j] + o, row + j * C + h * hs, run);
        }
    }
}

/* dq,dk,dv [B,H,T,hs] -> dqkv[B,T,3C] (overwrites) */
static void qkv_merge_rows(void *arg, size_t lo, size_t hi)
{
    const reshape_args *a = arg;
    size_t T = a->T, C = a->C, H = a->H, hs = C / H, run = hs * sizeof(float);
    for (size_t bt = lo; bt < hi; bt++) {
        size_t b = bt / T, t = bt % T;
        float *row = a->dst[0] + bt * 3 * C; /* [3C] */
        for (size_t h = 0; h < H; h++) {
            size_t o = head_offset(b, h, t, H, T, hs);
            for (int j = 0; j < 3; j++) memcpy(row + j * C + h * hs, a->src[j] + o, run);
        }
    }
}

/* x[B,H,T,hs] -> y[B,T,C] */
static void heads_to_seq_rows(void *arg, size_t lo, size_t hi)
{
    const reshape_args *a = arg;
    size_t T = a->T, C = a->C, H = a->H, hs = C / H, run = hs * sizeof(float);
    for (size_t bt = lo; bt < hi; bt++) {
        float *row = a->dst[0] + bt * C; /* [C] */
        for (size_t h = 0; h < H; h++)
            memcpy(row + h * hs, a->src[0] + head_offset(bt / T, h, bt % T, H, T, hs), run);
    }
}

/* x[B,T,C] -> y[B,H,T,hs] */
static void seq_to_heads_rows(void *arg, size_t lo, size_t hi)
{
    const reshape_args *a = arg;
    size_t T = a->T, C = a->C, H = a->H, hs = C / H, run = hs * sizeof(float);
    for (size_t bt = lo; bt < hi; bt++) {
        const float *row = a->src[0] + bt * C; /* [C] */
        for (size_t h = 0; h < H; h++)
            memcpy(a->dst[0] + head_offset(bt / T, h, bt % T, H, T, hs), row + h * hs, run);
    }
}

static void reshape(ppdl_backend *be, int B, int T, int C, int H, reshape_args *a,
                    size_t row_floats, cpu_range_fn fn)
{
    if (B <= 0 || T <= 0 || C <= 0 || H <= 0) return;
    a->T = (size_t)T;
    a->C = (size_t)C;
    a->H = (size_t)H;
    cpu_pool_for(cpu_pool_of(be), (size_t)B * T, grain_rows(row_floats), fn, a);
}

void cpu_qkv_split(ppdl_backend *be, int B, int T, int C, int H, const float *qkv, float *q,
                   float *k, float *v)
{
    reshape_args a = {.src = {qkv}, .dst = {q, k, v}};
    reshape(be, B, T, C, H, &a, 3 * (size_t)C, qkv_split_rows);
}

void cpu_qkv_merge(ppdl_backend *be, int B, int T, int C, int H, const float *dq,
                   const float *dk, const float *dv, float *dqkv)
{
    reshape_args a = {.src = {dq, dk, dv}, .dst = {dqkv}};
    reshape(be, B, T, C, H, &a, 3 * (size_t)C, qkv_merge_rows);
}

void cpu_heads_to_seq(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y)
{
    reshape_args a = {.src = {x}, .dst = {y}};
    reshape(be, B, T, C, H, &a, (size_t)C, heads_to_seq_rows);
}

void cpu_seq_to_heads(ppdl_backend *be, int B, int T, int C, int H, const float *x, float *y)
{
    reshape_args a = {.src = {x}, .dst = {y}};
    reshape(be, B, T, C, H, &a, (size_t)C, seq_to_heads_rows);
}

/* ------------------------------------------------------------ causal softmax */

typedef struct {
    const float *s, *p, *dp;
    float *out;
    size_t T;
    size_t n, L;                   /* forward: the last n query rows of L positions */
    float scale;
} softmax_args;

/* rows [lo,hi) of the forward, n per head, each of L columns: row (r,i) is position
 * t = L-n+i and keeps u <= t (the training forward is n = L = T: t = i) */
CPU_SIMD static void softmax_fwd_rows(void *arg, size_t lo, size_t hi)
{
    const softmax_args *a = arg;
    size_t T = a->L, first = a->L - a->n;
    float scale = a->scale;
    for (size_t row = lo; row < hi; row++) {
        size_t len = first + row % a->n + 1; /* u = 0..t */
        const float *sr = a->s + row * T;     /* [L] */
        float *pr = a->out + row * T;         /* [L] */
        /* scale > 0, so the largest scaled score is scale times the largest score */
        float mx = scale * cpu_max_f32(sr, len);
        float acc[CPU_LANES] = {0};
        size_t u = 0;
        for (; u + CPU_LANES <= len; u += CPU_LANES)
            for (int l = 0; l < CPU_LANES; l++) {
                float e = cpu_expf(scale * sr[u + l] - mx);
                pr[u + l] = e;
                acc[l] += e;
            }
        for (int l = 0; u < len; u++, l++) {
            float e = cpu_expf(scale * sr[u] - mx);
            pr[u] = e;
            acc[l] += e;
        }
        float inv = 1.0f / cpu_lanes_sum_f32(acc);
        for (u = 0; u < len; u++) pr[u] *= inv;
        for (; u < T; u++) pr[u] = 0.0f;
    }
}

/* s[BH,T,T] -> p[BH,T,T]: for each row (r,t), p[u] = softmax_u(scale*s[u]) over
 * u <= t, and 0 for u > t. Only the u <= t part of s is read (the upper triangle may
 * hold anything). p may alias s. scale > 0. */
void cpu_causal_softmax_fwd(ppdl_backend *be, int BH, int T, float scale, const float *s, float *p)
{
    if (BH <= 0 || T <= 0) return;
    softmax_args a = {.s = s, .out = p, .n = (size_t)T, .L = (size_t)T, .scale = scale};
    cpu_pool_for(cpu_pool_of(be), (size_t)BH * T, grain_rows((size_t)T), softmax_fwd_rows, &a);
}

/* s[BH,n,L] -> p[BH,n,L]: the last n rows of cpu_causal_softmax_fwd's [L,L] (row i is
 * position L-n+i); p may alias s */
void cpu_causal_softmax_tail_fwd(ppdl_backend *be, int BH, int n, int L, float scale, const float *s, float *p)
{
    if (BH <= 0 || n <= 0 || L < n) return;
    softmax_args a = {.s = s, .out = p, .n = (size_t)n, .L = (size_t)L, .scale = scale};
    cpu_pool_for(cpu_pool_of(be), (size_t)BH * n, grain_rows((size_t)L), softmax_fwd_rows, &a);
}

CPU_SIMD static void softmax_bwd_rows(void *arg, size_t lo, size_t hi)
{
    const softmax_args *a = arg;
    size_t T = a->T;
    float scale = a->scale;
    for (size_t row = lo; row < hi; row++) {
        size_t len = row % T + 1;
        const float *pr = a->p + row * T;   /* [T] */
        const float *dpr = a->dp + row * T; /* [T] */
        float *dsr = a->out + row * T;      /* [T] */
        double acc[CPU_LANES] = {0};
        size_t u = 0;
        for (; u + CPU_LANES <= len; u += CPU_LANES)
            for (int l = 0; l < CPU_LANES; l++) acc[l] += (double)dpr[u + l] * pr[u + l];
        for (int l = 0; u < len; u++, l++) acc[l] += (double)dpr[u] * pr[u];
        float d = (float)cpu_lanes_sum_f64(acc);
        for (u = 0; u < len; u++) dsr[u] = scale * pr[u] * (dpr[u] - d);
        for (; u < T; u++) dsr[u] = 0.0f;
    }
}

/* ds[u] = scale * p[u] * (dp[u] - sum_{u'<=t} dp[u'] p[u']) for u <= t, 0 above the
 * diagonal (overwrites ds; ds may alias dp). */
void cpu_causal_softmax_bwd(ppdl_backend *be, int BH, int T, float scale, const float *p,
                            const float *dp, float *ds)
{
    if (BH <= 0 || T <= 0) return;
    softmax_args a = {.p = p, .dp = dp, .out = ds, .T = (size_t)T, .scale = scale};
    cpu_pool_for(cpu_pool_of(be), (size_t)BH * T, grain_rows((size_t)T), softmax_bwd_rows, &a);
}
