/* Raw file I/O with an O_DIRECT interior and page-cache edges (see extent_io.h).
 *
 * Pipeline: a ring of N_SLOTS staging buffers shared by the caller and one worker
 * thread. A slot holds one file range [start, end) laid out at its file position
 * modulo the alignment: byte f of the file sits at buf[f - base], base = start rounded
 * down, so every aligned file offset in the slot is also an aligned address and the
 * worker can hand the aligned interior to O_DIRECT without another copy; it moves the
 * unaligned head and tail of the slot through the page cache.
 *
 * Slots are used strictly in ring order: the caller fills slot k (a write) or asks for
 * it (a read) and queues it; the worker serves queued slots in the same order. A
 * served write slot is free again; a served read slot is done and waits for the caller
 * to copy it out. Contiguous writes fill the same slot, so a caller may write a long
 * range in small pieces (hashing each while it is in cache) and still produce large
 * aligned transfers. So the disk works while the caller converts and hashes the next
 * piece, and reads run up to N_SLOTS chunks ahead.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "io/extent_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N_SLOTS = 8, MAX_AHEAD = 1024 };
#define CHUNK_BYTES ((size_t)8 << 20) /* a multiple of any alignment we use */

enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_QUEUED, SLOT_DONE };
enum slot_op { OP_WRITE, OP_READ };

/* an error code of a transfer: an errno value, or SHORT_READ at the end of the file */
#define SHORT_READ (-1)

typedef struct staging_slot {
    unsigned char *buf; /* CHUNK_BYTES, aligned; file byte f at buf[f - base] */
    uint64_t base, start, end;
    enum slot_op op;
    enum slot_state state;
    int error;          /* 0, an errno value or SHORT_READ */
    uint64_t error_at;  /* file offset of the failed transfer; SHORT_READ: the end of
                         * the file, the bytes before it in the slot are valid */
} staging_slot;

struct ft_extent_io {
    char path[1024];
    int fd_direct; /* O_DIRECT; -1 when refused */
    int fd_cached; /* ordinary descriptor: edges, and everything after a fallback */
    bool writing;
    bool direct;   /* interior through fd_direct (the worker clears it on EINVAL) */
    bool inject_einval; /* test hook direct:einval */
    size_t align;  /* offset, length and address alignment of direct transfers */

    staging_slot slots[N_SLOTS];
    staging_slot *filling;   /* the write slot being appended to, or NULL */
    unsigned long submitted; /* slots handed to the worker, ever */
    unsigned long served;    /* slots the worker finished, ever */
    pthread_t worker;
    bool worker_running;
    bool stopping;
    pthread_mutex_t mu;
    pthread_cond_t changed;

    /* Read-ahead: ranges the caller announced (ft_extent_will_read) and will read in
     * that order; slots are asked for up to N_SLOTS ahead of the reads. */
    struct { uint64_t start, end; } ahead[MAX_AHEAD]; /* a ring: range i at i % MAX_AHEAD */
    unsigned long n_ahead;   /* ranges announced in this stream */
    unsigned long ask_range; /* the range being asked for, and the next byte of it */
    uint64_t ask_next;
    unsigned long front;  /* ring position of the oldest read slot in flight */
    int in_flight;        /* read slots asked for and not yet consumed */
    uint64_t read_pos;    /* the next byte the reads will consume */

    int write_error; /* first failed write (sticky) */
    uint64_t write_error_at;
    uint64_t direct_bytes, cached_bytes;
};

/* ------------------------------------------------------------ plain transfers */

/* Whole-length pwrite/pread; returns 0, an errno value or SHORT_READ; *moved: the
 * bytes transferred. */
static int transfer_all(int fd, enum slot_op op, unsigned char *buf, size_t len, uint64_t off,
                        size_t *moved)
{
    size_t done = 0;
    *moved = 0;
    while (done < len) {
        ssize_t r = op == OP_WRITE ? pwrite(fd, buf + done, len - done, (off_t)(off + done))
                                   : pread(fd, buf + done, len - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0)
            return op == OP_READ ? SHORT_READ : EIO;
        done += (size_t)r;
        *moved = done;
    }
    return 0;
}

/* off: where the transfer failed; SHORT_READ: where the file ends, and `need` the
 * end of the bytes the read asked for. */
static int report(const ft_extent_io *x, int code, enum slot_op op, uint64_t off, uint64_t need,
                  ft_error *err)
{
    if (code == SHORT_READ)
        return ft_fail(err, "%s: ends at byte %llu, a read needs bytes up to %llu (truncated "
                       "file?)", x->path, (unsigned long long)off, (unsigned long long)need);
    return ft_fail(err, "%s: cannot %s at byte %llu: %s", x->path,
                   op == OP_WRITE ? "write" : "read", (unsigned long long)off, strerror(code));
}

/* Test hooks: FTMPI_FAULT=direct:refused makes O_DIRECT opens fail (as on a file
 * system without it); direct:einval makes the first direct transfer fail with EINVAL
 * (as for an alignment the device does not accept). Both must fall back, exactly. */
static bool fault_is(const char *name)
{
    const char *f = getenv("FTMPI_FAULT");
    return f && strcmp(f, name) == 0;
}

/* ------------------------------------------------------------ worker */

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t round_down(uint64_t v, uint64_t a) { return v / a * a; }

/* One piece [from, to) of a slot through fd; adds its bytes to *counter. */
static int move_piece(staging_slot *s, int fd, uint64_t from, uint64_t to, uint64_t *counter)
{
    if (to <= from)
        return 0;
    size_t moved;
    int code = transfer_all(fd, s->op, s->buf + (from - s->base), (size_t)(to - from), from,
                            &moved);
    if (code)
        s->error_at = from + (code == SHORT_READ ? moved : 0);
    *counter += moved;
    return code;
}

/* The slot's head and tail through the page cache, its aligned interior direct; the
 * bytes moved each way are added to n[0] (direct) and n[1] (cached). No lock held:
 * the slot is the worker's while queued. */
static int serve_slot(const ft_extent_io *x, staging_slot *s, bool *direct, uint64_t n[2])
{
    uint64_t a0 = round_up(s->start, x->align), a1 = round_down(s->end, x->align);
    if (a0 >= a1 || !*direct)
        a0 = a1 = s->end; /* no interior, or no O_DIRECT: all cached */
    int code = move_piece(s, x->fd_cached, s->start, a0, &n[1]);
    if (!code) {
        code = a1 > a0 && x->inject_einval ? EINVAL : move_piece(s, x->fd_direct, a0, a1, &n[0]);
        if (code == EINVAL) { /* an alignment the device refuses: stop using O_DIRECT */
            *direct = false;
            code = move_piece(s, x->fd_cached, a0, a1, &n[1]);
        }
    }
    if (!code)
        code = move_piece(s, x->fd_cached, a1 > a0 ? a1 : s->end, s->end, &n[1]);
    return code;
}

static void *worker_main(void *arg)
{
    ft_extent_io *x = arg;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        staging_slot *s = &x->slots[x->served % N_SLOTS];
        while (!x->stopping && !(x->served < x->submitted && s->state == SLOT_QUEUED))
            pthread_cond_wait(&x->changed, &x->mu);
        if (!(x->served < x->submitted && s->state == SLOT_QUEUED))
            break; /* stopping with nothing queued */
        bool direct = x->direct;
        uint64_t moved[2] = { 0, 0 };
        pthread_mutex_unlock(&x->mu);
        int code = serve_slot(x, s, &direct, moved);
        pthread_mutex_lock(&x->mu);
        x->direct = direct;
        x->direct_bytes += moved[0];
        x->cached_bytes += moved[1];
        s->error = code;
        if (s->op == OP_WRITE) {
            if (code && !x->write_error) {
                x->write_error = code;
                x->write_error_at = s->error_at;
            }
            s->state = SLOT_FREE;
        } else {
            s->state = SLOT_DONE;
        }
        x->served++;
        pthread_cond_broadcast(&x->changed);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* ------------------------------------------------------------ the ring (caller side) */

/* The next slot in ring order once it is free, set up to hold [start, ...) (caller
 * holds mu). */
static staging_slot *take_slot(ft_extent_io *x, enum slot_op op, uint64_t start)
{
    staging_slot *s = &x->slots[x->submitted % N_SLOTS];
    while (s->state != SLOT_FREE)
        pthread_cond_wait(&x->changed, &x->mu);
    s->op = op;
    s->base = round_down(start, x->align);
    s->start = s->end = start;
    s->error = 0;
    s->state = SLOT_FILLING;
    return s;
}

static void queue_slot(ft_extent_io *x, staging_slot *s)
{
    s->state = SLOT_QUEUED;
    x->submitted++;
    pthread_cond_broadcast(&x->changed);
}

/* Queues the slot being filled, if any (caller holds mu). */
static void queue_filling(ft_extent_io *x)
{
    if (x->filling)
        queue_slot(x, x->filling);
    x->filling = NULL;
}

/* ------------------------------------------------------------ open / close */

static size_t direct_alignment(void)
{
    /* 4 KiB covers every logical block size in use; never below a page, so that a
     * page holding edge bytes is never also the target of a direct transfer */
    long page = sysconf(_SC_PAGESIZE);
    return page > 4096 ? (size_t)page : 4096;
}

int ft_extent_open(ft_extent_io **out, const char *path, bool writing, bool direct, ft_error *err)
{
    *out = NULL;
    ft_extent_io *x = calloc(1, sizeof *x);
    if (!x)
        return ft_fail(err, "out of host memory");
    snprintf(x->path, sizeof x->path, "%s", path);
    x->writing = writing;
    x->align = direct_alignment();
    x->fd_direct = -1;
    const int mode = writing ? O_RDWR : O_RDONLY;
    x->fd_cached = open(path, mode | O_CLOEXEC);
    if (x->fd_cached < 0) {
        int e = errno;
        free(x);
        return ft_fail(err, "%s: cannot open: %s", path, strerror(e));
    }
    if (direct && !fault_is("direct:refused"))
        x->fd_direct = open(path, mode | O_CLOEXEC | O_DIRECT);
    x->inject_einval = fault_is("direct:einval");
    x->direct = x->fd_direct >= 0;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->changed, NULL);
    for (int i = 0; i < N_SLOTS; i++)
        if (posix_memalign((void **)&x->slots[i].buf, x->align, CHUNK_BYTES)) {
            x->slots[i].buf = NULL;
            ft_extent_close(x, NULL);
            return ft_fail(err, "out of host memory (I/O staging buffers)");
        }
    if (pthread_create(&x->worker, NULL, worker_main, x)) {
        ft_extent_close(x, NULL);
        return ft_fail(err, "%s: cannot start the I/O thread", path);
    }
    x->worker_running = true;
    *out = x;
    return 0;
}

/* Forgets the read-ahead, discarding the slots in flight (caller holds mu). */
static void drop_read_ahead(ft_extent_io *x)
{
    while (x->in_flight > 0) {
        staging_slot *s = &x->slots[x->front % N_SLOTS];
        while (s->state != SLOT_DONE)
            pthread_cond_wait(&x->changed, &x->mu);
        s->state = SLOT_FREE;
        x->front++;
        x->in_flight--;
    }
    x->n_ahead = x->ask_range = 0;
    pthread_cond_broadcast(&x->changed);
}

/* Asks for read slots until N_SLOTS are in flight or the announced ranges are all
 * asked for (caller holds mu). */
static void ask_ahead(ft_extent_io *x)
{
    while (x->in_flight < N_SLOTS && x->ask_range < x->n_ahead) {
        const uint64_t end = x->ahead[x->ask_range % MAX_AHEAD].end;
        if (x->in_flight == 0)
            x->front = x->submitted;
        staging_slot *s = take_slot(x, OP_READ, x->ask_next);
        const uint64_t room = s->base + CHUNK_BYTES - x->ask_next;
        s->end = end - x->ask_next < room ? end : x->ask_next + room;
        x->ask_next = s->end;
        if (x->ask_next == end && ++x->ask_range < x->n_ahead)
            x->ask_next = x->ahead[x->ask_range % MAX_AHEAD].start;
        queue_slot(x, s);
        x->in_flight++;
    }
}

int ft_extent_flush(ft_extent_io *x, ft_error *err)
{
    pthread_mutex_lock(&x->mu);
    drop_read_ahead(x);
    queue_filling(x);
    while (x->served < x->submitted)
        pthread_cond_wait(&x->changed, &x->mu);
    int code = x->write_error;
    uint64_t at = x->write_error_at;
    pthread_mutex_unlock(&x->mu);
    return code ? report(x, code, OP_WRITE, at, 0, err) : 0;
}

int ft_extent_close(ft_extent_io *x, ft_error *err)
{
    if (!x)
        return 0;
    int rc = 0;
    if (x->worker_running) {
        rc = ft_extent_flush(x, err);
        pthread_mutex_lock(&x->mu);
        x->stopping = true;
        pthread_cond_broadcast(&x->changed);
        pthread_mutex_unlock(&x->mu);
        pthread_join(x->worker, NULL);
    }
    /* one fsync covers both descriptors: they share the inode */
    if (x->writing && fsync(x->fd_cached) && !rc)
        rc = ft_fail(err, "%s: fsync failed: %s", x->path, strerror(errno));
    if (x->fd_direct >= 0)
        close(x->fd_direct);
    if (close(x->fd_cached) && x->writing && !rc)
        rc = ft_fail(err, "%s: close failed: %s", x->path, strerror(errno));
    for (int i = 0; i < N_SLOTS; i++)
        free(x->slots[i].buf);
    pthread_cond_destroy(&x->changed);
    pthread_mutex_destroy(&x->mu);
    free(x);
    return rc;
}

bool ft_extent_is_direct(const ft_extent_io *x)
{
    ft_extent_io *m = (ft_extent_io *)x;
    pthread_mutex_lock(&m->mu);
    bool d = m->direct;
    pthread_mutex_unlock(&m->mu);
    return d;
}

void ft_extent_counts(const ft_extent_io *x, uint64_t *direct_bytes, uint64_t *buffered_bytes)
{
    ft_extent_io *m = (ft_extent_io *)x;
    pthread_mutex_lock(&m->mu);
    *direct_bytes = m->direct_bytes;
    *buffered_bytes = m->cached_bytes;
    pthread_mutex_unlock(&m->mu);
}

/* ------------------------------------------------------------ transfers */

int ft_extent_write(ft_extent_io *x, uint64_t off, const void *src, size_t n, ft_error *err)
{
    if (!x->writing)
        return ft_fail(err, "%s: opened for reading, cannot write", x->path);
    const unsigned char *p = src;
    pthread_mutex_lock(&x->mu);
    drop_read_ahead(x); /* slots are used in ring order: no reads may wait there */
    while (n > 0 && !x->write_error) {
        staging_slot *s = x->filling;
        if (s && s->end != off) { /* not contiguous: a new slot */
            queue_filling(x);
            s = NULL;
        }
        if (!s)
            s = x->filling = take_slot(x, OP_WRITE, off);
        const uint64_t room = s->base + CHUNK_BYTES - s->end;
        const size_t take = n < room ? n : (size_t)room;
        /* the copy runs unlocked: the worker never touches a filling slot */
        pthread_mutex_unlock(&x->mu);
        memcpy(s->buf + (s->end - s->base), p, take);
        pthread_mutex_lock(&x->mu);
        s->end += take;
        off += take;
        p += take;
        n -= take;
        if (s->end == s->base + CHUNK_BYTES)
            queue_filling(x);
    }
    const int code = x->write_error;
    const uint64_t at = x->write_error_at;
    pthread_mutex_unlock(&x->mu);
    return code ? report(x, code, OP_WRITE, at, 0, err) : 0;
}

/* A read-ahead stream with no ranges yet, whose reads start at off (caller holds mu;
 * nothing in flight). */
static void start_stream(ft_extent_io *x, uint64_t off)
{
    x->n_ahead = x->ask_range = 0;
    x->ask_next = x->read_pos = off;
}

/* Appends [off, off+n) to the stream's ranges (caller holds mu, checked room). */
static void append_range(ft_extent_io *x, uint64_t off, size_t n)
{
    if (x->ask_range == x->n_ahead) /* all earlier ranges asked: this one is next */
        x->ask_next = off;
    x->ahead[x->n_ahead % MAX_AHEAD].start = off;
    x->ahead[x->n_ahead % MAX_AHEAD].end = off + n;
    x->n_ahead++;
}

int ft_extent_will_read(ft_extent_io *x, uint64_t off, size_t n)
{
    if (n == 0)
        return 0;
    pthread_mutex_lock(&x->mu);
    queue_filling(x); /* the slot being filled must not be taken for a read */
    /* the ranges not yet asked for must fit the ring */
    int ok = x->n_ahead - x->ask_range < MAX_AHEAD;
    if (ok) {
        if (x->in_flight == 0 && x->ask_range == x->n_ahead)
            start_stream(x, off); /* the previous stream is all read */
        append_range(x, off, n);
        ask_ahead(x);
    }
    pthread_mutex_unlock(&x->mu);
    return ok ? 0 : -1;
}

/* Reads [off, off+n) through the read-ahead stream, which starts (anew) at off unless
 * off is where it stands (caller holds mu). */
static int read_stream(ft_extent_io *x, uint64_t off, unsigned char *p, size_t n, int *code,
                       uint64_t *code_at)
{
    while (n > 0) {
        ask_ahead(x);
        if (x->in_flight == 0 || off != x->read_pos) {
            /* not announced, or announced otherwise: a stream of just the rest */
            drop_read_ahead(x);
            start_stream(x, off);
            append_range(x, off, n);
            ask_ahead(x);
        }
        staging_slot *s = &x->slots[x->front % N_SLOTS];
        while (s->state != SLOT_DONE)
            pthread_cond_wait(&x->changed, &x->mu);
        const size_t take = s->end - off < n ? (size_t)(s->end - off) : n;
        /* a slot that met the end of the file still serves the bytes before it */
        if (s->error && !(s->error == SHORT_READ && off + take <= s->error_at)) {
            *code = s->error;
            *code_at = s->error_at;
            drop_read_ahead(x);
            return -1;
        }
        /* the worker never touches a done slot: copy unlocked */
        pthread_mutex_unlock(&x->mu);
        memcpy(p, s->buf + (off - s->base), take);
        pthread_mutex_lock(&x->mu);
        off += take;
        p += take;
        n -= take;
        x->read_pos = off;
        if (off == s->end) { /* slot consumed */
            s->state = SLOT_FREE;
            x->front++;
            x->in_flight--;
            pthread_cond_broadcast(&x->changed);
            if (x->in_flight > 0)
                x->read_pos = x->slots[x->front % N_SLOTS].start;
            else if (x->ask_range < x->n_ahead)
                x->read_pos = x->ask_next;
        }
    }
    return 0;
}

int ft_extent_read(ft_extent_io *x, uint64_t off, void *dst, size_t n, ft_error *err)
{
    if (n == 0)
        return 0;
    pthread_mutex_lock(&x->mu);
    queue_filling(x); /* reads see earlier writes: wait for them */
    while (x->served < x->submitted - (unsigned long)x->in_flight)
        pthread_cond_wait(&x->changed, &x->mu);
    int code = 0;
    uint64_t code_at = 0;
    read_stream(x, off, dst, n, &code, &code_at);
    pthread_mutex_unlock(&x->mu);
    return code ? report(x, code, OP_READ, code_at, off + n, err) : 0;
}
