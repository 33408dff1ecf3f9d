/* Added (special) tokens: matched in the text before anything else, as HF AddedVocabulary
 * does with an Aho-Corasick automaton in leftmost-longest mode. We get the same matches from a
 * byte trie: scanning left to right, the first position where some token matches is the
 * leftmost match, and walking the trie as far as it goes there gives the longest one. The
 * scan then resumes after the match, so matches never overlap. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_utf8.h"

static int32_t trie_new_node(tok_trie *trie, uint8_t byte)
{
    if (trie->n == trie->cap) {
        size_t cap = trie->cap ? trie->cap * 2 : 64;
        tok_trie_node *p = realloc(trie->nodes, cap * sizeof *p);
        if (!p)
            return -1;
        trie->nodes = p;
        trie->cap = cap;
    }
    tok_trie_node *node = &trie->nodes[trie->n];
    node->child = node->sibling = node->added = -1;
    node->byte = byte;
    return (int32_t)trie->n++;
}

/* The child of node `at` reached by byte b, or -1 (a node's children are the list that
 * starts at `child` and goes on through `sibling`). */
static int32_t trie_child(const tok_trie *trie, int32_t at, uint8_t b)
{
    int32_t c = trie->nodes[at].child;
    while (c >= 0 && trie->nodes[c].byte != b)
        c = trie->nodes[c].sibling;
    return c;
}

int tok_trie_add(tok_trie *trie, const char *s, size_t n, int32_t added_index)
{
    if (n == 0)
        return 0; /* an empty token can never match (HF ignores it too) */
    if (trie->n == 0 && trie_new_node(trie, 0) < 0)
        return -1;
    int32_t at = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t c = trie_child(trie, at, b);
        if (c < 0) {
            c = trie_new_node(trie, b);
            if (c < 0)
                return -1;
            trie->nodes[c].sibling = trie->nodes[at].child;
            trie->nodes[at].child = c;
        }
        at = c;
    }
    /* A duplicate content keeps the later token, like HF's map from content to token. */
    trie->nodes[at].added = added_index;
    trie->first_byte[(uint8_t)s[0]] = true;
    return 0;
}

void tok_trie_free(tok_trie *trie)
{
    free(trie->nodes);
    memset(trie, 0, sizeof *trie);
}

/* Longest token of the trie that is a prefix of s[0..n): its index in t->added, or -1. */
static int32_t longest_at(const tok_trie *trie, const char *s, size_t n, size_t *match_len)
{
    int32_t best = -1;
    int32_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = trie_child(trie, at, (uint8_t)s[i]);
        if (c < 0)
            break;
        at = c;
        if (trie->nodes[at].added >= 0) {
            best = trie->nodes[at].added;
            *match_len = i + 1;
        }
    }
    return best;
}

/* Word characters for single_word tokens. HF tests char::is_alphanumeric(); we treat ASCII
 * letters, digits and '_' plus every non-ASCII non-space character as word characters (no
 * Llama tokenizer has single_word tokens; documented as approximate). */
static bool is_word_char(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    return !tok_is_white_space(cp);
}

/* Not a code point: stands for a byte outside well-formed UTF-8 (a word character, not a
 * space). */
#define INVALID_CP 0x110000u

/* The code point that ends at s[end] and its length in bytes. */
static uint32_t cp_before(const char *s, size_t end, size_t *len)
{
    size_t i = end - 1;
    while (i > 0 && end - i < 4 && ((unsigned char)s[i] & 0xC0) == 0x80)
        i--;
    uint32_t cp;
    int k = tok_utf8_next((const unsigned char *)s + i, end - i, &cp);
    if (k > 0 && (size_t)k == end - i) {
        *len = (size_t)k;
        return cp;
    }
    *len = 1;
    return INVALID_CP;
}

static uint32_t cp_at(const char *s, size_t n)
{
    uint32_t cp;
    int k = tok_utf8_next((const unsigned char *)s, n, &cp);
    return k > 0 ? cp : INVALID_CP;
}

static int push_span(tok_spans *out, size_t start, size_t end, int32_t id)
{
    if (out->len == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 16;
        tok_span *p = realloc(out->data, cap * sizeof *p);
        if (!p)
            return -1;
        out->data = p;
        out->cap = cap;
    }
    out->data[out->len++] = (tok_span){start, end, id};
    return 0;
}

int tok_split_added(const ft_tokenizer *t, const tok_trie *trie, const char *text, size_t n,
                    bool allow_special, tok_spans *out)
{
    out->len = 0;
    size_t done = 0; /* text before this offset is already in out */
    if (trie->n > 0) {
        for (size_t p = 0; p < n;) {
            size_t len = 0;
            int32_t a = trie->first_byte[(uint8_t)text[p]] ? longest_at(trie, text + p, n - p, &len)
                                                          : -1;
            if (a < 0) {
                p++;
                continue;
            }
            const tok_added *tok = &t->added[a];
            size_t start = p, stop = p + len;
            p = stop; /* the automaton resumes after the raw match, whatever we do with it */
            if (tok->special && !allow_special)
                continue;
            if (tok->single_word) {
                size_t cl;
                bool start_ok = start == 0 || !is_word_char(cp_before(text, start, &cl));
                bool stop_ok = stop == n || !is_word_char(cp_at(text + stop, n - stop));
                if (!start_ok || !stop_ok)
                    continue;
            }
            if (tok->lstrip) {
                while (start > done) {
                    size_t cl;
                    if (!tok_is_white_space(cp_before(text, start, &cl)))
                        break;
                    start -= cl;
                }
            }
            if (tok->rstrip) {
                while (stop < n) {
                    uint32_t cp;
                    int k = tok_utf8_next((const unsigned char *)text + stop, n - stop, &cp);
                    if (k < 0 || !tok_is_white_space(cp))
                        break;
                    stop += (size_t)k;
                }
                if (stop > p)
                    p = stop; /* keep spans disjoint */
            }
            if (start < done)
                start = done;
            if (done < start && push_span(out, done, start, -1) < 0)
                return -1;
            if (push_span(out, start, stop, tok->id) < 0)
                return -1;
            done = stop;
        }
    }
    if (done < n && push_span(out, done, n, -1) < 0)
        return -1;
    return 0;
}
