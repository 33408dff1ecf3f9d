/* The CPU execution harness for CUDA (./configure --with-cuda-emulation): the interface
 * between its modules. Not a product header: nothing under src/ or cuda/ includes it
 * (the kernels see only cudaemu_device.h, force-included by the build).
 *
 * Modules
 *  - cudaemu_runtime.c   device memory, streams, events, device properties: the CUDA
 *                        runtime API functions the backend calls, with the same names and
 *                        signatures as <cuda_runtime_api.h>, linked instead of libcudart.
 *  - cudaemu_stream.c    the lazy per-stream work queues and the happens-before checker.
 *  - cudaemu_kernel.cc   kernel launches: blocks of cooperative fibers, barriers, shuffles,
 *                        the launch checks.
 *  - cudaemu_fiber.c     the fibers themselves (a hand-written x86-64/aarch64 switch,
 *                        ucontext elsewhere).
 *  - cudaemu_cublaslt.c  cuBLASLt on CBLAS, linked instead of libcublasLt.
 *  - cudaemu_nccl.c      NCCL on MPI, linked instead of libnccl.
 *
 * Execution model. Work given to a stream (kernels, copies, memsets, matmuls, the landing
 * of a collective's result, event records, waits) is queued, not run. It runs only when
 * something forces it: a synchronisation (stream, event, device), a copy to pageable host
 * memory, cudaFree, or a collective that needs its stream's inputs. Forcing runs exactly
 * the work the forced point depends on (its stream's earlier work and, through event
 * waits, other streams' work up to the recorded events) and nothing else, so work that a
 * missing dependency leaves unordered runs as late as possible: a missing event wait reads
 * stale or poisoned data. Independently of execution, every queued operation declares the
 * device ranges it reads and writes, and a vector-clock happens-before check reports (and
 * aborts on) any two accesses from different streams, one a write, that no event or
 * synchronisation orders: a missing wait is reported even where the data happen to be
 * right.
 *
 * Findings (a race, an access outside a live allocation, a divergent barrier, a bad launch
 * configuration that the kernel-side checks see, a deadlock) are printed as one block
 * starting "cudaemu: " with the operation, the kernel and its launch site, then abort():
 * a test under the harness fails loudly at the first defect, as compute-sanitizer's
 * --error-exitcode would make it. */
#ifndef FT_CUDAEMU_H
#define FT_CUDAEMU_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- findings */

/* Prints "cudaemu: <message>" (and the operation being executed, if any) and aborts. */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 1, 2)))
#endif
void cudaemu_fail(const char *fmt, ...);

/* ---------------------------------------------------------------- device memory */

/* A live device allocation containing p: its base and size; 0 if found, -1 if p is not
 * inside any live allocation (freed, never allocated, or host memory). */
int cudaemu_find_alloc(const void *p, void **base, size_t *bytes);

/* Aborts with a finding unless [p, p+bytes) lies inside one live device allocation.
 * `who` names the API call ("cublasLtMatmul"), `what` the operand ("A"). bytes == 0
 * checks only that p is NULL or inside a live allocation. */
void cudaemu_check_device_range(const void *p, size_t bytes, const char *who, const char *what);

/* Device memory the program holds: the bytes of live device allocations (counted from
 * cudaMalloc/cudaMallocAsync until cudaFree/cudaFreeAsync is called, as the stream-
 * ordered pool sees them), and the largest that sum has been since the start or the last
 * cudaemu_memory_reset_peak. With CUDAEMU_REPORT=1 a one-line summary is printed at exit. */
void cudaemu_memory_usage(size_t *in_use, size_t *peak);
void cudaemu_memory_reset_peak(void);
/* cudaMemPoolTrimTo calls so far (the backend trims its pool when a request fails). */
long cudaemu_pool_trims(void);

/* ---------------------------------------------------------------- stream work */

/* A device range an operation reads or writes, for the happens-before check. */
typedef struct cudaemu_access {
    const void *p;
    size_t bytes;
    int write; /* 0: read only; 1: written (and possibly read) */
} cudaemu_access;

typedef void (*cudaemu_work_fn)(void *ctx);

/* Queues work on stream s (NULL = the legacy default stream). `what` names it in findings
 * ("kernel rmsnorm_fwd_kernel (cuda/cuda_rmsnorm.cu:115)"; copied). run(ctx) executes it
 * when forced; free_ctx(ctx) (may be NULL) is called after it ran. The accesses are checked
 * against the other streams at once (enqueue time: the order the host issued), and the
 * array is copied. */
void cudaemu_enqueue(cudaStream_t s, const char *what, cudaemu_work_fn run, void *ctx,
                     void (*free_ctx)(void *), const cudaemu_access *acc, int n_acc);

/* Runs everything queued on s so far (and whatever it waits on). */
void cudaemu_force_stream(cudaStream_t s);

/* The name of the operation being executed, for messages (NULL outside execution). */
const char *cudaemu_current_work(void);

/* Turns the happens-before check on or off from now on (tests; the environment's
 * CUDAEMU_RACECHECK=0 turns it off from the start). */
void cudaemu_set_racecheck(int enabled);

/* ---------------------------------------------------------------- device */

/* The emulated device model: 0 = A100 80GB (sm_80), 1 = H100 80GB SXM (sm_90). Chosen by
 * CUDAEMU_DEVICE=a100|h100 (default a100). */
int cudaemu_device_model(void);
/* Largest dynamic shared memory per block with the opt-in (163 KiB on sm_80, 227 KiB on
 * sm_90) and without it (48 KiB). */
size_t cudaemu_smem_optin_max(void);
#define CUDAEMU_SMEM_DEFAULT_MAX ((size_t)48 << 10)
/* The opt-in set by cudaFuncSetAttribute(MaxDynamicSharedMemorySize) for a kernel. */
size_t cudaemu_func_smem_limit(const void *func);
/* The thread order of kernel blocks (cudaemu_kernel.cc): "forward", "reverse", "random",
 * "warp-serial"; from CUDAEMU_ORDER unless a test sets it. Returns -1 for an unknown name. */
int cudaemu_set_thread_order(const char *name);

/* cuDNN graphs executed so far by the stand-in (cudaemu_cudnn.c): counted when
 * cudnnBackendExecute accepts the call. */
long cudaemu_cudnn_executions(void);
/* Execution plans finalized so far on an engine the stand-in marks non-deterministic.
 * CUDAEMU_CUDNN_ENGINES sets what the heuristics offer a graph they support: "deterministic"
 * (the default: one engine), "nondeterministic-first" (a non-deterministic engine ranked
 * before a deterministic one, as real heuristics may rank an atomics-based backward) or
 * "nondeterministic-only". Both engines compute the same results. */
long cudaemu_cudnn_nondeterministic_plans(void);

/* For tests that hold a path free of host waits (cuDNN attention with a segment hint):
 * the times the host has waited for the device so far (stream, device and event
 * synchronisations, explicit or implied: cudaMemcpy, a copy into pageable memory,
 * cudaFree), and the device-to-host copies queued so far. */
long cudaemu_host_waits(void);
long cudaemu_device_to_host_copies(void);
/* Device operations queued so far (kernels, library calls, copies, sets; not waits): on a
 * GPU each is a launch and a kernel boundary. CUDAEMU_REPORT=ops lists them by name at
 * exit, most frequent first. */
long cudaemu_device_ops(void);

/* Records a launch error for cudaGetLastError / cudaPeekAtLastError. */
void cudaemu_set_last_error(cudaError_t e);

#ifdef __cplusplus
}
#endif

#endif
