/* Raw extent I/O (src/io/extent_io.h): every byte written or read through it must
 * equal a reference buffer, whatever the order and size of the pieces, whether the
 * interior goes through O_DIRECT or not, with or without (and against) read-ahead
 * announcements, and across a fallback to the page cache.
 *  - writes: a file covered by shuffled ranges written in random pieces (direct, and
 *    direct = false), content checked with plain pread, byte counts checked;
 *  - reads: announced in order, announced otherwise (out of order, skipped, past the
 *    announced end, overlapping), not announced (1 byte .. 17 MiB), more ranges
 *    announced than fit, and a random mix of all of these;
 *  - errors: past the end of the file, a missing file, writes on an extent opened
 *    for reading, a device that refuses writes;
 *  - writes and reads interleaved on one open extent (reads see earlier writes,
 *    read-ahead does not serve stale bytes);
 *  - fallback: tmpfs, and the FTMPI_FAULT hooks direct:refused and direct:einval.
 * extent_io makes no MPI calls: no MPI here. */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "../common/test_env.h"
#include "io/extent_io.h"

#define MiB ((size_t)1 << 20)
#define FILE_SIZE (20 * MiB + 123) /* not a multiple of any block */
/* The staging chunk of extent_io.c (slots of 8 MiB): used to place ranges across slot
 * boundaries and to predict exactly how many bytes go through O_DIRECT. */
#define CHUNK (8 * MiB)
#define TMPFS_MAGIC_NUMBER 0x01021994


/* ------------------------------------------------------------ fixtures */

static char g_dir[4096];          /* a private directory under $TMPDIR or /tmp */
static char g_shm_dir[64];        /* one under /dev/shm, when made */
static unsigned char *g_ref;      /* the reference content R, FILE_SIZE bytes */
static unsigned char *g_ref2;     /* a second content, for overwrites */
static size_t g_align;            /* the alignment extent_io uses for O_DIRECT */

typedef struct rng { uint64_t s; } rng;

static uint64_t rng_next(rng *r) /* splitmix64 */
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(rng *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
    rng r = { seed };
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = rng_next(&r);
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++)
        p[i] = (unsigned char)rng_next(&r);
}

/* A random piece length in [1, max(1, left)]: often tiny, often a few KiB, often MiB. */
static size_t piece_len(rng *r, size_t left)
{
    static const size_t caps[] = { 64, 16384, 3 * MiB, 3 * MiB };
    size_t n = 1 + (size_t)rng_below(r, caps[rng_below(r, 4)]);
    return n < left ? n : left;
}

static void path_in(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

/* Creates path with size bytes: zeros (content NULL) or content. */
static void make_file(const char *path, const unsigned char *content, size_t size)
{
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    for (size_t done = 0; content && done < size;) {
        ssize_t w = pwrite(fd, content + done, size - done, (off_t)done);
        assert_true(w > 0);
        done += (size_t)w;
    }
    assert_int_equal(close(fd), 0);
}

/* Reads the whole file with plain pread; checks its size. */
static unsigned char *slurp(const char *path, size_t size)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((size_t)st.st_size, size);
    unsigned char *p = malloc(size);
    assert_non_null(p);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    for (size_t done = 0; done < size;) {
        ssize_t r = pread(fd, p + done, size - done, (off_t)done);
        assert_true(r > 0);
        done += (size_t)r;
    }
    close(fd);
    return p;
}

/* memcmp with a useful message: where the first difference is. */
static void expect_same(const unsigned char *got, const unsigned char *want, size_t n,
                        const char *what, uint64_t at)
{
    if (memcmp(got, want, n) == 0)
        return;
    size_t i = 0;
    while (got[i] == want[i])
        i++;
    fprintf(stderr, "%s: [%llu, +%zu): first difference at file byte %llu (got 0x%02x, want 0x%02x)\n",
            what, (unsigned long long)at, n, (unsigned long long)(at + i), got[i], want[i]);
    fail();
}

static void expect_file(const char *path, const unsigned char *want, size_t size)
{
    unsigned char *got = slurp(path, size);
    expect_same(got, want, size, path, 0);
    free(got);
}

/* Reads [off, off+n) through x and checks it against want (file-indexed). */
static void read_check(ft_extent_io *x, uint64_t off, size_t n, const unsigned char *want,
                       const char *what)
{
    unsigned char *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    memset(buf, 0x5A, n);
    ft_error err = { { 0 }, 0 };
    if (ft_extent_read(x, off, buf, n, &err) != 0) {
        fprintf(stderr, "%s: read [%llu, +%zu) failed: %s\n", what, (unsigned long long)off, n,
                err.msg);
        fail();
    }
    expect_same(buf, want + off, n, what, off);
    free(buf);
}

static int group_setup(void **state)
{
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/ft_extent_io.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror(g_dir);
        return -1;
    }
    g_ref = malloc(FILE_SIZE);
    g_ref2 = malloc(FILE_SIZE);
    if (!g_ref || !g_ref2)
        return -1;
    fill_random(g_ref, FILE_SIZE, 20240601);
    fill_random(g_ref2, FILE_SIZE, 777);
    long page = sysconf(_SC_PAGESIZE);
    g_align = page > 4096 ? (size_t)page : 4096;
    return 0;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            char p[4400];
            path_in(p, sizeof p, dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int group_teardown(void **state)
{
    remove_dir(g_dir);
    if (g_shm_dir[0])
        remove_dir(g_shm_dir);
    free(g_ref);
    free(g_ref2);
    return 0;
}

/* A hang (a lost wake-up, a slot never freed) must fail the test, not stall the suite. */
static void on_alarm(int sig)
{
    static const char msg[] = "test_extent_io: timed out (a hang in extent_io?)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static int arm_watchdog(void **state)
{
    unsetenv("FTMPI_FAULT"); /* a test that failed with a fault hook set leaves it */
    signal(SIGALRM, on_alarm);
    alarm(120);
    return 0;
}

static int disarm_watchdog(void **state)
{
    alarm(0);
    return 0;
}

/* ------------------------------------------------------------ writes */

typedef struct range { uint64_t start, end; } range;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t round_down(uint64_t v, uint64_t a) { return v / a * a; }

/* Bytes that must go through O_DIRECT when [s, e) is written contiguously: each slot
 * holds [pos, base + CHUNK) with base = pos rounded down to a block, and sends its
 * aligned interior direct. */
static uint64_t direct_share(uint64_t s, uint64_t e)
{
    uint64_t total = 0;
    for (uint64_t pos = s; pos < e;) {
        uint64_t base = round_down(pos, g_align);
        uint64_t end = base + CHUNK < e ? base + CHUNK : e;
        uint64_t a0 = round_up(pos, g_align), a1 = round_down(end, g_align);
        if (a1 > a0)
            total += a1 - a0;
        pos = end;
    }
    return total;
}

/* Cuts [0, FILE_SIZE) into ranges: fixed cuts that make 1-byte ranges, ranges inside
 * one block, an exactly aligned range, unaligned ends on both sides of 8 MiB, a range
 * longer than a slot (so it crosses a slot boundary), plus random cuts; then shuffles. */
static size_t make_ranges(range *out, size_t cap, rng *r)
{
    const uint64_t big0 = 8 * MiB + 5, big1 = 16 * MiB + 3 * 4096 + 1;
    uint64_t cuts[64] = { 0,       1,        2,       4095,     4097,     4100,
                          8192,    12288,    3 * MiB + 17,      8 * MiB - 3,
                          big0,    big1,     FILE_SIZE - 1,     FILE_SIZE };
    size_t nc = 14;
    while (nc < 24) {
        uint64_t c = 1 + rng_below(r, FILE_SIZE - 1);
        if (c > big0 && c < big1)
            continue; /* keep the range longer than a slot whole */
        cuts[nc++] = c;
    }
    qsort(cuts, nc, sizeof *cuts, cmp_u64);
    size_t n = 0;
    for (size_t i = 0; i + 1 < nc; i++)
        if (cuts[i + 1] > cuts[i]) {
            assert_true(n < cap);
            out[n++] = (range){ cuts[i], cuts[i + 1] };
        }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(r, i);
        range t = out[i - 1];
        out[i - 1] = out[j];
        out[j] = t;
    }
    return n;
}

/* Writes content[s, e) as contiguous pieces of random sizes, each from a scratch
 * buffer that is scribbled over once the call returns (the data must have been
 * copied). Returns the bytes written. */
static uint64_t write_pieces(ft_extent_io *x, uint64_t s, uint64_t e, const unsigned char *content,
                             unsigned char *scratch, rng *r)
{
    ft_error err = { { 0 }, 0 };
    for (uint64_t pos = s; pos < e;) {
        size_t n = piece_len(r, (size_t)(e - pos));
        memcpy(scratch, content + pos, n);
        TEST_CHECK_OK(ft_extent_write(x, pos, scratch, n, &err), &err);
        memset(scratch, 0xA5, n);
        pos += n;
    }
    return e - s;
}

/* Covers a FILE_SIZE file with shuffled ranges through extent_io; checks the content
 * with plain pread and the byte counts. */
static void cover_file(const char *name, bool direct, uint64_t seed, bool *was_direct)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, name);
    make_file(path, NULL, FILE_SIZE);
    rng r = { seed };
    range ranges[64];
    size_t nr = make_ranges(ranges, 64, &r);
    unsigned char *scratch = malloc(3 * MiB);
    assert_non_null(scratch);

    ft_extent_io *x = NULL;
    ft_error err = { { 0 }, 0 };
    TEST_CHECK_OK(ft_extent_open(&x, path, true, direct, &err), &err);
    assert_non_null(x);
    uint64_t total = 0, want_direct = 0;
    range run = ranges[0]; /* ranges written back to back fill the same slots */
    for (size_t i = 0; i < nr; i++) {
        total += write_pieces(x, ranges[i].start, ranges[i].end, g_ref, scratch, &r);
        if (i > 0 && ranges[i].start == run.end) {
            run.end = ranges[i].end;
        } else if (i > 0) {
            want_direct += direct_share(run.start, run.end);
            run = ranges[i];
        }
    }
    want_direct += direct_share(run.start, run.end);
    assert_int_equal(total, FILE_SIZE);
    TEST_CHECK_OK(ft_extent_flush(x, &err), &err);
    uint64_t db = 0, cb = 0;
    ft_extent_counts(x, &db, &cb);
    *was_direct = ft_extent_is_direct(x);
    TEST_CHECK_OK(ft_extent_close(x, &err), &err);
    free(scratch);

    expect_file(path, g_ref, FILE_SIZE);
    assert_int_equal(db + cb, total);
    if (!direct)
        assert_false(*was_direct);
    if (!*was_direct || !direct) {
        assert_int_equal(db, 0);
    } else {
        /* contiguous pieces coalesce into one slot: the aligned interior of every
         * 8 MiB slot went direct, exactly */
        assert_true(db > 0);
        assert_int_equal(db, want_direct);
    }
}

static void test_write_cover_direct(void **state)
{
    bool was_direct = false;
    cover_file("cover_direct", true, 1, &was_direct);
    if (!was_direct)
        fprintf(stderr, "note: %s refuses O_DIRECT: the direct write path was not exercised\n",
                g_dir);
}

static void test_write_cover_cached(void **state)
{
    bool was_direct = true;
    cover_file("cover_cached", false, 2, &was_direct);
}

/* ------------------------------------------------------------ reads */

static ft_extent_io *open_reader(const char *path, bool direct)
{
    ft_extent_io *x = NULL;
    ft_error err = { { 0 }, 0 };
    TEST_CHECK_OK(ft_extent_open(&x, path, false, direct, &err), &err);
    assert_non_null(x);
    return x;
}

/* Reads [s, e) in random-size pieces, checking each. */
static void read_pieces(ft_extent_io *x, uint64_t s, uint64_t e, const unsigned char *want,
                        rng *r, const char *what)
{
    for (uint64_t pos = s; pos < e;) {
        size_t n = piece_len(r, (size_t)(e - pos));
        read_check(x, pos, n, want, what);
        pos += n;
    }
}

static void test_reads(void **state)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, "reads");
    make_file(path, g_ref, FILE_SIZE);
    ft_extent_io *x = open_reader(path, true);
    rng r = { 3 };
    uint64_t db0 = 0, cb0 = 0;

    /* (a) announced, read in the announced order, in random pieces; the ranges are
     * unaligned, one is longer than a slot, one is 1 byte, one ends at the end */
    const range a[] = { { 4097, 3 * MiB + 11 },          { 12 * MiB + 1, 12 * MiB + 2 },
                        { 100, 200 },                    { 5 * MiB - 7, 15 * MiB + 4099 },
                        { FILE_SIZE - 5000, FILE_SIZE }, { 0, 4096 },
                        { 8 * MiB, 8 * MiB + 8192 } };
    const size_t na = sizeof a / sizeof *a;
    for (size_t i = 0; i < na; i++)
        assert_int_equal(ft_extent_will_read(x, a[i].start, (size_t)(a[i].end - a[i].start)), 0);
    for (size_t i = 0; i < na; i++)
        read_pieces(x, a[i].start, a[i].end, g_ref, &r, "announced, in order");
    ft_extent_counts(x, &db0, &cb0);
    if (ft_extent_is_direct(x))
        assert_true(db0 > 0); /* the interiors came through O_DIRECT */

    /* announcements made while earlier ones are still being read */
    assert_int_equal(ft_extent_will_read(x, 1 * MiB + 3, 10 * MiB), 0);
    read_pieces(x, 1 * MiB + 3, 2 * MiB, g_ref, &r, "announced, extended while reading");
    assert_int_equal(ft_extent_will_read(x, 17 * MiB + 1, 4096), 0);
    assert_int_equal(ft_extent_will_read(x, 333, 1), 0);
    read_pieces(x, 2 * MiB, 11 * MiB + 3, g_ref, &r, "announced, extended while reading");
    read_check(x, 17 * MiB + 1, 4096, g_ref, "announced, extended while reading");
    read_check(x, 333, 1, g_ref, "announced, extended while reading");

    /* (b) announced, read otherwise */
    const range b[] = { { 10, 9 * MiB }, { 9 * MiB + 100, 9 * MiB + 200 },
                        { 16 * MiB + 3, 18 * MiB }, { 4096, 8192 } };
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ft_extent_will_read(x, b[i].start, (size_t)(b[i].end - b[i].start)), 0);
    read_check(x, 16 * MiB + 3, 1000, g_ref, "announced, read out of order");  /* jumps ahead */
    read_check(x, 10, 5000, g_ref, "announced, read out of order");             /* back */
    read_check(x, 9 * MiB + 150, 50, g_ref, "announced, read out of order");    /* skips */
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ft_extent_will_read(x, b[i].start, (size_t)(b[i].end - b[i].start)), 0);
    read_check(x, 10, 9 * MiB - 10 + 777, g_ref, "announced, read past its end"); /* beyond */
    read_check(x, 9 * MiB + 100, 50, g_ref, "announced, read short");             /* a part */
    read_check(x, 9 * MiB + 120, 80, g_ref, "announced, overlapping read");       /* overlaps */
    read_check(x, 9 * MiB + 120, 80, g_ref, "announced, same read twice");
    read_check(x, 17 * MiB, 2 * MiB, g_ref, "announced, read from the middle");   /* inside */
    read_check(x, 4000, 4192 + 10, g_ref, "announced, read around it");           /* covers */
    /* announced twice over the same bytes, then read twice */
    assert_int_equal(ft_extent_will_read(x, 7 * MiB, 3 * MiB), 0);
    assert_int_equal(ft_extent_will_read(x, 7 * MiB, 3 * MiB), 0);
    read_pieces(x, 7 * MiB, 10 * MiB, g_ref, &r, "announced twice");
    read_pieces(x, 7 * MiB, 10 * MiB, g_ref, &r, "announced twice");
    /* announced and never read, then an unrelated read */
    assert_int_equal(ft_extent_will_read(x, 0, 20 * MiB), 0);
    read_check(x, FILE_SIZE - 1, 1, g_ref, "announced, never read");

    /* (c) not announced: single bytes, 17 MiB, the whole file */
    const uint64_t ones[] = { 0, 1, 4095, 4096, 8 * MiB - 1, 8 * MiB, FILE_SIZE - 1, 12345677 };
    for (size_t i = 0; i < sizeof ones / sizeof *ones; i++)
        read_check(x, ones[i], 1, g_ref, "1 byte, not announced");
    uint64_t db1 = 0, cb1 = 0;
    ft_extent_counts(x, &db1, &cb1);
    read_check(x, 1 * MiB + 3, 17 * MiB, g_ref, "17 MiB, not announced");
    read_check(x, 0, FILE_SIZE, g_ref, "the whole file, not announced");
    read_check(x, 0, 0, g_ref, "0 bytes");
    uint64_t db2 = 0, cb2 = 0;
    ft_extent_counts(x, &db2, &cb2);
    if (ft_extent_is_direct(x))
        assert_true(db2 - db1 >= 17 * MiB); /* the big reads went direct */

    ft_error err = { { 0 }, 0 };
    TEST_CHECK_OK(ft_extent_close(x, &err), &err);

    /* the same through the page cache only */
    x = open_reader(path, false);
    assert_false(ft_extent_is_direct(x));
    for (size_t i = 0; i < na; i++)
        assert_int_equal(ft_extent_will_read(x, a[i].start, (size_t)(a[i].end - a[i].start)), 0);
    for (size_t i = 0; i < na; i++)
        read_pieces(x, a[i].start, a[i].end, g_ref, &r, "cached, announced");
    read_check(x, 3, 17 * MiB, g_ref, "cached, 17 MiB");
    ft_extent_counts(x, &db0, &cb0);
    assert_int_equal(db0, 0);
    TEST_CHECK_OK(ft_extent_close(x, &err), &err);
}

/* (d) more ranges announced than can be pending: some announcements are refused, and
 * every read, announced or not, is still right. */
static void test_reads_many_announced(void **state)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, "many");
    make_file(path, g_ref, FILE_SIZE);
    ft_extent_io *x = open_reader(path, true);
    rng r = { 4 };
    enum { N = 1300 };
    static range rs[N];
    static int ok[N];
    for (size_t i = 0; i < N; i++) {
        uint64_t len = 1 + rng_below(&r, i % 50 == 0 ? 300000 : 5000);
        uint64_t s = rng_below(&r, FILE_SIZE - len + 1);
        rs[i] = (range){ s, s + len };
    }
    int accepted = 0, refused = 0;
    for (size_t i = 0; i < N; i++) {
        ok[i] = ft_extent_will_read(x, rs[i].start, (size_t)(rs[i].end - rs[i].start));
        assert_true(ok[i] == 0 || ok[i] == -1);
        if (ok[i] == 0)
            accepted++;
        else
            refused++;
    }
    assert_true(accepted >= 1024);
    assert_true(refused > 0);
    for (size_t i = 0; i < N; i++) {
        /* each range once, the odd ones in two pieces */
        uint64_t len = rs[i].end - rs[i].start;
        if (i % 2 && len > 1) {
            read_check(x, rs[i].start, (size_t)(len / 2), g_ref, "many announced");
            read_check(x, rs[i].start + len / 2, (size_t)(len - len / 2), g_ref, "many announced");
        } else {
            read_check(x, rs[i].start, (size_t)len, g_ref, "many announced");
        }
    }
    /* once the pending ranges are read, announcements are taken again */
    assert_int_equal(ft_extent_will_read(x, 5, 10), 0);
    read_check(x, 5, 10, g_ref, "announced after many");
    ft_error err = { { 0 }, 0 };
    TEST_CHECK_OK(ft_extent_close(x, &err), &err);
}

/* A random mix of announcements, reads that follow them, reads that do not, on one
 * extent: every byte read equals R. */
static void test_reads_fuzz(void **state)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, "fuzz");
    make_file(path, g_ref, FILE_SIZE);
    ft_extent_io *x = open_reader(path, true);
    rng r = { 5 };
    enum { QCAP = 64 };
    range q[QCAP]; /* announced ranges not yet read (front at qh) */
    size_t qh = 0, qn = 0;
    uint64_t qpos = 0; /* next byte of q[qh] to read */
    for (int step = 0; step < 600; step++) {
        uint64_t op = rng_below(&r, 10);
        if (op < 3 && qn < QCAP) { /* announce */
            uint64_t len = 1 + rng_below(&r, rng_below(&r, 8) == 0 ? 9 * MiB : 70000);
            uint64_t s = rng_below(&r, FILE_SIZE - len + 1);
            if (rng_below(&r, 3) == 0)
                s = round_down(s, g_align);
            if (ft_extent_will_read(x, s, (size_t)len) == 0) {
                if (qn == 0)
                    qpos = s;
                q[(qh + qn++) % QCAP] = (range){ s, s + len };
            }
        } else if (op < 8 && qn > 0) { /* read the next piece of the announced stream */
            range *f = &q[qh % QCAP];
            size_t n = piece_len(&r, (size_t)(f->end - qpos));
            read_check(x, qpos, n, g_ref, "fuzz, in stream");
            qpos += n;
            if (qpos == f->end && (qh++, --qn > 0))
                qpos = q[qh % QCAP].start;
        } else { /* a read elsewhere: drops the read-ahead */
            uint64_t len = 1 + rng_below(&r, rng_below(&r, 6) == 0 ? 3 * MiB : 9000);
            uint64_t s = rng_below(&r, FILE_SIZE - len + 1);
            read_check(x, s, (size_t)len, g_ref, "fuzz, elsewhere");
            qn = 0;
        }
    }
    ft_error err = { { 0 }, 0 };
    TEST_CHECK_OK(ft_extent_close(x, &err), &err);
}

/* ------------------------------------------------------------ errors */

static void expect_msg(const ft_error *err, const char *a, const char *b)
{
    if (!strstr(err->msg, a) || (b && !strstr(err->msg, b))) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"%s%s\n", err->msg, a, b ? " or " : "",
                b ? b : "");
        fail();
    }
}

static void test_errors_truncated(void **state)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, "short");
    const size_t size = 3 * MiB + 1000; /* short of what the readers expect */
    make_file(path, g_ref, size);
    for (int direct = 1; direct >= 0; direct--) {
        ft_extent_io *x = open_reader(path, direct);
        unsigned char *buf = malloc(4 * MiB);
        assert_non_null(buf);
        const range bad[] = { { size - 10, size + 10 }, { size, size + 1 },
                              { size + 5000, size + 6000 }, { 0, 4 * MiB },
                              { 1 * MiB + 1, 3 * MiB + 4096 * 2 } };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            for (int announced = 0; announced < 2; announced++) {
                ft_error err = { { 0 }, 0 };
                size_t n = (size_t)(bad[i].end - bad[i].start);
                if (announced)
                    assert_int_equal(ft_extent_will_read(x, bad[i].start, n), 0);
                assert_int_equal(ft_extent_read(x, bad[i].start, buf, n, &err), -1);
                expect_msg(&err, path, "truncated");
                /* the extent still reads what is there */
                read_check(x, size - 4097, 4097, g_ref, "after a truncated read");
            }
        }
        read_check(x, 0, size, g_ref, "the whole truncated file");
        free(buf);
        ft_error err = { { 0 }, 0 };
        TEST_CHECK_OK(ft_extent_close(x, &err), &err);
    }
}

/* Announcing past the end of the file is not an error by itself: the bytes before the
 * end still read, and a read that does cross the end names where the file ends and
 * what the read needed. */
static void test_errors_announced_past_end(void **state)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, "overshoot");
    const size_t size = 13288; /* 3 blocks and a bit */
    make_file(path, g_ref, size);
    for (int direct = 1; direct >= 0; direct--) {
        ft_extent_io *x = open_reader(path, direct);
        unsigned char buf[16384];
        ft_error err = { { 0 }, 0 };
        assert_int_equal(ft_extent_will_read(x, 0, size + 100), 0);
        TEST_CHECK_OK(ft_extent_read(x, 0, buf, 100, &err), &err);
        assert_memory_equal(buf, g_ref, 100);
        TEST_CHECK_OK(ft_extent_read(x, 100, buf, size - 100, &err), &err);
        assert_memory_equal(buf, g_ref + 100, size - 100);
        assert_int_equal(ft_extent_read(x, 0, buf, sizeof buf, &err), -1);
        expect_msg(&err, path, "ends at byte 13288, a read needs bytes up to 16384");
        TEST_CHECK_OK(ft_extent_close(x, &err), &err);
    }
}

static void test_errors_open_missing(void **state)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, "no_such_file");
    for (int writing = 0; writing < 2; writing++) {
        ft_extent_io *x = (ft_extent_io *)(uintptr_t)16; /* must be reset to NULL */
        ft_error err = { { 0 }, 0 };
        assert_int_equal(ft_extent_open(&x, path, writing, true, &err), -1);
        assert_null(x);
        expect_msg(&err, path, NULL);
    }
    assert_int_equal(ft_extent_close(NULL, NULL), 0);
}

/* Writes on an extent opened for reading fail at the call with a message that says
 * so, leave the file as it was, and neither crash nor hang. */
static void test_errors_write_readonly(void **state)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, "readonly");
    const size_t size = 2 * MiB + 77;
    make_file(path, g_ref, size);
    for (int direct = 1; direct >= 0; direct--) {
        ft_extent_io *x = open_reader(path, direct);
        ft_error err = { { 0 }, 0 };
        /* refused at the call, whatever the range (1 byte, an interior, an edge) */
        for (int i = 0; i < 3; i++) {
            ft_error e = { { 0 }, 0 };
            assert_int_equal(ft_extent_write(x, i == 0 ? 5 : i == 1 ? 4096 : 9000, g_ref2,
                                             i == 0 ? 1 : i == 1 ? 2 * 4096 : 100, &e),
                             -1);
            expect_msg(&e, path, "opened for reading");
        }
        /* nothing was queued: flush and reads still work, close succeeds */
        TEST_CHECK_OK(ft_extent_flush(x, &err), &err);
        read_check(x, 0, size, g_ref, "read-only extent after a refused write");
        TEST_CHECK_OK(ft_extent_close(x, &err), &err);
        expect_file(path, g_ref, size);
    }
}

/* A device that takes no bytes (ENOSPC on every write): the error reaches the caller. */
static void test_errors_write_enospc(void **state)
{
    if (access("/dev/full", W_OK) != 0) {
        skip();
        return;
    }
    ft_extent_io *x = NULL;
    ft_error err = { { 0 }, 0 };
    TEST_CHECK_OK(ft_extent_open(&x, "/dev/full", true, false, &err), &err);
    int rc = ft_extent_write(x, 0, g_ref, 5 * MiB, &err);
    if (rc == 0)
        rc = ft_extent_flush(x, &err);
    assert_int_equal(rc, -1);
    expect_msg(&err, "/dev/full", strerror(ENOSPC));
    ft_error err2 = { { 0 }, 0 };
    assert_int_equal(ft_extent_close(x, &err2), -1);
    expect_msg(&err2, "/dev/full", NULL);
}

/* ------------------------------------------------------------ interleaving */

/* Writes and reads on one open extent, against a model of the file. */
static void test_interleave(void **state)
{
    char path[4200];
    path_in(path, sizeof path, g_dir, "interleave");
    make_file(path, NULL, FILE_SIZE);
    unsigned char *model = calloc(1, FILE_SIZE);
    unsigned char *scratch = malloc(3 * MiB);
    assert_non_null(model);
    assert_non_null(scratch);
    ft_extent_io *x = NULL;
    ft_error err = { { 0 }, 0 };
    TEST_CHECK_OK(ft_extent_open(&x, path, true, true, &err), &err);
    rng r = { 6 };

#define WRITE(src, s, e)                                                                  \
    do {                                                                                  \
        write_pieces(x, (s), (e), (src), scratch, &r);                                   \
        memcpy(model + (s), (src) + (s), (size_t)((e) - (s)));                           \
    } while (0)

    /* round 1: unaligned ranges; read them back, and around them (zeros) */
    WRITE(g_ref, 100, 5 * MiB + 3);
    WRITE(g_ref, 9 * MiB - 1, 9 * MiB + 4096 * 3 + 1);
    read_check(x, 100, 5 * MiB - 97, model, "round 1, what was written");
    read_check(x, 0, 10 * MiB, model, "round 1, around it");
    read_check(x, 9 * MiB - 5, 20, model, "round 1, an edge");

    /* a write still in its staging slot (not contiguous with anything yet) */
    WRITE(g_ref, 12 * MiB + 7, 12 * MiB + 50);
    read_check(x, 12 * MiB, 4096, model, "a pending small write");
    /* a contiguous write after a read: the read must see both halves */
    WRITE(g_ref, 12 * MiB + 50, 12 * MiB + 3 * 4096);
    read_check(x, 12 * MiB, 4 * 4096, model, "a write continued after a read");

    /* round 2: overwrite with other bytes, across the earlier edges and slot ends */
    WRITE(g_ref2, 4096 * 2 - 1, 4096 * 2 + 1);
    WRITE(g_ref2, 5 * MiB - 4096, 9 * MiB + 10);
    WRITE(g_ref2, 0, 4096);
    read_check(x, 0, 12 * MiB, model, "round 2");

    /* announced reads, then a write into the announced bytes: no stale read-ahead */
    assert_int_equal(ft_extent_will_read(x, 1 * MiB, 4 * MiB), 0);
    assert_int_equal(ft_extent_will_read(x, 15 * MiB, 2 * MiB), 0);
    read_check(x, 1 * MiB, 1000, model, "announced, before a write");
    WRITE(g_ref2, 1 * MiB + 500, 2 * MiB + 3);
    WRITE(g_ref, 15 * MiB + 4096, 15 * MiB + 8192);
    read_check(x, 1 * MiB + 1000, 4 * MiB - 1000, model, "announced, after a write");
    read_check(x, 15 * MiB, 2 * MiB, model, "announced, after a write");
    /* a write, then an announcement of it while it is still staged, then the read */
    WRITE(g_ref, 18 * MiB + 1, 19 * MiB + 5);
    assert_int_equal(ft_extent_will_read(x, 18 * MiB, 1 * MiB + 4096), 0);
    read_pieces(x, 18 * MiB, 19 * MiB + 4096, model, &r, "announced after a staged write");

    /* round 3: the rest of the file, then everything through the extent and with pread */
    WRITE(g_ref, 19 * MiB + 5, FILE_SIZE);
    read_check(x, 0, FILE_SIZE, model, "round 3, the whole file");
    TEST_CHECK_OK(ft_extent_close(x, &err), &err);
#undef WRITE
    expect_file(path, model, FILE_SIZE);
    free(model);
    free(scratch);
}

/* ------------------------------------------------------------ fallback */

/* Writes and reads on one extent that was asked for O_DIRECT; content equal to R. */
static void round_trip(const char *path, bool *was_direct, uint64_t *direct_bytes)
{
    make_file(path, NULL, FILE_SIZE);
    rng r = { 7 };
    range ranges[64];
    size_t nr = make_ranges(ranges, 64, &r);
    unsigned char *scratch = malloc(3 * MiB);
    assert_non_null(scratch);
    ft_extent_io *x = NULL;
    ft_error err = { { 0 }, 0 };
    TEST_CHECK_OK(ft_extent_open(&x, path, true, true, &err), &err);
    uint64_t total = 0;
    for (size_t i = 0; i < nr; i++)
        total += write_pieces(x, ranges[i].start, ranges[i].end, g_ref, scratch, &r);
    for (size_t i = 0; i < nr; i++)
        assert_int_equal(ft_extent_will_read(x, ranges[i].start,
                                             (size_t)(ranges[i].end - ranges[i].start)), 0);
    for (size_t i = 0; i < nr; i++)
        read_pieces(x, ranges[i].start, ranges[i].end, g_ref, &r, path);
    read_check(x, 3, 17 * MiB, g_ref, path);
    uint64_t cb = 0;
    ft_extent_counts(x, direct_bytes, &cb);
    *was_direct = ft_extent_is_direct(x);
    assert_true(*direct_bytes + cb >= total + 17 * MiB);
    TEST_CHECK_OK(ft_extent_close(x, &err), &err);
    free(scratch);
    expect_file(path, g_ref, FILE_SIZE);
}

static bool opens_direct(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_DIRECT);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* tmpfs: before Linux 6.6 it refuses O_DIRECT and the extent falls back; since, it
 * accepts the flag. Either way the bytes are right, and the extent says direct only
 * when the file system took O_DIRECT. */
static void test_fallback_tmpfs(void **state)
{
    struct statfs sf;
    if (statfs("/dev/shm", &sf) != 0 || (unsigned long)sf.f_type != TMPFS_MAGIC_NUMBER) {
        skip();
        return;
    }
    snprintf(g_shm_dir, sizeof g_shm_dir, "/dev/shm/ft_extent_io.XXXXXX");
    if (!mkdtemp(g_shm_dir)) {
        g_shm_dir[0] = '\0';
        skip();
        return;
    }
    const char *dir = g_shm_dir;
    char path[4200];
    path_in(path, sizeof path, dir, "f");
    make_file(path, NULL, 10);
    const bool fs_direct = opens_direct(path);
    bool was_direct = true;
    uint64_t db = 0;
    round_trip(path, &was_direct, &db);
    if (!fs_direct) {
        assert_false(was_direct);
        assert_int_equal(db, 0);
    }
    /* the refusal as seen from the extent, on tmpfs */
    setenv("FTMPI_FAULT", "direct:refused", 1);
    round_trip(path, &was_direct, &db);
    unsetenv("FTMPI_FAULT");
    assert_false(was_direct);
    assert_int_equal(db, 0);
}

/* The test hooks on the ordinary test directory: a refused O_DIRECT open, and EINVAL
 * on the first direct transfer; both fall back and move every byte right. */
static void test_fallback_hooks(void **state)
{
    static const char *faults[] = { "direct:refused", "direct:einval" };
    static const char *names[] = { "refused", "einval" };
    for (int i = 0; i < 2; i++) {
        char path[4200];
        path_in(path, sizeof path, g_dir, names[i]);
        setenv("FTMPI_FAULT", faults[i], 1);
        bool was_direct = true;
        uint64_t db = 1;
        round_trip(path, &was_direct, &db);
        unsetenv("FTMPI_FAULT");
        assert_false(was_direct);
        assert_int_equal(db, 0);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* the name of a test that hangs reaches the log */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_cover_direct, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_write_cover_cached, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_reads, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_reads_many_announced, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_reads_fuzz, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_errors_truncated, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_errors_announced_past_end, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_errors_open_missing, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_errors_write_readonly, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_errors_write_enospc, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_interleave, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_fallback_tmpfs, arm_watchdog, disarm_watchdog),
        cmocka_unit_test_setup_teardown(test_fallback_hooks, arm_watchdog, disarm_watchdog),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
