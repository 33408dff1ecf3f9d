/* The next forward's embedding rows ahead of the embedding's update.
 *
 * With the update beside the next forward (engine_overlap.c) the forward waits for each
 * unit's update as it acquires the unit, and the first it needs is the embedding's, the
 * largest: at the Llama-3.2-1B shape (tied, 128256 x 2048) 263 M of the 1.24 G parameters,
 * about 2.7 ms of AdamW at 30 bytes a parameter on an H100, with the forward waiting. Yet
 * the lookup reads only the micro-batch's rows, at most 4096 of the 128256 at seq_len 4096.
 *
 * So when the trainer has announced the next micro-batch's ids (the loader read them
 * ahead: ft_engine_announce_lookup), the step queues on the side lane first the AdamW
 * values of just the distinct rows among them, rounded to bf16 (adamw_rows_bf16: the bits
 * the whole update will write, AdamW being elementwise), into a table; then the blocks'
 * updates; the embedding's own update last. The lookup (ft_engine_lookup_acquire) waits
 * only for the table and reads it through the ids remapped to its rows: the same bits as
 * the updated embedding. The head (tied), the backward and any other pass acquire the
 * embedding as before, after its whole update.
 *
 * The table, its rows and the remapped ids live in a buffer of their own, sized for a
 * micro-batch's tokens (ft_engine_options.lookup_tokens; at the 1B shape and seq_len 4096,
 * 16 MiB), allocated with the engine so that the memory plan counts it. What keeps it
 * correct:
 *   - the table is written on the side lane after the fork (after the main lane's earlier
 *     work, the previous lookup included) and read on the main lane after its mark;
 *   - it serves one lookup, whose ids must be the armed ones (an evaluation's forward
 *     between steps reads the embedding the normal way);
 *   - a load disarms it (it replaces the state the rows were made from); a checkpoint's
 *     save, an evaluation or a settling does not (they change none of it).
 * The rows and remapped ids are uploaded on the main lane before the step's fork, after
 * its settling: nothing on the side lane still reads the previous ones. */
#include <stdlib.h>
#include <string.h>

#include "shard/engine_internal.h"

/* The table's mark on the side lane: after every unit's. */
static int table_mark(const ft_engine *e) { return e->layout.n_units; }

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* Where the table's rows and the remapped ids start in the buffer, for `rows` rows. */
static size_t table_bytes(const ft_engine *e, size_t rows)
{
    return align_up(rows * (size_t)e->layout.config.hidden_size * sizeof(uint16_t), 256);
}

/* The most distinct rows a lookup of n tokens has. */
static size_t max_rows(const ft_engine *e, size_t n)
{
    const size_t V = (size_t)e->layout.config.vocab_size;
    return n < V ? n : V;
}

size_t ft_engine_lookup_bytes(const ft_engine *e)
{
    const size_t n = e->opt.lookup_tokens;
    /* the update writes the bf16 working copy the lookup reads: stage 0's bits, AdamW's */
    if (n == 0 || e->opt.frozen || e->opt.zero_stage != 0 || !ft_engine_hands_bits(e) ||
        !e->opt.precision.has_master || e->opt.offload_optimizer ||
        e->opt.optimizer != FT_OPT_ADAMW || e->layout.n_units < 1 ||
        e->layout.units[0].kind != FT_UNIT_EMBED || e->layout.units[0].n_tensors != 1)
        return 0;
    return table_bytes(e, max_rows(e, n)) + (max_rows(e, n) + n) * sizeof(int32_t);
}

/* Whether this engine serves lookups ahead (its choices at creation). */
int ft_engine_lookup_wanted(const ft_engine *e)
{
    const char *env = getenv("FTMPI_LOOKUP_AHEAD");
    if (env && !strcmp(env, "0"))
        return 0;
    return e->overlap && e->be->ops->adamw_rows_bf16 && e->lookup.buf;
}

void ft_engine_announce_lookup(ft_engine *e, const uint32_t *tokens, int rows, size_t stride,
                               int len)
{
    engine_lookup *lk = &e->lookup;
    lk->n_next = 0;
    if (!e->lookup_ahead || rows < 1 || len < 1)
        return;
    const size_t n = (size_t)rows * (size_t)len;
    const int V = e->layout.config.vocab_size;
    if (n > e->opt.lookup_tokens) /* more than the buffer was sized for */
        return;
    if (n > lk->cap) {
        int32_t *next = realloc(lk->next_ids, n * sizeof *next);
        int32_t *ids = next ? realloc(lk->ids, n * sizeof *ids) : NULL;
        int32_t *up = ids ? realloc(lk->upload, 2 * n * sizeof *up) : NULL;
        lk->next_ids = next ? next : lk->next_ids;
        lk->ids = ids ? ids : lk->ids;
        lk->upload = up ? up : lk->upload;
        if (!up) /* out of host memory: no lookup ahead; the step is the same without */
            return;
        lk->cap = n;
    }
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < len; t++) {
            const uint32_t id = tokens[(size_t)r * stride + (size_t)t];
            if (id >= (uint32_t)V) /* the model refuses the batch: nothing to serve */
                return;
            lk->next_ids[(size_t)r * len + t] = (int32_t)id;
        }
    lk->n_next = n;
}

/* Takes the announced ids: the distinct rows in order of first use and each id's row of
 * the table, uploaded to the buffer after the table. 1 when armed. */
static int arm(ft_engine *e)
{
    engine_lookup *lk = &e->lookup;
    const size_t n = lk->n_next;
    lk->n_next = 0;
    lk->armed = 0;
    if (n == 0)
        return 0;
    const int V = e->layout.config.vocab_size;
    if (!lk->slot) {
        lk->slot = malloc((size_t)V * sizeof *lk->slot);
        if (!lk->slot)
            return 0;
        for (int i = 0; i < V; i++)
            lk->slot[i] = -1;
    }
    int32_t *rows = lk->upload, *remap = lk->upload + n;
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t id = lk->next_ids[i];
        if (lk->slot[id] < 0) {
            lk->slot[id] = (int32_t)distinct;
            rows[distinct++] = id;
        }
        remap[i] = lk->slot[id];
    }
    for (size_t k = 0; k < distinct; k++) /* the map is all -1 again for the next */
        lk->slot[rows[k]] = -1;
    memmove(rows + distinct, remap, n * sizeof *remap); /* rows then remapped ids */
    char *base = lk->buf;
    lk->table = (uint16_t *)base;
    lk->rows_dev = (int32_t *)(base + table_bytes(e, distinct));
    lk->remap_dev = lk->rows_dev + distinct;
    lk->distinct = distinct;
    e->be->ops->upload(e->be, lk->rows_dev, rows, (distinct + n) * sizeof(int32_t));
    memcpy(lk->ids, lk->next_ids, n * sizeof *lk->ids);
    lk->n = n;
    return 1;
}

int ft_engine_lookup_arm(ft_engine *e)
{
    return e->lookup_ahead && arm(e);
}

void ft_engine_lookup_preview(ft_engine *e, const float *param, const float *grad,
                              const ft_adamw_params *p)
{
    engine_lookup *lk = &e->lookup;
    const size_t H = (size_t)e->layout.config.hidden_size;
    e->be->ops->adamw_rows_bf16(e->be, lk->table, param, grad, e->units[0].m, e->units[0].v,
                                lk->rows_dev, lk->distinct, H, p);
    e->be->ops->lane_mark(e->be, table_mark(e));
    lk->armed = 1;
}

const void *ft_engine_lookup_acquire(ft_engine *e, int unit, const int32_t *ids, size_t n,
                                     const int32_t **ids_dev)
{
    engine_lookup *lk = &e->lookup;
    if (unit != 0 || !lk->armed || n != lk->n || memcmp(ids, lk->ids, n * sizeof *ids))
        return NULL;
    lk->armed = 0;
    lk->served++;
    e->be->ops->lane_await(e->be, table_mark(e));
    *ids_dev = lk->remap_dev;
    return lk->table;
}

void ft_engine_lookup_disarm(ft_engine *e) { e->lookup.armed = 0; }

long ft_engine_lookups_served(const ft_engine *e) { return e->lookup.served; }

void ft_engine_lookup_free(ft_engine *e)
{
    engine_lookup *lk = &e->lookup;
    e->be->ops->free(e->be, lk->buf);
    free(lk->next_ids);
    free(lk->ids);
    free(lk->upload);
    free(lk->slot);
    memset(lk, 0, sizeof *lk);
}
