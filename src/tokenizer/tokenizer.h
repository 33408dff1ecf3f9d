/* Tokenizer: reads a Hugging Face `tokenizer.json` (BPE model) and encodes/decodes
 * exactly like the HF `tokenizers` library for the layouts ftmpi uses:
 *   - byte-level BPE (Llama 3 / 3.1: regex Split + ByteLevel, ignore_merges), kind "byte_level_bpe";
 *   - SentencePiece-style BPE (Llama 2 legacy: Prepend/Replace "▁" normalizer, byte_fallback,
 *     fuse_unk), kind "sentencepiece_bpe".
 * Anything outside the supported subset of tokenizer.json is rejected at load time with one
 * line naming the file and the JSON path, never silently approximated. See doc/tokenizer.md.
 *
 * Ownership: ft_tokenizer_load() returns a tokenizer the caller frees with ft_tokenizer_free().
 * Encode/decode allocate their result with malloc(); the caller frees it with free().
 * Thread safety: a loaded tokenizer is immutable; any number of threads may encode/decode with
 * it at once. An ft_tok_scratch is per-thread working memory (one thread at a time).
 *
 * Text is UTF-8. Bytes that are not part of a well-formed UTF-8 sequence never make encode
 * fail: each such byte is encoded on its own, as its byte-level token (byte-level models) or
 * its <0xXX> byte-fallback token (SentencePiece models), so encode never loses input bytes.
 * Decode is HF-exact and therefore lossy on purpose for ids that do not spell valid UTF-8:
 * byte-level output goes through UTF-8 "maximal subpart" replacement (U+FFFD), a run of
 * <0xXX> tokens that is not valid UTF-8 becomes one U+FFFD per byte. The output of
 * ft_tokenizer_decode() is therefore always valid UTF-8.
 */
#ifndef FT_TOKENIZER_TOKENIZER_H
#define FT_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct ft_tokenizer ft_tokenizer;

/* Per-thread working memory for encoding (regex match state, BPE buffers, a cache of recent
 * pre-tokens). Optional: ft_tokenizer_encode() makes a temporary one; reuse one across calls
 * when encoding many texts. A scratch is bound to the tokenizer it was made for and must be
 * freed before that tokenizer. */
typedef struct ft_tok_scratch ft_tok_scratch;

/* Loads `path` (a tokenizer.json). BOS/EOS come from a sibling tokenizer_config.json when
 * present (`bos_token`/`eos_token`, string or {"content": ...}), otherwise from the
 * post_processor template (the special token before $A is BOS, one after $A is EOS), otherwise
 * from well-known names (<|begin_of_text|>/<|end_of_text|>, <s>/</s>). */
int ft_tokenizer_load(const char *path, ft_tokenizer **out, ft_error *err);

/* Same from a buffer holding the JSON text; `name` is used in error messages and no sibling
 * tokenizer_config.json is read. */
int ft_tokenizer_load_buffer(const char *json, size_t len, const char *name, ft_tokenizer **out,
                             ft_error *err);

void ft_tokenizer_free(ft_tokenizer *t);

/* Encodes `len` bytes of `text` (need not be NUL-terminated; may contain NUL bytes).
 * allow_special: true = added tokens written in the text (e.g. "<|eot_id|>") become their ids,
 * as HF does by default; false = special tokens are ordinary text (HF
 * `encode_special_tokens = True`), use this for untrusted dataset text. Non-special added
 * tokens match in both modes (there are none in the Llama tokenizers).
 * No BOS/EOS is added (= HF `add_special_tokens=False`). *ids is malloc'd (NULL when
 * *n_ids == 0); the caller frees it. */
int ft_tokenizer_encode(const ft_tokenizer *t, const char *text, size_t len, bool allow_special,
                        int32_t **ids, size_t *n_ids, ft_error *err);

ft_tok_scratch *ft_tok_scratch_new(const ft_tokenizer *t); /* NULL when out of memory */
void ft_tok_scratch_free(ft_tok_scratch *s);
int ft_tokenizer_encode_with(const ft_tokenizer *t, ft_tok_scratch *s, const char *text, size_t len,
                             bool allow_special, int32_t **ids, size_t *n_ids, ft_error *err);

/* Decodes ids to UTF-8 text like HF `decode(ids, skip_special_tokens)`. *text is malloc'd and
 * NUL-terminated (the NUL is not counted in *len; the text may itself contain NULs); the caller
 * frees it. Fails on an id outside [0, vocab_size) or on a hole in the id space. */
int ft_tokenizer_decode(const ft_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                        char **text, size_t *len, ft_error *err);

/* The id of a token written as in tokenizer.json ("Ġthe", "▁the", "<|eot_id|>"), added tokens
 * first as in HF token_to_id(); -1 if absent. */
int32_t ft_tokenizer_token_id(const ft_tokenizer *t, const char *token);
/* The token string of an id as HF id_to_token() gives it (borrowed, valid while t lives);
 * NULL if out of range. */
const char *ft_tokenizer_token(const ft_tokenizer *t, int32_t id);
bool ft_tokenizer_is_special(const ft_tokenizer *t, int32_t id);

int32_t ft_tokenizer_bos_id(const ft_tokenizer *t); /* -1 if unknown */
int32_t ft_tokenizer_eos_id(const ft_tokenizer *t); /* -1 if unknown */
/* tokenizer_config.json's pad_token; -1 when it names none */
int32_t ft_tokenizer_pad_id(const ft_tokenizer *t);
/* Largest id + 1, added tokens included (Llama 3: 128256, Llama 2: 32000). */
int ft_tokenizer_vocab_size(const ft_tokenizer *t);
/* "byte_level_bpe" or "sentencepiece_bpe" (static string). */
const char *ft_tokenizer_kind(const ft_tokenizer *t);
/* FNV-1a 64 of the tokenizer.json bytes: identifies the exact file in dataset attributes. */
uint64_t ft_tokenizer_hash(const ft_tokenizer *t);

#endif
