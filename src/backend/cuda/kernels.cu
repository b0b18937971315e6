// kernels.cu — CUDA kernels of the CUDA backend, with C launchers (cuda_backend.h).
//
// Each kernel mirrors a CPU kernel (src/backend/cpu.c, cpu_gpt.c, cpu_conv.c), which is
// its reference and documents the semantics; tests/unit/test_backend_ops.c compares the two.
// Shape letters are those of backend.h.
//
// Determinism: no kernel here uses atomics, so a run repeats bitwise. Reductions run
// in a fixed order (a fixed grid, then a fixed tree). Where each output element is the
// sum of a few inputs (embedding backward, col2im, max-pool backward), one thread owns
// the element and adds its inputs in the CPU's order, so those results are bitwise the
// CPU's.
//
// Launch shapes: 256 threads for elementwise kernels; a warp per row for the row-wise
// kernels of the transformer (layernorm, causal softmax), whose rows are a few hundred
// to a few thousand floats; a block per row for the loss, whose rows are a vocabulary.
//
// Kernels are launched through PPDL_LAUNCH(kernel, grid, block, stream, args...), the
// <<<grid, block, 0, stream>>> launch: tests/cuda_emu.h redefines it to run this very
// file on the CPU (a thread per fiber), so that CI without a GPU tests the kernels'
// indexing, reductions and aliasing (tests/unit/test_backend_ops.c, part 2).
#ifndef PPDL_CUDA_EMU
#include <cuda_runtime.h>
#define PPDL_LAUNCH(kernel, grid, block, stream, ...) kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_backend.h"

namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kThreads / kWarp; // warp-per-row kernels

unsigned blocks_for(size_t n) { return (unsigned)((n + kThreads - 1) / kThreads); }
unsigned row_blocks(size_t rows) { return (unsigned)((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

int last_error() { return (int)cudaGetLastError(); }

template <typename T> __device__ T warp_sum(T v)
{
    for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float warp_max(float v)
{
    for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// ------------------------------------------------------------------ elementwise

__global__ void add_kernel(size_t n, const float *x, const float *y, float *out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

// The _rn intrinsics are never fused into multiply-adds: axpy and AdamW round each
// operation as cpu.c does, so their results are bitwise the CPU's (nvcc would contract
// a*b + c into one fma, one rounding instead of two).
__global__ void axpy_kernel(size_t n, float alpha, const float *x, float *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));
}

__global__ void bias_add_kernel(size_t n, int cols, float *x, const float *bias)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) x[i] += bias[i % cols];
}

// GELU, tanh approximation, as cpu.c (which evaluates tanh its own way: the two agree
// to a few float ulps, not bitwise)
__device__ float gelu(float v)
{
    const float k = 0.7978845608028654f;
    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
}

__device__ float gelu_grad(float v)
{
    const float k = 0.7978845608028654f;
    float t = tanhf(k * (v + 0.044715f * v * v * v));
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * v * v);
}

__global__ void act_fwd_kernel(int act, size_t n, const float *x, float *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    y[i] = act == 1 ? (v > 0 ? v : 0.0f) : act == 2 ? gelu(v) : v;
}

__global__ void act_bwd_kernel(int act, size_t n, const float *x, const float *dy, float *dx)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    dx[i] = act == 1 ? (v > 0 ? dy[i] : 0.0f) : act == 2 ? dy[i] * gelu_grad(v) : dy[i];
}

__global__ void adamw_kernel(size_t n, float *p, const float *g, float *m, float *v, float decay,
                             float b1, float b2, float a1, float a2, float eps, float step, float c2s)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    // cpu.c's expressions, operation by operation and in its order
    float gi = g[i];
    float w = __fmul_rn(p[i], decay);
    float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(a1, gi));
    float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(a2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c2s), eps);
    p[i] = __fsub_rn(w, __fdiv_rn(__fmul_rn(step, mi), den));
}

// ------------------------------------------------------------------ column sums
// A block of 32 x 32 threads owns 32 columns: thread (tx, ty) sums rows ty, ty+32, ...
// of column tx in order, then the 32 partial sums of a column are added in ty order.

constexpr int kColTile = 32;

// dbias[c] += sum_r dy[r, c]
__global__ void bias_grad_kernel(int rows, int cols, const float *dy, float *dbias)
{
    __shared__ float part[kColTile][kColTile + 1];
    int c = blockIdx.x * kColTile + threadIdx.x;
    float s = 0.0f;
    if (c < cols)
        for (int r = threadIdx.y; r < rows; r += kColTile) s += dy[(size_t)r * cols + c];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t = 0.0f;
        for (int k = 0; k < kColTile; k++) t += part[k][threadIdx.x];
        dbias[c] += t;
    }
}

// layernorm backward, the parameter half: dw[c] += sum_r dy*n, db[c] += sum_r dy with
// n = (x - mean[r]) * rstd[r]
__global__ void layernorm_bwd_params_kernel(int rows, int C, const float *x, const float *mean,
                                            const float *rstd, const float *dy, float *dw, float *db)
{
    __shared__ float pw[kColTile][kColTile + 1], pb[kColTile][kColTile + 1];
    int c = blockIdx.x * kColTile + threadIdx.x;
    float sw = 0.0f, sb = 0.0f;
    if (c < C)
        for (int r = threadIdx.y; r < rows; r += kColTile) {
            size_t i = (size_t)r * C + c;
            float n = (x[i] - mean[r]) * rstd[r];
            sw += dy[i] * n;
            sb += dy[i];
        }
    pw[threadIdx.y][threadIdx.x] = sw;
    pb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < kColTile; k++) {
            tw += pw[k][threadIdx.x];
            tb += pb[k][threadIdx.x];
        }
        dw[c] += tw;
        db[c] += tb;
    }
}

// ------------------------------------------------------------------ sum of squares
// Partial sums in double over a grid-stride loop of a fixed grid; the host adds the
// partials in order (the grid size depends only on n, so the result repeats).

__global__ void sumsq_kernel(size_t n, const float *x, double *partial)
{
    __shared__ double s[kThreads];
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double v = x[i];
        acc += v * v;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int h = kThreads / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// ------------------------------------------------------------------ layernorm
// A warp per row. Row statistics in double, as cpu_gpt.c.

__global__ void layernorm_fwd_kernel(int rows, int C, float eps, const float *x, const float *w,
                                     const float *b, float *y, float *mean, float *rstd)
{
    int r = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (r >= rows) return;
    const float *xr = x + (size_t)r * C;
    float *yr = y + (size_t)r * C;
    double s = 0.0;
    for (int i = lane; i < C; i += kWarp) s += xr[i];
    double mu = warp_sum(s) / C;
    double v = 0.0;
    for (int i = lane; i < C; i += kWarp) {
        double d = xr[i] - mu;
        v += d * d;
    }
    double var = warp_sum(v) / C;
    float m = (float)mu, rs = (float)(1.0 / sqrt(var + (double)eps));
    for (int i = lane; i < C; i += kWarp) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
    if (lane == 0) {
        mean[r] = m;
        rstd[r] = rs;
    }
}

// layernorm backward, the input half: dx[r] += rstd * (g - mean(g) - n * mean(g n)),
// g = dy * w
__global__ void layernorm_bwd_dx_kernel(int rows, int C, const float *x, const float *w, const float *mean,
                                        const float *rstd, const float *dy, float *dx)
{
    int r = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (r >= rows) return;
    const float *xr = x + (size_t)r * C, *dyr = dy + (size_t)r * C;
    float *dxr = dx + (size_t)r * C;
    float m = mean[r], rs = rstd[r];
    double sg = 0.0, sgn = 0.0;
    for (int i = lane; i < C; i += kWarp) {
        float n = (xr[i] - m) * rs;
        float g = dyr[i] * w[i];
        sg += g;
        sgn += (double)g * n;
    }
    float mean_g = (float)(warp_sum(sg) / C), mean_gn = (float)(warp_sum(sgn) / C);
    for (int i = lane; i < C; i += kWarp) {
        float n = (xr[i] - m) * rs;
        float g = dyr[i] * w[i];
        dxr[i] += (g - mean_g - n * mean_gn) * rs;
    }
}

// ------------------------------------------------------------------ embedding

__global__ void embedding_fwd_kernel(int BT, int T, int C, const int32_t *tokens, const float *wte,
                                     const float *wpe, float *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C);
    y[i] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)(bt % T) * C + c];
}

// dwpe[t, c] += sum_b dy[b, t, c], b in order (thread per (t, c))
__global__ void embedding_bwd_wpe_kernel(int B, int T, int C, const float *dy, float *dwpe)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C) return;
    float acc = dwpe[i];
    for (int b = 0; b < B; b++) acc += dy[(size_t)b * T * C + i];
    dwpe[i] = acc;
}

// dwte[tok, c] += dy[bt, c] for every position bt in order. Sort-free and without
// atomics: block (x, p) owns columns x*256 .. of the vocabulary rows v with
// v % P == p, scans all positions and applies those whose token it owns. Each element
// of dwte has one owner, which adds its contributions in position order: the CPU's.
constexpr int kEmbParts = 64;
constexpr int kTokChunk = 1024;

__global__ void embedding_bwd_wte_kernel(int BT, int C, const int32_t *tokens, const float *dy, float *dwte)
{
    __shared__ int32_t tok[kTokChunk];
    int c = blockIdx.x * blockDim.x + threadIdx.x, part = blockIdx.y;
    for (int base = 0; base < BT; base += kTokChunk) {
        int n = BT - base < kTokChunk ? BT - base : kTokChunk;
        __syncthreads();
        for (int k = threadIdx.x; k < n; k += blockDim.x) tok[k] = tokens[base + k];
        __syncthreads();
        if (c >= C) continue;
        for (int k = 0; k < n; k++) {
            int v = tok[k];
            if (v % kEmbParts != part) continue;
            dwte[(size_t)v * C + c] += dy[(size_t)(base + k) * C + c];
        }
    }
}

// ------------------------------------------------------------------ attention reshapes
// element (b, t, h, d) sits at [b, t, h*hs + d] in the sequence layout and at
// [b, h, t, d] in the head layout; a thread per element of the head layout

__device__ void head_index(size_t i, int T, int H, int hs, int *b, int *t, int *h, int *d)
{
    *d = (int)(i % hs);
    size_t r = i / hs;
    *t = (int)(r % T);
    r /= T;
    *h = (int)(r % H);
    *b = (int)(r / H);
}

__global__ void qkv_split_kernel(int B, int T, int C, int H, const float *qkv, float *q, float *k, float *v)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int hs = C / H;
    if (i >= (size_t)B * T * C) return;
    int b, t, h, d;
    head_index(i, T, H, hs, &b, &t, &h, &d);
    const float *row = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs + d;
    q[i] = row[0];
    k[i] = row[C];
    v[i] = row[2 * (size_t)C];
}

__global__ void qkv_merge_kernel(int B, int T, int C, int H, const float *dq, const float *dk, const float *dv,
                                 float *dqkv)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int hs = C / H;
    if (i >= (size_t)B * T * C) return;
    int b, t, h, d;
    head_index(i, T, H, hs, &b, &t, &h, &d);
    float *row = dqkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs + d;
    row[0] = dq[i];
    row[C] = dk[i];
    row[2 * (size_t)C] = dv[i];
}

// to_seq: x[B,H,T,hs] -> y[B,T,C]; otherwise x[B,T,C] -> y[B,H,T,hs]
__global__ void heads_seq_kernel(int B, int T, int C, int H, int to_seq, const float *x, float *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    int hs = C / H;
    if (i >= (size_t)B * T * C) return;
    int b, t, h, d;
    head_index(i, T, H, hs, &b, &t, &h, &d);
    size_t s = ((size_t)b * T + t) * C + (size_t)h * hs + d;
    if (to_seq) y[s] = x[i];
    else y[i] = x[s];
}

// ------------------------------------------------------------------ causal softmax
// A warp per row (r, t) of length T; only u <= t is read, u > t is written 0. p may
// alias s and ds may alias dp: every element is read and written by the same lane.

// The forward takes the last n rows of the [L,L] square (decoding with a key/value
// cache: n new positions against L cached ones); training's is n = L = T.
__global__ void causal_softmax_fwd_kernel(int BH, int n, int T, float scale, const float *s, float *p)
{
    size_t row = blockIdx.x * (size_t)kRowsPerBlock + threadIdx.x / kWarp;
    int lane = threadIdx.x % kWarp;
    if (row >= (size_t)BH * n) return;
    int t = T - n + (int)(row % n);
    const float *sr = s + row * T;
    float *pr = p + row * T;
    float mx = -INFINITY;
    for (int u = lane; u <= t; u += kWarp) mx = fmaxf(mx, scale * sr[u]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int u = lane; u <= t; u += kWarp) sum += expf(scale * sr[u] - mx);
    float inv = 1.0f / warp_sum(sum);
    for (int u = lane; u < T; u += kWarp) pr[u] = u <= t ? expf(scale * sr[u] - mx) * inv : 0.0f;
}

__global__ void causal_softmax_bwd_kernel(int BH, int T, float scale, const float *p, const float *dp, float *ds)
{
    size_t row = blockIdx.x * (size_t)kRowsPerBlock + threadIdx.x / kWarp;
    int lane = threadIdx.x % kWarp;
    if (row >= (size_t)BH * T) return;
    int t = (int)(row % T);
    const float *pr = p + row * T, *dpr = dp + row * T;
    float *dsr = ds + row * T;
    double dot = 0.0;
    for (int u = lane; u <= t; u += kWarp) dot += (double)dpr[u] * pr[u];
    float d = (float)warp_sum(dot);
    for (int u = lane; u < T; u += kWarp) dsr[u] = u <= t ? scale * pr[u] * (dpr[u] - d) : 0.0f;
}

// ------------------------------------------------------------------ loss
// A block per row of logits[rows, V]: max, then the sum of exponentials in double,
// then the gradient. The row's loss goes to row_loss[r] (double); a second kernel adds
// the rows in order into *loss_sum. dlogits may alias logits: z[t] is read before any
// write, and each element is read and written by the same thread.

constexpr int kLossThreads = 512;

__device__ float block_max(float v, float *sh)
{
    v = warp_max(v);
    int w = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < (int)(blockDim.x / kWarp) ? sh[lane] : -INFINITY;
        v = warp_max(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

__device__ double block_sum(double v, double *sh)
{
    v = warp_sum(v);
    int w = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < (int)(blockDim.x / kWarp) ? sh[lane] : 0.0;
        v = warp_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

__global__ void softmax_xent_kernel(int V, const float *logits, const int32_t *targets, float scale,
                                    double *row_loss, float *dlogits)
{
    __shared__ float shf[kWarp];
    __shared__ double shd[kWarp];
    size_t r = blockIdx.x;
    const float *z = logits + r * V;
    float *d = dlogits + r * V;
    int t = targets[r];
    float zt = z[t];
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, z[j]);
    mx = block_max(mx, shf);
    double s = 0.0;
    for (int j = threadIdx.x; j < V; j += blockDim.x) s += exp((double)(z[j] - mx));
    double sum = block_sum(s, shd); // every thread has read all it reads of z, and zt
    if (threadIdx.x == 0) row_loss[r] = log(sum) - (double)(zt - mx);
    float inv = (float)(1.0 / sum);
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float g = scale * (expf(z[j] - mx) * inv);
        d[j] = j == t ? g - scale : g;
    }
}

// *loss_sum += sum_r row_loss[r]: one block, fixed order
__global__ void loss_reduce_kernel(int rows, const double *row_loss, float *loss_sum)
{
    __shared__ double shd[kWarp];
    double s = 0.0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) s += row_loss[r];
    s = block_sum(s, shd);
    if (threadIdx.x == 0) *loss_sum += (float)s;
}

// ------------------------------------------------------------------ convolution helpers

__device__ int conv_out(int n, int k, int stride, int pad) { return (n + 2 * pad - k) / stride + 1; }

// col[(c*kh + i)*kw + j, oh*OW + ow] = x[c, oh*stride - pad + i, ow*stride - pad + j] (0 outside)
__global__ void im2col_kernel(int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad, const float *x,
                              float *col)
{
    const int OH = conv_out(Hh, kh, stride, pad), OW = conv_out(Ww, kw, stride, pad);
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, P = (size_t)OH * OW;
    if (i >= (size_t)Ci * kh * kw * P) return;
    int p = (int)(i % P), row = (int)(i / P);
    int j = row % kw, ki = (row / kw) % kh, c = row / (kw * kh);
    int ih = (p / OW) * stride - pad + ki, iw = (p % OW) * stride - pad + j;
    col[i] = ih >= 0 && ih < Hh && iw >= 0 && iw < Ww ? x[((size_t)c * Hh + ih) * Ww + iw] : 0.0f;
}

// dx[c, h, w] += the col entries that im2col copied from it, taps (i, j) in order
__global__ void col2im_kernel(int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad, const float *col,
                              float *dx)
{
    const int OH = conv_out(Hh, kh, stride, pad), OW = conv_out(Ww, kw, stride, pad);
    size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x, P = (size_t)OH * OW;
    if (idx >= (size_t)Ci * Hh * Ww) return;
    int w = (int)(idx % Ww), h = (int)((idx / Ww) % Hh), c = (int)(idx / ((size_t)Hh * Ww));
    float acc = dx[idx];
    for (int i = 0; i < kh; i++) {
        int ys = h + pad - i; // = oh * stride
        if (ys < 0 || ys % stride) continue;
        int oh = ys / stride;
        if (oh >= OH) continue;
        for (int j = 0; j < kw; j++) {
            int xs = w + pad - j;
            if (xs < 0 || xs % stride) continue;
            int ow = xs / stride;
            if (ow >= OW) continue;
            acc += col[((size_t)(c * kh + i) * kw + j) * P + (size_t)oh * OW + ow];
        }
    }
    dx[idx] = acc;
}

// a thread per output; the window is folded in cpu_conv.c's order (top-left first,
// then row-major; strictly greater wins, a NaN wins)
__global__ void maxpool_fwd_kernel(int N, int C, int Hh, int Ww, int k, int stride, const float *x, float *y,
                                   int32_t *argmax)
{
    const int OH = (Hh - k) / stride + 1, OW = (Ww - k) / stride + 1;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C * OH * OW) return;
    int ow = (int)(i % OW), oh = (int)((i / OW) % OH);
    size_t plane = i / ((size_t)OH * OW);
    const float *xp = x + plane * Hh * Ww;
    int h0 = oh * stride, w0 = ow * stride;
    float best = xp[(size_t)h0 * Ww + w0];
    int arg = h0 * Ww + w0;
    for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++) {
            if (a == 0 && b == 0) continue;
            int at = (h0 + a) * Ww + w0 + b;
            float v = xp[at];
            if (v > best || isnan(v)) {
                best = v;
                arg = at;
            }
        }
    y[i] = best;
    argmax[i] = arg;
}

// dx[n, c, h, w] = sum of dy over the windows whose argmax is (h, w), windows in
// output order (the order in which cpu_conv.c scatters them)
__global__ void maxpool_bwd_kernel(int N, int C, int Hh, int Ww, int k, int stride, const int32_t *argmax,
                                   const float *dy, float *dx)
{
    const int OH = (Hh - k) / stride + 1, OW = (Ww - k) / stride + 1;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C * Hh * Ww) return;
    int w = (int)(i % Ww), h = (int)((i / Ww) % Hh);
    size_t plane = i / ((size_t)Hh * Ww);
    const int32_t *ap = argmax + plane * OH * OW;
    const float *dyp = dy + plane * OH * OW;
    // windows oh with oh*stride <= h <= oh*stride + k - 1
    int oh0 = h - k + 1 > 0 ? (h - k + 1 + stride - 1) / stride : 0, oh1 = h / stride;
    int ow0 = w - k + 1 > 0 ? (w - k + 1 + stride - 1) / stride : 0, ow1 = w / stride;
    if (oh1 > OH - 1) oh1 = OH - 1;
    if (ow1 > OW - 1) ow1 = OW - 1;
    int me = h * Ww + w;
    float acc = 0.0f;
    for (int oh = oh0; oh <= oh1; oh++)
        for (int ow = ow0; ow <= ow1; ow++) {
            int o = oh * OW + ow;
            if (ap[o] == me) acc += dyp[o];
        }
    dx[i] = acc;
}

// ------------------------------------------------------------------ bf16
// backend/bf16.h's conversion, operation for operation, so that the results are its
// bits: round to nearest even by adding 0x7fff plus the lowest kept bit, a NaN becomes
// 0x7fc0, numbers past the largest bf16 round to infinity, subnormals round like any
// other number. Not cuda_bf16.h's __float2bfloat16: that is also round-to-nearest-even,
// but keeps a NaN's sign and payload bits (0xffff and others), which bf16.h does not.

__device__ uint16_t bf16_from_f32(float f)
{
    uint32_t u = __float_as_uint(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)rounded;
}

__device__ float f32_from_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

// x[i] rounded to bf16, kept in fp32 storage; y may be x (each element is read and
// written by the same thread)
__global__ void round_bf16_kernel(size_t n, const float *x, float *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = f32_from_bf16(bf16_from_f32(x[i]));
}

// y[i] = bf16(x[i]); y must not overlap x (see the packing below)
__global__ void narrow_bf16_kernel(size_t n, const float *x, uint16_t *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = bf16_from_f32(x[i]);
}

// y[i] = fp32 of the bf16 x[i]; y must not overlap x
__global__ void widen_bf16_kernel(size_t n, const uint16_t *x, float *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = f32_from_bf16(x[i]);
}

__global__ void copy_u16_kernel(size_t n, const uint16_t *x, uint16_t *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

}  // namespace

// ====================================================================== launchers

#define STREAM ((cudaStream_t)s)

extern "C" int ppdl_cu_add(void *s, size_t n, const float *x, const float *y, float *out)
{
    if (n) PPDL_LAUNCH(add_kernel, blocks_for(n), kThreads, STREAM, n, x, y, out);
    return last_error();
}

extern "C" int ppdl_cu_axpy(void *s, size_t n, float alpha, const float *x, float *y)
{
    if (n) PPDL_LAUNCH(axpy_kernel, blocks_for(n), kThreads, STREAM, n, alpha, x, y);
    return last_error();
}

extern "C" int ppdl_cu_bias_add(void *s, int rows, int cols, float *x, const float *bias)
{
    size_t n = (size_t)rows * cols;
    if (n) PPDL_LAUNCH(bias_add_kernel, blocks_for(n), kThreads, STREAM, n, cols, x, bias);
    return last_error();
}

extern "C" int ppdl_cu_bias_grad(void *s, int rows, int cols, const float *dy, float *dbias)
{
    if (rows > 0 && cols > 0)
        PPDL_LAUNCH(bias_grad_kernel, (cols + kColTile - 1) / kColTile, dim3(kColTile, kColTile), STREAM, rows,
                    cols, dy, dbias);
    return last_error();
}

extern "C" int ppdl_cu_act_fwd(void *s, int act, size_t n, const float *x, float *y)
{
    if (n) PPDL_LAUNCH(act_fwd_kernel, blocks_for(n), kThreads, STREAM, act, n, x, y);
    return last_error();
}

extern "C" int ppdl_cu_act_bwd(void *s, int act, size_t n, const float *x, const float *dy, float *dx)
{
    if (n) PPDL_LAUNCH(act_bwd_kernel, blocks_for(n), kThreads, STREAM, act, n, x, dy, dx);
    return last_error();
}

extern "C" int ppdl_cu_sumsq_partials(void *s, size_t n, const float *x, double *partial, int max_partials,
                                      int *n_partials)
{
    size_t want = blocks_for(n ? n : 1);
    int g = want < (size_t)max_partials ? (int)want : max_partials;
    PPDL_LAUNCH(sumsq_kernel, g, kThreads, STREAM, n, x, partial);
    *n_partials = g;
    return last_error();
}

extern "C" int ppdl_cu_adamw(void *s, size_t n, float *p, const float *g, float *m, float *v, float decay,
                             float b1, float b2, float a1, float a2, float eps, float step, float c2s)
{
    if (n)
        PPDL_LAUNCH(adamw_kernel, blocks_for(n), kThreads, STREAM, n, p, g, m, v, decay, b1, b2, a1, a2, eps, step,
                    c2s);
    return last_error();
}

extern "C" int ppdl_cu_layernorm_fwd(void *s, int rows, int C, float eps, const float *x, const float *w,
                                     const float *b, float *y, float *mean, float *rstd)
{
    if (rows > 0)
        PPDL_LAUNCH(layernorm_fwd_kernel, row_blocks(rows), kThreads, STREAM, rows, C, eps, x, w, b, y, mean, rstd);
    return last_error();
}

extern "C" int ppdl_cu_layernorm_bwd(void *s, int rows, int C, const float *x, const float *w, const float *mean,
                                     const float *rstd, const float *dy, float *dx, float *dw, float *db)
{
    if (rows <= 0 || C <= 0) return last_error();
    // either half alone (dx NULL, or dw and db NULL): the backward split (nn/layer.h)
    if (dx) PPDL_LAUNCH(layernorm_bwd_dx_kernel, row_blocks(rows), kThreads, STREAM, rows, C, x, w, mean, rstd, dy, dx);
    if (dw)
        PPDL_LAUNCH(layernorm_bwd_params_kernel, (C + kColTile - 1) / kColTile, dim3(kColTile, kColTile), STREAM, rows,
                C, x, mean, rstd, dy, dw, db);
    return last_error();
}

extern "C" int ppdl_cu_embedding_fwd(void *s, int B, int T, int C, const int32_t *tokens, const float *wte,
                                     const float *wpe, float *y)
{
    size_t n = (size_t)B * T * C;
    if (n) PPDL_LAUNCH(embedding_fwd_kernel, blocks_for(n), kThreads, STREAM, B * T, T, C, tokens, wte, wpe, y);
    return last_error();
}

extern "C" int ppdl_cu_embedding_bwd(void *s, int B, int T, int C, const int32_t *tokens, const float *dy,
                                     float *dwte, float *dwpe)
{
    if ((size_t)B * T * C == 0) return last_error();
    PPDL_LAUNCH(embedding_bwd_wpe_kernel, blocks_for((size_t)T * C), kThreads, STREAM, B, T, C, dy, dwpe);
    dim3 grid((C + kThreads - 1) / kThreads, kEmbParts);
    PPDL_LAUNCH(embedding_bwd_wte_kernel, grid, kThreads, STREAM, B * T, C, tokens, dy, dwte);
    return last_error();
}

extern "C" int ppdl_cu_qkv_split(void *s, int B, int T, int C, int H, const float *qkv, float *q, float *k,
                                 float *v)
{
    size_t n = (size_t)B * T * C;
    if (n) PPDL_LAUNCH(qkv_split_kernel, blocks_for(n), kThreads, STREAM, B, T, C, H, qkv, q, k, v);
    return last_error();
}

extern "C" int ppdl_cu_qkv_merge(void *s, int B, int T, int C, int H, const float *dq, const float *dk,
                                 const float *dv, float *dqkv)
{
    size_t n = (size_t)B * T * C;
    if (n) PPDL_LAUNCH(qkv_merge_kernel, blocks_for(n), kThreads, STREAM, B, T, C, H, dq, dk, dv, dqkv);
    return last_error();
}

extern "C" int ppdl_cu_heads_seq(void *s, int B, int T, int C, int H, int to_seq, const float *x, float *y)
{
    size_t n = (size_t)B * T * C;
    if (n) PPDL_LAUNCH(heads_seq_kernel, blocks_for(n), kThreads, STREAM, B, T, C, H, to_seq, x, y);
    return last_error();
}

extern "C" int ppdl_cu_causal_softmax_fwd(void *s, int BH, int T, float scale, const float *sc, float *p)
{
    size_t rows = (size_t)BH * T;
    if (rows) PPDL_LAUNCH(causal_softmax_fwd_kernel, row_blocks(rows), kThreads, STREAM, BH, T, T, scale, sc, p);
    return last_error();
}

extern "C" int ppdl_cu_causal_softmax_tail_fwd(void *s, int BH, int n, int L, float scale, const float *sc, float *p)
{
    size_t rows = (size_t)BH * n;
    if (rows && L >= n) PPDL_LAUNCH(causal_softmax_fwd_kernel, row_blocks(rows), kThreads, STREAM, BH, n, L, scale, sc, p);
    return last_error();
}

extern "C" int ppdl_cu_causal_softmax_bwd(void *s, int BH, int T, float scale, const float *p, const float *dp,
                                          float *ds)
{
    size_t rows = (size_t)BH * T;
    if (rows) PPDL_LAUNCH(causal_softmax_bwd_kernel, row_blocks(rows), kThreads, STREAM, BH, T, scale, p, dp, ds);
    return last_error();
}

extern "C" int ppdl_cu_softmax_xent(void *s, int rows, int V, const float *logits, const int32_t *targets,
                                    float scale, double *row_loss, float *loss_sum, float *dlogits)
{
    if (rows <= 0) return last_error();
    PPDL_LAUNCH(softmax_xent_kernel, rows, kLossThreads, STREAM, V, logits, targets, scale, row_loss, dlogits);
    PPDL_LAUNCH(loss_reduce_kernel, 1, 1024, STREAM, rows, row_loss, loss_sum);
    return last_error();
}

extern "C" int ppdl_cu_im2col(void *s, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad, const float *x,
                              float *col)
{
    size_t OH = (size_t)(Hh + 2 * pad - kh) / stride + 1, OW = (size_t)(Ww + 2 * pad - kw) / stride + 1;
    size_t n = (size_t)Ci * kh * kw * OH * OW;
    if (n) PPDL_LAUNCH(im2col_kernel, blocks_for(n), kThreads, STREAM, Ci, Hh, Ww, kh, kw, stride, pad, x, col);
    return last_error();
}

extern "C" int ppdl_cu_col2im(void *s, int Ci, int Hh, int Ww, int kh, int kw, int stride, int pad, const float *col,
                              float *dx)
{
    size_t n = (size_t)Ci * Hh * Ww;
    if (n) PPDL_LAUNCH(col2im_kernel, blocks_for(n), kThreads, STREAM, Ci, Hh, Ww, kh, kw, stride, pad, col, dx);
    return last_error();
}

extern "C" int ppdl_cu_maxpool_fwd(void *s, int N, int C, int Hh, int Ww, int k, int stride, const float *x,
                                   float *y, int32_t *argmax)
{
    size_t n = (size_t)N * C * ((Hh - k) / stride + 1) * ((Ww - k) / stride + 1);
    if (n) PPDL_LAUNCH(maxpool_fwd_kernel, blocks_for(n), kThreads, STREAM, N, C, Hh, Ww, k, stride, x, y, argmax);
    return last_error();
}

extern "C" int ppdl_cu_maxpool_bwd(void *s, int N, int C, int Hh, int Ww, int k, int stride, const int32_t *argmax,
                                   const float *dy, float *dx)
{
    size_t n = (size_t)N * C * Hh * Ww;
    if (n) PPDL_LAUNCH(maxpool_bwd_kernel, blocks_for(n), kThreads, STREAM, N, C, Hh, Ww, k, stride, argmax, dy, dx);
    return last_error();
}

// In-place packing goes through a scratch of n bf16 (2n bytes, not overlapping buf),
// in two kernels on the one stream. A single in-place kernel would race: the bf16 slot
// i is bytes 2i..2i+1 of buf, inside the fp32 element i/2, which another thread (of
// another block, in any order, or not yet started) may still have to read. The stream
// orders the two launches: the second starts after every thread of the first is done,
// so every fp32 is read (into the scratch) before any slot of buf is written.
extern "C" int ppdl_cu_pack_bf16(void *s, size_t n, void *buf, uint16_t *scratch)
{
    if (n) {
        PPDL_LAUNCH(narrow_bf16_kernel, blocks_for(n), kThreads, STREAM, n, (const float *)buf, scratch);
        PPDL_LAUNCH(copy_u16_kernel, blocks_for(n), kThreads, STREAM, n, (const uint16_t *)scratch, (uint16_t *)buf);
    }
    return last_error();
}

// the inverse: the bf16 first to the scratch, then widened into buf (fp32 i covers the
// bf16 slots 2i and 2i+1, which other threads read: the same race, the same cure)
extern "C" int ppdl_cu_unpack_bf16(void *s, size_t n, void *buf, uint16_t *scratch)
{
    if (n) {
        PPDL_LAUNCH(copy_u16_kernel, blocks_for(n), kThreads, STREAM, n, (const uint16_t *)buf, scratch);
        PPDL_LAUNCH(widen_bf16_kernel, blocks_for(n), kThreads, STREAM, n, (const uint16_t *)scratch, (float *)buf);
    }
    return last_error();
}

extern "C" int ppdl_cu_round_bf16(void *s, size_t n, const float *x, float *y)
{
    if (n) PPDL_LAUNCH(round_bf16_kernel, blocks_for(n), kThreads, STREAM, n, x, y);
    return last_error();
}

extern "C" int ppdl_cu_narrow_bf16(void *s, size_t n, const float *x, uint16_t *y)
{
    if (n) PPDL_LAUNCH(narrow_bf16_kernel, blocks_for(n), kThreads, STREAM, n, x, y);
    return last_error();
}
