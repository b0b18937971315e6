/* gpud.h — the GPU double's internals, shared by its parts: runtime.c (devices, memory,
 * streams, events, the checks, the watchdog, the exit report), blas.c (cuBLAS),
 * dnn.c (cuDNN), nccl.c (NCCL over MPI).
 *
 * Device memory is one arena per device, reserved with mmap and kept PROT_NONE while
 * host code runs: a host read or write of device memory faults, as it would on a GPU.
 * The double opens the arenas only while it executes queued work (gpud_enqueue's fn).
 *
 * Settings (environment; read once):
 *   GPUD_GPUS=N          GPUs on this node (default 1); CUDA_VISIBLE_DEVICES selects
 *                        and orders them as CUDA does
 *   GPUD_MEM=BYTES       each GPU's memory (default 1 GiB; K, M, G suffixes)
 *   GPUD_SM=90           the compute capability the properties report
 *   GPUD_LAZY=1          adversarial streams: queued work runs when the host
 *                        synchronises, queries or waits, or GPUD_LAZY_MS (20) later
 *                        (default 0: at once, in order; NCCL's as soon as it can)
 *   GPUD_WATCHDOG=S      seconds without progress before a wait is declared hung and
 *                        the pending operations are printed (default 60)
 *   GPUD_NO_DRIVER=1     cudaGetDeviceCount fails as on a machine without a driver
 *   GPUD_FAIL_MALLOC=K   the K-th device allocation (1-based) fails: out of memory
 *   GPUD_FAULT_KERNEL=K  the K-th kernel faults: an illegal address, sticky, as a GPU's
 *   GPUD_NCCL_ERROR=K    the K-th NCCL operation fails asynchronously (ncclRemoteError)
 *   GPUD_NCCL_HANG=K     the K-th NCCL operation never completes, and nothing says why
 *   GPUD_TRACE=1         one line per API call on stderr */
#ifndef GPUD_H
#define GPUD_H

#include <stddef.h>

#include "cuda_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "gpu double: <message>" on stderr (with the rank), then abort(): for what a GPU would
 * do silently wrong or not at all (a host pointer in a kernel, a hang) */
void gpud_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void gpud_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* 1 when [p, p + bytes) lies inside one live device allocation (bytes 0: p inside or
 * one past the end of one) */
int gpud_is_device(const void *p, size_t bytes);
/* fatal unless it is: `who` names the call, `arg` the argument */
void gpud_require_device(const void *p, size_t bytes, const char *who, const char *arg);
/* 1 for the legacy stream (NULL) and live streams */
int gpud_stream_live(cudaStream_t s);

/* Queue fn(ctx) on stream s, after the work queued on it before. ctx is malloc'd by the
 * caller and freed by the double after fn has run. In the default mode it runs before
 * gpud_enqueue returns (if the stream is idle); under GPUD_LAZY=1 only at the host's
 * next synchronise, query or wait. fn runs with device memory readable and writable.
 * Returns cudaErrorInvalidResourceHandle for a dead stream, the sticky error if any. */
typedef void (*gpud_work_fn)(void *ctx);
cudaError_t gpud_enqueue(cudaStream_t s, const char *what, gpud_work_fn fn, void *ctx);

/* a library's own device memory (cuBLAS's work space, cuDNN's, NCCL's buffers),
 * counted against the device's capacity like cudaMalloc's; NULL when it does not fit */
void *gpud_lib_alloc(size_t bytes, const char *what);
void gpud_lib_free(void *p);

/* the exit report counts open handles by kind ("cuBLAS handle", "cuDNN descriptor", ...):
 * a process that ends with status 0 and anything still open fails with status 97 */
void gpud_handle_open(const char *kind);
void gpud_handle_close(const char *kind);

/* ---- shared by runtime.c, nccl.c and the kernels (tests/cuda_emu.h) ---- */

/* an item that completes when poll(ctx) says 1 (called at the head of its stream,
 * again and again); describe(ctx) says what it waits for, for the watchdog's list */
typedef int (*gpud_poll_fn)(void *ctx);
typedef void (*gpud_describe_fn)(void *ctx, char *buf, size_t len);
cudaError_t gpud_enqueue_poll(cudaStream_t s, const char *what, gpud_poll_fn poll, gpud_describe_fn describe,
                              void *ctx);
/* a kernel launch (counted for GPUD_FAULT_KERNEL); as gpud_enqueue */
int gpud_kernel_launch(cudaStream_t s, const char *name, gpud_work_fn fn, void *ctx);
/* the host blocks until cond(arg): progress, naps, and the watchdog, which names `what` */
void gpud_wait(int (*cond)(void *), void *arg, const char *what);
/* something moved (an NCCL operation started or finished): resets the watchdog */
void gpud_progressed(void);
/* device memory readable and writable by the host between open and close (nested) */
void gpud_mem_open(void);
void gpud_mem_close(void);
/* the pending NCCL operations of every communicator, for the watchdog (nccl.c) */
void gpud_nccl_dump(void);
/* how many NCCL operations are issued and not complete (nccl.c) */
int gpud_nccl_pending(void);
/* the lock over the double's state (recursive), shared with the progress thread */
void gpud_lock(void);
void gpud_unlock(void);
/* the physical GPU of visible device d */
int gpud_physical(int visible);

#ifdef __cplusplus
}
#endif

#endif
