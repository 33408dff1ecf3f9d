/* The CPU execution harness for CUDA: the registry of live allocations (device memory,
 * and the runtime's pinned host memory), the device-range checks built on it, a memory
 * of recently freed ranges for messages, and interned operation names. */
#define _POSIX_C_SOURCE 200809L /* strdup, posix_memalign */
#include "cudaemu_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- registry */

/* Index of the first allocation whose base is > p (binary search). */
static size_t upper_bound(const cudaemu_registry *r, const void *p)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)r->v[mid]->base <= (uintptr_t)p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

cudaemu_alloc *cudaemu_registry_add(cudaemu_registry *r, void *base, size_t bytes)
{
    static uint64_t serial;
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        cudaemu_alloc **v = realloc(r->v, cap * sizeof *v);
        if (!v)
            return NULL;
        r->v = v;
        r->cap = cap;
    }
    cudaemu_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->base = base;
    a->bytes = bytes;
    a->serial = ++serial;
    size_t i = upper_bound(r, base);
    memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof *r->v);
    r->v[i] = a;
    r->n++;
    return a;
}

cudaemu_alloc *cudaemu_registry_find(const cudaemu_registry *r, const void *p)
{
    size_t i = upper_bound(r, p);
    if (i == 0)
        return NULL;
    cudaemu_alloc *a = r->v[i - 1];
    /* Zero-byte allocations own no byte: nothing is inside them. */
    return (uintptr_t)p - (uintptr_t)a->base < a->bytes ? a : NULL;
}

int cudaemu_registry_remove(cudaemu_registry *r, const void *base)
{
    size_t i = upper_bound(r, base);
    if (i == 0 || r->v[i - 1]->base != base)
        return -1;
    cudaemu_alloc *a = r->v[i - 1];
    free(a->shadow);
    free(a);
    memmove(&r->v[i - 1], &r->v[i], (r->n - i) * sizeof *r->v);
    r->n--;
    return 0;
}

static cudaemu_registry g_device; /* process-wide: the emulated device's memory */

cudaemu_registry *cudaemu_device_registry(void) { return &g_device; }

/* ---------------------------------------------------------------- recently freed */

/* A ring of the last frees, only to make "not a live allocation" messages say which
 * allocation the pointer belonged to. The addresses may since have been reused by the
 * host allocator, so this is a hint, never a decision. */
#define FREED_RING 256
static struct freed {
    uintptr_t base;
    size_t bytes;
    uint64_t serial;
    const char *how;
} g_freed[FREED_RING];
static unsigned g_freed_next;

void cudaemu_note_freed(const void *base, size_t bytes, uint64_t serial, const char *how)
{
    g_freed[g_freed_next % FREED_RING] = (struct freed){ (uintptr_t)base, bytes, serial, how };
    g_freed_next++;
}

const char *cudaemu_freed_note(const void *p)
{
    static char note[160];
    uintptr_t u = (uintptr_t)p;
    for (unsigned k = 1; k <= FREED_RING && k <= g_freed_next; k++) { /* newest first */
        const struct freed *f = &g_freed[(g_freed_next - k) % FREED_RING];
        if (u >= f->base && u - f->base < (f->bytes ? f->bytes : 1)) {
            snprintf(note, sizeof note, " (it was in allocation #%llu of %zu bytes at %p, freed by %s)",
                     (unsigned long long)f->serial, f->bytes, (void *)f->base, f->how);
            return note;
        }
    }
    return "";
}

/* ---------------------------------------------------------------- the cudaemu.h checks */

int cudaemu_find_alloc(const void *p, void **base, size_t *bytes)
{
    cudaemu_alloc *a = cudaemu_registry_find(&g_device, p);
    if (!a)
        return -1;
    if (base)
        *base = a->base;
    if (bytes)
        *bytes = a->bytes;
    return 0;
}

void cudaemu_check_device_range(const void *p, size_t bytes, const char *who, const char *what)
{
    if (bytes == 0 && !p)
        return;
    cudaemu_alloc *a = cudaemu_registry_find(&g_device, p);
    if (!a)
        cudaemu_fail("%s: %s = %p is not inside a live device allocation%s", who, what, p,
                     cudaemu_freed_note(p));
    size_t off = (size_t)((const char *)p - a->base);
    if (bytes > a->bytes - off)
        cudaemu_fail("%s: %s = [%p, +%zu bytes) runs %zu bytes past the end of device "
                     "allocation #%llu (%zu bytes at %p; the operand starts at offset %zu)",
                     who, what, p, bytes, bytes - (a->bytes - off),
                     (unsigned long long)a->serial, a->bytes, (void *)a->base, off);
}

/* ---------------------------------------------------------------- interned names */

/* Open addressing over FNV-1a hashes; the table only grows. Operation names are a small
 * set (kernel names with launch sites, API call names), so this stays tiny. */
static const char **g_names;
static size_t g_names_cap, g_names_n;

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int names_put(const char **tab, size_t cap, const char *s)
{
    size_t i = (size_t)fnv1a(s) & (cap - 1);
    while (tab[i])
        i = (i + 1) & (cap - 1);
    tab[i] = s;
    return 0;
}

const char *cudaemu_intern(const char *s)
{
    if (!s)
        s = "(unnamed operation)";
    if (g_names_cap) {
        size_t i = (size_t)fnv1a(s) & (g_names_cap - 1);
        for (; g_names[i]; i = (i + 1) & (g_names_cap - 1))
            if (strcmp(g_names[i], s) == 0)
                return g_names[i];
    }
    if (2 * (g_names_n + 1) > g_names_cap) {
        size_t cap = g_names_cap ? 2 * g_names_cap : 256;
        const char **tab = calloc(cap, sizeof *tab);
        if (!tab)
            cudaemu_fail("out of host memory interning an operation name");
        for (size_t i = 0; i < g_names_cap; i++)
            if (g_names[i])
                names_put(tab, cap, g_names[i]);
        free(g_names);
        g_names = tab;
        g_names_cap = cap;
    }
    char *copy = strdup(s);
    if (!copy)
        cudaemu_fail("out of host memory interning an operation name");
    names_put(g_names, g_names_cap, copy);
    g_names_n++;
    return copy;
}
