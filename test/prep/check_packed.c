/* check_packed DATASET.h5 DUMP.jsonl [--any-order]
 *
 * Checks a file written by ftmpi-prep against its --dump-examples output:
 *  - every row has seq_len+1 columns; segments start at 0 and go up by one, contiguously;
 *  - each segment is one example exactly (ids and mask), except a row's last segment, which
 *    may be padding (pad id, mask 0);
 *  - the first token of every document has mask 0;
 *  - the documents, read row by row, are the examples in order (or, with --any-order, each
 *    example exactly once: first-fit-decreasing or shuffled packing);
 *  - n_documents and n_target_tokens agree with the rows.
 * Exit 0 when all hold, 1 with a message naming the row and column otherwise.
 */
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/dataset.h"

typedef struct example {
    int32_t n;
    uint32_t *ids;
    uint8_t *mask;
    int used;
} example;

static int fail(const char *what, long long row, long long col)
{
    fprintf(stderr, "check_packed: row %lld, column %lld: %s\n", row, col, what);
    return 1;
}

static example *load_dump(const char *path, int64_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    example *ex = NULL;
    int64_t cap = 0;
    *n = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *ids = json_object_get(o, "ids"), *mask = json_object_get(o, "mask");
        if (*n == cap)
            ex = realloc(ex, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *ex);
        example *e = &ex[(*n)++];
        e->n = (int32_t)json_array_size(ids);
        e->ids = malloc((size_t)e->n * sizeof *e->ids + 1);
        e->mask = malloc((size_t)e->n + 1);
        e->used = 0;
        for (int32_t k = 0; k < e->n; k++) {
            e->ids[k] = (uint32_t)json_integer_value(json_array_get(ids, (size_t)k));
            e->mask[k] = (uint8_t)json_integer_value(json_array_get(mask, (size_t)k));
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    return ex;
}

static int same(const example *e, const uint32_t *t, const uint8_t *m, int32_t n)
{
    return e->n == n && memcmp(e->ids, t, (size_t)n * 4) == 0 && memcmp(e->mask, m, (size_t)n) == 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return fputs("usage: check_packed DATASET.h5 DUMP.jsonl [--any-order]\n", stderr), 2;
    int any_order = argc > 3 && strcmp(argv[3], "--any-order") == 0;
    MPI_Init(&argc, &argv);
    ft_error err = { { 0 }, 0 };
    ft_dataset ds;
    if (ft_dataset_open(&ds, argv[1], MPI_COMM_SELF, &err))
        return fprintf(stderr, "check_packed: %s\n", err.msg), 1;
    int64_t n_ex;
    example *ex = load_dump(argv[2], &n_ex);
    if (!ex)
        return fprintf(stderr, "check_packed: cannot read %s\n", argv[2]), 1;
    const int64_t R = ds.info.rows;
    const int W = ds.info.seq_len + 1;
    uint32_t *tok = malloc((size_t)(R * W) * 4);
    uint8_t *mask = malloc((size_t)(R * W));
    int32_t *seg = malloc((size_t)(R * W) * 4);
    int64_t *rows = malloc((size_t)R * sizeof *rows);
    for (int64_t r = 0; r < R; r++)
        rows[r] = r;
    if (ft_dataset_read_rows(&ds, rows, (int)R, tok, mask, seg, &err))
        return fprintf(stderr, "check_packed: %s\n", err.msg), 1;
    int64_t next = 0, docs = 0, targets = 0;
    int rc = 0;
    for (int64_t r = 0; r < R && !rc; r++) {
        const uint32_t *t = tok + r * W;
        const uint8_t *m = mask + r * W;
        const int32_t *s = seg + r * W;
        if (s[0] != 0)
            rc = fail("first segment is not 0", r, 0);
        for (int c = 0; c < W && !rc; c++) {
            targets += m[c];
            if (c > 0 && s[c] != s[c - 1] && s[c] != s[c - 1] + 1)
                rc = fail("segment ids not contiguous and increasing", r, c);
        }
        for (int c = 0; c < W && !rc;) {
            int e = c;
            while (e < W && s[e] == s[c])
                e++;
            int32_t n = e - c;
            if (m[c] != 0)
                rc = fail("first token of a document is a target", r, c);
            const example *hit = NULL;
            if (!any_order) {
                if (next < n_ex && same(&ex[next], t + c, m + c, n))
                    hit = &ex[next++];
            } else {
                for (int64_t i = 0; i < n_ex && !hit; i++)
                    if (!ex[i].used && same(&ex[i], t + c, m + c, n))
                        hit = &ex[i];
            }
            if (hit) {
                ((example *)hit)->used = 1;
                docs++;
            } else if (e == W) { /* trailing padding */
                for (int k = c; k < W && !rc; k++)
                    if (m[k] || (int32_t)t[k] != ds.info.pad_token_id)
                        rc = fail("padding is not pad id with mask 0", r, k);
            } else {
                rc = fail(any_order ? "segment is no unused example"
                                    : "segment is not the next example in order",
                          r, c);
            }
            c = e;
        }
    }
    if (!rc && docs != n_ex)
        rc = fail("not every example is in the file", R, 0);
    if (!rc && (ds.info.n_documents != n_ex || ds.info.n_target_tokens != targets)) {
        fprintf(stderr, "check_packed: attributes n_documents %lld / n_target_tokens %lld, "
                "rows have %lld / %lld\n", (long long)ds.info.n_documents,
                (long long)ds.info.n_target_tokens, (long long)n_ex, (long long)targets);
        rc = 1;
    }
    if (!rc)
        printf("check_packed: %lld rows, %lld documents, %lld targets: ok\n", (long long)R,
               (long long)docs, (long long)targets);
    ft_dataset_close(&ds);
    MPI_Finalize();
    return rc;
}
