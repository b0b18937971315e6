/* cpu_pool.c — the CPU backend's persistent compute threads (cpu_pool.h).
 *
 * A batch is published by bumping a generation counter; the workers, and the caller,
 * take task indices from a shared atomic counter until none are left, and the caller
 * returns once every worker has reported the batch finished. Kernels are issued back
 * to back, so an idle worker first polls the generation for a short while (a wake-up
 * through the kernel costs tens of microseconds, as much as a small kernel) and only
 * then sleeps on a condition variable, so that idle ranks (a pipeline stage waiting
 * for its neighbour) leave the cores to others.
 */
#include "backend/cpu_pool.h"
#include "core/error.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* how long an idle worker polls before it sleeps */
#define SPIN_NS 200000L

struct cpu_pool {
    int threads;          /* in all, the caller included */
    pthread_t *tid;       /* threads - 1 workers */
    pthread_mutex_t mu;   /* guards the sleep / wake-up hand-over and `stop` */
    pthread_cond_t wake;
    atomic_uint gen;      /* batch generation, bumped to publish a batch */
    atomic_int next;      /* next task index of the current batch */
    atomic_int active;    /* workers that have not finished the current batch */
    atomic_flag busy;     /* a batch is running: nested or concurrent runs go serial */
    int stop;             /* workers exit (under mu) */
    /* the current batch, written before gen is bumped */
    int n;
    cpu_task_fn fn;
    void *ctx;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* take and run tasks of the published batch until none are left */
static void drain(cpu_pool *pool)
{
    int n = pool->n;
    cpu_task_fn fn = pool->fn;
    void *ctx = pool->ctx;
    for (int i; (i = atomic_fetch_add(&pool->next, 1)) < n;) fn(ctx, i);
}

/* Wait until the generation differs from `seen`; returns it, or seen when stopping. */
static unsigned wait_batch(cpu_pool *pool, unsigned seen)
{
    long deadline = now_ns() + SPIN_NS;
    for (int k = 0;; k++) {
        unsigned g = atomic_load_explicit(&pool->gen, memory_order_acquire);
        if (g != seen) return g;
        cpu_relax();
        if ((k & 255) == 255 && now_ns() > deadline) break;
    }
    pthread_mutex_lock(&pool->mu);
    unsigned g;
    while ((g = atomic_load_explicit(&pool->gen, memory_order_acquire)) == seen && !pool->stop)
        pthread_cond_wait(&pool->wake, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
    return g;
}

static void *worker_main(void *arg)
{
    cpu_pool *pool = arg;
    unsigned seen = 0;
    for (;;) {
        unsigned g = wait_batch(pool, seen);
        if (g == seen) return NULL; /* stopping */
        seen = g;
        drain(pool);
        atomic_fetch_sub_explicit(&pool->active, 1, memory_order_release);
    }
}

cpu_pool *cpu_pool_create(int threads, char *err, size_t errlen)
{
    cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool) {
        ppdl_errf(err, errlen, "out of memory for the thread pool");
        return NULL;
    }
    pool->threads = threads > 1 ? threads : 1;
    atomic_init(&pool->gen, 0);
    atomic_init(&pool->next, 0);
    atomic_init(&pool->active, 0);
    atomic_flag_clear(&pool->busy);
    int rc = pthread_mutex_init(&pool->mu, NULL);
    if (!rc) rc = pthread_cond_init(&pool->wake, NULL);
    if (rc) {
        ppdl_errf(err, errlen, "thread pool: %s", strerror(rc));
        free(pool);
        return NULL;
    }
    pool->tid = calloc((size_t)pool->threads, sizeof *pool->tid);
    if (!pool->tid) {
        ppdl_errf(err, errlen, "out of memory for the thread pool");
        cpu_pool_destroy(pool);
        return NULL;
    }
    int started = 0;
    for (; started < pool->threads - 1; started++) {
        rc = pthread_create(&pool->tid[started], NULL, worker_main, pool);
        if (rc) break;
    }
    if (rc) {
        ppdl_errf(err, errlen, "cannot start compute thread %d of %d: %s", started + 2,
                  pool->threads, strerror(rc));
        pool->threads = started + 1; /* only those are joined */
        cpu_pool_destroy(pool);
        return NULL;
    }
    return pool;
}

void cpu_pool_destroy(cpu_pool *pool)
{
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);
    if (pool->tid)
        for (int i = 0; i < pool->threads - 1; i++) pthread_join(pool->tid[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mu);
    free(pool->tid);
    free(pool);
}

int cpu_pool_threads(const cpu_pool *pool) { return pool ? pool->threads : 1; }

void cpu_pool_run(cpu_pool *pool, int n, cpu_task_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (!pool || pool->threads == 1 || n == 1 || atomic_flag_test_and_set(&pool->busy)) {
        for (int i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    pool->n = n;
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store_explicit(&pool->next, 0, memory_order_relaxed);
    atomic_store_explicit(&pool->active, pool->threads - 1, memory_order_relaxed);
    /* publish: the release orders the batch fields before the new generation */
    atomic_fetch_add_explicit(&pool->gen, 1, memory_order_release);
    /* wake sleepers; under the mutex so that a worker about to sleep cannot miss it */
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mu);

    drain(pool);
    /* the workers finish their last tasks; yield if one of them has lost its core */
    for (int k = 0; atomic_load_explicit(&pool->active, memory_order_acquire) > 0; k++) {
        if (k < 4096) cpu_relax();
        else sched_yield();
    }
    atomic_flag_clear(&pool->busy);
}

/* a range split into pieces for cpu_pool_run */
typedef struct {
    cpu_range_fn fn;
    void *ctx;
    size_t n;
    int pieces;
} range_job;

static void range_task(void *arg, int i)
{
    const range_job *job = arg;
    size_t lo = job->n * (size_t)i / (size_t)job->pieces;
    size_t hi = job->n * (size_t)(i + 1) / (size_t)job->pieces;
    if (hi > lo) job->fn(job->ctx, lo, hi);
}

void cpu_pool_for(cpu_pool *pool, size_t n, size_t grain, cpu_range_fn fn, void *ctx)
{
    if (!n) return;
    if (grain < 1) grain = 1;
    /* a few pieces per thread, so that a thread slowed down by another process does
     * not hold up the others for long */
    size_t pieces = (size_t)cpu_pool_threads(pool) * 4;
    if (pieces > n / grain) pieces = n / grain;
    if (pieces <= 1) {
        fn(ctx, 0, n);
        return;
    }
    range_job job = {fn, ctx, n, (int)pieces};
    cpu_pool_run(pool, (int)pieces, range_task, &job);
}
