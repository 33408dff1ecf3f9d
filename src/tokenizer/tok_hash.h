/* Hash tables of the tokenizer: token bytes -> id, and BPE pair (left, right) -> merge.
 * Both are open-addressing tables with linear probing, sized once at load time (load factor
 * <= 1/2) and read-only afterwards, so lookups from many threads need no locking. */
#ifndef FT_TOKENIZER_TOK_HASH_H
#define FT_TOKENIZER_TOK_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint64_t tok_fnv1a64(const void *data, size_t len);

/* Index of byte strings that live elsewhere: key of id i is pool[off[i] .. off[i]+len[i]).
 * The index stores only ids (and their hashes, to skip most memcmp calls); the arrays it
 * points at are owned by the caller and must outlive it and not move. */
typedef struct tok_index {
    int32_t *slots;     /* id, or -1 for an empty slot */
    uint32_t *hashes;   /* hash of the key in the same slot */
    uint32_t mask;      /* capacity - 1 (capacity is a power of two) */
    const char *pool;
    const uint32_t *off;
    const uint32_t *len;
} tok_index;

/* Room for n keys. Returns -1 when out of memory. */
int tok_index_init(tok_index *ix, size_t n, const char *pool, const uint32_t *off,
                   const uint32_t *len);
void tok_index_free(tok_index *ix);
/* Adds id under its key. When the key is already present the existing id is kept unless
 * `replace`. Never fails (capacity was reserved). */
void tok_index_put(tok_index *ix, int32_t id, bool replace);
int32_t tok_index_get(const tok_index *ix, const char *key, size_t len); /* -1 if absent */

/* BPE merges: (left id, right id) -> (rank, id of the merged token). */
typedef struct tok_pairmap {
    uint64_t *keys;     /* (uint64)left << 32 | right, or UINT64_MAX for an empty slot */
    uint32_t *ranks;
    int32_t *merged;
    uint32_t mask;
} tok_pairmap;

int tok_pairmap_init(tok_pairmap *m, size_t n);
void tok_pairmap_free(tok_pairmap *m);
/* A pair already present is overwritten: the last merge listed wins, as in HF (which
 * collects the merge list into a hash map). */
void tok_pairmap_put(tok_pairmap *m, int32_t left, int32_t right, uint32_t rank, int32_t merged);
/* Returns true and fills rank/merged when the pair is a merge. */
bool tok_pairmap_get(const tok_pairmap *m, int32_t left, int32_t right, uint32_t *rank,
                     int32_t *merged);

#endif
