/* registry.c — backends by name. Each entry names a constructor declared in its
 * backend's header (cpu.h, cuda/cuda_api.h); a backend this build left out keeps its
 * entry with no constructor, so that asking for it says "built without" rather than
 * "unknown". Adding a backend is one header, one entry. */
#include "config.h"

#include "backend/backend_impl.h"
#include "backend/cpu.h"
#if HAVE_CUDA
#include "backend/cuda/cuda_api.h"
#endif
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/* one signature for every constructor: each takes what it needs */
typedef ppdl_backend *(*backend_ctor)(int threads, int rank, char *err, size_t errlen);

static ppdl_backend *make_cpu(int threads, int rank, char *err, size_t errlen)
{
    (void)rank, (void)err, (void)errlen;
    return ppdl_backend_cpu_create(threads);
}

#if HAVE_CUDA
static ppdl_backend *make_cuda(int threads, int rank, char *err, size_t errlen)
{
    (void)threads;
    return ppdl_backend_cuda_create(rank, err, errlen);
}
#endif

static const struct {
    const char *name;
    backend_ctor create; /* NULL: not in this build */
    const char *missing; /* when not built: what is missing and how to build it in */
} registry[] = {
    {"cpu", make_cpu, NULL},
#if HAVE_CUDA
    {"cuda", make_cuda, NULL},
#else
    {"cuda", NULL, "CUDA (configure --with-cuda=DIR to build it)"},
#endif
};
enum { N_BACKENDS = sizeof registry / sizeof registry[0] };

ppdl_backend *ppdl_backend_create(const char *name, int threads, int rank, char *err, size_t errlen)
{
    int i = 0;
    while (i < N_BACKENDS && strcmp(name, registry[i].name)) i++;
    if (i == N_BACKENDS) {
        char known[128] = "";
        for (int j = 0; j < N_BACKENDS; j++) {
            if (j) strncat(known, j + 1 < N_BACKENDS ? ", " : " or ", sizeof known - strlen(known) - 1);
            strncat(known, registry[j].name, sizeof known - strlen(known) - 1);
        }
        ppdl_errf(err, errlen, "--backend %s: expected %s", name, known);
        return NULL;
    }
    if (!registry[i].create) {
        ppdl_errf(err, errlen, "--backend %s: this ppdl was built without %s", name, registry[i].missing);
        return NULL;
    }
    ppdl_backend *be = registry[i].create(threads, rank, err, errlen);
    if (!be) return NULL;
    be->rank = rank;
    be->stage = -1;
    const char *stage = getenv("PPDL_STAGE_MESSAGES");
    be->stage_messages = stage && !strcmp(stage, "1");
    return be;
}
