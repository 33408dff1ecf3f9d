#include "prep/prep_pack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

enum { STREAM_SPLIT = 0x5e1171, STREAM_SHUFFLE = 0x5f0ff1e };

void prep_plan_free(prep_plan *p)
{
    free(p->row);
    free(p->offset);
    free(p->seg);
    free(p->row_docs);
    free(p->row_used);
    memset(p, 0, sizeof *p);
}

typedef struct by_len {
    int32_t len;
    int64_t k;
} by_len;

static int longest_first(const void *a, const void *b)
{
    const by_len *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k); /* ties in list order: deterministic */
}

/* First fit in O(log rows): a max-tree over the free space of rows 0..size-1 (unopened rows
 * are empty, so the leftmost row with room is the first fit and rows open in order). */
static int pack_ffd(const int32_t *len, int64_t n, int width, prep_plan *p, int64_t *placed,
                    ft_error *err)
{
    by_len *order = malloc((size_t)n * sizeof *order);
    int64_t size = 1;
    while (size < n)
        size *= 2;
    int32_t *tree = malloc((size_t)(2 * size) * sizeof *tree);
    if (!order || !tree) {
        free(order);
        free(tree);
        return ft_fail(err, "out of host memory (packing %lld documents)", (long long)n);
    }
    for (int64_t i = 0; i < 2 * size; i++)
        tree[i] = width;
    for (int64_t k = 0; k < n; k++)
        order[k] = (by_len){ len[k], k };
    qsort(order, (size_t)n, sizeof *order, longest_first);
    for (int64_t i = 0; i < n; i++) {
        int32_t L = order[i].len;
        int64_t node = 1;
        while (node < size)
            node = tree[2 * node] >= L ? 2 * node : 2 * node + 1;
        int64_t row = node - size;
        int64_t k = order[i].k;
        p->row[k] = row;
        p->offset[k] = width - tree[node];
        tree[node] -= L;
        for (node /= 2; node >= 1; node /= 2)
            tree[node] = tree[2 * node] > tree[2 * node + 1] ? tree[2 * node] : tree[2 * node + 1];
        placed[i] = k;
        if (row + 1 > p->rows)
            p->rows = row + 1;
    }
    free(order);
    free(tree);
    return 0;
}

int prep_pack(const int32_t *len, int64_t n, int width, prep_pack_mode mode, prep_plan *p,
              ft_error *err)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    size_t m = (size_t)(n > 0 ? n : 1);
    p->row = malloc(m * sizeof *p->row);
    p->offset = malloc(m * sizeof *p->offset);
    p->seg = malloc(m * sizeof *p->seg);
    int64_t *placed = malloc(m * sizeof *placed); /* documents in placement order */
    if (!p->row || !p->offset || !p->seg || !placed)
        goto oom;
    for (int64_t k = 0; k < n; k++)
        if (len[k] < 1 || len[k] > width) {
            free(placed);
            prep_plan_free(p);
            return ft_fail(err, "internal: document %lld has length %d (row width %d)",
                           (long long)k, len[k], width);
        }
    if (mode == PREP_PACK_FFD) {
        if (pack_ffd(len, n, width, p, placed, err)) {
            free(placed);
            prep_plan_free(p);
            return -1;
        }
    } else {
        int64_t row = -1;
        int32_t used = width;
        for (int64_t k = 0; k < n; k++) {
            if (mode == PREP_PACK_NONE || used + len[k] > width)
                row++, used = 0;
            p->row[k] = row;
            p->offset[k] = used;
            used += len[k];
            placed[k] = k;
        }
        p->rows = row + 1;
    }
    size_t r = (size_t)(p->rows > 0 ? p->rows : 1);
    p->row_docs = calloc(r, sizeof *p->row_docs);
    p->row_used = calloc(r, sizeof *p->row_used);
    if (!p->row_docs || !p->row_used)
        goto oom;
    /* In placement order a row's documents come by increasing column: number them. */
    for (int64_t i = 0; i < n; i++) {
        int64_t k = placed[i];
        p->seg[k] = p->row_docs[p->row[k]]++;
        p->row_used[p->row[k]] += len[k];
    }
    free(placed);
    return 0;
oom:
    free(placed);
    prep_plan_free(p);
    return ft_fail(err, "out of host memory (packing %lld documents)", (long long)n);
}

static int ascending(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int prep_split(int64_t n, double eval_fraction, uint64_t seed, bool shuffle, int64_t **train,
               int64_t *n_train, int64_t **eval, int64_t *n_eval, ft_error *err)
{
    if (n >= (int64_t)UINT32_MAX)
        return ft_fail(err, "%lld examples: at most 2^32-1 are supported", (long long)n);
    int64_t ne = (int64_t)floor(eval_fraction * (double)n + 0.5);
    if (eval_fraction > 0 && ne == 0 && n > 1)
        ne = 1;
    if (ne >= n)
        ne = n > 0 ? n - 1 : 0;
    size_t m = (size_t)(n > 0 ? n : 1);
    uint32_t *perm = malloc(m * sizeof *perm);
    unsigned char *is_eval = calloc(m, 1);
    *train = malloc(m * sizeof **train);
    *eval = malloc(m * sizeof **eval);
    if (!perm || !is_eval || !*train || !*eval) {
        free(perm);
        free(is_eval);
        free(*train);
        free(*eval);
        return ft_fail(err, "out of host memory");
    }
    if (ne > 0) {
        ft_rng_permutation(seed, STREAM_SPLIT, perm, (size_t)n);
        for (int64_t i = 0; i < ne; i++) {
            is_eval[perm[i]] = 1;
            (*eval)[i] = perm[i];
        }
        qsort(*eval, (size_t)ne, sizeof **eval, ascending);
    }
    int64_t nt = 0;
    for (int64_t i = 0; i < n; i++)
        if (!is_eval[i])
            (*train)[nt++] = i;
    if (shuffle && nt > 1) {
        ft_rng_permutation(seed, STREAM_SHUFFLE, perm, (size_t)nt);
        int64_t *t = (int64_t *)malloc((size_t)nt * sizeof *t);
        if (!t) {
            free(perm);
            free(is_eval);
            free(*train);
            free(*eval);
            return ft_fail(err, "out of host memory");
        }
        for (int64_t i = 0; i < nt; i++)
            t[i] = (*train)[perm[i]];
        free(*train);
        *train = t;
    }
    free(perm);
    free(is_eval);
    *n_train = nt, *n_eval = ne;
    return 0;
}
