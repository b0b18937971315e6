/* cuda_api.h — what code outside the CUDA backend may ask of it: whether a device is
 * usable, its stream and device, the TF32 switch. Only in builds with HAVE_CUDA.
 *
 * Choosing the GPU (ppdl_backend_create("cuda", ...)): each rank takes the GPU of its
 * node-local rank (MPI_Comm_split_type SHARED over MPI_COMM_WORLD; collective, so every
 * rank must create its backend), never a hostname hash. A node with fewer GPUs than
 * ranks is an error, unless PPDL_CUDA_SHARE=1 lets ranks share GPUs (local rank modulo
 * the GPU count): what the 2-ranks-on-1-GPU tests use. CUDA_VISIBLE_DEVICES is obeyed.
 *
 * GEMMs run in plain fp32 by default. PPDL_CUDA_TF32=1 (or ppdl_cuda_set_tf32) lets
 * cuBLAS and cuDNN use TF32 tensor cores: 10-bit mantissas in the products, about
 * 1e-3 relative error instead of 1e-6, and several times the fp32 rate. */
#ifndef PPDL_CUDA_API_H
#define PPDL_CUDA_API_H

#include <stddef.h>

#include "backend/backend.h"

/* 1 when this process can use a CUDA device; otherwise 0 and why, e.g.
 * "CUDA error 35: CUDA driver version is insufficient for CUDA runtime version" */
int ppdl_cuda_available(char *why, size_t len);
/* the CUDA devices this process sees; 0 when CUDA is not usable */
int ppdl_cuda_device_count(void);

/* the constructor the registry calls for "cuda" (registry.c; collective, see above).
 * On failure NULL and a reason naming --backend cuda and the rank in err. */
ppdl_backend *ppdl_backend_cuda_create(int rank, char *err, size_t errlen);

void ppdl_cuda_set_tf32(ppdl_backend *be, int on);
int ppdl_cuda_tf32(const ppdl_backend *be);
void *ppdl_cuda_stream(ppdl_backend *be);   /* the compute stream, a cudaStream_t */
int ppdl_cuda_device(const ppdl_backend *be);
/* "device 0 of 1 (NVIDIA H200, sm_90, 139.8 GiB), node-local rank 0 of 1, fp32" */
const char *ppdl_cuda_describe(const ppdl_backend *be, char *buf, size_t len);

#endif
