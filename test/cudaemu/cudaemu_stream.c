/* The CPU execution harness for CUDA: streams, events, lazy execution and the
 * happens-before checker (see "Execution model" in cudaemu.h).
 *
 * Streams. A stream is a slot of a fixed table: slot 0 is the legacy default stream
 * (the NULL handle), 1..CUDAEMU_SLOTS-1 the streams the program creates. Each keeps a
 * FIFO of queued operations, numbered by the stream's epoch (1, 2, ... in queue order),
 * and `done`, the epoch of the last one that ran. An operation is either work (a
 * function to run) or a wait (for stream w to have run up to epoch e).
 *
 * Laziness. Nothing runs when queued. force(slot, e) runs slot's operations up to epoch
 * e, and a wait first forces the stream it waits for, up to the recorded epoch: so
 * exactly the work a forced point depends on runs, and work that no dependency reaches
 * runs as late as possible. Forcing is iterative (an explicit stack) so long chains of
 * cross-stream waits cannot overflow the C stack.
 *
 * Happens-before. Every stream has a vector clock C (CUDAEMU_SLOTS epochs): C[t] is the
 * last epoch of stream t that is ordered before the stream's next operation. Queuing
 * joins the host's clock into C (work issued after a host synchronisation is ordered
 * after what the host waited for), then C[self] = the new epoch. An event record
 * snapshots (slot, epoch, C); a wait joins the snapshot into the waiting stream's C; a
 * host synchronisation joins the stream's (or event's) C into the host's clock. Access
 * (slot s, epoch e) happens before an operation with clock C iff C[s] >= e.
 *
 * Shadow records. Each allocation keeps the recent accesses (slot, epoch, range, rw,
 * operation name). A new access conflicts with a record from another slot when the
 * ranges overlap, one of the two writes, and the record does not happen before it: a
 * finding that names both operations and the allocation. Records are dropped when
 *  - the host's clock covers them: every future operation is ordered after them;
 *  - a newer access of the same stream covers their range and writes, or both read:
 *    anything unordered with the old record is unordered with the newer one (same
 *    stream, later epoch) and conflicts with it whenever it conflicted with the old.
 * Dropping runs when an allocation's records double, so the cost per access stays
 * proportional to the records that are genuinely unordered.
 *
 * Legacy default stream. Work on slot 0 waits for all work queued so far on blocking
 * streams (created without cudaStreamNonBlocking), and work on a blocking stream waits
 * for the legacy stream's work so far: implicit waits, queued like explicit ones. */
#include "cudaemu_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct op {
    struct op *next;
    uint32_t epoch;
    int is_wait;
    uint16_t wait_slot; /* is_wait: run stream wait_slot up to wait_epoch first */
    uint32_t wait_epoch;
    const char *what; /* interned */
    cudaemu_work_fn run;
    void *ctx;
    void (*free_ctx)(void *);
} op;

struct CUstream_st {
    int slot;
    int in_use;       /* handed out and not destroyed (slot 0: always) */
    unsigned flags;
    uint32_t epoch;   /* of the last queued operation */
    uint32_t done;    /* of the last operation that ran */
    op *head, *tail;
    cudaemu_clock clock;
};

#define EVENT_MAGIC 0x45564e54u
struct CUevent_st {
    uint32_t magic;
    unsigned flags;
    int recorded;
    uint16_t slot;
    uint32_t epoch;
    cudaemu_clock clock;
};

/* Process-wide: the emulated device's streams, the host's clock, the running op. */
static struct CUstream_st g_streams[CUDAEMU_SLOTS] = { [0] = { .slot = 0, .in_use = 1 } };
static cudaemu_clock g_host;
static const char *g_current;
static long g_host_waits; /* for tests: see cudaemu_host_waits */

/* Device operations queued (work, not waits), per interned name: on a GPU each is a
 * launch the host pays for and a boundary where the device drains one kernel's tail
 * before the next starts; the report shows which ones a step repeats. */
#define OP_NAMES 512
static struct { const char *what; long count; } g_op_names[OP_NAMES];
static long g_device_ops;

static int g_racecheck = -1; /* -1: not yet read from the environment */

int cudaemu_racecheck_enabled(void)
{
    if (g_racecheck < 0) {
        const char *e = getenv("CUDAEMU_RACECHECK");
        g_racecheck = !(e && strcmp(e, "0") == 0);
    }
    return g_racecheck;
}

void cudaemu_set_racecheck(int enabled) { g_racecheck = enabled != 0; }

const char *cudaemu_current_work(void) { return g_current; }

static void join(cudaemu_clock into, const cudaemu_clock from)
{
    for (int i = 0; i < CUDAEMU_SLOTS; i++)
        if (from[i] > into[i])
            into[i] = from[i];
}

static const char *stream_name(int slot)
{
    static char names[2][48]; /* two names per message */
    static int turn;
    char *n = names[turn++ & 1];
    if (slot == 0)
        snprintf(n, sizeof names[0], "the legacy default stream");
    else
        snprintf(n, sizeof names[0], "stream %d", slot);
    return n;
}

void cudaemu_check_stream(cudaStream_t s, const char *who)
{
    if (!s)
        return;
    if (s < &g_streams[1] || s > &g_streams[CUDAEMU_SLOTS - 1])
        cudaemu_fail("%s: %p is not a stream handle", who, (void *)s);
    if (!s->in_use)
        cudaemu_fail("%s: stream %d is used after cudaStreamDestroy", who, s->slot);
}

static struct CUstream_st *stream_of(cudaStream_t s, const char *who)
{
    cudaemu_check_stream(s, who);
    return s ? s : &g_streams[0];
}

/* ---------------------------------------------------------------- queuing */

static op *new_op(struct CUstream_st *st, const char *what)
{
    op *o = calloc(1, sizeof *o);
    if (!o)
        cudaemu_fail("out of host memory queuing %s", what);
    o->epoch = ++st->epoch;
    o->what = cudaemu_intern(what);
    st->clock[st->slot] = o->epoch;
    if (st->tail)
        st->tail->next = o;
    else
        st->head = o;
    st->tail = o;
    return o;
}

/* Queues "wait until stream `slot` ran up to `epoch`" on st, ordering st after it. */
static void push_wait(struct CUstream_st *st, int slot, uint32_t epoch, const cudaemu_clock c)
{
    join(st->clock, c);
    op *o = new_op(st, "cudaStreamWaitEvent");
    o->is_wait = 1;
    o->wait_slot = (uint16_t)slot;
    o->wait_epoch = epoch;
}

/* What every new operation on st is ordered after, before its own epoch is taken: the
 * host's knowledge and the legacy default stream's implicit synchronisation. */
static void begin_op(struct CUstream_st *st)
{
    join(st->clock, g_host);
    if (st->slot == 0) {
        for (int i = 1; i < CUDAEMU_SLOTS; i++) {
            struct CUstream_st *b = &g_streams[i];
            if (b->in_use && !(b->flags & cudaStreamNonBlocking) && st->clock[i] < b->epoch)
                push_wait(st, i, b->epoch, b->clock);
        }
    } else if (!(st->flags & cudaStreamNonBlocking)) {
        struct CUstream_st *legacy = &g_streams[0];
        if (st->clock[0] < legacy->epoch)
            push_wait(st, 0, legacy->epoch, legacy->clock);
    }
}

/* ---------------------------------------------------------------- the checker */

static int overlaps(size_t a_off, size_t a_len, size_t b_off, size_t b_len)
{
    return a_off < b_off + b_len && b_off < a_off + a_len;
}

/* Drops the records every future operation is ordered after (the host knows them). */
static void prune(cudaemu_alloc *al)
{
    size_t kept = 0;
    for (size_t i = 0; i < al->n_shadow; i++)
        if (g_host[al->shadow[i].slot] < al->shadow[i].epoch)
            al->shadow[kept++] = al->shadow[i];
    al->n_shadow = kept;
    al->prune_at = 2 * kept > 16 ? 2 * kept : 16;
}

static void race(const cudaemu_alloc *al, const cudaemu_shadow *old, const char *what,
                 int slot, const cudaemu_access *a, size_t off)
{
    cudaemu_fail("race on device allocation #%llu (%zu bytes at %p):\n"
                 "  %s on %s %s bytes [%zu, %zu)\n"
                 "  is not ordered after %s on %s, which %s bytes [%zu, %zu):\n"
                 "  a cudaStreamWaitEvent (or a synchronisation) between them is missing",
                 (unsigned long long)al->serial, al->bytes, (void *)al->base, what,
                 stream_name(slot), a->write ? "writes" : "reads", off, off + a->bytes,
                 old->what, stream_name(old->slot), old->write ? "wrote" : "read", old->off,
                 old->off + old->len);
}

static void check_access(struct CUstream_st *st, uint32_t epoch, const char *what,
                         const cudaemu_access *a)
{
    if (a->bytes == 0)
        return;
    cudaemu_alloc *al = cudaemu_registry_find(cudaemu_device_registry(), a->p);
    if (!al)
        cudaemu_fail("%s on %s %s [%p, +%zu bytes), which is not inside a live device "
                     "allocation%s",
                     what, stream_name(st->slot), a->write ? "writes" : "reads", a->p, a->bytes,
                     cudaemu_freed_note(a->p));
    size_t off = (size_t)((const char *)a->p - al->base);
    if (a->bytes > al->bytes - off)
        cudaemu_fail("%s on %s %s [%p, +%zu bytes), which runs %zu bytes past the end of "
                     "device allocation #%llu (%zu bytes at %p)",
                     what, stream_name(st->slot), a->write ? "writes" : "reads", a->p, a->bytes,
                     a->bytes - (al->bytes - off), (unsigned long long)al->serial, al->bytes,
                     (void *)al->base);
    if (!cudaemu_racecheck_enabled())
        return;
    for (size_t i = 0; i < al->n_shadow;) {
        cudaemu_shadow *r = &al->shadow[i];
        if (r->slot == st->slot) {
            int covered = off <= r->off && r->off + r->len <= off + a->bytes;
            if (covered && (a->write || !r->write)) {
                *r = al->shadow[--al->n_shadow]; /* dominated: see the header */
                continue;
            }
        } else if ((r->write || a->write) && overlaps(off, a->bytes, r->off, r->len) &&
                   st->clock[r->slot] < r->epoch) {
            race(al, r, what, st->slot, a, off);
        }
        i++;
    }
    if (al->n_shadow == al->cap_shadow) {
        size_t cap = al->cap_shadow ? 2 * al->cap_shadow : 4;
        cudaemu_shadow *v = realloc(al->shadow, cap * sizeof *v);
        if (!v)
            cudaemu_fail("out of host memory recording an access of %s", what);
        al->shadow = v;
        al->cap_shadow = cap;
    }
    al->shadow[al->n_shadow++] = (cudaemu_shadow){ .off = off, .len = a->bytes, .epoch = epoch,
                                                   .slot = (uint16_t)st->slot,
                                                   .write = (uint8_t)(a->write != 0),
                                                   .what = cudaemu_intern(what) };
    if (al->n_shadow >= al->prune_at)
        prune(al);
}

/* what: interned, so the pointer names the operation (kernel, file and line) */
static void count_op(const char *what)
{
    g_device_ops++;
    size_t h = ((uintptr_t)what >> 4) % OP_NAMES;
    for (size_t i = 0; i < OP_NAMES; i++, h = (h + 1) % OP_NAMES) {
        if (g_op_names[h].what == what || !g_op_names[h].what) {
            g_op_names[h].what = what;
            g_op_names[h].count++;
            return;
        }
    } /* a full table: counted in the total only */
}

long cudaemu_device_ops(void) { return g_device_ops; }

static int by_count_desc(const void *a, const void *b)
{
    long ca = ((const long *)a)[1], cb = ((const long *)b)[1];
    return ca < cb ? 1 : ca > cb ? -1 : 0;
}

void cudaemu_report_device_ops(FILE *out)
{
    long rows[OP_NAMES][2];
    int n = 0;
    for (int i = 0; i < OP_NAMES; i++)
        if (g_op_names[i].what) {
            rows[n][0] = i;
            rows[n][1] = g_op_names[i].count;
            n++;
        }
    qsort(rows, (size_t)n, sizeof rows[0], by_count_desc);
    for (int i = 0; i < n; i++)
        fprintf(out, "cudaemu: %8ld x %s\n", rows[i][1], g_op_names[rows[i][0]].what);
}

void cudaemu_enqueue(cudaStream_t s, const char *what, cudaemu_work_fn run, void *ctx,
                     void (*free_ctx)(void *), const cudaemu_access *acc, int n_acc)
{
    struct CUstream_st *st = stream_of(s, what);
    begin_op(st);
    op *o = new_op(st, what);
    count_op(o->what);
    o->run = run;
    o->ctx = ctx;
    o->free_ctx = free_ctx;
    for (int i = 0; i < n_acc; i++)
        check_access(st, o->epoch, o->what, &acc[i]);
}

/* ---------------------------------------------------------------- forcing */

typedef struct target {
    int slot;
    uint32_t upto;
} target;

static void force(int slot, uint32_t upto)
{
    target local[16], *stack = local;
    size_t n = 0, cap = 16;
    stack[n++] = (target){ slot, upto };
    while (n > 0) {
        struct CUstream_st *st = &g_streams[stack[n - 1].slot];
        if (st->done >= stack[n - 1].upto) {
            n--;
            continue;
        }
        op *o = st->head;
        if (o->is_wait && g_streams[o->wait_slot].done < o->wait_epoch) {
            if (n == cap) {
                target *bigger = malloc(2 * cap * sizeof *bigger);
                if (!bigger)
                    cudaemu_fail("out of host memory forcing %s", stream_name(slot));
                memcpy(bigger, stack, n * sizeof *stack);
                if (stack != local)
                    free(stack);
                stack = bigger;
                cap *= 2;
            }
            stack[n++] = (target){ o->wait_slot, o->wait_epoch };
            continue;
        }
        st->head = o->next;
        if (!st->head)
            st->tail = NULL;
        if (o->run) {
            const char *outer = g_current;
            g_current = o->what;
            o->run(o->ctx);
            g_current = outer;
        }
        if (o->free_ctx)
            o->free_ctx(o->ctx);
        st->done = o->epoch;
        free(o);
    }
    if (stack != local)
        free(stack);
}

void cudaemu_force_stream(cudaStream_t s)
{
    struct CUstream_st *st = stream_of(s, "cudaemu_force_stream");
    force(st->slot, st->epoch);
}

void cudaemu_sync_stream(cudaStream_t s)
{
    struct CUstream_st *st = stream_of(s, "cudaStreamSynchronize");
    g_host_waits++;
    force(st->slot, st->epoch);
    join(g_host, st->clock);
}

long cudaemu_host_waits(void) { return g_host_waits; }

void cudaemu_sync_device(void)
{
    g_host_waits++;
    for (int i = 0; i < CUDAEMU_SLOTS; i++) {
        force(i, g_streams[i].epoch);
        join(g_host, g_streams[i].clock);
    }
}

int cudaemu_stream_pending(cudaStream_t s)
{
    return stream_of(s, "cudaStreamQuery")->head != NULL;
}

/* ---------------------------------------------------------------- stream lifetime */

cudaError_t cudaemu_stream_create(cudaStream_t *out, unsigned flags)
{
    if (!out || (flags & ~(unsigned)cudaStreamNonBlocking))
        return cudaErrorInvalidValue;
    for (int i = 1; i < CUDAEMU_SLOTS; i++) {
        struct CUstream_st *st = &g_streams[i];
        /* A slot is reused only when the host is ordered after all its work, so that
         * "same slot" keeps meaning "program order" for the checker. */
        if (st->in_use || st->head || g_host[i] < st->epoch)
            continue;
        st->slot = i;
        st->in_use = 1;
        st->flags = flags;
        memcpy(st->clock, g_host, sizeof st->clock);
        st->clock[i] = st->epoch;
        *out = st;
        return cudaSuccess;
    }
    cudaemu_fail("cudaStreamCreate: more than %d streams alive (or destroyed without a "
                 "synchronisation): the harness's vector clocks have no slot left",
                 CUDAEMU_SLOTS - 1);
}

cudaError_t cudaemu_stream_destroy(cudaStream_t s)
{
    if (!s)
        return cudaErrorInvalidResourceHandle;
    cudaemu_check_stream(s, "cudaStreamDestroy");
    /* Queued work still runs when something forces it (an event that captured it, or a
     * device synchronisation): destruction only retires the handle. */
    s->in_use = 0;
    return cudaSuccess;
}

/* ---------------------------------------------------------------- events */

static void check_event(cudaEvent_t e, const char *who)
{
    if (!e || e->magic != EVENT_MAGIC)
        cudaemu_fail("%s: %p is not a live event", who, (void *)e);
}

cudaError_t cudaemu_event_create(cudaEvent_t *out, unsigned flags)
{
    if (!out)
        return cudaErrorInvalidValue;
    cudaEvent_t e = calloc(1, sizeof *e);
    if (!e)
        return cudaErrorMemoryAllocation;
    e->magic = EVENT_MAGIC;
    e->flags = flags;
    *out = e;
    return cudaSuccess;
}

cudaError_t cudaemu_event_destroy(cudaEvent_t e)
{
    check_event(e, "cudaEventDestroy");
    /* Waits already queued hold their own copy of the record (slot, epoch), so the
     * recorded work completes whatever happens to the event: CUDA's deferred
     * destruction comes for free. */
    e->magic = 0;
    free(e);
    return cudaSuccess;
}

cudaError_t cudaemu_event_record(cudaEvent_t e, cudaStream_t s)
{
    check_event(e, "cudaEventRecord");
    struct CUstream_st *st = stream_of(s, "cudaEventRecord");
    begin_op(st); /* a record is ordered like any operation queued at this point */
    e->recorded = 1;
    e->slot = (uint16_t)st->slot;
    e->epoch = st->epoch;
    memcpy(e->clock, st->clock, sizeof e->clock);
    return cudaSuccess;
}

cudaError_t cudaemu_stream_wait_event(cudaStream_t s, cudaEvent_t e)
{
    check_event(e, "cudaStreamWaitEvent");
    struct CUstream_st *st = stream_of(s, "cudaStreamWaitEvent");
    if (!e->recorded) /* CUDA: waiting for a never-recorded event is a no-op */
        return cudaSuccess;
    begin_op(st);
    if (e->slot == st->slot || st->clock[e->slot] >= e->epoch)
        join(st->clock, e->clock); /* already ordered: no wait to queue */
    else
        push_wait(st, e->slot, e->epoch, e->clock);
    return cudaSuccess;
}

cudaError_t cudaemu_event_sync(cudaEvent_t e)
{
    check_event(e, "cudaEventSynchronize");
    if (!e->recorded)
        return cudaSuccess;
    g_host_waits++;
    force(e->slot, e->epoch);
    join(g_host, e->clock);
    return cudaSuccess;
}

int cudaemu_event_pending(cudaEvent_t e)
{
    check_event(e, "cudaEventQuery");
    return e->recorded && g_streams[e->slot].done < e->epoch;
}
