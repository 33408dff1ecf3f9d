/* Force-included (g++ -include) into every kernel source (cuda/, .cu) when the harness builds it: the
 * device side of CUDA C++ for the host compiler. The kernel sources do not change: their
 * launches go through FT_LAUNCH and their dynamic shared memory through FT_DYNAMIC_SMEM
 * (cuda/cuda_common.cuh), which map here to cudaemu_launch and cudaemu_dynamic_smem.
 *
 *  - A CUDA thread is a fiber; threadIdx, blockIdx, blockDim, gridDim read the running
 *    fiber's and block's coordinates.
 *  - `__shared__` is `static thread_local`: every fiber of a block runs on one OS thread,
 *    so they all see one copy, as a block does.
 *  - __syncthreads, __syncwarp and the warp collectives (__shfl*_sync, __ballot_sync,
 *    __any_sync, __all_sync) switch to the block's scheduler, which releases them when
 *    every thread involved has arrived and checks that they agree (same barrier, same
 *    mask, no exited lane); see cudaemu_kernel.cc.
 *  - The correctly rounded intrinsics (__fmul_rn, __fadd_rn, ...) keep their rounding:
 *    the result goes through a volatile, so the compiler cannot contract it into an FMA.
 *  - Fast-math intrinsics (__expf, __fdividef, ...) are the accurate host functions: the
 *    harness does not reproduce the GPU's approximations (doc/cuda-emulation.md). */
#ifndef FT_CUDAEMU_DEVICE_H
#define FT_CUDAEMU_DEVICE_H

#ifndef __cplusplus
#error "cudaemu_device.h is for kernel sources compiled as C++"
#endif

#define __shared__ static thread_local
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "cudaemu.h"

#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

/* ---------------------------------------------------------------- coordinates */

struct cudaemu_block_view {
    uint3 idx;
    dim3 dim;
    dim3 grid;
    void *dynamic_smem;
    size_t dynamic_smem_bytes; /* the launch's size (cudaemu_wgmma.cc bounds-checks with it) */
};
extern thread_local const uint3 *cudaemu_cur_tid;
extern thread_local cudaemu_block_view cudaemu_cur_block;

#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim
#undef warpSize
#define threadIdx (*cudaemu_cur_tid)
#define blockIdx (cudaemu_cur_block.idx)
#define blockDim (cudaemu_cur_block.dim)
#define gridDim (cudaemu_cur_block.grid)
#define warpSize 32

static inline void *cudaemu_dynamic_smem(void)
{
    return cudaemu_cur_block.dynamic_smem;
}

/* ---------------------------------------------------------------- synchronisation */

enum cudaemu_warp_kind {
    CUDAEMU_SYNCWARP,
    CUDAEMU_SHFL_IDX,
    CUDAEMU_SHFL_UP,
    CUDAEMU_SHFL_DOWN,
    CUDAEMU_SHFL_XOR,
    CUDAEMU_BALLOT,
    CUDAEMU_ANY,
    CUDAEMU_ALL,
    CUDAEMU_COLLECTIVE, /* cudaemu_warp_collective */
};

void cudaemu_syncthreads_at(const char *file, int line);
/* One warp collective: waits for the lanes of `mask`, returns this lane's result (the
 * source lane's 64 value bits for shuffles, the vote for ballot/any/all). */
uint64_t cudaemu_warp_op(enum cudaemu_warp_kind kind, unsigned mask, uint64_t value, int arg,
                         int width, const char *file, int line);

/* A warp-wide instruction with its own semantics (mma, ldmatrix: cudaemu_warp_matrix.cc):
 * every lane of `mask` arrives with its `lane_data`; the last to arrive calls
 * complete(data) with the 32 lanes' pointers (NULL outside the mask), which reads every
 * lane's inputs and writes every lane's outputs; then all lanes continue. */
typedef void (*cudaemu_warp_complete_fn)(void *const lane_data[32]);
void cudaemu_warp_collective(const char *name, unsigned mask, void *lane_data,
                             cudaemu_warp_complete_fn complete, const char *file, int line);
int cudaemu_lane_id(void);
/* The running thread's slot for an extension's state; drop(state) runs when it exits. */
void **cudaemu_thread_ext(void (*drop)(void *));
/* The running block's slot for an extension's state (one slot per `end` function, a few
 * at most); end(state) runs once every thread of the block has exited, before the next
 * block starts: it checks what only the whole block shows and frees the state. */
void **cudaemu_block_ext(void (*end)(void *));

#define __syncthreads() cudaemu_syncthreads_at(__FILE__, __LINE__)
#define __syncwarp(...) cudaemu_syncwarp_at(__FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)
#define __shfl_sync(...) cudaemu_shfl_at(CUDAEMU_SHFL_IDX, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) cudaemu_shfl_at(CUDAEMU_SHFL_UP, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) cudaemu_shfl_at(CUDAEMU_SHFL_DOWN, __FILE__, __LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) cudaemu_shfl_at(CUDAEMU_SHFL_XOR, __FILE__, __LINE__, __VA_ARGS__)
#define __ballot_sync(mask, pred)                                                                  \
    ((unsigned)cudaemu_warp_op(CUDAEMU_BALLOT, (mask), (pred) != 0, 0, 32, __FILE__, __LINE__))
#define __any_sync(mask, pred)                                                                     \
    ((int)cudaemu_warp_op(CUDAEMU_ANY, (mask), (pred) != 0, 0, 32, __FILE__, __LINE__))
#define __all_sync(mask, pred)                                                                     \
    ((int)cudaemu_warp_op(CUDAEMU_ALL, (mask), (pred) != 0, 0, 32, __FILE__, __LINE__))

static inline void cudaemu_syncwarp_at(const char *file, int line, unsigned mask = 0xffffffffu)
{
    (void)cudaemu_warp_op(CUDAEMU_SYNCWARP, mask, 0, 0, 32, file, line);
}

template <typename T>
static inline T cudaemu_shfl_at(enum cudaemu_warp_kind kind, const char *file, int line,
                                unsigned mask, T var, int arg, int width = 32)
{
    static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a type wider than 64 bits");
    uint64_t bits = 0;
    memcpy(&bits, &var, sizeof var);
    bits = cudaemu_warp_op(kind, mask, bits, arg, width, file, line);
    T out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

/* ---------------------------------------------------------------- arithmetic */

/* A value the optimiser must materialise as written: no contraction into an FMA. */
static inline float cudaemu_rounded(float x)
{
    volatile float r = x;
    return r;
}
static inline double cudaemu_rounded_d(double x)
{
    volatile double r = x;
    return r;
}

static inline float __fmul_rn(float a, float b) { return cudaemu_rounded(a * b); }
static inline float __fadd_rn(float a, float b) { return cudaemu_rounded(a + b); }
static inline float __fsub_rn(float a, float b) { return cudaemu_rounded(a - b); }
static inline float __fdiv_rn(float a, float b) { return cudaemu_rounded(a / b); }
static inline float __frcp_rn(float a) { return cudaemu_rounded(1.0f / a); }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dmul_rn(double a, double b) { return cudaemu_rounded_d(a * b); }
static inline double __dadd_rn(double a, double b) { return cudaemu_rounded_d(a + b); }
/* __expf, __logf, __powf: glibc declares functions of these names (the accurate ones). */
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

static inline unsigned __float_as_uint(float x)
{
    unsigned u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float __uint_as_float(unsigned u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static inline int __float_as_int(float x) { return (int)__float_as_uint(x); }
static inline float __int_as_float(int i) { return __uint_as_float((unsigned)i); }
static inline long long __double_as_longlong(double x)
{
    long long u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline double __longlong_as_double(long long u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}
/* CUDA's min/max overloads for every arithmetic pair (usual arithmetic conversions). */
template <typename A, typename B>
static inline std::common_type_t<A, B> min(A a, B b)
{
    typedef std::common_type_t<A, B> T;
    return (T)b < (T)a ? (T)b : (T)a;
}
template <typename A, typename B>
static inline std::common_type_t<A, B> max(A a, B b)
{
    typedef std::common_type_t<A, B> T;
    return (T)a < (T)b ? (T)b : (T)a;
}

static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
static inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }

template <typename T>
static inline T __ldg(const T *p)
{
    return *p;
}

/* Atomics: blocks run one at a time on an OS thread, but the sequentially consistent
 * builtins keep them right if blocks are ever spread over threads. */
template <typename T>
static inline T cudaemu_atomic_update(T *p, T (*f)(T, T), T v)
{
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(p, &old, f(old, v), false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
    }
    return old;
}
static inline float atomicAdd(float *p, float v)
{
    unsigned *u = (unsigned *)p;
    unsigned old = __atomic_load_n(u, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(u, &old, __float_as_uint(__uint_as_float(old) + v),
                                        false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return __uint_as_float(old);
}
static inline double atomicAdd(double *p, double v)
{
    unsigned long long *u = (unsigned long long *)p;
    unsigned long long old = __atomic_load_n(u, __ATOMIC_SEQ_CST);
    for (;;) {
        double nv = __longlong_as_double((long long)old) + v;
        if (__atomic_compare_exchange_n(u, &old, (unsigned long long)__double_as_longlong(nv),
                                        false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            break;
    }
    return __longlong_as_double((long long)old);
}
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline int atomicMax(int *p, int v)
{
    return cudaemu_atomic_update<int>(p, [](int a, int b) { return a > b ? a : b; }, v);
}
static inline int atomicMin(int *p, int v)
{
    return cudaemu_atomic_update<int>(p, [](int a, int b) { return a < b ? a : b; }, v);
}
static inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline int atomicCAS(int *p, int expected, int desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
static inline unsigned atomicCAS(unsigned *p, unsigned expected, unsigned desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ---------------------------------------------------------------- launches */

/* cuda_runtime.h declares the kernel-pointer overloads only for nvcc. */
template <typename... P>
static inline cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr,
                                               int value)
{
    return cudaFuncSetAttribute((const void *)kernel, attr, value);
}

typedef struct cudaemu_launch_desc {
    const void *func;  /* the kernel, for its cudaFuncSetAttribute opt-ins */
    const char *name;  /* as written at the launch site */
    const char *file;
    int line;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
} cudaemu_launch_desc;

/* Checks the configuration (a bad one sets the launch error, as CUDA does, and runs
 * nothing) and the pointer arguments (each must be NULL or in a live device allocation),
 * then queues the grid on the stream. run(closure) is one CUDA thread's body;
 * destroy(closure) frees it after the grid ran. */
void cudaemu_launch_erased(const cudaemu_launch_desc *d, void *closure, void (*run)(void *),
                           void (*destroy)(void *), const cudaemu_access *acc, int n_acc,
                           const int *pointer_arg_index);

template <typename... P>
struct cudaemu_launcher {
    void (*kernel)(P...);
    cudaemu_launch_desc desc;

    using args_t = std::tuple<std::decay_t<P>...>;
    struct closure {
        void (*kernel)(P...);
        args_t args;
    };
    static void run(void *c)
    {
        closure *cl = (closure *)c;
        std::apply(cl->kernel, cl->args);
    }
    static void destroy(void *c) { delete (closure *)c; }

    /* One access per pointer argument: from the pointer to the end of its allocation
     * (the kernel's extent is not known), written unless the pointee is const. */
    template <size_t I>
    static void collect(const args_t &a, cudaemu_access *acc, int *idx, int &n)
    {
        if constexpr (I < sizeof...(P)) {
            using E = std::tuple_element_t<I, args_t>;
            if constexpr (std::is_pointer_v<E>) {
                acc[n].p = (const void *)std::get<I>(a);
                acc[n].bytes = 0; /* to the allocation's end */
                acc[n].write = !std::is_const_v<std::remove_pointer_t<E>>;
                idx[n] = (int)I;
                n++;
            }
            collect<I + 1>(a, acc, idx, n);
        }
    }

    template <typename... A>
    void operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong argument count");
        closure *c = new closure{kernel, args_t(static_cast<std::decay_t<P>>(std::forward<A>(a))...)};
        cudaemu_access acc[sizeof...(P) + 1];
        int idx[sizeof...(P) + 1];
        int n = 0;
        collect<0>(c->args, acc, idx, n);
        cudaemu_launch_erased(&desc, c, &run, &destroy, acc, n, idx);
    }
};

template <typename... P>
static inline cudaemu_launcher<P...> cudaemu_launch(void (*kernel)(P...), const char *name,
                                                    dim3 grid, dim3 block, size_t smem,
                                                    cudaStream_t stream, const char *file,
                                                    int line)
{
    cudaemu_launcher<P...> l;
    l.kernel = kernel;
    l.desc.func = (const void *)kernel;
    l.desc.name = name;
    l.desc.file = file;
    l.desc.line = line;
    l.desc.grid = grid;
    l.desc.block = block;
    l.desc.smem = smem;
    l.desc.stream = stream;
    return l;
}

#endif
