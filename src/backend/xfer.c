/* xfer.c — host staging of MPI messages for backends whose memory MPI cannot address
 * (see xfer.h). */
#include "backend/xfer.h"
#include "core/error.h"
#include "core/util.h"

#include <stdlib.h>

int ppdl_xfer_staged(const ppdl_backend *be) { return ppdl_be_device_memory(be) || ppdl_be_stage_messages(be); }

static void *host_buf(ppdl_backend *be, ppdl_xfer *x, size_t n)
{
    if (n <= x->cap && x->host) return x->host;
    ppdl_xfer_free(be, x);
    size_t want = n ? n : 1;
    x->host = ppdl_be_host_alloc(be, want, &x->pinned);
    x->cap = want;
    return x->host;
}

const void *ppdl_xfer_send_buf(ppdl_backend *be, ppdl_xfer *x, const void *dev, size_t n)
{
    if (!ppdl_xfer_staged(be)) return dev;
    void *h = host_buf(be, x, n);
    ppdl_be_copy_d2h(be, h, dev, n); /* ordered after the stream's work; returns when done */
    return h;
}

void *ppdl_xfer_recv_buf(ppdl_backend *be, ppdl_xfer *x, void *dev, size_t n)
{
    if (!ppdl_xfer_staged(be)) return dev;
    return host_buf(be, x, n);
}

void ppdl_xfer_recv_done(ppdl_backend *be, ppdl_xfer *x, void *dev, size_t n)
{
    if (!ppdl_xfer_staged(be)) return;
    PPDL_CHECK(x->host && n <= x->cap, "staged receive of %zu bytes completed without its host buffer", n);
    ppdl_be_copy_h2d(be, dev, x->host, n);
}

void ppdl_xfer_free(ppdl_backend *be, ppdl_xfer *x)
{
    ppdl_be_host_free(be, x->host, x->pinned);
    x->host = NULL;
    x->cap = 0;
    x->pinned = 0;
}
