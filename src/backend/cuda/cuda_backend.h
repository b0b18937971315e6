/* cuda_backend.h — launchers of the CUDA kernels (kernels.cu), callable from C.
 * Every launcher queues work on `stream` and returns cudaGetLastError() as an int. */
#ifndef PPDL_CUDA_BACKEND_H
#define PPDL_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int ppdl_cu_add(void *stream, size_t n, const float *x, const float *y, float *out);
int ppdl_cu_axpy(void *stream, size_t n, float alpha, const float *x, float *y);
int ppdl_cu_bias_add(void *stream, int rows, int cols, float *x, const float *bias);
int ppdl_cu_act_fwd(void *stream, int act, size_t n, const float *x, float *y);
int ppdl_cu_act_bwd(void *stream, int act, size_t n, const float *x, const float *dy, float *dx);
/* p = p*decay; m = b1 m + a1 g; v = b2 v + a2 g^2; p -= step * m / (sqrt(v)/c2s + eps) */
int ppdl_cu_adamw(void *stream, size_t n, float *p, const float *g, float *m, float *v, float decay,
                  float b1, float b2, float a1, float a2, float eps, float step, float c2s);

#ifdef __cplusplus
}
#endif

#endif
