/* Cooperative fibers for the CUDA execution harness: one per CUDA thread of the block
 * being run. A fiber runs until it switches away explicitly; all fibers of a block live on
 * one OS thread, so they share its thread-local storage (which is how `__shared__`
 * variables become block-shared).
 *
 * On x86-64 the switch is a few instructions (callee-saved registers and the stack
 * pointer); elsewhere, or with CUDAEMU_FIBER=ucontext, it is swapcontext, which makes a
 * signal-mask system call per switch (about 100x slower, same behaviour). Under
 * AddressSanitizer every switch is announced to ASan so that it follows the stacks. */
#ifndef FT_CUDAEMU_FIBER_H
#define FT_CUDAEMU_FIBER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cudaemu_fiber cudaemu_fiber;

/* The context of the OS thread that runs the scheduler; fibers switch back to it. */
cudaemu_fiber *cudaemu_fiber_main(void);

/* A fiber with a stack of `stack_bytes` (a guard page below it). NULL if out of memory. */
cudaemu_fiber *cudaemu_fiber_create(size_t stack_bytes);
void cudaemu_fiber_destroy(cudaemu_fiber *f);

/* Makes f start entry(arg) at its next switch-in. entry must never return: it ends by
 * switching away with cudaemu_fiber_exit_to. */
void cudaemu_fiber_prepare(cudaemu_fiber *f, void (*entry)(void *), void *arg);

/* Saves the current context in `from` and resumes `to`. */
void cudaemu_fiber_switch(cudaemu_fiber *from, cudaemu_fiber *to);
/* Like switch, for a fiber that is finished: `from` will only be prepared anew. */
void cudaemu_fiber_exit_to(cudaemu_fiber *from, cudaemu_fiber *to);

#ifdef __cplusplus
}
#endif

#endif
