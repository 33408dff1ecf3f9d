#include "tokenizer/tok_hash.h"

#include <stdlib.h>
#include <string.h>

uint64_t tok_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* 32-bit FNV-1a: token keys are short (a few bytes), where it beats fancier hashes. */
static uint32_t key_hash(const char *key, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 16777619u;
    }
    return h;
}

static size_t capacity_for(size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

int tok_index_init(tok_index *ix, size_t n, const char *pool, const uint32_t *off,
                   const uint32_t *len)
{
    size_t cap = capacity_for(n);
    ix->slots = malloc(cap * sizeof *ix->slots);
    ix->hashes = malloc(cap * sizeof *ix->hashes);
    if (!ix->slots || !ix->hashes) {
        tok_index_free(ix);
        return -1;
    }
    memset(ix->slots, 0xff, cap * sizeof *ix->slots); /* all -1 */
    ix->mask = (uint32_t)(cap - 1);
    ix->pool = pool;
    ix->off = off;
    ix->len = len;
    return 0;
}

void tok_index_free(tok_index *ix)
{
    free(ix->slots);
    free(ix->hashes);
    ix->slots = NULL;
    ix->hashes = NULL;
}

void tok_index_put(tok_index *ix, int32_t id, bool replace)
{
    const char *key = ix->pool + ix->off[id];
    size_t len = ix->len[id];
    uint32_t h = key_hash(key, len);
    for (uint32_t i = h & ix->mask;; i = (i + 1) & ix->mask) {
        int32_t other = ix->slots[i];
        if (other < 0) {
            ix->slots[i] = id;
            ix->hashes[i] = h;
            return;
        }
        if (ix->hashes[i] == h && ix->len[other] == len &&
            memcmp(ix->pool + ix->off[other], key, len) == 0) {
            if (replace)
                ix->slots[i] = id;
            return;
        }
    }
}

int32_t tok_index_get(const tok_index *ix, const char *key, size_t len)
{
    uint32_t h = key_hash(key, len);
    for (uint32_t i = h & ix->mask;; i = (i + 1) & ix->mask) {
        int32_t id = ix->slots[i];
        if (id < 0)
            return -1;
        if (ix->hashes[i] == h && ix->len[id] == len && memcmp(ix->pool + ix->off[id], key, len) == 0)
            return id;
    }
}

/* Fibonacci hashing of the packed pair: multiplicative mixing spreads the (small, dense) ids
 * over the high bits, which we then take. */
static uint32_t pair_slot(const tok_pairmap *m, uint64_t key)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & m->mask;
}

int tok_pairmap_init(tok_pairmap *m, size_t n)
{
    size_t cap = capacity_for(n);
    m->keys = malloc(cap * sizeof *m->keys);
    m->ranks = malloc(cap * sizeof *m->ranks);
    m->merged = malloc(cap * sizeof *m->merged);
    if (!m->keys || !m->ranks || !m->merged) {
        tok_pairmap_free(m);
        return -1;
    }
    memset(m->keys, 0xff, cap * sizeof *m->keys);
    m->mask = (uint32_t)(cap - 1);
    return 0;
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->keys);
    free(m->ranks);
    free(m->merged);
    m->keys = NULL;
    m->ranks = NULL;
    m->merged = NULL;
}

void tok_pairmap_put(tok_pairmap *m, int32_t left, int32_t right, uint32_t rank, int32_t merged)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint32_t i = pair_slot(m, key);; i = (i + 1) & m->mask) {
        if (m->keys[i] == UINT64_MAX || m->keys[i] == key) {
            m->keys[i] = key;
            m->ranks[i] = rank;
            m->merged[i] = merged;
            return;
        }
    }
}

bool tok_pairmap_get(const tok_pairmap *m, int32_t left, int32_t right, uint32_t *rank,
                     int32_t *merged)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint32_t i = pair_slot(m, key);; i = (i + 1) & m->mask) {
        if (m->keys[i] == key) {
            *rank = m->ranks[i];
            *merged = m->merged[i];
            return true;
        }
        if (m->keys[i] == UINT64_MAX)
            return false;
    }
}
