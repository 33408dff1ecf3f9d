/* Temporary files and an input cursor for the fuzzers (fuzz_util.h). */
#include "fuzz_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[512];

static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    if (d) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(tmpdir);
}

const char *fuzz_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/ftmpi-fuzz-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

/* A few name slots so that a fuzzer can hold several paths at once. */
const char *fuzz_path(const char *name)
{
    static char slots[8][1024];
    static unsigned next;
    char *p = slots[next++ % 8];
    snprintf(p, 1024, "%s/%s", fuzz_tmpdir(), name);
    return p;
}

const char *fuzz_write_file(const char *name, const void *data, size_t n)
{
    const char *path = fuzz_path(name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) {
        perror("fuzz: writing the input file");
        abort();
    }
    return path;
}

uint8_t fuzz_u8(fuzz_bytes *b)
{
    if (!b->n)
        return 0;
    b->n--;
    return *b->p++;
}

uint32_t fuzz_u32(fuzz_bytes *b)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)fuzz_u8(b) << (8 * i);
    return v;
}

uint64_t fuzz_u64(fuzz_bytes *b)
{
    return (uint64_t)fuzz_u32(b) | (uint64_t)fuzz_u32(b) << 32;
}

uint32_t fuzz_pick(fuzz_bytes *b, uint32_t n)
{
    return n ? fuzz_u8(b) % n : 0;
}

size_t fuzz_str(fuzz_bytes *b, char *out, size_t max)
{
    size_t len = fuzz_u8(b);
    if (len > max)
        len = max;
    if (len > b->n)
        len = b->n;
    memcpy(out, b->p, len);
    out[len] = '\0';
    b->p += len;
    b->n -= len;
    return len;
}
