/* Internal layout of a loaded tokenizer, shared by the tok_*.c files (not a public header).
 *
 * Encoding pipeline (HF order), with the file that implements each step:
 *   text --split on added tokens (tok_specials.c)--> segments
 *        --normalizer per segment (tok_normalize.c)--> normalized segment
 *        --split on normalized added tokens (tok_specials.c)--> pieces of text
 *        --pre-tokenizer stages (tok_pretokenize.c)--> pre-tokens
 *        --BPE model (tok_bpe.c)--> ids
 * tok_encode.c drives it, tok_decode.c runs the decoder chain, tok_load.c and
 * tok_config.c build this struct from tokenizer.json. */
#ifndef FT_TOKENIZER_TOK_INTERNAL_H
#define FT_TOKENIZER_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>

#include "tokenizer/tok_buf.h"
#include "tokenizer/tok_hash.h"
#include "tokenizer/tokenizer.h"

/* One entry of tokenizer.json "added_tokens". */
typedef struct tok_added {
    int32_t id;
    char *content; /* owned */
    size_t len;
    /* normalized=true tokens are matched, and spelled by id_to_token/decode, in normalized
     * form (HF: "[N]" under a Prepend("▁") normalizer decodes as "▁[N]"); NULL otherwise. */
    char *norm_content; /* owned */
    size_t norm_len;
    bool special, lstrip, rstrip, single_word, normalized;
} tok_added;

/* Byte trie over added-token contents, for leftmost-longest matching. Children are a
 * singly linked sibling list: there are few tokens (hundreds) sharing long prefixes such as
 * "<|reserved_special_token_", so a list beats a 256-way array on memory at no real cost. */
typedef struct tok_trie_node {
    int32_t child;   /* first child, -1 if none */
    int32_t sibling; /* next sibling, -1 if none */
    int32_t added;   /* index into ft_tokenizer.added of the token ending here, -1 if none */
    uint8_t byte;
} tok_trie_node;

typedef struct tok_trie {
    tok_trie_node *nodes; /* nodes[0] is the root; NULL when the trie is empty */
    size_t n, cap;
    bool first_byte[256]; /* quick reject: can a token start with this byte? */
} tok_trie;

typedef enum { TOK_NORM_PREPEND, TOK_NORM_REPLACE, TOK_NORM_NFC } tok_norm_kind;

typedef struct tok_norm_step {
    tok_norm_kind kind;
    char *pattern; /* Replace: literal to find (owned, non-empty); Prepend, NFC: unused */
    size_t pattern_len;
    char *content; /* Replace: replacement; Prepend: the prefix (owned) */
    size_t content_len;
} tok_norm_step;

typedef enum {
    TOK_DEC_BYTE_LEVEL,
    TOK_DEC_REPLACE,
    TOK_DEC_BYTE_FALLBACK,
    TOK_DEC_FUSE,
    TOK_DEC_STRIP,
} tok_dec_kind;

typedef struct tok_dec_step {
    tok_dec_kind kind;
    char *pattern; /* Replace: literal (owned, non-empty); Strip: the character (UTF-8) */
    size_t pattern_len;
    char *content; /* Replace: replacement (owned) */
    size_t content_len;
    size_t start, stop; /* Strip: at most this many characters at each end */
} tok_dec_step;

/* One splitting stage of the pre-tokenizer. HF runs a Sequence's pre-tokenizers in order, each
 * on every piece the one before made; the stages keep that order:
 *   REGEX         Split(Regex|String, Isolated), Digits before ByteLevel (\p{N} or \p{N}+: HF's
 *                 Digits tests Rust's char::is_numeric, the Unicode N categories), and the
 *                 GPT-2 regex of ByteLevel(use_regex=true)
 *   PREFIX_SPACE  ByteLevel(add_prefix_space=true): ' ' in front of a piece not starting with one
 *   BYTE_DIGITS   Digits after ByteLevel: HF then sees the byte alphabet, whose numeric
 *                 characters are the bytes '0'-'9' and 0xB2 0xB3 0xB9 0xBC-0xBE (spelled ² ³ ¹
 *                 ¼ ½ ¾), so the split is on those bytes, even inside a UTF-8 sequence. */
typedef enum { TOK_STAGE_REGEX, TOK_STAGE_PREFIX_SPACE, TOK_STAGE_BYTE_DIGITS } tok_stage_kind;

typedef struct tok_stage {
    tok_stage_kind kind;
    pcre2_code *re;  /* REGEX: owned */
    bool individual; /* BYTE_DIGITS: each numeric byte alone (else runs of them) */
} tok_stage;

enum { TOK_MAX_STAGES = 8 };

/* TOK_ID_RESPELLED: an added token whose spelling for decode is its norm_content. */
enum { TOK_ID_PRESENT = 1, TOK_ID_ADDED = 2, TOK_ID_SPECIAL = 4, TOK_ID_RESPELLED = 8 };

struct ft_tokenizer {
    char *name; /* path or buffer name, for messages (owned) */
    uint64_t hash;
    const char *kind;
    int32_t n_ids; /* largest id + 1 */

    /* Token strings as written in tokenizer.json, per id (added tokens override). */
    char *strs;
    uint32_t *str_off, *str_len;
    uint8_t *id_flags; /* TOK_ID_* */
    tok_index by_string;

    /* BPE model. The key of a model token is what the pre-tokenizer produces for it: its raw
     * bytes for byte-level models (so text never has to be mapped to the byte alphabet), its
     * string otherwise. Tokens whose string is not byte-level-spelled cannot be produced and
     * are left out of by_key. */
    char *keys;
    uint32_t *key_off, *key_len;
    tok_index by_key;
    tok_pairmap merges;
    bool byte_level, ignore_merges, byte_fallback, fuse_unk;
    /* Metaspace pre-tokenizer (Mistral v0.3; split false): ' ' -> U+2581 in each segment, and
     * a U+2581 prepended per prepend_scheme unless the segment already starts with one. */
    enum { TOK_META_NONE, TOK_META_NEVER, TOK_META_FIRST, TOK_META_ALWAYS } metaspace;
    int32_t unk_id;              /* -1 if none */
    int32_t byte_char_id[256];   /* byte-level: id of the one-byte token, -1 if missing */
    int32_t byte_fallback_id[256]; /* id of "<0xXX>", -1 if missing */

    tok_added *added;
    size_t n_added;
    tok_trie raw_trie;  /* added tokens with normalized=false: matched on the input text */
    tok_trie norm_trie; /* normalized=true: matched on normalized segments */

    tok_norm_step *norm;
    size_t n_norm;

    /* Pre-tokenizer stages of a byte-level model, in order (none: a segment is one pre-token). */
    tok_stage stages[TOK_MAX_STAGES];
    size_t n_stages;

    bool has_decoder; /* false: HF joins token strings with " " */
    tok_dec_step *dec;
    size_t n_dec;

    int32_t bos_id, eos_id, pad_id;
};

/* A split of text into added-token matches (id >= 0) and plain text (id == -1). */
typedef struct tok_span {
    size_t start, end;
    int32_t id;
} tok_span;

typedef struct tok_spans {
    tok_span *data;
    size_t len, cap;
} tok_spans;

/* Working memory of the BPE merge loop (see tok_bpe.c). */
typedef struct tok_bpe_work {
    struct tok_symbol *sym;
    size_t sym_cap;
    struct tok_merge *heap;
    size_t heap_len, heap_cap;
    struct tok_cache_entry *cache; /* recent pre-token -> ids, direct-mapped */
} tok_bpe_work;

struct ft_tok_scratch {
    const ft_tokenizer *t;
    pcre2_match_data *match[TOK_MAX_STAGES]; /* per REGEX stage: the stages nest */
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    tok_spans raw_spans, norm_spans;
    tok_buf normalized;
    tok_buf metaspaced; /* Metaspace output of one segment */
    tok_buf prefixed[TOK_MAX_STAGES]; /* PREFIX_SPACE output, per stage */
    tok_bpe_work bpe;
};

/* tok_load.c: how decode and ft_tokenizer_token spell an id (valid, present id). */
const char *tok_spelling(const ft_tokenizer *t, int32_t id, size_t *len);

/* tok_specials.c */
int tok_trie_add(tok_trie *trie, const char *s, size_t n, int32_t added_index);
void tok_trie_free(tok_trie *trie);
/* Splits text[0..n) on matches of the trie's tokens (HF AddedVocabulary rules: leftmost-
 * longest, then single_word/lstrip/rstrip). Special tokens are skipped when !allow_special.
 * Replaces the content of out. -1 when out of memory. */
int tok_split_added(const ft_tokenizer *t, const tok_trie *trie, const char *text, size_t n,
                    bool allow_special, tok_spans *out);

/* tok_normalize.c: out = normalizer(s); -1 when out of memory. */
int tok_normalize(const ft_tokenizer *t, const char *s, size_t n, tok_buf *out);

/* tok_pretokenize.c */
/* Compiles a tokenizer.json Split regex (Oniguruma syntax as used by HF) for PCRE2; on
 * failure writes the reason into why. */
int tok_regex_compile(const char *pattern, size_t len, pcre2_code **out, char *why, size_t why_len);
typedef int (*tok_piece_fn)(void *ctx, const char *piece, size_t n);
/* Calls fn for each pre-token of s, in order. Returns 0, or the first non-zero value of fn, or
 * -1 with err set on a regex failure. */
int tok_pretokenize(const ft_tokenizer *t, ft_tok_scratch *s, const char *text, size_t n,
                    tok_piece_fn fn, void *ctx, ft_error *err);

/* tok_bpe.c: appends the ids of one pre-token; -1 when out of memory. */
int tok_bpe_encode(const ft_tokenizer *t, tok_bpe_work *w, const char *piece, size_t n,
                   tok_ids *out);
void tok_bpe_work_free(tok_bpe_work *w);

/* tok_config.c: normalizer, pre_tokenizer, decoder, post_processor, BOS/EOS. */
struct json_t;
int tok_config_pipeline(ft_tokenizer *t, struct json_t *root, ft_error *err);
/* path may be NULL (buffer load): then only tokenizer.json is consulted. */
int tok_config_bos_eos(ft_tokenizer *t, struct json_t *root, const char *path, ft_error *err);

#endif
