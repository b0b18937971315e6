/* cpu_pool.c — the CPU backend's persistent compute threads (cpu_pool.h).
 *
 * A batch is published by a new generation in `state`; the workers that see it in
 * time join it, and they and the caller take task indices from a shared counter until
 * none are left. The caller then closes the batch, so that no worker joins any more,
 * and waits only for the workers that joined: a worker that is asleep, or that another
 * process keeps off its core, costs that batch its help but never holds the caller up.
 *
 * Kernels are issued back to back, so an idle worker first polls for a short while (a
 * wake-up through the kernel costs tens of microseconds, as much as a small kernel)
 * and then sleeps on a condition variable. The poll is kept short: on a machine shared
 * with other processes a spinning thread takes its share of a core from the threads
 * doing the work, and a long poll makes a loaded machine's step far slower.
 */
#include "backend/cpu_pool.h"
#include "core/error.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* how long an idle worker polls before it sleeps */
#define SPIN_NS 50000L

/* state: generation << 32 | CLOSED | number of workers inside the batch */
#define ST_CLOSED ((uint64_t)1 << 31)
#define ST_COUNT ((uint64_t)ST_CLOSED - 1)

struct cpu_pool {
    int threads;            /* in all, the caller included */
    pthread_t *tid;         /* threads - 1 workers */
    pthread_mutex_t mu;     /* guards the sleep / wake-up hand-over and `stop` */
    pthread_cond_t wake;
    _Atomic uint64_t state; /* see ST_* */
    atomic_int sleepers;    /* workers blocked (or about to block) on `wake` */
    atomic_int next;        /* next task index of the current batch */
    atomic_flag busy;       /* a batch is running: nested or concurrent runs go serial */
    uint32_t gen;           /* the caller's count of batches */
    int stop;               /* workers exit (under mu) */
    /* the current batch, written before its generation is published */
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

static uint32_t gen_of(uint64_t st) { return (uint32_t)(st >> 32); }

/* take and run tasks of the published batch until none are left */
static void drain(cpu_pool *pool)
{
    int n = pool->n;
    cpu_task_fn fn = pool->fn;
    void *ctx = pool->ctx;
    for (int i; (i = atomic_fetch_add(&pool->next, 1)) < n;) fn(ctx, i);
}

/* Wait until the generation differs from `seen`; returns it, or seen when stopping. */
static uint32_t wait_batch(cpu_pool *pool, uint32_t seen)
{
    long deadline = now_ns() + SPIN_NS;
    for (int k = 0;; k++) {
        uint32_t g = gen_of(atomic_load_explicit(&pool->state, memory_order_acquire));
        if (g != seen) return g;
        cpu_relax();
        if ((k & 63) == 63 && now_ns() > deadline) break;
    }
    pthread_mutex_lock(&pool->mu);
    /* sleepers before the check, the caller publishes before it reads sleepers (both
     * sequentially consistent): one of the two sees the other's write */
    atomic_fetch_add(&pool->sleepers, 1);
    uint32_t g;
    while ((g = gen_of(atomic_load(&pool->state))) == seen && !pool->stop)
        pthread_cond_wait(&pool->wake, &pool->mu);
    atomic_fetch_sub(&pool->sleepers, 1);
    pthread_mutex_unlock(&pool->mu);
    return g;
}

/* enter batch g unless it has moved on or been closed */
static int join_batch(cpu_pool *pool, uint32_t g)
{
    uint64_t st = atomic_load_explicit(&pool->state, memory_order_acquire);
    do {
        if (gen_of(st) != g || (st & ST_CLOSED)) return 0;
    } while (!atomic_compare_exchange_weak_explicit(&pool->state, &st, st + 1,
                                                    memory_order_acquire, memory_order_acquire));
    return 1;
}

static void *worker_main(void *arg)
{
    cpu_pool *pool = arg;
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = wait_batch(pool, seen);
        if (g == seen) return NULL; /* stopping */
        seen = g;
        if (!join_batch(pool, g)) continue;
        drain(pool);
        /* leave: the release makes the tasks' writes visible to the caller */
        atomic_fetch_sub_explicit(&pool->state, 1, memory_order_release);
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
    atomic_init(&pool->state, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->next, 0);
    atomic_flag_clear(&pool->busy);
    int rc = pthread_mutex_init(&pool->mu, NULL);
    if (!rc) {
        rc = pthread_cond_init(&pool->wake, NULL);
        if (rc) pthread_mutex_destroy(&pool->mu);
    }
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
    /* publish: open, nobody inside; orders the batch fields before the generation */
    pool->gen++;
    atomic_store(&pool->state, (uint64_t)pool->gen << 32);
    if (atomic_load(&pool->sleepers) > 0) {
        /* under the mutex, so that a worker between its check and its sleep cannot
         * miss the wake-up */
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->mu);
    }

    drain(pool);
    /* close, then wait for the workers still inside (finishing their last tasks);
     * yield if one of them has lost its core */
    atomic_fetch_or_explicit(&pool->state, ST_CLOSED, memory_order_acq_rel);
    for (int k = 0; atomic_load_explicit(&pool->state, memory_order_acquire) & ST_COUNT; k++) {
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
