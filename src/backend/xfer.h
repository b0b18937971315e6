/* xfer.h — MPI messages whose payload lives in a backend's device memory.
 *
 * MPI reads and writes host memory. On the CPU backend a "device" pointer is a host
 * pointer and MPI uses it directly: these functions return it unchanged and copy
 * nothing. On a backend with device memory (ppdl_be_device_memory: CUDA) the payload is staged through a
 * page-locked host buffer owned by a ppdl_xfer:
 *
 *   send:    buf = ppdl_xfer_send_buf(be, &x, dev, n);   device -> host, after the work
 *            MPI_Isend(buf, ...)                          queued on the stream so far
 *   receive: buf = ppdl_xfer_recv_buf(be, &x, dev, n);
 *            MPI_Irecv(buf, ...); ... MPI_Wait
 *            ppdl_xfer_recv_done(be, &x, dev, n);         host -> device
 *
 * A ppdl_xfer holds one message at a time: do not reuse it before MPI is done with its
 * buffer (the send completed; the receive completed and recv_done called). The host
 * buffer grows to the largest message and is freed by ppdl_xfer_free. It is host
 * memory and is not counted against --mem-limit (which bounds device memory). */
#ifndef PPDL_XFER_H
#define PPDL_XFER_H

#include <stddef.h>

#include "backend/backend.h"

typedef struct ppdl_xfer {
    void *host;      /* staging buffer (NULL until a staged message needs it) */
    size_t cap;      /* its size in bytes */
    int pinned;      /* as ppdl_be_host_alloc set it: 1 page-locked, 0 malloc */
} ppdl_xfer;

/* 1 when messages of this backend are staged through host memory (a device backend,
 * or ppdl_be_stage_messages) */
int ppdl_xfer_staged(const ppdl_backend *be);
/* the buffer to give MPI_Isend for the n bytes at dev (waits for the stream to produce them) */
const void *ppdl_xfer_send_buf(ppdl_backend *be, ppdl_xfer *x, const void *dev, size_t n);
/* the buffer to give MPI_Irecv for the n bytes that will land at dev */
void *ppdl_xfer_recv_buf(ppdl_backend *be, ppdl_xfer *x, void *dev, size_t n);
/* after the receive completed: move the payload to dev (no-op when not staged) */
void ppdl_xfer_recv_done(ppdl_backend *be, ppdl_xfer *x, void *dev, size_t n);
void ppdl_xfer_free(ppdl_backend *be, ppdl_xfer *x);

#endif
