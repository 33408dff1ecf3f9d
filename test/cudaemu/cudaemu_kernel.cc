/* Kernel launches on the CPU: each block's threads are cooperative fibers scheduled by
 * one loop on the OS thread that executes the stream's work; blocks run one after the
 * other.
 *
 * A fiber runs until it reaches a barrier, a warp collective, or its end, then returns to
 * the scheduler, which picks the next runnable fiber in the order CUDAEMU_ORDER selects:
 *   forward      the next runnable thread after the one that ran (by linear index);
 *   reverse      the previous one;
 *   random       a random one (CUDAEMU_SEED, default 1), blocks in a random order too;
 *   warp-serial  always the lowest runnable thread: a warp runs to its next block barrier
 *                before the next warp starts, the order that exposes a barrier missing
 *                between warps that exchange data through shared memory.
 * Each order makes some missing barriers read stale or poisoned shared memory; CI runs
 * the kernel tests in all four.
 *
 * Checks (each a finding: message, then abort):
 *  - __syncthreads: every thread that has not exited must reach the same barrier (source
 *    line); threads waiting at different barriers, or some at a barrier while the others
 *    wait in a warp collective, are reported (divergent barrier, deadlock).
 *  - warp collectives: the caller's lane is in its mask; the mask names only lanes that
 *    exist and have not exited; every lane of the mask calls the same collective with
 *    the same mask; a shuffle reads only lanes of the mask.
 *  - launch: threads per block, block and grid dimensions within the device limits;
 *    dynamic shared memory within 48 KiB, or within the cudaFuncSetAttribute opt-in, which
 *    the runtime caps at the device's maximum. A bad configuration is a launch error
 *    (cudaGetLastError), exactly as on a GPU: the caller must check.
 *  - pointer arguments: NULL or inside a live device allocation.
 * Dynamic shared memory is a separate heap block per launch (AddressSanitizer sees
 * overruns) filled with 0xFF bytes (NaN) before every block, so reading what no thread of
 * the block wrote shows. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudaemu_device.h"
#include "cudaemu_fiber.h"

thread_local const uint3 *cudaemu_cur_tid;
thread_local cudaemu_block_view cudaemu_cur_block;

namespace {

enum order_kind { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM, ORDER_WARP_SERIAL };
enum thread_state { T_NEW, T_READY, T_BARRIER, T_WARP, T_DONE };

struct emu_block;

struct emu_thread {
    uint3 tid;
    int index; /* linear index in the block */
    int state;
    emu_block *block;
    cudaemu_fiber *fiber;
    /* where it waits */
    const char *file;
    int line;
    /* warp collective */
    int kind;
    unsigned mask;
    uint64_t value;
    int arg;
    int width;
    uint64_t result;
    /* a collective with a completion function (mma, ldmatrix) */
    void *data;
    cudaemu_warp_complete_fn complete;
    const char *cname;
    /* per-thread state of an extension (pending cp.async copies), dropped at exit */
    void *ext;
    void (*ext_drop)(void *);
};

struct grid_job {
    cudaemu_launch_desc d;
    void *closure;
    void (*run)(void *);
    void (*destroy)(void *);
    char what[256];
};

struct emu_block {
    const grid_job *job;
    emu_thread *t;
    int n;
    int done;
    int at_barrier;
    uint64_t *ready; /* bitmap of runnable (or not yet started) threads */
    int words;
    int last; /* thread that ran last */
    /* per-block state of extensions (wgmma's), ended when the block's threads are done */
    struct {
        void *state;
        void (*end)(void *);
    } ext[4];
    int n_ext;
};

int order_from_name(const char *e)
{
    if (!strcmp(e, "forward"))
        return ORDER_FORWARD;
    if (!strcmp(e, "reverse"))
        return ORDER_REVERSE;
    if (!strcmp(e, "random"))
        return ORDER_RANDOM;
    if (!strcmp(e, "warp-serial"))
        return ORDER_WARP_SERIAL;
    return -1;
}

int chosen_order = -1;

order_kind thread_order()
{
    if (chosen_order < 0) {
        const char *e = getenv("CUDAEMU_ORDER");
        chosen_order = ORDER_FORWARD;
        if (e && *e && (chosen_order = order_from_name(e)) < 0)
            cudaemu_fail("CUDAEMU_ORDER=%s: expected forward, reverse, random or warp-serial", e);
    }
    return (order_kind)chosen_order;
}

/* xorshift64*: the random order's choices, reproducible from CUDAEMU_SEED. */
uint64_t next_random()
{
    static thread_local uint64_t s;
    if (s == 0) {
        const char *e = getenv("CUDAEMU_SEED");
        s = e ? strtoull(e, NULL, 10) * 0x9E3779B97F4A7C15ull + 1 : 0x9E3779B97F4A7C15ull;
    }
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
}

uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

size_t stack_bytes()
{
    const char *e = getenv("CUDAEMU_STACK_KB");
    if (e && atoi(e) > 0)
        return (size_t)atoi(e) << 10;
#if defined(__SANITIZE_ADDRESS__)
    return (size_t)512 << 10;
#else
    return (size_t)128 << 10;
#endif
}

/* Stacks are reused: a thread takes one when it first runs and returns it at its end, so
 * a kernel without barriers runs every thread on the same stack. */
thread_local cudaemu_fiber **fiber_pool;
thread_local int fiber_pool_n, fiber_pool_cap;
thread_local emu_thread *cur_thread;

cudaemu_fiber *fiber_take()
{
    if (fiber_pool_n > 0)
        return fiber_pool[--fiber_pool_n];
    cudaemu_fiber *f = cudaemu_fiber_create(stack_bytes());
    if (!f)
        cudaemu_fail("out of memory for a fiber stack (CUDAEMU_STACK_KB)");
    return f;
}

void fiber_give(cudaemu_fiber *f)
{
    if (fiber_pool_n == fiber_pool_cap) {
        int cap = fiber_pool_cap ? 2 * fiber_pool_cap : 64;
        cudaemu_fiber **p = (cudaemu_fiber **)realloc(fiber_pool, (size_t)cap * sizeof *p);
        if (!p)
            cudaemu_fail("out of memory");
        fiber_pool = p;
        fiber_pool_cap = cap;
    }
    fiber_pool[fiber_pool_n++] = f;
}

inline void set_ready(emu_block *b, int i) { b->ready[i >> 6] |= 1ull << (i & 63); }
inline void clear_ready(emu_block *b, int i) { b->ready[i >> 6] &= ~(1ull << (i & 63)); }

/* First runnable index >= from (no wrap); -1 if none. */
int ready_at_or_after(const emu_block *b, int from)
{
    if (from >= b->n)
        return -1;
    int w = from >> 6;
    uint64_t bits = b->ready[w] & (~0ull << (from & 63));
    for (;;) {
        if (bits)
            return (w << 6) + __builtin_ctzll(bits);
        if (++w >= b->words)
            return -1;
        bits = b->ready[w];
    }
}

/* Last runnable index <= from (no wrap); -1 if none. */
int ready_at_or_before(const emu_block *b, int from)
{
    if (from < 0)
        return -1;
    int w = from >> 6;
    int sh = 63 - (from & 63);
    uint64_t bits = b->ready[w] & (~0ull >> sh);
    for (;;) {
        if (bits)
            return (w << 6) + 63 - __builtin_clzll(bits);
        if (--w < 0)
            return -1;
        bits = b->ready[w];
    }
}

int pick(emu_block *b)
{
    int i;
    switch (thread_order()) {
    case ORDER_REVERSE:
        i = ready_at_or_before(b, b->last - 1);
        return i >= 0 ? i : ready_at_or_before(b, b->n - 1);
    case ORDER_RANDOM:
        i = ready_at_or_after(b, (int)(next_random() % (uint64_t)b->n));
        return i >= 0 ? i : ready_at_or_after(b, 0);
    case ORDER_WARP_SERIAL:
        return ready_at_or_after(b, 0);
    case ORDER_FORWARD:
    default:
        i = ready_at_or_after(b, b->last + 1);
        return i >= 0 ? i : ready_at_or_after(b, 0);
    }
}

void thread_main(void *arg)
{
    emu_thread *t = (emu_thread *)arg;
    t->ext = NULL;
    t->ext_drop = NULL;
    t->block->job->run(t->block->job->closure);
    if (t->ext && t->ext_drop)
        t->ext_drop(t->ext);
    t->ext = NULL;
    t->state = T_DONE;
    t->block->done++;
    cudaemu_fiber_exit_to(t->fiber, cudaemu_fiber_main());
}

const char *kind_name(int k)
{
    static const char *const names[] = {"__syncwarp",   "__shfl_sync", "__shfl_up_sync",
                                        "__shfl_down_sync", "__shfl_xor_sync", "__ballot_sync",
                                        "__any_sync",   "__all_sync",  "a warp-wide instruction"};
    return k >= 0 && k < (int)(sizeof names / sizeof names[0]) ? names[k] : "?";
}

void describe_thread(const emu_thread *t, char *buf, size_t n)
{
    const emu_block *b = t->block;
    snprintf(buf, n, "block (%u,%u,%u) thread (%u,%u,%u)", cudaemu_cur_block.idx.x,
             cudaemu_cur_block.idx.y, cudaemu_cur_block.idx.z, t->tid.x, t->tid.y, t->tid.z);
    (void)b;
}

/* All threads that have not exited wait at a barrier: they must wait at the same one. */
void release_barrier(emu_block *b)
{
    const emu_thread *first = NULL;
    for (int i = 0; i < b->n; i++) {
        const emu_thread *t = &b->t[i];
        if (t->state != T_BARRIER)
            continue;
        if (!first) {
            first = t;
        } else if (t->line != first->line || strcmp(t->file, first->file) != 0) {
            char a[96], c[96];
            describe_thread(first, a, sizeof a);
            describe_thread(t, c, sizeof c);
            cudaemu_fail("divergent __syncthreads in %s: %s waits at %s:%d, %s at %s:%d",
                         b->job->what, a, first->file, first->line, c, t->file, t->line);
        }
    }
    for (int i = 0; i < b->n; i++)
        if (b->t[i].state == T_BARRIER) {
            b->t[i].state = T_READY;
            set_ready(b, i);
        }
    b->at_barrier = 0;
}

/* Nothing can run, yet threads have not finished: report who waits where. */
[[noreturn]] void report_deadlock(emu_block *b)
{
    char msg[1024];
    size_t len = 0;
    int shown = 0;
    for (int i = 0; i < b->n && shown < 6; i++) {
        const emu_thread *t = &b->t[i];
        if (t->state != T_BARRIER && t->state != T_WARP)
            continue;
        char who[96];
        describe_thread(t, who, sizeof who);
        if (t->state == T_WARP) {
            int first = t->index / 32 * 32;
            for (int l = 0; l < 32 && first + l < b->n; l++)
                if ((t->mask & (1u << l)) && b->t[first + l].state == T_DONE)
                    cudaemu_fail("%s: %s waits in %s at %s:%d with mask 0x%08x, which names "
                                 "lane %d; that lane has exited (or passed this collective with "
                                 "another mask)",
                                 b->job->what, who, kind_name(t->kind), t->file, t->line, t->mask,
                                 l);
        }
        int w = snprintf(msg + len, sizeof msg - len, "\n  %s waits in %s at %s:%d", who,
                         t->state == T_BARRIER ? "__syncthreads" : kind_name(t->kind), t->file,
                         t->line);
        if (w > 0 && (size_t)w < sizeof msg - len)
            len += (size_t)w;
        shown++;
    }
    cudaemu_fail("deadlock in %s: %d of %d threads wait, %d exited, %d at a barrier:%s",
                 b->job->what, b->n - b->done, b->n, b->done, b->at_barrier, msg);
}

void run_block(const grid_job *job, emu_block *b, uint3 bidx, void *smem)
{
    cudaemu_cur_block.idx = bidx;
    if (smem)
        memset(smem, 0xFF, job->d.smem);
    b->done = 0;
    b->at_barrier = 0;
    b->n_ext = 0;
    b->last = thread_order() == ORDER_REVERSE ? b->n : -1;
    memset(b->ready, 0, (size_t)b->words * sizeof *b->ready);
    for (int i = 0; i < b->n; i++) {
        b->t[i].state = T_NEW;
        set_ready(b, i);
    }
    cudaemu_fiber *main_fiber = cudaemu_fiber_main();
    while (b->done < b->n) {
        int i = pick(b);
        if (i < 0) {
            if (b->at_barrier > 0 && b->at_barrier + b->done == b->n) {
                release_barrier(b);
                continue;
            }
            report_deadlock(b);
        }
        emu_thread *t = &b->t[i];
        clear_ready(b, i);
        if (t->state == T_NEW) {
            t->fiber = fiber_take();
            cudaemu_fiber_prepare(t->fiber, thread_main, t);
        }
        t->state = t->state == T_NEW ? T_READY : t->state;
        cur_thread = t;
        cudaemu_cur_tid = &t->tid;
        b->last = i;
        cudaemu_fiber_switch(main_fiber, t->fiber);
        cur_thread = NULL;
        if (t->state == T_DONE) {
            fiber_give(t->fiber);
            t->fiber = NULL;
        }
        if (b->at_barrier > 0 && b->at_barrier + b->done == b->n)
            release_barrier(b);
    }
    for (int i = 0; i < b->n_ext; i++)
        b->ext[i].end(b->ext[i].state);
    b->n_ext = 0;
}

void run_grid(void *arg)
{
    const grid_job *job = (const grid_job *)arg;
    dim3 g = job->d.grid, bd = job->d.block;
    int n = (int)(bd.x * bd.y * bd.z);
    emu_block b;
    memset(&b, 0, sizeof b);
    b.job = job;
    b.n = n;
    b.words = (n + 63) / 64;
    b.t = (emu_thread *)calloc((size_t)n, sizeof *b.t);
    b.ready = (uint64_t *)calloc((size_t)b.words, sizeof *b.ready);
    void *smem = job->d.smem ? malloc(job->d.smem) : NULL;
    if (!b.t || !b.ready || (job->d.smem && !smem))
        cudaemu_fail("out of host memory running %s", job->what);
    for (int i = 0; i < n; i++) {
        emu_thread *t = &b.t[i];
        t->index = i;
        t->block = &b;
        t->tid.x = (unsigned)i % bd.x;
        t->tid.y = ((unsigned)i / bd.x) % bd.y;
        t->tid.z = (unsigned)i / (bd.x * bd.y);
    }
    cudaemu_block_view saved = cudaemu_cur_block;
    cudaemu_cur_block.dim = bd;
    cudaemu_cur_block.grid = g;
    cudaemu_cur_block.dynamic_smem = smem;
    cudaemu_cur_block.dynamic_smem_bytes = job->d.smem;

    uint64_t blocks = (uint64_t)g.x * g.y * g.z;
    uint64_t start = 0, step = 1;
    order_kind ord = thread_order();
    if (ord == ORDER_REVERSE) {
        start = blocks - 1;
        step = (uint64_t)-1;
    } else if (ord == ORDER_RANDOM && blocks > 1) {
        /* visit every block once: a stride coprime with the count from a random start */
        start = next_random() % blocks;
        do
            step = 1 + next_random() % blocks;
        while (step > 1 && gcd_u64(step, blocks) != 1);
    }
    uint64_t lin = start;
    for (uint64_t k = 0; k < blocks; k++) {
        uint3 bidx;
        bidx.x = (unsigned)(lin % g.x);
        bidx.y = (unsigned)((lin / g.x) % g.y);
        bidx.z = (unsigned)(lin / ((uint64_t)g.x * g.y));
        run_block(job, &b, bidx, smem);
        lin = (lin + step) % blocks;
    }
    cudaemu_cur_block = saved;
    free(smem);
    free(b.ready);
    free(b.t);
}

void free_job(void *arg)
{
    grid_job *job = (grid_job *)arg;
    job->destroy(job->closure);
    delete job;
}

emu_thread *running_thread(const char *what)
{
    if (!cur_thread)
        cudaemu_fail("%s called outside a kernel", what);
    return cur_thread;
}

/* Lanes of t's warp: the warp's first thread and how many threads it has. */
void warp_extent(const emu_thread *t, int *first, int *count)
{
    *first = t->index / 32 * 32;
    int left = t->block->n - *first;
    *count = left < 32 ? left : 32;
}

/* Called by the last lane of `mask` to arrive: checks the group and computes results. */
void complete_warp_op(emu_thread *self, int first, int count)
{
    emu_block *b = self->block;
    unsigned mask = self->mask;
    emu_thread *lanes[32] = {0};
    for (int l = 0; l < 32; l++)
        if (mask & (1u << l))
            lanes[l] = &b->t[first + l];
    for (int l = 0; l < 32; l++) {
        emu_thread *o = lanes[l];
        if (!o)
            continue;
        if (o->mask != mask || o->kind != self->kind)
            cudaemu_fail("%s: warp %d, lane %d calls %s with mask 0x%08x at %s:%d while lane %d "
                         "calls %s with mask 0x%08x at %s:%d (the lanes of a mask must execute "
                         "the same collective with the same mask)",
                         b->job->what, first / 32, self->index - first, kind_name(self->kind),
                         mask, self->file, self->line, l, kind_name(o->kind), o->mask, o->file,
                         o->line);
    }
    if (self->kind == CUDAEMU_COLLECTIVE) {
        void *data[32] = {0};
        for (int l = 0; l < 32; l++) {
            if (!lanes[l])
                continue;
            if (lanes[l]->complete != self->complete)
                cudaemu_fail("%s: warp %d: lane %d executes %s at %s:%d while lane %d executes "
                             "%s at %s:%d (the lanes must execute the same instruction)",
                             b->job->what, first / 32, self->index - first, self->cname,
                             self->file, self->line, l, lanes[l]->cname, lanes[l]->file,
                             lanes[l]->line);
            data[l] = lanes[l]->data;
        }
        self->complete(data);
        for (int l = 0; l < 32; l++)
            if (lanes[l]) {
                lanes[l]->state = T_READY;
                set_ready(b, first + l);
            }
        return;
    }
    uint64_t vote = 0;
    for (int l = 0; l < 32; l++)
        if (lanes[l] && lanes[l]->value)
            vote |= 1ull << l;
    for (int l = 0; l < 32; l++) {
        emu_thread *o = lanes[l];
        if (!o)
            continue;
        int w = o->width;
        int base = l & ~(w - 1);
        int src = l;
        switch (o->kind) {
        case CUDAEMU_SHFL_IDX:
            src = base + (o->arg & (w - 1));
            break;
        case CUDAEMU_SHFL_UP:
            src = l - o->arg >= base ? l - o->arg : l;
            break;
        case CUDAEMU_SHFL_DOWN:
            src = l + o->arg < base + w ? l + o->arg : l;
            break;
        case CUDAEMU_SHFL_XOR:
            src = l ^ o->arg;
            if (src >= base + w)
                src = l;
            break;
        default:
            break;
        }
        switch (o->kind) {
        case CUDAEMU_SHFL_IDX:
        case CUDAEMU_SHFL_UP:
        case CUDAEMU_SHFL_DOWN:
        case CUDAEMU_SHFL_XOR:
            if (src < 0 || src >= 32 || !lanes[src])
                cudaemu_fail("%s: %s at %s:%d: lane %d reads lane %d, which is not in the mask "
                             "0x%08x (its value is undefined on a GPU)",
                             b->job->what, kind_name(o->kind), o->file, o->line, l, src, mask);
            o->result = lanes[src]->value;
            break;
        case CUDAEMU_BALLOT:
            o->result = vote;
            break;
        case CUDAEMU_ANY:
            o->result = vote != 0;
            break;
        case CUDAEMU_ALL:
            o->result = vote == (uint64_t)mask;
            break;
        default:
            o->result = 0;
        }
        o->state = T_READY;
        set_ready(b, first + l);
    }
}

} // namespace

extern "C" int cudaemu_set_thread_order(const char *name)
{
    int o = order_from_name(name);
    if (o >= 0)
        chosen_order = o;
    return o < 0 ? -1 : 0;
}

extern "C++" void cudaemu_syncthreads_at(const char *file, int line)
{
    emu_thread *t = running_thread("__syncthreads");
    t->state = T_BARRIER;
    t->file = file;
    t->line = line;
    t->block->at_barrier++;
    cudaemu_fiber_switch(t->fiber, cudaemu_fiber_main());
}

namespace {

/* A lane arrives at a warp collective: checks, waits for the lanes of the mask, and
 * returns once the collective completed (its results are in the lanes' records). */
void warp_arrive(emu_thread *t, int kind, unsigned mask, int width, const char *name,
                 const char *file, int line)
{
    emu_block *b = t->block;
    int first, count;
    warp_extent(t, &first, &count);
    int lane = t->index - first;
    if (width <= 0 || width > 32 || (width & (width - 1)))
        cudaemu_fail("%s: %s at %s:%d: width %d is not a power of two in 1..32", b->job->what,
                     name, file, line, width);
    if (!(mask & (1u << lane)))
        cudaemu_fail("%s: %s at %s:%d: lane %d calls it with mask 0x%08x, which does not "
                     "contain the lane itself",
                     b->job->what, name, file, line, lane, mask);
    if (count < 32 && (mask >> count))
        cudaemu_fail("%s: %s at %s:%d: mask 0x%08x names lanes %d..31, which do not exist "
                     "(the block has %d threads)",
                     b->job->what, name, file, line, mask, count, b->n);
    t->state = T_WARP;
    t->kind = kind;
    t->mask = mask;
    t->width = width;
    t->file = file;
    t->line = line;
    int all_here = 1;
    for (int l = 0; l < count; l++) {
        if (!(mask & (1u << l)))
            continue;
        const emu_thread *o = &b->t[first + l];
        if (o->state == T_DONE)
            cudaemu_fail("%s: %s at %s:%d: lane %d's mask 0x%08x names lane %d, which has "
                         "exited",
                         b->job->what, name, file, line, lane, mask, l);
        if (o->state != T_WARP)
            all_here = 0;
    }
    if (all_here)
        complete_warp_op(t, first, count);
    cudaemu_fiber_switch(t->fiber, cudaemu_fiber_main());
}

} // namespace

extern "C++" uint64_t cudaemu_warp_op(enum cudaemu_warp_kind kind, unsigned mask, uint64_t value,
                                      int arg, int width, const char *file, int line)
{
    emu_thread *t = running_thread(kind_name(kind));
    t->value = value;
    t->arg = arg;
    warp_arrive(t, kind, mask, width, kind_name(kind), file, line);
    return t->result;
}

extern "C++" void cudaemu_warp_collective(const char *name, unsigned mask, void *lane_data,
                                          cudaemu_warp_complete_fn complete, const char *file,
                                          int line)
{
    emu_thread *t = running_thread(name);
    t->data = lane_data;
    t->complete = complete;
    t->cname = name;
    warp_arrive(t, CUDAEMU_COLLECTIVE, mask, 32, name, file, line);
}

extern "C++" int cudaemu_lane_id(void)
{
    return running_thread("the lane id")->index % 32;
}

extern "C++" void **cudaemu_thread_ext(void (*drop)(void *))
{
    emu_thread *t = running_thread("per-thread state");
    t->ext_drop = drop;
    return &t->ext;
}

extern "C++" void **cudaemu_block_ext(void (*end)(void *))
{
    emu_block *b = running_thread("per-block state")->block;
    for (int i = 0; i < b->n_ext; i++)
        if (b->ext[i].end == end)
            return &b->ext[i].state;
    if (b->n_ext == (int)(sizeof b->ext / sizeof b->ext[0]))
        cudaemu_fail("more than %d extensions keep per-block state", b->n_ext);
    b->ext[b->n_ext].state = NULL;
    b->ext[b->n_ext].end = end;
    return &b->ext[b->n_ext++].state;
}

extern "C++" void cudaemu_launch_erased(const cudaemu_launch_desc *d, void *closure,
                                        void (*run)(void *), void (*destroy)(void *),
                                        const cudaemu_access *acc, int n_acc,
                                        const int *pointer_arg_index)
{
    const dim3 g = d->grid, bl = d->block;
    uint64_t threads = (uint64_t)bl.x * bl.y * bl.z;
    cudaError_t bad = cudaSuccess;
    if (threads == 0 || threads > 1024 || bl.x > 1024 || bl.y > 1024 || bl.z > 64 || g.x == 0 ||
        g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
        bad = cudaErrorInvalidConfiguration;
    else if (d->smem > cudaemu_func_smem_limit(d->func))
        bad = cudaErrorInvalidValue;
    if (bad != cudaSuccess) {
        if (getenv("CUDAEMU_VERBOSE"))
            fprintf(stderr,
                    "cudaemu: launch of %s (%s:%d) refused: grid (%u,%u,%u) block (%u,%u,%u) "
                    "dynamic smem %zu (limit %zu)\n",
                    d->name, d->file, d->line, g.x, g.y, g.z, bl.x, bl.y, bl.z, d->smem,
                    cudaemu_func_smem_limit(d->func));
        cudaemu_set_last_error(bad);
        destroy(closure);
        return;
    }
    grid_job *job = new grid_job;
    job->d = *d;
    job->closure = closure;
    job->run = run;
    job->destroy = destroy;
    snprintf(job->what, sizeof job->what, "kernel %s (%s:%d)", d->name, d->file, d->line);
    for (int i = 0; i < n_acc; i++)
        if (acc[i].p && cudaemu_find_alloc(acc[i].p, NULL, NULL) != 0)
            cudaemu_fail("%s: pointer argument %d (%p) is not in a live device allocation",
                         job->what, pointer_arg_index[i], acc[i].p);
    cudaemu_access live[64];
    int n_live = 0;
    for (int i = 0; i < n_acc && n_live < 64; i++) {
        void *base;
        size_t bytes;
        if (!acc[i].p || cudaemu_find_alloc(acc[i].p, &base, &bytes) != 0)
            continue;
        live[n_live] = acc[i];
        live[n_live].bytes = (size_t)((const char *)base + bytes - (const char *)acc[i].p);
        n_live++;
    }
    cudaemu_enqueue(d->stream, job->what, run_grid, job, free_job, live, n_live);
}
