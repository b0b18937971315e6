/* backend.c — what every backend shares: the accounting allocator, the accessors of
 * its accounting and labels, destruction. Creation by name is in registry.c, the
 * forwarding of each operation in ops.c. */
#include "backend/backend_impl.h"
#include "core/error.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t ppdl_be_alloc_size(size_t n_bytes) { return (n_bytes + 255) & ~(size_t)255; }

void *ppdl_be_try_alloc(ppdl_backend *be, size_t n_bytes, const char *what)
{
    (void)what;
    size_t sz = ppdl_be_alloc_size(n_bytes ? n_bytes : 1);
    if (be->bytes_limit && be->bytes_in_use + sz > be->bytes_limit) return NULL;
    void *p = be->ops->alloc(be, sz);
    if (!p) return NULL;
    if (be->n_live == be->cap_live) {
        be->cap_live = be->cap_live ? 2 * be->cap_live : 64;
        be->live = realloc(be->live, be->cap_live * sizeof *be->live);
        PPDL_CHECK(be->live, "out of host memory");
    }
    be->live[be->n_live].p = p;
    be->live[be->n_live].bytes = sz;
    be->n_live++;
    be->bytes_in_use += sz;
    if (be->bytes_in_use > be->bytes_peak) be->bytes_peak = be->bytes_in_use;
    return p;
}

void *ppdl_be_alloc(ppdl_backend *be, size_t n_bytes, const char *what)
{
    void *p = ppdl_be_try_alloc(be, n_bytes, what);
    if (p) return p;
    char a[32], b[32], c[32];
    size_t sz = ppdl_be_alloc_size(n_bytes ? n_bytes : 1);
    if (be->bytes_limit && be->bytes_in_use + sz > be->bytes_limit)
        ppdl_fail(3, "rank %d, stage %d: allocating %s for %s would pass the memory limit: "
                     "%s in use of %s (--mem-limit); try more ranks, recompute, or a smaller "
                     "micro-batch",
                  be->rank, be->stage, ppdl_fmt_bytes(sz, a, sizeof a), what,
                  ppdl_fmt_bytes(be->bytes_in_use, b, sizeof b),
                  ppdl_fmt_bytes(be->bytes_limit, c, sizeof c));
    ppdl_fail(3, "rank %d, stage %d: the %s device is out of memory allocating %s for %s "
                 "(%s in use)",
              be->rank, be->stage, be->ops->name, ppdl_fmt_bytes(sz, a, sizeof a), what,
              ppdl_fmt_bytes(be->bytes_in_use, b, sizeof b));
}

void ppdl_be_free(ppdl_backend *be, void *p)
{
    if (!p) return;
    for (size_t i = 0; i < be->n_live; i++)
        if (be->live[i].p == p) {
            be->bytes_in_use -= be->live[i].bytes;
            be->live[i] = be->live[--be->n_live];
            be->ops->free(be, p);
            return;
        }
    ppdl_die("freeing a pointer this backend did not allocate");
}

void ppdl_be_free_all(ppdl_backend *be)
{
    /* emptied first: a buffer leaves the table once, whatever ops->free does */
    size_t n = be->n_live;
    be->n_live = 0;
    for (size_t i = 0; i < n; i++) {
        be->bytes_in_use -= be->live[i].bytes;
        be->ops->free(be, be->live[i].p);
    }
}

void ppdl_backend_destroy(ppdl_backend *be)
{
    if (!be) return;
    /* what is still allocated belongs to this backend and goes with it (the table kept
     * it reachable before; a test or an early exit need not free every buffer first).
     * The table owns every buffer, the backend's own scratch included: it frees them
     * here, once, while the backend's streams still exist; ops->destroy then releases
     * the rest and must not free them again (backend_impl.h) */
    ppdl_be_free_all(be);
    if (be->ops->destroy) be->ops->destroy(be);
    free(be->live);
    free(be->impl);
    free(be);
}

const char *ppdl_be_name(const ppdl_backend *be) { return be->ops->name; }
int ppdl_be_device_memory(const ppdl_backend *be) { return be->ops->device_memory; }
size_t ppdl_be_free_memory(ppdl_backend *be) { return be->ops->free_memory ? be->ops->free_memory(be) : 0; }
size_t ppdl_be_in_use(const ppdl_backend *be) { return be->bytes_in_use; }
size_t ppdl_be_peak(const ppdl_backend *be) { return be->bytes_peak; }
size_t ppdl_be_limit(const ppdl_backend *be) { return be->bytes_limit; }
void ppdl_be_set_limit(ppdl_backend *be, size_t n_bytes) { be->bytes_limit = n_bytes; }
void ppdl_be_set_stage(ppdl_backend *be, int stage) { be->stage = stage; }
int ppdl_be_stage_messages(const ppdl_backend *be) { return be->stage_messages; }

void ppdl_be_restore_peak(ppdl_backend *be, size_t saved_peak)
{
    /* a peak below the bytes in use now would be a lie: whatever the caller saved, the
     * peak stays at least what is held */
    be->bytes_peak = saved_peak > be->bytes_in_use ? saved_peak : be->bytes_in_use;
}

void *ppdl_be_host_alloc(ppdl_backend *be, size_t n_bytes, int *pinned)
{
    /* page-locked memory lets the copy engine move a payload without a bounce buffer;
     * where the backend has none (the CPU) or it runs out, plain host memory serves */
    void *p = be->ops->host_alloc ? be->ops->host_alloc(be, n_bytes) : NULL;
    *pinned = p != NULL;
    return p ? p : ppdl_xmalloc(n_bytes);
}

void ppdl_be_host_free(ppdl_backend *be, void *p, int pinned)
{
    if (!p) return;
    if (pinned) be->ops->host_free(be, p);
    else free(p);
}
