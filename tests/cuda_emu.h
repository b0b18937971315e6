// cuda_emu.h — run the CUDA kernels of src/backend/cuda/kernels.cu on the CPU, for tests
// on machines without a GPU. Force-included when kernels.cu is compiled as plain C++:
//   nvcc -x c++ -DPPDL_CUDA_EMU -include tests/cuda_emu.h ... kernels.cu
//
// What it models: a launch runs its blocks one after another; the threads of a block
// are fibers (ucontext) scheduled round-robin, switching only where CUDA threads
// synchronise: __syncthreads() (all threads of the block) and __shfl_xor_sync (the 32
// lanes of a warp exchange values; every lane must take part). When thread 0 of a
// block finishes without synchronising, the block's other threads run as plain calls
// (fast); one of them that then tries to synchronise aborts the test, since CUDA
// requires block-uniform __syncthreads. __shared__ arrays are
// function statics, which the threads of a block share; blocks never run at once.
// What it does not model: the memory model (no stale reads between threads that do
// not synchronise, no races shown up), the GPU's own expf/tanhf (host libm instead),
// fused multiply-adds, launch limits and timing. So it checks the kernels' indexing,
// ownership of outputs, reductions, barriers and aliasing, not their numerics on the
// device: that is what tests/gpu/run does on a real GPU.
#ifndef PPDL_CUDA_EMU_H
#define PPDL_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#include "backend/bf16.h"
#ifndef PPDL_CUDA_DOUBLE
#include "cuda_emu_names.h" // the double keeps the ppdl_cu_* names cuda.c calls
#endif

#define __global__
#define __device__
#define __host__
#define __shared__ static

#ifdef PPDL_CUDA_DOUBLE
// the GPU double (tests/gpudouble): streams, errors and device memory of its runtime
#include <new>
#include <type_traits>

#include "cuda_runtime.h"
#include "gpud.h"
#else
typedef void *cudaStream_t;
typedef enum { cudaSuccess = 0 } cudaError_t;
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
#endif

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace emu {

constexpr size_t kStack = 64 * 1024;

// A fiber is made once and serves every block after it: its entry runs the body in a
// loop. Switches are GCC's __builtin_setjmp/__builtin_longjmp (five words: the frame,
// the resume address, the stack pointer); only a fiber's first start goes through
// swapcontext. Not the C library's _setjmp/_longjmp: AddressSanitizer intercepts
// those, and on each jump between a fiber's stack and the thread's it clears the
// shadow of what it takes for the stack (the GPU double's ppdl: 38 s a run under the
// sanitizers, 1.1 s with the builtins).
typedef void *jump_buf[5];
// the longjmp half, outside the functions that call __builtin_setjmp (GCC's rule)
[[gnu::noinline]] inline void jump_to(jump_buf b) { __builtin_longjmp(b, 1); }

struct fiber {
    jump_buf jb;
    char *stack = nullptr;
    bool started = false, done = false;
    dim3 tid;
};

struct state {
    std::vector<fiber> f;
    jump_buf sched;
    int cur = 0, n = 0;
    unsigned bar_count = 0, bar_gen = 0;
    std::vector<unsigned> warp_count, warp_gen;
    std::vector<double> slot;      // one value per thread, for shuffles
    const std::function<void()> *body = nullptr;
    long rounds = 0;
    bool plain = false;            // threads run as plain calls: no synchronisation allowed
    bool synced = false;           // some thread of the block synchronised
    ~state()
    {
        for (fiber &x : f) free(x.stack); // the fibers' stacks live as long as the program
    }
};

inline state S;
inline dim3 gridDim_, blockDim_, blockIdx_, threadIdx_;

inline void yield()
{
    if (S.plain) {
        fprintf(stderr, "cuda_emu: thread %d synchronises but thread 0 of its block did not "
                        "(non-uniform __syncthreads/__shfl_xor_sync)\n", S.cur);
        abort();
    }
    S.synced = true;
    if (!__builtin_setjmp(S.f[S.cur].jb)) jump_to(S.sched);
}

inline void entry()
{
    for (;;) {
        (*S.body)();
        S.f[S.cur].done = true;
        if (!__builtin_setjmp(S.f[S.cur].jb)) jump_to(S.sched); // resumed: the next block
    }
}

inline int linear_tid() { return (int)(threadIdx_.x + blockDim_.x * (threadIdx_.y + blockDim_.y * threadIdx_.z)); }

inline void syncthreads()
{
    if (S.plain) yield(); // aborts
    unsigned gen = S.bar_gen;
    if (++S.bar_count == (unsigned)S.n) {
        S.bar_count = 0;
        S.bar_gen++;
    } else {
        while (S.bar_gen == gen) yield();
    }
}

inline void warp_barrier(int w)
{
    if (S.plain) yield(); // aborts
    int lanes = S.n - 32 * w < 32 ? S.n - 32 * w : 32;
    unsigned gen = S.warp_gen[w];
    if (++S.warp_count[w] == (unsigned)lanes) {
        S.warp_count[w] = 0;
        S.warp_gen[w]++;
    } else {
        while (S.warp_gen[w] == gen) yield();
    }
}

template <typename T> T shfl_xor(T v, int lane_mask)
{
    int t = linear_tid(), w = t / 32, lane = t % 32;
    memcpy(&S.slot[t], &v, sizeof v);
    warp_barrier(w);
    T r;
    memcpy(&r, &S.slot[32 * w + (lane ^ lane_mask)], sizeof r);
    warp_barrier(w);
    return r;
}

inline void make_fiber(int i)
{
    dim3 b = blockDim_;
    fiber &f = S.f[i];
    f.done = false;
    f.tid = dim3(i % b.x, (i / b.x) % b.y, i / (b.x * b.y));
}

inline void resume(int i)
{
    S.cur = i;
    threadIdx_ = S.f[i].tid;
    fiber &f = S.f[i];
    if (__builtin_setjmp(S.sched)) return; // the fiber yielded or finished its body
    if (f.started) jump_to(f.jb);
    f.started = true;
    f.stack = (char *)malloc(kStack);
    static ucontext_t from, to;
    getcontext(&to);
    to.uc_stack.ss_sp = f.stack;
    to.uc_stack.ss_size = kStack;
    to.uc_link = nullptr; // entry never returns
    makecontext(&to, entry, 0);
    swapcontext(&from, &to);
}

inline void run_block()
{
    dim3 b = blockDim_;
    S.n = (int)(b.x * b.y * b.z);
    if ((int)S.f.size() < S.n) S.f.resize(S.n);
    S.warp_count.assign((S.n + 31) / 32, 0);
    S.warp_gen.assign((S.n + 31) / 32, 0);
    S.slot.assign(S.n, 0.0);
    S.bar_count = 0;
    S.plain = S.synced = false;
    /* thread 0 first: if it never synchronises, neither may the others */
    make_fiber(0);
    resume(0);
    if (S.f[0].done && !S.synced) {
        S.plain = true;
        for (int i = 1; i < S.n; i++) {
            S.cur = i;
            threadIdx_ = dim3(i % b.x, (i / b.x) % b.y, i / (b.x * b.y));
            (*S.body)();
        }
        S.plain = false;
        return;
    }
    for (int i = 1; i < S.n; i++) make_fiber(i);
    for (bool alive = true; alive;) {
        alive = false;
        for (int i = 0; i < S.n; i++) {
            if (S.f[i].done) continue;
            resume(i);
            if (!S.f[i].done) alive = true;
        }
        if (++S.rounds > 100000000L) {
            fprintf(stderr, "cuda_emu: a block does not finish (threads waiting on a barrier that not all reach?)\n");
            abort();
        }
    }
}

inline void launch(dim3 grid, dim3 block, const std::function<void()> &body)
{
    gridDim_ = grid;
    blockDim_ = block;
    S.body = &body;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx_ = dim3(x, y, z);
                run_block();
            }
}

} // namespace emu

#define gridDim (emu::gridDim_)
#define blockDim (emu::blockDim_)
#define blockIdx (emu::blockIdx_)
#define threadIdx (emu::threadIdx_)
#define __syncthreads() emu::syncthreads()
template <typename T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask)
{
    (void)mask;
    return emu::shfl_xor(v, lane_mask);
}

// single-rounding arithmetic (compiled with -ffp-contract=off, so never fused)
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }

// bit casts
static inline unsigned __float_as_uint(float f) { return ppdl_f32_bits(f); }
static inline float __uint_as_float(unsigned u) { return ppdl_f32_of_bits(u); }

#ifdef PPDL_CUDA_DOUBLE
// Under the GPU double a launch is queued on its stream (run when the stream gets
// there) after every pointer argument is checked to lie in live device memory.
namespace emu {
struct queued {
    std::function<void()> body;
};
inline void run_queued(void *q)
{
    static_cast<queued *>(q)->body();
    static_cast<queued *>(q)->~queued(); // the double frees the memory
}
template <typename T> void check_arg(const char *kernel, T v)
{
    if constexpr (std::is_pointer_v<T>)
        if (v) gpud_require_device((const void *)v, 0, kernel, "a pointer argument");
}
template <typename... A> void check_args(const char *kernel, A... a) { (check_arg(kernel, a), ...); }
inline void enqueue(cudaStream_t s, const char *kernel, dim3 g, dim3 b, std::function<void()> f)
{
    void *mem = malloc(sizeof(queued));
    new (mem) queued{[=]() { launch(g, b, f); }};
    gpud_kernel_launch(s, kernel, run_queued, mem);
}
} // namespace emu
#define PPDL_LAUNCH(kernel, grid, block, stream, ...)                                     \
    do {                                                                                  \
        emu::check_args(#kernel, __VA_ARGS__);                                            \
        emu::enqueue((stream), #kernel, dim3(grid), dim3(block), [=]() { kernel(__VA_ARGS__); }); \
    } while (0)
#else
#define PPDL_LAUNCH(kernel, grid, block, stream, ...)                                     \
    do {                                                                                  \
        (void)(stream);                                                                   \
        emu::launch(dim3(grid), dim3(block), [=]() { kernel(__VA_ARGS__); });             \
    } while (0)
#endif

#endif
