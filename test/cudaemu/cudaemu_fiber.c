/* Fibers: see cudaemu_fiber.h.
 *
 * The x86-64 switch pushes the System V callee-saved registers (rbx, rbp, r12-r15) on
 * the current stack, stores the stack pointer in `from`, loads `to`'s and pops. A fresh
 * fiber's stack is laid out as if it had been switched away from: six register slots
 * (r12 = entry, r13 = arg) under a return address that points to a trampoline, which
 * moves arg into rdi and calls entry with the stack 16-byte aligned as the ABI wants.
 * The floating-point control words are not switched: kernels do not change them. */
#include "cudaemu_fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FIBER_ASAN 1
#endif
#endif
#ifdef FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && !defined(CUDAEMU_FORCE_UCONTEXT)
#define FIBER_ASM 1
#endif

struct cudaemu_fiber {
    void *sp;           /* saved stack pointer (asm switch) */
    ucontext_t uc;      /* saved context (ucontext switch) */
    char *map;          /* mapping: guard page + stack; NULL for the main fiber */
    size_t map_bytes;
    const void *stack_lo; /* for ASan: the stack's bounds */
    size_t stack_size;
    void *fake_stack;   /* ASan's fake stack while switched away */
    void (*entry)(void *);
    void *arg;
    int fresh; /* prepared, not yet switched to (ucontext flavour) */
};

static _Thread_local cudaemu_fiber main_fiber;
static _Thread_local cudaemu_fiber *switching_from; /* who switched to the running fiber */

#ifdef FIBER_ASM
void cudaemu_fiber_asm_switch(void **save_sp, void *new_sp);
void cudaemu_fiber_asm_trampoline(void);
__asm__(".text\n"
        ".globl cudaemu_fiber_asm_switch\n"
        ".type cudaemu_fiber_asm_switch,@function\n"
        "cudaemu_fiber_asm_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size cudaemu_fiber_asm_switch, .-cudaemu_fiber_asm_switch\n"
        ".globl cudaemu_fiber_asm_trampoline\n"
        ".type cudaemu_fiber_asm_trampoline,@function\n"
        "cudaemu_fiber_asm_trampoline:\n"
        "    movq %r13, %rdi\n"
        "    callq *%r12\n"
        "    ud2\n"
        ".size cudaemu_fiber_asm_trampoline, .-cudaemu_fiber_asm_trampoline\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");
#endif

static int use_ucontext(void)
{
#ifdef FIBER_ASM
    static int cached = -1;
    if (cached < 0) {
        const char *e = getenv("CUDAEMU_FIBER");
        cached = e && strcmp(e, "ucontext") == 0;
    }
    return cached;
#else
    return 1;
#endif
}

cudaemu_fiber *cudaemu_fiber_main(void)
{
    return &main_fiber;
}

cudaemu_fiber *cudaemu_fiber_create(size_t stack_bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t pg = page > 0 ? (size_t)page : 4096;
    size_t stack = (stack_bytes + pg - 1) / pg * pg;
    cudaemu_fiber *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->map_bytes = stack + pg;
    f->map = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (f->map == MAP_FAILED) {
        free(f);
        return NULL;
    }
    /* The lowest page traps a stack overflow instead of letting it write into a neighbour. */
    mprotect(f->map, pg, PROT_NONE);
    f->stack_lo = f->map + pg;
    f->stack_size = stack;
    return f;
}

void cudaemu_fiber_destroy(cudaemu_fiber *f)
{
    if (!f)
        return;
    munmap(f->map, f->map_bytes);
    free(f);
}

/* First code run on a fresh fiber (both switch flavours). */
static void fiber_start(void *self_ptr)
{
    cudaemu_fiber *self = self_ptr;
#ifdef FIBER_ASAN
    cudaemu_fiber *from = switching_from;
    const void *lo;
    size_t size;
    __sanitizer_finish_switch_fiber(NULL, &lo, &size);
    if (from && !from->map) { /* learn the main stack's bounds for switches back */
        from->stack_lo = lo;
        from->stack_size = size;
    }
#endif
    self->entry(self->arg);
    abort(); /* entry must switch away for good */
}

static _Thread_local cudaemu_fiber *ucontext_starting;

static void ucontext_start(void)
{
    fiber_start(ucontext_starting);
}

void cudaemu_fiber_prepare(cudaemu_fiber *f, void (*entry)(void *), void *arg)
{
    f->entry = entry;
    f->arg = arg;
    f->fake_stack = NULL;
#ifdef FIBER_ASAN
    /* A stack reused from a finished fiber keeps the redzones of the frames that never
     * returned (the fiber switched away for good): clear them for the new one. */
    __asan_unpoison_memory_region(f->stack_lo, f->stack_size);
#endif
    char *top = (char *)f->stack_lo + f->stack_size;
    if (use_ucontext()) {
        getcontext(&f->uc);
        f->uc.uc_stack.ss_sp = (void *)f->stack_lo;
        f->uc.uc_stack.ss_size = f->stack_size;
        f->uc.uc_link = NULL;
        makecontext(&f->uc, ucontext_start, 0);
        f->fresh = 1;
        return;
    }
#ifdef FIBER_ASM
    /* After the six pops and the ret, rsp = slots + 7 words must be 16-byte aligned. */
    uintptr_t after_ret = ((uintptr_t)top - 64) & ~(uintptr_t)15;
    void **slots = (void **)(after_ret - 7 * sizeof(void *));
    memset(slots, 0, 7 * sizeof(void *));
    slots[2] = (void *)f;            /* r13: the trampoline's argument */
    slots[3] = (void *)fiber_start;  /* r12: what it calls */
    slots[6] = (void *)cudaemu_fiber_asm_trampoline;
    f->sp = slots;
#else
    (void)top;
#endif
}

static void raw_switch(cudaemu_fiber *from, cudaemu_fiber *to)
{
    switching_from = from;
    if (use_ucontext()) {
        if (to->fresh) {
            ucontext_starting = to;
            to->fresh = 0;
        }
        swapcontext(&from->uc, &to->uc);
        return;
    }
#ifdef FIBER_ASM
    cudaemu_fiber_asm_switch(&from->sp, to->sp);
#endif
}

void cudaemu_fiber_switch(cudaemu_fiber *from, cudaemu_fiber *to)
{
#ifdef FIBER_ASAN
    __sanitizer_start_switch_fiber(&from->fake_stack, to->stack_lo, to->stack_size);
#endif
    raw_switch(from, to);
#ifdef FIBER_ASAN
    {
        cudaemu_fiber *back_from = switching_from;
        const void *lo;
        size_t size;
        __sanitizer_finish_switch_fiber(from->fake_stack, &lo, &size);
        if (back_from && !back_from->map) {
            back_from->stack_lo = lo;
            back_from->stack_size = size;
        }
    }
#endif
}

void cudaemu_fiber_exit_to(cudaemu_fiber *from, cudaemu_fiber *to)
{
#ifdef FIBER_ASAN
    __sanitizer_start_switch_fiber(NULL, to->stack_lo, to->stack_size);
#endif
    raw_switch(from, to);
    abort(); /* a finished fiber is never resumed without cudaemu_fiber_prepare */
}
