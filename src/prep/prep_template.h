/* Prompt templates: turn one input record into a list of pieces (text or special-token ids),
 * each marked as a training target or not. The exact strings are in doc/prep.md.
 *
 * Why pieces and not one rendered string: the template's own special tokens (BOS,
 * <|start_header_id|>, ...) must become their ids, while dataset text must never be parsed for
 * special tokens (a user writing "<|eot_id|>" gets the plain-text tokens). And the response is
 * tokenized apart from the prompt (reference-formats §4.2, "robust variant") so that no BPE
 * merge crosses the prompt/response boundary and the loss mask is exact. Each text piece is
 * encoded on its own with special-token parsing off; special pieces are ids.
 *
 * Ownership: a prep_template owns its custom prompt strings (prep_template_free). A prep_render
 * owns its buffers and is reused across records (prep_render_reset keeps the memory).
 */
#ifndef FT_PREP_TEMPLATE_H
#define FT_PREP_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

typedef enum prep_format {
    PREP_FORMAT_AUTO = 0,
    PREP_FORMAT_ALPACA, /* instruction, input (optional), output */
    PREP_FORMAT_DOLLY,  /* instruction, context (optional), response */
    PREP_FORMAT_SAMSUM, /* dialogue, summary */
    PREP_FORMAT_CHAT,   /* messages: [{role, content}, ...], or ShareGPT's conversations */
    PREP_FORMAT_TEXT,   /* text (JSON) or raw text */
} prep_format;

typedef enum prep_template_kind {
    PREP_TPL_AUTO = 0,
    PREP_TPL_ALPACA,       /* Alpaca PROMPT_DICT (or --prompt-template files) */
    PREP_TPL_LLAMA3_CHAT,  /* Llama 3 Instruct chat template */
    PREP_TPL_LLAMA31_CHAT, /* Llama 3.1 Instruct: adds the dated system block */
    PREP_TPL_LLAMA2_CHAT,  /* Llama 2 chat: <s>[INST] <<SYS>> ... [/INST] answer </s> */
    PREP_TPL_TEXT,         /* plain text: BOS text EOS, all targets */
    PREP_TPL_CHATML,       /* ChatML <|im_start|>role\n...<|im_end|>\n, no default system */
    PREP_TPL_QWEN2_CHAT,   /* ChatML + default system "You are a helpful assistant." */
    PREP_TPL_QWEN25_CHAT,  /* ChatML + Qwen2.5's default system ("You are Qwen, ...") */
    PREP_TPL_MISTRAL_CHAT, /* Mistral v0.3: <s>[INST] ...[/INST] answer</s> */
    PREP_TPL_QWEN3_CHAT,   /* ChatML + Qwen3's <think> blocks (reasoning kept after the last
                            * user turn, stripped before it) */
    PREP_TPL_SMOLLM2_CHAT, /* ChatML + SmolLM2-Instruct's default system prompt */
} prep_template_kind;

/* One piece: special >= 0 is a token id; otherwise text [off, off+len) of the render's text. */
typedef struct prep_piece {
    size_t off, len;
    int32_t special;
    bool target;
} prep_piece;

typedef struct prep_render {
    prep_piece *pieces;
    size_t n, cap;
    char *text;
    size_t len, text_cap;
} prep_render;

typedef struct prep_template {
    prep_format format;
    prep_template_kind kind;
    const ft_tokenizer *tok; /* borrowed */
    int32_t bos, eos;        /* -1: none */
    bool sentencepiece;      /* each separately encoded text gets a leading "▁" */
    int32_t start_header, end_header, eot; /* Llama 3 chat specials */
    int32_t im_start, im_end;              /* ChatML specials */
    int32_t inst, inst_end;                /* Mistral v0.3 [INST] [/INST] specials */
    char *prompt_input, *prompt_no_input;  /* alpaca-style prompt strings (owned) */
    char name[64];                         /* the dataset file's `template` attribute */
} prep_template;

/* format must not be AUTO (detect it first). kind AUTO picks the default for the format and
 * tokenizer. prompt_file / prompt_file_no_input: custom alpaca-style templates (NULL: the
 * built-in Alpaca strings; a NULL no-input file reuses prompt_file). eos_token: the token
 * string that ends each example (NULL: the template's default, see doc/prep.md). */
int prep_template_init(prep_template *t, prep_format format, prep_template_kind kind,
                       const char *prompt_file, const char *prompt_file_no_input,
                       const ft_tokenizer *tok, const char *eos_token, ft_error *err);
void prep_template_free(prep_template *t);

/* Renders a JSON record of the template's format. Returns 0, or -1 with err holding the
 * problem (no file:line prefix; the caller adds it): missing field, wrong type, bad roles. */
int prep_render_json(const prep_template *t, json_t *obj, prep_render *r, ft_error *err);
/* Renders a raw text document (PREP_TPL_TEXT). */
int prep_render_text(const prep_template *t, const char *s, size_t n, prep_render *r,
                     ft_error *err);

void prep_render_reset(prep_render *r);
void prep_render_free(prep_render *r);

/* The format a record looks like (AUTO when none): messages or conversations > instruction+output >
 * instruction+response > dialogue+summary > text. */
prep_format prep_detect_format(json_t *obj);
const char *prep_format_name(prep_format f);
int prep_format_parse(const char *s, prep_format *f);
int prep_template_parse(const char *s, prep_template_kind *k);

/* The built-in Alpaca prompts (stanford_alpaca PROMPT_DICT plus "\n", see doc/prep.md). */
extern const char prep_alpaca_prompt_input[];
extern const char prep_alpaca_prompt_no_input[];

#endif
