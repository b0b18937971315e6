/* cpu_pool.h — the CPU backend's compute threads: a small persistent pool that runs a
 * batch of independent tasks on all threads (the caller is one of them) and returns
 * when every task is done.
 *
 * Determinism is the caller's job and is easy to keep: a task must write only its own
 * outputs and compute them the same way whichever thread runs it, so that the result
 * never depends on the number of threads or on which thread took which task. Sums
 * that cross tasks are formed afterwards, in a fixed order, by the caller.
 *
 * One batch runs at a time. A batch started while another one is running (from a task
 * or from another thread) runs serially on the calling thread, which is always
 * correct, only slower. */
#ifndef PPDL_CPU_POOL_H
#define PPDL_CPU_POOL_H

#include <stddef.h>

typedef struct cpu_pool cpu_pool;

/* task i of a batch of n, 0 <= i < n */
typedef void (*cpu_task_fn)(void *ctx, int i);

/* A pool of `threads` compute threads in all (threads - 1 are started). Returns NULL
 * (and writes a reason into err) when a thread cannot be started. */
cpu_pool *cpu_pool_create(int threads, char *err, size_t errlen);
void cpu_pool_destroy(cpu_pool *pool);
int cpu_pool_threads(const cpu_pool *pool); /* 1 for a NULL pool */

/* Run fn(ctx, i) for i in [0, n) and return when all have finished. */
void cpu_pool_run(cpu_pool *pool, int n, cpu_task_fn fn, void *ctx);

/* Range helper: splits [0, n) into pieces of at least `grain` items (at most a few per
 * thread) and runs fn(ctx, lo, hi) on each. Every item is handled by exactly one
 * call; how the range is cut may depend on the thread count, so fn must treat items
 * independently. */
typedef void (*cpu_range_fn)(void *ctx, size_t lo, size_t hi);
void cpu_pool_for(cpu_pool *pool, size_t n, size_t grain, cpu_range_fn fn, void *ctx);

#endif
