/* The CPU execution harness for CUDA: internals shared by the host-side modules
 * (cudaemu_alloc.c, cudaemu_stream.c, cudaemu_runtime.c, cudaemu_errors.c,
 * cudaemu_cublaslt.c, cudaemu_nccl.c). The interface with the kernel side is cudaemu.h.
 *
 * Threading: like the backend it serves, the harness is driven by one host thread.
 * Kernels may call cudaemu_find_alloc / cudaemu_check_device_range while they run (those
 * only read the registry), but nothing here takes locks. */
#ifndef FT_CUDAEMU_HOST_H
#define FT_CUDAEMU_HOST_H

#include "cudaemu.h"

#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- clocks */

/* Stream slots of the vector clocks: slot 0 is the legacy default stream, 1.. the
 * streams the program creates. A destroyed stream's slot is reused only once the host
 * has synchronised with all of its work (so its epochs stay meaningful). */
#define CUDAEMU_SLOTS 64
typedef uint32_t cudaemu_clock[CUDAEMU_SLOTS];

/* ---------------------------------------------------------------- allocations */

/* One access some operation made to an allocation, kept for the happens-before check:
 * operation `what` (interned, never freed) at epoch `epoch` of stream slot `slot`
 * touched [off, off+len). */
typedef struct cudaemu_shadow {
    size_t off, len;
    uint32_t epoch;
    uint16_t slot;
    uint8_t write;
    const char *what;
} cudaemu_shadow;

/* A live allocation (device memory, or pinned host memory in the runtime's second
 * registry). Owns its shadow records; the memory itself is owned by whoever added it. */
typedef struct cudaemu_alloc {
    char *base;
    size_t bytes;
    uint64_t serial;           /* "#n": the n-th allocation of the process, for messages */
    cudaemu_shadow *shadow;    /* recent accesses, see cudaemu_stream.c */
    size_t n_shadow, cap_shadow, prune_at;
} cudaemu_alloc;

/* A set of allocations sorted by base address: lookups by any interior pointer in
 * O(log n), insertion and removal O(n) (memmove of pointers; n is at most thousands). */
typedef struct cudaemu_registry {
    cudaemu_alloc **v;
    size_t n, cap;
} cudaemu_registry;

/* Adds [base, base+bytes); NULL when out of host memory. */
cudaemu_alloc *cudaemu_registry_add(cudaemu_registry *r, void *base, size_t bytes);
/* The allocation containing p, or NULL. */
cudaemu_alloc *cudaemu_registry_find(const cudaemu_registry *r, const void *p);
/* Removes the allocation starting exactly at base (and frees its record); -1 if none. */
int cudaemu_registry_remove(cudaemu_registry *r, const void *base);

/* The device allocations (cudaMalloc, cudaMallocAsync). */
cudaemu_registry *cudaemu_device_registry(void);
/* Remembers a freed device range so later messages can say "freed by ... at ..." */
void cudaemu_note_freed(const void *base, size_t bytes, uint64_t serial, const char *how);
/* "(allocation #n of N bytes at 0x..., freed by cudaFreeAsync)" if p was in a recently
 * freed allocation, else "". Static buffer: use before the next call. */
const char *cudaemu_freed_note(const void *p);

/* An immortal copy of s, the same pointer for equal strings (operation names). */
const char *cudaemu_intern(const char *s);

/* The device operations counted by name (cudaemu_device_ops), most frequent first. */
void cudaemu_report_device_ops(FILE *out);

/* ---------------------------------------------------------------- streams */

/* The vector-clock race check is on unless CUDAEMU_RACECHECK=0. */
int cudaemu_racecheck_enabled(void);

cudaError_t cudaemu_stream_create(cudaStream_t *out, unsigned flags);
cudaError_t cudaemu_stream_destroy(cudaStream_t s);
/* Forces s and makes the host's clock include everything s did. */
void cudaemu_sync_stream(cudaStream_t s);
/* Forces every stream and joins every clock into the host's. */
void cudaemu_sync_device(void);
/* 1 if s has queued work that has not run. */
int cudaemu_stream_pending(cudaStream_t s);
/* Checks that s is a stream handle in use (NULL is the legacy stream); a finding if it
 * was destroyed. */
void cudaemu_check_stream(cudaStream_t s, const char *who);

cudaError_t cudaemu_event_create(cudaEvent_t *out, unsigned flags);
cudaError_t cudaemu_event_destroy(cudaEvent_t e);
cudaError_t cudaemu_event_record(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaemu_stream_wait_event(cudaStream_t s, cudaEvent_t e);
/* Forces the work the event's record captured and joins its clock into the host's. */
cudaError_t cudaemu_event_sync(cudaEvent_t e);
/* 1 if the work the record captured has not run (0 for an unrecorded event). */
int cudaemu_event_pending(cudaEvent_t e);

/* ---------------------------------------------------------------- errors */

/* Returns e after recording it as the last error (a no-op for cudaSuccess). */
cudaError_t cudaemu_error(cudaError_t e);
/* A sticky error a previous operation left, or cudaSuccess. */
cudaError_t cudaemu_sticky_error(void);
/* Every runtime call fails with a sticky error once one happened. */
#define STICKY_GUARD()                                                                             \
    do {                                                                                           \
        if (cudaemu_sticky_error() != cudaSuccess)                                                 \
            return cudaemu_sticky_error();                                                         \
    } while (0)

/* ---------------------------------------------------------------- device */

/* Bytes of memory of an emulated device (80 GiB). */
size_t cudaemu_device_memory_total(void);

#endif
