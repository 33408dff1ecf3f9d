/* BPE model: one pre-token -> ids, with HF's exact merge order.
 *
 * The word starts as one symbol per character (byte-level: per byte). HF then repeatedly
 * merges the adjacent pair with the lowest merge rank, the leftmost one on ties. Doing that
 * by rescanning the word is quadratic; instead, as HF does, we keep
 *   - the symbols in a doubly linked list over an array (a merge folds the right symbol into
 *     the left one, so a symbol's array index is a stable position and the leftmost pair is
 *     the one with the smallest index), and
 *   - a binary min-heap of candidate merges keyed by (rank, position).
 * Each merge changes at most the two pairs around the merged symbol, which are pushed anew;
 * entries made stale by earlier merges are detected when popped (left symbol gone, no right
 * neighbour, or the pair there no longer merges into the same token) and dropped. A word of
 * n symbols costs O(n log n).
 *
 * Before any of that: with ignore_merges (Llama 3) a pre-token that is itself a vocabulary
 * entry is emitted as is, and a small direct-mapped cache remembers the ids of recent
 * pre-tokens (natural text repeats words constantly). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_utf8.h"

struct tok_symbol {
    int32_t id;
    int32_t prev, next; /* array indices, -1 at the ends */
    int32_t alive;
};

struct tok_merge {
    uint64_t key; /* rank << 32 | position of the left symbol: smaller pops first */
    int32_t merged;
};

/* Cache of pre-token -> ids. Only short pre-tokens with few ids are cached, which is nearly
 * all of them in natural text; an entry is overwritten by the next pre-token hashing to the
 * same slot. */
#define CACHE_SLOTS 8192
#define CACHE_KEY_MAX 40
#define CACHE_IDS_MAX 10
struct tok_cache_entry {
    uint8_t key_len; /* 0: empty slot (empty pre-tokens never reach the model) */
    uint8_t n_ids;
    char key[CACHE_KEY_MAX];
    int32_t ids[CACHE_IDS_MAX];
};

static uint32_t cache_slot(const char *p, size_t n)
{
    return (uint32_t)(tok_fnv1a64(p, n) & (CACHE_SLOTS - 1));
}

static void heap_push(tok_bpe_work *w, uint64_t key, int32_t merged)
{
    /* capacity reserved by the caller: at most 3 pushes per symbol */
    size_t i = w->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (w->heap[parent].key <= key)
            break;
        w->heap[i] = w->heap[parent];
        i = parent;
    }
    w->heap[i] = (struct tok_merge){key, merged};
}

static struct tok_merge heap_pop(tok_bpe_work *w)
{
    struct tok_merge top = w->heap[0];
    struct tok_merge last = w->heap[--w->heap_len];
    size_t i = 0, n = w->heap_len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && w->heap[c + 1].key < w->heap[c].key)
            c++;
        if (last.key <= w->heap[c].key)
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0)
        w->heap[i] = last;
    return top;
}

static void push_pair(const ft_tokenizer *t, tok_bpe_work *w, int32_t left)
{
    int32_t right = w->sym[left].next;
    uint32_t rank;
    int32_t merged;
    if (right >= 0 && tok_pairmap_get(&t->merges, w->sym[left].id, w->sym[right].id, &rank, &merged))
        heap_push(w, (uint64_t)rank << 32 | (uint32_t)left, merged);
}

static int reserve(tok_bpe_work *w, size_t n)
{
    if (n > w->sym_cap) {
        size_t cap = w->sym_cap ? w->sym_cap : 64;
        while (cap < n)
            cap *= 2;
        struct tok_symbol *s = realloc(w->sym, cap * sizeof *s);
        if (!s)
            return -1;
        w->sym = s;
        struct tok_merge *h = realloc(w->heap, 3 * cap * sizeof *h);
        if (!h)
            return -1;
        w->heap = h;
        w->sym_cap = cap;
        w->heap_cap = 3 * cap;
    }
    return 0;
}

static void add_symbol(tok_bpe_work *w, size_t *n, int32_t id)
{
    struct tok_symbol *s = &w->sym[*n];
    s->id = id;
    s->prev = (int32_t)*n - 1;
    s->next = (int32_t)*n + 1;
    s->alive = 1;
    (*n)++;
}

/* Initial symbols of a SentencePiece-style word: one per UTF-8 character (a stray byte counts
 * as a character). A character outside the vocabulary becomes its <0xXX> byte tokens
 * (byte_fallback), else <unk> (consecutive ones fused into one with fuse_unk), else nothing,
 * exactly as HF's BPE::merge_word. Returns the symbol count. */
static size_t initial_chars(const ft_tokenizer *t, tok_bpe_work *w, const char *p, size_t n)
{
    size_t count = 0;
    bool last_was_unk = false;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tok_utf8_next((const unsigned char *)p + i, n - i, &cp);
        size_t clen = k > 0 ? (size_t)k : 1;
        int32_t id = tok_index_get(&t->by_key, p + i, clen);
        if (id >= 0) {
            add_symbol(w, &count, id);
            last_was_unk = false;
        } else {
            bool bytes_ok = t->byte_fallback;
            for (size_t j = 0; bytes_ok && j < clen; j++)
                bytes_ok = t->byte_fallback_id[(uint8_t)p[i + j]] >= 0;
            if (bytes_ok) {
                for (size_t j = 0; j < clen; j++)
                    add_symbol(w, &count, t->byte_fallback_id[(uint8_t)p[i + j]]);
                last_was_unk = false;
            } else if (t->unk_id >= 0) {
                if (!(t->fuse_unk && last_was_unk))
                    add_symbol(w, &count, t->unk_id);
                last_was_unk = true;
            }
        }
        i += clen;
    }
    return count;
}

static size_t initial_bytes(const ft_tokenizer *t, tok_bpe_work *w, const char *p, size_t n)
{
    size_t count = 0;
    bool last_was_unk = false;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_char_id[(uint8_t)p[i]];
        if (id >= 0) {
            add_symbol(w, &count, id);
            last_was_unk = false;
        } else if (t->unk_id >= 0) {
            if (!(t->fuse_unk && last_was_unk))
                add_symbol(w, &count, t->unk_id);
            last_was_unk = true;
        }
    }
    return count;
}

static int merge_word(const ft_tokenizer *t, tok_bpe_work *w, const char *p, size_t n, tok_ids *out)
{
    /* byte_fallback can turn one byte into one symbol at most, so n symbols suffice. */
    if (reserve(w, n) < 0)
        return -1;
    size_t count = t->byte_level ? initial_bytes(t, w, p, n) : initial_chars(t, w, p, n);
    if (count == 0)
        return 0;
    w->sym[count - 1].next = -1;

    w->heap_len = 0;
    for (size_t i = 0; i + 1 < count; i++)
        push_pair(t, w, (int32_t)i);
    while (w->heap_len > 0) {
        struct tok_merge m = heap_pop(w);
        int32_t pos = (int32_t)(uint32_t)m.key;
        struct tok_symbol *left = &w->sym[pos];
        if (!left->alive || left->next < 0)
            continue;
        struct tok_symbol *right = &w->sym[left->next];
        uint32_t rank;
        int32_t merged;
        if (!tok_pairmap_get(&t->merges, left->id, right->id, &rank, &merged) || merged != m.merged)
            continue; /* stale entry */
        left->id = merged;
        right->alive = 0;
        left->next = right->next;
        if (left->next >= 0)
            w->sym[left->next].prev = pos;
        if (left->prev >= 0)
            push_pair(t, w, left->prev);
        push_pair(t, w, pos);
    }
    if (tok_ids_reserve(out, count) < 0)
        return -1;
    for (int32_t i = 0; i >= 0; i = w->sym[i].next)
        out->data[out->len++] = w->sym[i].id;
    return 0;
}

int tok_bpe_encode(const ft_tokenizer *t, tok_bpe_work *w, const char *piece, size_t n,
                   tok_ids *out)
{
    if (n == 0)
        return 0;
    if (t->ignore_merges) {
        int32_t id = tok_index_get(&t->by_key, piece, n);
        if (id >= 0)
            return tok_ids_push(out, id);
    }
    struct tok_cache_entry *e = NULL;
    if (n <= CACHE_KEY_MAX) {
        if (!w->cache)
            w->cache = calloc(CACHE_SLOTS, sizeof *w->cache);
        if (w->cache) {
            e = &w->cache[cache_slot(piece, n)];
            if (e->key_len == n && memcmp(e->key, piece, n) == 0) {
                if (tok_ids_reserve(out, e->n_ids) < 0)
                    return -1;
                /* a word may encode to no ids at all (symbols without an id and no unk_token),
                 * and out may then still have no buffer: NULL + 0 is undefined in C */
                if (e->n_ids > 0)
                    memcpy(out->data + out->len, e->ids, e->n_ids * sizeof *e->ids);
                out->len += e->n_ids;
                return 0;
            }
        }
    }
    size_t before = out->len;
    if (merge_word(t, w, piece, n, out) < 0)
        return -1;
    size_t produced = out->len - before;
    if (e && produced <= CACHE_IDS_MAX) {
        e->key_len = (uint8_t)n;
        e->n_ids = (uint8_t)produced;
        memcpy(e->key, piece, n);
        if (produced > 0)
            memcpy(e->ids, out->data + before, produced * sizeof *e->ids);
    }
    return 0;
}

void tok_bpe_work_free(tok_bpe_work *w)
{
    free(w->sym);
    free(w->heap);
    free(w->cache);
    memset(w, 0, sizeof *w);
}
