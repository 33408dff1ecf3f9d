/* Every kernel, copy and set a process runs on the GPU, with its start and end on the
 * device's clock: a timeline for bench/gpu_timeline.sh, which measures what a kernel-time
 * profile (ncu serialises the kernels) cannot: the device's idle time between operations.
 *
 *   cc -shared -fPIC -I<CUPTI include> bench/cupti_timeline.c -o libcupti_timeline.so -lcupti
 *   CUDA_INJECTION64_PATH=$PWD/libcupti_timeline.so FTMPI_TIMELINE=out.tsv ftmpi step.cfg
 *
 * The CUDA driver loads the library named by CUDA_INJECTION64_PATH when the process first
 * initialises CUDA and calls InitializeInjection, which turns on CUPTI's activity records
 * for kernels (CONCURRENT_KERNEL: no serialisation), memory copies and sets. Records
 * arrive in buffers that CUPTI hands back (buffer_completed); at exit the rest are flushed
 * and all are written, one per line: kind, start ns, end ns, stream, name.
 *
 * Only the leading fields of the records are read, at the offsets every version of them
 * has had (kernel records 4 to 9, memcpy 5, memset 4 in CUPTI's headers: start at 16, end
 * at 24, the stream at 48 in a kernel record and 40 in the others, a kernel's name at
 * 104), so the file builds against the CUPTI headers of any recent toolkit; the
 * developers' machine has none of a GPU's, only a compile check against the headers a
 * Python package carries. */
#include <cupti.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_BYTES (8u << 20)

typedef struct op_record {
    char kind;            /* 'K' kernel, 'C' copy, 'S' set */
    uint64_t start, end;  /* ns */
    uint32_t stream;
    const char *name;     /* kernels: interned; others: a fixed word */
} op_record;

/* Process-wide: the records so far (appended from CUPTI's buffer thread). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static op_record *g_ops;
static size_t g_n, g_cap;
static char **g_names; /* interned kernel names */
static size_t g_n_names, g_cap_names;

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap * 2 : 4096;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * elem);
    if (!q) {
        fprintf(stderr, "cupti_timeline: out of memory\n");
        abort();
    }
    *cap = c;
    return q;
}

/* A copy of s that outlives CUPTI's buffer, the same one for equal names (linear search
 * over a few hundred distinct kernels). Called with g_lock held. */
static const char *intern(const char *s)
{
    if (!s)
        return "?";
    for (size_t i = 0; i < g_n_names; i++)
        if (!strcmp(g_names[i], s))
            return g_names[i];
    g_names = grow(g_names, &g_cap_names, g_n_names + 1, sizeof *g_names);
    g_names[g_n_names] = strdup(s);
    if (!g_names[g_n_names])
        abort();
    return g_names[g_n_names++];
}

static uint64_t u64_at(const CUpti_Activity *r, size_t off)
{
    uint64_t v;
    memcpy(&v, (const char *)r + off, sizeof v);
    return v;
}

static uint32_t u32_at(const CUpti_Activity *r, size_t off)
{
    uint32_t v;
    memcpy(&v, (const char *)r + off, sizeof v);
    return v;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)ctx, (void)stream_id, (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&g_lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
        op_record o;
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const char *name;
            memcpy(&name, (const char *)r + 104, sizeof name);
            o = (op_record){ 'K', u64_at(r, 16), u64_at(r, 24), u32_at(r, 48), intern(name) };
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            o = (op_record){ 'C', u64_at(r, 16), u64_at(r, 24), u32_at(r, 40), "memcpy" };
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            o = (op_record){ 'S', u64_at(r, 16), u64_at(r, 24), u32_at(r, 40), "memset" };
        } else {
            continue;
        }
        g_ops = grow(g_ops, &g_cap, g_n + 1, sizeof *g_ops);
        g_ops[g_n++] = o;
    }
    pthread_mutex_unlock(&g_lock);
    free(buffer);
}

static void write_timeline(void)
{
    cuptiActivityFlushAll(1);
    const char *path = getenv("FTMPI_TIMELINE");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) {
        fprintf(stderr, "cupti_timeline: cannot write FTMPI_TIMELINE=%s\n", path ? path : "");
        return;
    }
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n; i++)
        fprintf(f, "%c\t%llu\t%llu\t%u\t%s\n", g_ops[i].kind, (unsigned long long)g_ops[i].start,
                (unsigned long long)g_ops[i].end, g_ops[i].stream, g_ops[i].name);
    pthread_mutex_unlock(&g_lock);
    fclose(f);
    fprintf(stderr, "cupti_timeline: %zu operations written to %s\n", g_n, path);
}

static int check(CUptiResult r, const char *what)
{
    if (r == CUPTI_SUCCESS)
        return 0;
    const char *msg = NULL;
    cuptiGetResultString(r, &msg);
    fprintf(stderr, "cupti_timeline: %s: %s\n", what, msg ? msg : "?");
    return -1;
}

/* Called by the CUDA driver (CUDA_INJECTION64_PATH); 1 on success. */
int InitializeInjection(void)
{
    if (check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
              "cuptiActivityRegisterCallbacks") ||
        check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
              "cuptiActivityEnable(CONCURRENT_KERNEL)") ||
        check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable(MEMCPY)") ||
        check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable(MEMSET)"))
        return 0;
    atexit(write_timeline);
    return 1;
}
