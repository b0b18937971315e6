/* cuda_api.h — what code outside the CUDA backend may ask of it: whether a device is
 * usable, its stream and device, the TF32 switch. Only in builds with HAVE_CUDA.
 *
 * Choosing the GPU (ppdl_backend_create("cuda", ...), --backend auto): the ranks of a
 * node (MPI_Comm_split_type SHARED over MPI_COMM_WORLD; collective, so every rank must
 * create its backend) tell each other the PCI bus ids of the devices each sees, and
 * spread over distinct physical GPUs where they can (ppdl_cuda_choose_gpu). A rank
 * whose GPU another rank of its node also takes is an error, unless PPDL_CUDA_SHARE=1
 * lets ranks share GPUs: what the 2-ranks-on-1-GPU tests use. CUDA_VISIBLE_DEVICES is
 * obeyed: with one GPU bound to each rank (Slurm --gpus-per-task=1) every rank has its
 * own, although each sees one device.
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

/* the room for a PCI bus id, "0000:41:00.0" (cudaDeviceGetPCIBusId: 13 at least) */
#define PPDL_CUDA_BUS_ID_LEN 32

/* the GPU a rank takes, and who else on its node takes it */
typedef struct ppdl_cuda_gpu {
    int usable;                       /* 0: this rank sees no usable device */
    int device;                       /* the CUDA device number (cudaSetDevice), among n_devices */
    int n_devices;                    /* the devices this rank sees */
    int local_rank, local_size;       /* its place among the ranks of its node */
    char bus_id[PPDL_CUDA_BUS_ID_LEN]; /* the GPU's PCI bus id: the physical GPU */
    int sharing;                      /* the node's ranks that take it, this one included */
    char sharers[192];                /* their world ranks: "rank 2", "ranks 0 and 2" */
} ppdl_cuda_gpu;

/* Choose this rank's GPU. Collective over MPI_COMM_WORLD (each node's ranks exchange
 * the bus ids of the devices each sees); every rank calls it, one without a usable
 * device too; a process without MPI is rank 0 of 1. Among ranks that see the same
 * devices, the i-th takes visible device i % count; ranks that see different sets
 * (bound by CUDA_VISIBLE_DEVICES) take the least-taken GPU they see. Returns
 * g->usable; when 0, why says why. The backend (PPDL_CUDA_SHARE, the memory of
 * cu_free_memory, the header line) and --backend auto (run_setup.c) both use it. */
int ppdl_cuda_choose_gpu(ppdl_cuda_gpu *g, char *why, size_t len);

/* the constructor the registry calls for "cuda" (registry.c; collective, see above).
 * On failure NULL and a reason naming --backend cuda and the rank in err. */
ppdl_backend *ppdl_backend_cuda_create(int rank, char *err, size_t errlen);

/* A check run while the host waits for the GPU's compute stream (a copy to the host,
 * a synchronisation): waited_s is how long this wait has lasted. NCCL's objects
 * register theirs (nccl_p2p.c): a stream that waits on a transfer whose peer failed
 * would otherwise hold the host for ever; the check ends the job instead. on = 1
 * adds, 0 removes; at most PPDL_CUDA_MAX_WATCH. */
#define PPDL_CUDA_MAX_WATCH 8
typedef void (*ppdl_cuda_watch_fn)(void *arg, double waited_s);
void ppdl_cuda_watch(ppdl_backend *be, ppdl_cuda_watch_fn fn, void *arg, int on);

void ppdl_cuda_set_tf32(ppdl_backend *be, int on);
int ppdl_cuda_tf32(const ppdl_backend *be);
void *ppdl_cuda_stream(ppdl_backend *be);   /* the compute stream, a cudaStream_t */
int ppdl_cuda_device(const ppdl_backend *be);
/* "device 0 of 1 (NVIDIA H200, sm_90, 139.8 GiB, PCI 0000:41:00.0 shared by 1 rank),
 * node-local rank 0 of 1, fp32 GEMMs" */
const char *ppdl_cuda_describe(const ppdl_backend *be, char *buf, size_t len);

#endif
