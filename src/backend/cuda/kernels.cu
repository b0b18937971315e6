// kernels.cu — CUDA kernels of the CUDA backend, with C launchers (cuda_backend.h).
// Each kernel mirrors a CPU kernel in src/backend/cpu.c, which is its reference.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) { return (unsigned)((n + kThreads - 1) / kThreads); }

__global__ void add_kernel(size_t n, const float *x, const float *y, float *out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

__global__ void axpy_kernel(size_t n, float alpha, const float *x, float *y)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] += alpha * x[i];
}

__global__ void bias_add_kernel(size_t n, int cols, float *x, const float *bias)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) x[i] += bias[i % cols];
}

// GELU, tanh approximation, as cpu.c
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
    float w = p[i] * decay;
    float mi = b1 * m[i] + a1 * g[i];
    float vi = b2 * v[i] + a2 * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] = w - step * mi / (sqrtf(vi) / c2s + eps);
}

}  // namespace

extern "C" int ppdl_cu_add(void *s, size_t n, const float *x, const float *y, float *out)
{
    if (n) add_kernel<<<blocks_for(n), kThreads, 0, (cudaStream_t)s>>>(n, x, y, out);
    return (int)cudaGetLastError();
}

extern "C" int ppdl_cu_axpy(void *s, size_t n, float alpha, const float *x, float *y)
{
    if (n) axpy_kernel<<<blocks_for(n), kThreads, 0, (cudaStream_t)s>>>(n, alpha, x, y);
    return (int)cudaGetLastError();
}

extern "C" int ppdl_cu_bias_add(void *s, int rows, int cols, float *x, const float *bias)
{
    size_t n = (size_t)rows * cols;
    if (n) bias_add_kernel<<<blocks_for(n), kThreads, 0, (cudaStream_t)s>>>(n, cols, x, bias);
    return (int)cudaGetLastError();
}

extern "C" int ppdl_cu_act_fwd(void *s, int act, size_t n, const float *x, float *y)
{
    if (n) act_fwd_kernel<<<blocks_for(n), kThreads, 0, (cudaStream_t)s>>>(act, n, x, y);
    return (int)cudaGetLastError();
}

extern "C" int ppdl_cu_act_bwd(void *s, int act, size_t n, const float *x, const float *dy, float *dx)
{
    if (n) act_bwd_kernel<<<blocks_for(n), kThreads, 0, (cudaStream_t)s>>>(act, n, x, dy, dx);
    return (int)cudaGetLastError();
}

extern "C" int ppdl_cu_adamw(void *s, size_t n, float *p, const float *g, float *m, float *v, float decay,
                             float b1, float b2, float a1, float a2, float eps, float step, float c2s)
{
    if (n) adamw_kernel<<<blocks_for(n), kThreads, 0, (cudaStream_t)s>>>(n, p, g, m, v, decay, b1, b2, a1, a2, eps, step, c2s);
    return (int)cudaGetLastError();
}
