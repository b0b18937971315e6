/* runtime.c — the GPU double's CUDA runtime: devices, device memory, streams, events,
 * the sticky error, fault injection and the exit report (gpud.h says what it models
 * and its settings). Tests only.
 *
 * Streams are FIFO queues of items: work (a closure: a kernel, a copy, a GEMM), an
 * event record, a wait for another stream's position, a poll (an NCCL operation that
 * completes when its messages have), a stream-ordered free. The progress engine runs
 * the head item of every stream while it can complete; a stream's items complete in
 * order. The host blocks only in the calls that wait (synchronise, event synchronise,
 * NCCL's first contact), in a loop that makes progress, naps, and declares a hang
 * after GPUD_WATCHDOG seconds without progress, printing every pending item. */
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gpud.h"

#define MAX_GPUS 16
#define ALIGN 256
#define MAGIC_STREAM 0x57AE4A11u
#define MAGIC_EVENT 0xE7E47001u
#define MAGIC_DEAD 0xDEADDEADu

/* ------------------------------------------------------------------ settings */

static struct {
    int init, gpus, sm, lazy, no_driver, trace;
    long fail_malloc, fault_kernel;
    double watchdog;
    size_t mem;
    int visible[MAX_GPUS], n_visible; /* visible index -> physical GPU */
} cfg;

/* One lock over the double's state: the host thread and the progress thread (the
 * GPU's own progress: see gpud_progress_main) both run queued work. Recursive: the
 * public calls nest. */
static pthread_mutex_t mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
void gpud_lock(void) { pthread_mutex_lock(&mu); }
void gpud_unlock(void) { pthread_mutex_unlock(&mu); }

static size_t parse_bytes(const char *v, size_t dflt)
{
    if (!v || !*v) return dflt;
    char *end;
    double x = strtod(v, &end);
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0;
    else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024;
    else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024 * 1024;
    return x > 0 ? (size_t)(x * mult) : dflt;
}
static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

static void report_at_exit(int status, void *arg);

static void setup(void)
{
    if (cfg.init) return;
    cfg.init = 1;
    cfg.gpus = (int)env_long("GPUD_GPUS", 1);
    if (cfg.gpus < 0) cfg.gpus = 0;
    if (cfg.gpus > MAX_GPUS) cfg.gpus = MAX_GPUS;
    cfg.sm = (int)env_long("GPUD_SM", 90);
    cfg.lazy = env_long("GPUD_LAZY", 0) != 0;
    cfg.no_driver = env_long("GPUD_NO_DRIVER", 0) != 0;
    cfg.trace = env_long("GPUD_TRACE", 0) != 0;
    cfg.fail_malloc = env_long("GPUD_FAIL_MALLOC", 0);
    cfg.fault_kernel = env_long("GPUD_FAULT_KERNEL", 0);
    cfg.watchdog = (double)env_long("GPUD_WATCHDOG", 60);
    cfg.mem = parse_bytes(getenv("GPUD_MEM"), (size_t)1 << 30);
    /* CUDA_VISIBLE_DEVICES: a comma list of indices; the list ends at the first entry
     * that names no GPU, as CUDA's does */
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    cfg.n_visible = 0;
    if (!vis) {
        for (int i = 0; i < cfg.gpus; i++) cfg.visible[cfg.n_visible++] = i;
    } else {
        const char *p = vis;
        while (*p && cfg.n_visible < MAX_GPUS) {
            char *end;
            long d = strtol(p, &end, 10);
            if (end == p || d < 0 || d >= cfg.gpus) break;
            int dup = 0;
            for (int i = 0; i < cfg.n_visible; i++) dup |= cfg.visible[i] == d;
            if (dup) break;
            cfg.visible[cfg.n_visible++] = (int)d;
            p = end;
            while (*p == ' ') p++;
            if (*p != ',') break;
            p++;
        }
    }
    on_exit(report_at_exit, NULL);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int my_rank(void)
{
    int up = 0, down = 0, r = -1;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

void gpud_fatal(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gpu double (rank %d): %s\n", my_rank(), msg);
    fflush(stderr);
    abort();
}

void gpud_trace(const char *fmt, ...)
{
    setup();
    if (!cfg.trace) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gpud[%d] ", my_rank());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ------------------------------------------------------------------ errors */

static cudaError_t sticky = cudaSuccess, last = cudaSuccess;

static cudaError_t ret(cudaError_t e)
{
    if (e != cudaSuccess) last = e;
    return e;
}
/* every call but the error queries fails once the context has faulted */
#define STICKY()                                                                                   \
    do {                                                                                           \
        setup();                                                                                   \
        if (sticky) return ret(sticky);                                                            \
    } while (0)


const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
    }
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = sticky ? sticky : last;
    last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return sticky ? sticky : last; }

/* ------------------------------------------------------------------ devices */

static int current; /* visible index */

cudaError_t cudaGetDeviceCount(int *count)
{
    setup();
    gpud_trace("cudaGetDeviceCount");
    if (cfg.no_driver) return ret(cudaErrorInsufficientDriver); /* *count left unwritten */
    if (!count) return ret(cudaErrorInvalidValue);
    *count = cfg.n_visible;
    if (cfg.n_visible == 0) return ret(cudaErrorNoDevice);
    return cudaSuccess;
}

static int valid_device(int d) { return !cfg.no_driver && d >= 0 && d < cfg.n_visible; }

cudaError_t cudaSetDevice(int device)
{
    STICKY();
    if (!valid_device(device)) return ret(cudaErrorInvalidDevice);
    current = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device)
{
    STICKY();
    if (!valid_device(current)) return ret(cudaErrorNoDevice);
    *device = current;
    return cudaSuccess;
}
int gpud_physical(int visible) { return cfg.visible[visible]; }

cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device)
{
    STICKY();
    if (!valid_device(device) || !bus_id || len < 13) return ret(cudaErrorInvalidValue);
    snprintf(bus_id, (size_t)len, "0000:%02X:00.0", 0x18 + 0x10 * cfg.visible[device]);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    STICKY();
    if (!valid_device(device) || !prop) return ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "GPU double %d", cfg.visible[device]);
    prop->totalGlobalMem = cfg.mem;
    prop->major = cfg.sm / 10;
    prop->minor = cfg.sm % 10;
    prop->multiProcessorCount = 4;
    prop->pciBusID = 0x18 + 0x10 * cfg.visible[device];
    return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    STICKY();
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}

/* ------------------------------------------------------------------ device memory */

/* one arena per physical GPU this process touches: [base, base + cfg.mem), reserved
 * PROT_NONE; allocations sorted by address, first fit */
typedef struct alloc {
    char *p;
    size_t n;
    int live, pending_free, lib, pinned;
    const char *what;
} alloc;

typedef struct arena {
    char *base;
    size_t used_hw; /* high-water mark: the extent that is ever opened */
    size_t in_use;
    alloc *a;
    int n, cap;
} arena;

static arena arenas[MAX_GPUS];
static int mem_open_depth;
static long n_device_allocs, n_kernels;

static arena *arena_of(int phys)
{
    arena *ar = &arenas[phys];
    if (!ar->base) {
        ar->base = mmap(NULL, cfg.mem, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (ar->base == MAP_FAILED) gpud_fatal("cannot reserve %zu bytes of address space for GPU %d", cfg.mem, phys);
    }
    return ar;
}

static void protect(int prot)
{
    for (int g = 0; g < MAX_GPUS; g++) {
        arena *ar = &arenas[g];
        if (!ar->base || !ar->used_hw) continue;
        size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (ar->used_hw + page - 1) / page * page;
        if (mprotect(ar->base, len, prot)) gpud_fatal("mprotect: %s", strerror(errno));
    }
}
void gpud_mem_open(void)
{
    if (mem_open_depth++ == 0) protect(PROT_READ | PROT_WRITE);
}
void gpud_mem_close(void)
{
    if (--mem_open_depth == 0) protect(PROT_NONE);
}

/* the allocation holding p (live or not), or NULL */
static alloc *find(const void *p, int *phys)
{
    for (int g = 0; g < MAX_GPUS; g++) {
        arena *ar = &arenas[g];
        if (!ar->base || (const char *)p < ar->base || (const char *)p >= ar->base + cfg.mem) continue;
        for (int i = 0; i < ar->n; i++)
            if ((const char *)p >= ar->a[i].p && (const char *)p < ar->a[i].p + (ar->a[i].n ? ar->a[i].n : 1)) {
                if (phys) *phys = g;
                return &ar->a[i];
            }
        if (phys) *phys = g;
        return NULL;
    }
    return NULL;
}

static int in_arena(const void *p)
{
    for (int g = 0; g < MAX_GPUS; g++)
        if (arenas[g].base && (const char *)p >= arenas[g].base && (const char *)p < arenas[g].base + cfg.mem) return 1;
    return 0;
}

int gpud_is_device(const void *p, size_t bytes)
{
    if (!p) return 0;
    gpud_lock();
    alloc *a = find(p, NULL);
    if (!a && bytes == 0) a = find((const char *)p - 1, NULL); /* one past the end */
    int yes = a && a->live && !a->pending_free && (const char *)p + bytes <= a->p + a->n;
    gpud_unlock();
    return yes;
}

void gpud_require_device(const void *p, size_t bytes, const char *who, const char *arg)
{
    if (bytes == 0 && !p) return;
    if (gpud_is_device(p, bytes)) return;
    gpud_lock(); /* held into gpud_fatal */
    alloc *a = find(p, NULL);
    if (!in_arena(p))
        gpud_fatal("%s: %s = %p is not device memory (a host pointer where a device one is expected)", who, arg, p);
    if (!a || !a->live) gpud_fatal("%s: %s = %p points into freed device memory (use after free)", who, arg, p);
    if (a->pending_free) gpud_fatal("%s: %s = %p: its allocation was freed (cudaFreeAsync) before this work", who, arg, p);
    gpud_fatal("%s: %s = %p, %zu bytes, runs past the end of its allocation (%zu bytes at %p)", who, arg, p, bytes,
               a->n, (void *)a->p);
}

static void *arena_alloc_locked(int phys, size_t n, int lib, const char *what);
static void *arena_alloc(int phys, size_t n, int lib, const char *what)
{
    gpud_lock();
    void *p = arena_alloc_locked(phys, n, lib, what);
    gpud_unlock();
    return p;
}
static void *arena_alloc_locked(int phys, size_t n, int lib, const char *what)
{
    arena *ar = arena_of(phys);
    size_t sz = (n + ALIGN - 1) / ALIGN * ALIGN;
    if (!sz) sz = ALIGN;
    if (ar->in_use + sz > cfg.mem) return NULL;
    /* first fit between the sorted allocations (the dead ones are removed) */
    size_t off = 0;
    int at = 0;
    for (; at < ar->n; at++) {
        size_t start = (size_t)(ar->a[at].p - ar->base);
        if (start - off >= sz) break;
        off = start + (ar->a[at].n + ALIGN - 1) / ALIGN * ALIGN;
        if (!ar->a[at].n) off += ALIGN;
    }
    if (off + sz > cfg.mem) return NULL;
    if (ar->n == ar->cap) {
        ar->cap = ar->cap ? 2 * ar->cap : 64;
        ar->a = realloc(ar->a, (size_t)ar->cap * sizeof *ar->a);
        if (!ar->a) gpud_fatal("out of host memory");
    }
    memmove(&ar->a[at + 1], &ar->a[at], (size_t)(ar->n - at) * sizeof *ar->a);
    ar->a[at] = (alloc){.p = ar->base + off, .n = n, .live = 1, .lib = lib, .what = what};
    ar->n++;
    ar->in_use += sz;
    if (off + sz > ar->used_hw) {
        size_t old = ar->used_hw;
        ar->used_hw = off + sz;
        /* the new extent takes the protection the rest has now */
        if (mem_open_depth) {
            size_t page = (size_t)sysconf(_SC_PAGESIZE), a0 = old / page * page,
                   len = (ar->used_hw + page - 1) / page * page - a0;
            if (mprotect(ar->base + a0, len, PROT_READ | PROT_WRITE)) gpud_fatal("mprotect: %s", strerror(errno));
        }
    }
    return ar->base + off;
}

static void arena_release(const void *p)
{
    gpud_lock();
    int phys = 0;
    alloc *a = find(p, &phys);
    arena *ar = &arenas[phys];
    size_t sz = (a->n + ALIGN - 1) / ALIGN * ALIGN;
    ar->in_use -= sz ? sz : ALIGN;
    int i = (int)(a - ar->a);
    memmove(&ar->a[i], &ar->a[i + 1], (size_t)(ar->n - i - 1) * sizeof *ar->a);
    ar->n--;
    gpud_unlock();
}

static cudaError_t device_alloc(void **p, size_t n, const char *who)
{
    STICKY();
    if (!p) return ret(cudaErrorInvalidValue);
    if (!valid_device(current)) return ret(cudaErrorNoDevice);
    n_device_allocs++;
    if (cfg.fail_malloc && n_device_allocs == cfg.fail_malloc) {
        gpud_trace("%s: allocation %ld fails (GPUD_FAIL_MALLOC)", who, n_device_allocs);
        return ret(cudaErrorMemoryAllocation);
    }
    *p = arena_alloc(cfg.visible[current], n, 0, who);
    gpud_trace("%s(%zu) = %p", who, n, *p);
    return *p ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaMalloc(void **p, size_t n) { return device_alloc(p, n, "cudaMalloc"); }

static cudaError_t check_free(void *p, const char *who, alloc **out)
{
    alloc *a = find(p, NULL);
    if (!a || a->p != p || !a->live || a->lib) {
        gpud_trace("%s(%p): not a live device allocation", who, p);
        if (in_arena(p)) fprintf(stderr, "gpu double (rank %d): %s(%p): double free or not the start of an allocation\n",
                                 my_rank(), who, p);
        else fprintf(stderr, "gpu double (rank %d): %s(%p): not device memory\n", my_rank(), who, p);
        return ret(cudaErrorInvalidValue);
    }
    if (a->pending_free) {
        fprintf(stderr, "gpu double (rank %d): %s(%p): freed twice (a cudaFreeAsync is pending)\n", my_rank(), who, p);
        return ret(cudaErrorInvalidValue);
    }
    *out = a;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    STICKY();
    if (!p) return cudaSuccess;
    alloc *a;
    gpud_lock();
    cudaError_t e = check_free(p, "cudaFree", &a);
    gpud_unlock();
    if (e) return e;
    /* cudaFree synchronises the device: everything queued finishes first. With NCCL
     * operations in flight that can deadlock (NCCL's documentation says so): stricter
     * than a GPU, the double refuses it. */
    gpud_lock();
    int nccl = gpud_nccl_pending();
    gpud_unlock();
    if (nccl) gpud_fatal("cudaFree(%p) synchronises the device while %d NCCL operations are in flight", p, nccl);
    cudaError_t s = cudaDeviceSynchronize();
    if (s) return s;
    gpud_trace("cudaFree(%p)", p);
    arena_release(p);
    return cudaSuccess;
}

void *gpud_lib_alloc(size_t bytes, const char *what)
{
    setup();
    if (!valid_device(current)) return NULL;
    return arena_alloc(cfg.visible[current], bytes, 1, what);
}
void gpud_lib_free(void *p)
{
    if (!p) return;
    gpud_lock();
    alloc *a = find(p, NULL);
    if (!a || a->p != p || !a->lib) gpud_fatal("a library frees %p, which it did not allocate", p);
    arena_release(p);
    gpud_unlock();
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    STICKY();
    if (!valid_device(current)) return ret(cudaErrorNoDevice);
    gpud_lock();
    arena *ar = arena_of(cfg.visible[current]);
    if (free_bytes) *free_bytes = cfg.mem - ar->in_use;
    gpud_unlock();
    if (total_bytes) *total_bytes = cfg.mem;
    return cudaSuccess;
}

/* pinned host memory: plain memory, tracked so that cudaFreeHost is checked */
typedef struct pinned {
    void *p;
    size_t n;
    struct pinned *next;
} pinned;
static pinned *pinned_list;

cudaError_t cudaMallocHost(void **p, size_t n)
{
    STICKY();
    if (!p) return ret(cudaErrorInvalidValue);
    pinned *h = malloc(sizeof *h);
    h->p = malloc(n ? n : 1);
    h->n = n;
    h->next = pinned_list;
    pinned_list = h;
    *p = h->p;
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p)
{
    STICKY();
    if (!p) return cudaSuccess;
    for (pinned **q = &pinned_list; *q; q = &(*q)->next)
        if ((*q)->p == p) {
            cudaError_t s = cudaDeviceSynchronize(); /* as cudaFree */
            if (s) return s;
            pinned *h = *q;
            *q = h->next;
            free(h->p);
            free(h);
            return cudaSuccess;
        }
    fprintf(stderr, "gpu double (rank %d): cudaFreeHost(%p): not page-locked memory of cudaMallocHost (double free?)\n",
            my_rank(), p);
    return ret(cudaErrorInvalidValue);
}
static int is_pinned(const void *p, size_t n)
{
    for (pinned *h = pinned_list; h; h = h->next)
        if ((const char *)p >= (const char *)h->p && (const char *)p + n <= (const char *)h->p + h->n) return 1;
    return 0;
}

/* ------------------------------------------------------------------ streams and items */

enum { IT_WORK, IT_RECORD, IT_WAIT, IT_POLL, IT_FREE, IT_FAULT };

typedef struct item {
    struct item *next;
    int kind;
    const char *what;
    gpud_work_fn fn;        /* WORK */
    gpud_poll_fn poll;      /* POLL: 1 when complete */
    gpud_describe_fn describe;
    void *ctx;
    struct gpud_event *ev;  /* RECORD */
    struct gpud_stream *ws; /* WAIT: until ws->done >= wpos */
    unsigned long wpos;
    void *ptr;              /* FREE */
    double t;               /* when it was queued */
} item;

struct gpud_stream {
    unsigned magic;
    int device;
    unsigned flags;
    item *head, *tail;
    unsigned long queued, done;
    struct gpud_stream *next_all;
    int destroyed;
};

struct gpud_event {
    unsigned magic;
    unsigned flags;
    struct gpud_stream *s;
    unsigned long pos;
    int recorded;
    double t; /* when the record ran */
    struct gpud_event *next_dead;
};
static struct gpud_event *dead_events; /* destroyed ones, kept so that a later use is caught */

static struct gpud_stream legacy = {.magic = MAGIC_STREAM};
static struct gpud_stream *all_streams;
static double last_progress;
static unsigned long progress_ticks;

void gpud_progressed(void)
{
    progress_ticks++;
    last_progress = now_s();
}

static struct gpud_stream *S(cudaStream_t s) { return s ? s : &legacy; }

int gpud_stream_live(cudaStream_t s) { return !s || (s->magic == MAGIC_STREAM && !s->destroyed); }

static int stream_registered(struct gpud_stream *s)
{
    if (s == &legacy) return 1;
    for (struct gpud_stream *t = all_streams; t; t = t->next_all)
        if (t == s) return 1;
    return 0;
}

static cudaError_t new_stream(cudaStream_t *out, unsigned flags)
{
    STICKY();
    if (!out) return ret(cudaErrorInvalidValue);
    if (!valid_device(current)) return ret(cudaErrorNoDevice);
    struct gpud_stream *s = calloc(1, sizeof *s);
    s->magic = MAGIC_STREAM;
    s->device = current;
    s->flags = flags;
    gpud_lock();
    s->next_all = all_streams;
    all_streams = s;
    gpud_unlock();
    *out = s;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return new_stream(s, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) { return new_stream(s, flags); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority)
{
    (void)priority;
    return new_stream(s, flags);
}

static int step_item(item *it)
{
    switch (it->kind) {
    case IT_WORK:
        if (!sticky) {
            gpud_mem_open();
            it->fn(it->ctx);
            gpud_mem_close();
        }
        return 1;
    case IT_FAULT:
        sticky = cudaErrorIllegalAddress;
        gpud_trace("kernel %s faults: the context's error is now sticky", it->what);
        return 1;
    case IT_RECORD:
        it->ev->t = now_s();
        return 1;
    case IT_WAIT: return it->ws->done >= it->wpos;
    case IT_POLL: {
        gpud_mem_open();
        int done = it->poll(it->ctx);
        gpud_mem_close();
        return done;
    }
    case IT_FREE: arena_release(it->ptr); return 1;
    }
    return 1;
}

/* run what can run, in every stream; 1 when anything completed. min_age > 0 (the
 * progress thread under GPUD_LAZY=1): only items queued at least that long ago. */
static int progress_aged(double min_age)
{
    int any = 0;
    gpud_lock();
    double now = min_age > 0 ? now_s() : 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (struct gpud_stream *s = &legacy; s; s = s == &legacy ? all_streams : s->next_all) {
            while (s->head && (min_age <= 0 || now - s->head->t >= min_age) && step_item(s->head)) {
                item *it = s->head;
                s->head = it->next;
                if (!s->head) s->tail = NULL;
                s->done++;
                free(it->ctx);
                free(it);
                changed = any = 1;
            }
        }
    }
    if (any) gpud_progressed();
    gpud_unlock();
    return any;
}
static int progress_all(void) { return progress_aged(0); }

static int pending_work(void)
{
    for (struct gpud_stream *s = &legacy; s; s = s == &legacy ? all_streams : s->next_all)
        if (s->head) return 1;
    return 0;
}

static void dump_pending(void)
{
    int r = my_rank();
    for (struct gpud_stream *s = &legacy; s; s = s == &legacy ? all_streams : s->next_all) {
        int k = 0;
        for (item *it = s->head; it && k < 8; it = it->next, k++) {
            char d[256] = "";
            if (it->describe) it->describe(it->ctx, d, sizeof d);
            fprintf(stderr, "gpu double (rank %d):   stream %p item %d: %s%s%s\n", r, (void *)s, k, it->what,
                    d[0] ? ": " : "", d);
        }
    }
    gpud_nccl_dump();
}

static void enqueue_item(struct gpud_stream *s, item *it)
{
    gpud_lock();
    it->t = now_s();
    if (s->tail) s->tail->next = it;
    else s->head = it;
    s->tail = it;
    s->queued++;
    if (!cfg.lazy) progress_all();
    gpud_unlock();
}

cudaError_t gpud_enqueue(cudaStream_t st, const char *what, gpud_work_fn fn, void *ctx)
{
    setup();
    if (sticky) {
        free(ctx);
        return ret(sticky);
    }
    if (!gpud_stream_live(st)) {
        free(ctx);
        gpud_trace("%s on a dead stream %p", what, (void *)st);
        return ret(cudaErrorInvalidResourceHandle);
    }
    item *it = calloc(1, sizeof *it);
    *it = (item){.kind = IT_WORK, .what = what, .fn = fn, .ctx = ctx};
    enqueue_item(S(st), it);
    return cudaSuccess;
}

cudaError_t gpud_enqueue_poll(cudaStream_t st, const char *what, gpud_poll_fn poll, gpud_describe_fn describe,
                              void *ctx)
{
    setup();
    if (sticky) return ret(sticky);
    if (!gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    item *it = calloc(1, sizeof *it);
    *it = (item){.kind = IT_POLL, .what = what, .poll = poll, .describe = describe, .ctx = ctx};
    enqueue_item(S(st), it);
    return cudaSuccess;
}

int gpud_kernel_launch(cudaStream_t st, const char *name, gpud_work_fn fn, void *ctx)
{
    setup();
    if (!gpud_stream_live(st)) {
        free(ctx);
        return ret(cudaErrorInvalidResourceHandle);
    }
    n_kernels++;
    if (cfg.fault_kernel && n_kernels == cfg.fault_kernel) {
        /* the launch succeeds; the fault shows at the next synchronising call */
        free(ctx);
        item *it = calloc(1, sizeof *it);
        *it = (item){.kind = IT_FAULT, .what = name};
        enqueue_item(S(st), it);
        return cudaSuccess;
    }
    return gpud_enqueue(st, name, fn, ctx);
}

/* the host waits until cond(arg): progress, naps, the watchdog */
void gpud_wait(int (*cond)(void *), void *arg, const char *what)
{
    double t0 = now_s();
    unsigned long ticks = progress_ticks;
    long naps = 0;
    for (;;) {
        gpud_lock();
        progress_all();
        int done = cond(arg);
        gpud_unlock();
        if (done) return;
        if (progress_ticks != ticks) {
            ticks = progress_ticks;
            t0 = now_s();
        }
        if (now_s() - t0 > cfg.watchdog) {
            fprintf(stderr, "gpu double (rank %d): %s: no progress for %.0f s (GPUD_WATCHDOG); pending:\n", my_rank(),
                    what, cfg.watchdog);
            dump_pending();
            gpud_fatal("%s hangs", what);
        }
        if (++naps < 100) sched_yield();
        else nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

/* a host that polls (cudaEventQuery, cudaStreamQuery) with work pending that has not
 * moved for the watchdog's time is hung as surely as one that blocks */
static void poll_watchdog(const char *what)
{
    gpud_lock();
    int pending = pending_work();
    gpud_unlock();
    if (!pending) {
        last_progress = now_s();
        return;
    }
    if (last_progress == 0) last_progress = now_s();
    if (now_s() - last_progress > cfg.watchdog) {
        fprintf(stderr, "gpu double (rank %d): %s: polled for %.0f s without progress (GPUD_WATCHDOG); pending:\n",
                my_rank(), what, cfg.watchdog);
        dump_pending();
        gpud_fatal("%s: the host polls work that never completes", what);
    }
}

static int stream_empty(void *s) { return ((struct gpud_stream *)s)->head == NULL; }

cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
    STICKY();
    if (!gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    gpud_wait(stream_empty, S(st), "cudaStreamSynchronize");
    return sticky ? ret(sticky) : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t st)
{
    STICKY();
    if (!gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    progress_all();
    poll_watchdog("cudaStreamQuery");
    if (sticky) return ret(sticky);
    gpud_lock();
    int busy = S(st)->head != NULL;
    gpud_unlock();
    return busy ? cudaErrorNotReady : cudaSuccess;
}

static int all_empty(void *unused)
{
    (void)unused;
    return !pending_work();
}
cudaError_t cudaDeviceSynchronize(void)
{
    STICKY();
    gpud_wait(all_empty, NULL, "cudaDeviceSynchronize");
    return sticky ? ret(sticky) : cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t st)
{
    STICKY();
    if (!st || st->magic != MAGIC_STREAM || st->destroyed || !stream_registered(st))
        return ret(cudaErrorInvalidResourceHandle);
    /* CUDA lets queued work finish after the destroy; the double keeps the queue */
    gpud_lock();
    st->destroyed = 1;
    gpud_unlock();
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t st)
{
    if (!gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    return device_alloc(p, n, "cudaMallocAsync");
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t st)
{
    STICKY();
    if (!gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    if (!p) return cudaSuccess;
    alloc *a;
    gpud_lock();
    cudaError_t e = check_free(p, "cudaFreeAsync", &a);
    if (!e) {
        a->pending_free = 1; /* no new work may name it; work queued before still runs */
        item *it = calloc(1, sizeof *it);
        *it = (item){.kind = IT_FREE, .what = "cudaFreeAsync", .ptr = p};
        enqueue_item(S(st), it);
    }
    gpud_unlock();
    return e;
}

/* ------------------------------------------------------------------ copies */

typedef struct copy_ctx {
    void *dst;
    const void *src;
    size_t n;
    int value, is_set;
    void *snapshot; /* pageable host source, copied at the call as CUDA stages it */
} copy_ctx;

static void run_copy(void *c_)
{
    copy_ctx *c = c_;
    if (c->is_set) memset(c->dst, c->value, c->n);
    else memcpy(c->dst, c->snapshot ? c->snapshot : c->src, c->n);
    free(c->snapshot);
    c->snapshot = NULL;
}

static int done_upto(void *p)
{
    void **a = p;
    return ((struct gpud_stream *)a[0])->done >= (unsigned long)(uintptr_t)a[1];
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t st)
{
    STICKY();
    if (!gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    if (n == 0) return cudaSuccess;
    int d_dev = gpud_is_device(dst, n), s_dev = gpud_is_device(src, n);
    if (kind == cudaMemcpyDefault) kind = s_dev ? (d_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                                : (d_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    const char *names[] = {"cudaMemcpyAsync host to host", "cudaMemcpyAsync host to device",
                           "cudaMemcpyAsync device to host", "cudaMemcpyAsync device to device"};
    if ((int)kind < 0 || kind > cudaMemcpyDeviceToDevice) return ret(cudaErrorInvalidValue);
    const char *who = names[kind];
    if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) gpud_require_device(dst, n, who, "dst");
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice) gpud_require_device(src, n, who, "src");
    if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost) && in_arena(src))
        gpud_fatal("%s: src = %p is device memory, the kind says host", who, src);
    if ((kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost) && in_arena(dst))
        gpud_fatal("%s: dst = %p is device memory, the kind says host", who, dst);
    copy_ctx *c = calloc(1, sizeof *c);
    *c = (copy_ctx){.dst = dst, .src = src, .n = n};
    int host_src = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
    int pageable_dst = (kind == cudaMemcpyDeviceToHost) && !is_pinned(dst, n);
    if (host_src && !is_pinned(src, n)) { /* CUDA stages pageable memory at the call */
        c->snapshot = malloc(n);
        memcpy(c->snapshot, src, n);
    }
    cudaError_t e = gpud_enqueue(st, who, run_copy, c);
    if (e) return e;
    if (pageable_dst) { /* to pageable memory the call returns when the copy is done */
        struct gpud_stream *s = S(st);
        gpud_lock();
        void *arg[2] = {s, (void *)(uintptr_t)s->queued};
        gpud_unlock();
        gpud_wait(done_upto, arg, who);
    }
    return sticky ? ret(sticky) : cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, NULL);
    return e ? e : cudaDeviceSynchronize();
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t st)
{
    STICKY();
    if (!gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    if (n == 0) return cudaSuccess;
    gpud_require_device(p, n, "cudaMemsetAsync", "devPtr");
    copy_ctx *c = calloc(1, sizeof *c);
    *c = (copy_ctx){.dst = p, .n = n, .value = value, .is_set = 1};
    return gpud_enqueue(st, "cudaMemsetAsync", run_copy, c);
}

/* ------------------------------------------------------------------ events */

static long n_events;

static int event_live(cudaEvent_t e) { return e && e->magic == MAGIC_EVENT; }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    STICKY();
    if (!e) return ret(cudaErrorInvalidValue);
    struct gpud_event *ev = calloc(1, sizeof *ev);
    ev->magic = MAGIC_EVENT;
    ev->flags = flags;
    *e = ev;
    n_events++;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    STICKY();
    if (!event_live(e)) return ret(cudaErrorInvalidResourceHandle);
    gpud_lock();
    e->magic = MAGIC_DEAD; /* kept: a later use is told apart from a live event */
    e->next_dead = dead_events;
    dead_events = e;
    n_events--;
    gpud_unlock();
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
    STICKY();
    if (!event_live(e) || !gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    struct gpud_stream *s = S(st);
    gpud_lock();
    e->s = s;
    e->recorded = 1;
    e->pos = s->queued + 1;
    item *it = calloc(1, sizeof *it);
    *it = (item){.kind = IT_RECORD, .what = "cudaEventRecord", .ev = e};
    enqueue_item(s, it);
    gpud_unlock();
    return cudaSuccess;
}

static int event_done(void *e_)
{
    struct gpud_event *e = e_;
    return !e->recorded || e->s->done >= e->pos;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    STICKY();
    if (!event_live(e)) return ret(cudaErrorInvalidResourceHandle);
    progress_all();
    if (sticky) return ret(sticky);
    gpud_lock();
    int done = event_done(e);
    gpud_unlock();
    if (done) return cudaSuccess;
    poll_watchdog("cudaEventQuery");
    return cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    STICKY();
    if (!event_live(e)) return ret(cudaErrorInvalidResourceHandle);
    gpud_wait(event_done, e, "cudaEventSynchronize");
    return sticky ? ret(sticky) : cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    STICKY();
    if (!event_live(a) || !event_live(b) || !ms) return ret(cudaErrorInvalidResourceHandle);
    if ((a->flags | b->flags) & cudaEventDisableTiming) return ret(cudaErrorInvalidResourceHandle);
    gpud_lock();
    int done = a->recorded && b->recorded && event_done(a) && event_done(b);
    gpud_unlock();
    if (!done) return ret(cudaErrorNotReady);
    *ms = (float)(1e3 * (b->t - a->t));
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned flags)
{
    STICKY();
    (void)flags;
    if (!event_live(e) || !gpud_stream_live(st)) return ret(cudaErrorInvalidResourceHandle);
    gpud_lock();
    if (e->recorded) { /* CUDA: waiting on an unrecorded event is a no-op */
        item *it = calloc(1, sizeof *it);
        *it = (item){.kind = IT_WAIT, .what = "cudaStreamWaitEvent", .ws = e->s, .wpos = e->pos};
        enqueue_item(S(st), it);
    }
    gpud_unlock();
    return cudaSuccess;
}

/* ------------------------------------------------------------------ handles, exit report */

typedef struct kind_count {
    const char *kind;
    long open;
} kind_count;
static kind_count kinds[16];

void gpud_handle_open(const char *kind)
{
    gpud_lock();
    for (int i = 0; i < 16; i++)
        if (!kinds[i].kind || !strcmp(kinds[i].kind, kind)) {
            kinds[i].kind = kind;
            kinds[i].open++;
            break;
        }
    gpud_unlock();
}
void gpud_handle_close(const char *kind)
{
    gpud_lock();
    for (int i = 0; i < 16 && kinds[i].kind; i++)
        if (!strcmp(kinds[i].kind, kind)) {
            kinds[i].open--;
            gpud_unlock();
            return;
        }
    gpud_fatal("a %s closed that was never opened", kind);
}

/* On a clean exit (status 0): everything the program made must be gone, or the process
 * fails with status 97 and the list; the line "gpu double: clean exit" otherwise. */
static void report_at_exit(int status, void *arg)
{
    (void)arg;
    if (status != 0) return;
    gpud_lock();
    int r = my_rank(), bad = 0;
    char who[32] = "";
    if (r >= 0) snprintf(who, sizeof who, " (rank %d)", r);
    if (pending_work()) {
        fprintf(stderr, "gpu double%s: leak: work still queued at exit\n", who);
        bad = 1;
    }
    for (int g = 0; g < MAX_GPUS; g++)
        for (int i = 0; i < arenas[g].n; i++) {
            alloc *a = &arenas[g].a[i];
            if (a->lib) continue; /* the library's handle is reported instead */
            fprintf(stderr, "gpu double%s: leak: %zu bytes of device memory at %p (%s)\n", who, a->n, (void *)a->p,
                    a->what);
            bad = 1;
        }
    for (pinned *h = pinned_list; h; h = h->next) {
        fprintf(stderr, "gpu double%s: leak: %zu bytes of page-locked host memory\n", who, h->n);
        bad = 1;
    }
    int streams = 0;
    for (struct gpud_stream *s = all_streams; s; s = s->next_all) streams += !s->destroyed;
    if (streams) {
        fprintf(stderr, "gpu double%s: leak: %d streams not destroyed\n", who, streams);
        bad = 1;
    }
    if (n_events) {
        fprintf(stderr, "gpu double%s: leak: %ld events not destroyed\n", who, n_events);
        bad = 1;
    }
    for (int i = 0; i < 16 && kinds[i].kind; i++)
        if (kinds[i].open) {
            fprintf(stderr, "gpu double%s: leak: %ld %s%s not destroyed\n", who, kinds[i].open, kinds[i].kind,
                    kinds[i].open == 1 ? "" : "s");
            bad = 1;
        }
    if (bad) {
        fflush(stderr);
        _exit(97);
    }
    gpud_unlock();
    fprintf(stderr, "gpu double%s: clean exit (%ld device allocations, %ld kernels)\n", who, n_device_allocs, n_kernels);
}

/* ------------------------------------------------------------------ the GPU's own progress */

/* A GPU runs its queues while the host does something else: a rank blocked in MPI must
 * still see its NCCL sends leave. The double runs a thread that progresses the queues
 * (under GPUD_LAZY=1 only what was queued GPUD_LAZY_MS ago, default 20 ms: late, but
 * never never). It exists where MPI does: MPI_Init_thread asks for MPI_THREAD_MULTIPLE,
 * since NCCL's operations call MPI from it; MPI_Finalize stops it first. */
static pthread_t progress_thread;
static volatile int progress_stop, progress_running;

static void *progress_main(void *arg)
{
    (void)arg;
    double age = cfg.lazy ? 1e-3 * (double)env_long("GPUD_LAZY_MS", 20) : 0;
    while (!progress_stop) {
        gpud_lock();
        int pending = pending_work();
        if (pending) progress_aged(age);
        gpud_unlock();
        nanosleep(&(struct timespec){0, pending ? 100000 : 1000000}, NULL);
    }
    return NULL;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    (void)required;
    setup();
    int rc = PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, provided);
    if (rc != MPI_SUCCESS) return rc;
    if (*provided < MPI_THREAD_MULTIPLE) gpud_fatal("the GPU double needs MPI_THREAD_MULTIPLE (got %d)", *provided);
    if (pthread_create(&progress_thread, NULL, progress_main, NULL)) gpud_fatal("cannot start the progress thread");
    progress_running = 1;
    return rc;
}

int MPI_Init(int *argc, char ***argv)
{
    int provided = 0;
    return MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
}

int MPI_Finalize(void)
{
    if (progress_running) {
        progress_stop = 1;
        pthread_join(progress_thread, NULL);
        progress_running = 0;
    }
    return PMPI_Finalize();
}
