/* cpu.h — the CPU backend's constructor, for the registry (registry.c) and for the
 * tests that want a CPU backend without going through a name. */
#ifndef PPDL_CPU_H
#define PPDL_CPU_H

#include "backend/backend.h"

/* a CPU backend with `threads` compute threads (at least 1); aborts on failure */
ppdl_backend *ppdl_backend_cpu_create(int threads);

#endif
