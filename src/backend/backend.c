/* backend.c — backend creation and the accounting allocator every backend shares. */
#include "config.h"

#include "backend/backend.h"
#include "core/error.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ppdl_backend *ppdl_backend_cpu_create(int threads);
#if HAVE_CUDA
ppdl_backend *ppdl_backend_cuda_create(int rank, char *err, size_t errlen);
#endif

ppdl_backend *ppdl_backend_create(const char *name, int threads, int rank, char *err, size_t errlen)
{
    ppdl_backend *be = NULL;
    if (!strcmp(name, "cpu")) {
        be = ppdl_backend_cpu_create(threads);
    } else if (!strcmp(name, "cuda")) {
#if HAVE_CUDA
        be = ppdl_backend_cuda_create(rank, err, errlen);
        if (!be) return NULL;
#else
        ppdl_errf(err, errlen, "--backend cuda: this ppdl was built without CUDA "
                               "(configure --with-cuda=DIR to build it)");
        return NULL;
#endif
    } else {
        ppdl_errf(err, errlen, "--backend %s: expected cpu or cuda", name);
        return NULL;
    }
    be->rank = rank;
    be->stage = -1;
    const char *stage = getenv("PPDL_STAGE_MESSAGES");
    be->stage_messages = stage && !strcmp(stage, "1");
    return be;
}

/* A small table of live allocations: device pointers cannot carry a size header. */
typedef struct { void *p; size_t bytes; } live_alloc;
static live_alloc *live;
static size_t n_live, cap_live;

size_t ppdl_be_alloc_size(size_t n_bytes) { return (n_bytes + 255) & ~(size_t)255; }

void *ppdl_be_try_alloc(ppdl_backend *be, size_t n_bytes, const char *what)
{
    (void)what;
    size_t sz = ppdl_be_alloc_size(n_bytes ? n_bytes : 1);
    if (be->bytes_limit && be->bytes_in_use + sz > be->bytes_limit) return NULL;
    void *p = be->ops->alloc(be, sz);
    if (!p) return NULL;
    if (n_live == cap_live) {
        cap_live = cap_live ? 2 * cap_live : 64;
        live = realloc(live, cap_live * sizeof *live);
        PPDL_CHECK(live, "out of host memory");
    }
    live[n_live].p = p;
    live[n_live].bytes = sz;
    n_live++;
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
    for (size_t i = 0; i < n_live; i++)
        if (live[i].p == p) {
            be->bytes_in_use -= live[i].bytes;
            live[i] = live[--n_live];
            be->ops->free(be, p);
            return;
        }
    ppdl_die("freeing a pointer this backend did not allocate");
}

void ppdl_backend_destroy(ppdl_backend *be)
{
    if (!be) return;
    if (be->ops->destroy) be->ops->destroy(be);
    free(be->impl);
    free(be);
}
