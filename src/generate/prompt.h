/* Prompts in and completions out: prompt templates, and the text <-> token id codec
 * (a Hugging Face tokenizer, or the byte tokens of ftmpi-gendata's synthetic models:
 * ids 0..255 are bytes, BOS 256, EOS 257, PAD 258).
 *
 * Templates: exactly the prompt side of what ftmpi-prep renders for training (src/prep,
 * doc/prep.md), piece for piece, so that a fine-tuned model sees at generation the ids it
 * was trained on. Each text piece is encoded on its own, special tokens are inserted by
 * id, and the user's text is encoded with special tokens treated as text, so a prompt
 * cannot forge them:
 *   none          BOS, prompt
 *   alpaca        BOS, the Stanford Alpaca PROMPT_DICT text (the "### Input:" form when an
 *                 input is given) ending "### Response:\n" (ftmpi-prep's final newline)
 *   llama3-chat   <|begin_of_text|> [system message] user message, then the open
 *                 assistant header <|start_header_id|>assistant<|end_header_id|> "\n\n";
 *                 a message is <|start_header_id|> role <|end_header_id|> "\n\n"
 *                 trim(content) <|eot_id|>; also stops at <|eot_id|>
 *   llama3.1-chat the same, always opening with the Llama 3.1 dated system block
 *                 ("Cutting Knowledge Date: ..." then the system message)
 *   llama2-chat   <s> "[INST] " trim([<<SYS>>\n{system}\n<</SYS>>\n\n]{prompt}) " [/INST]"
 *   qwen3-chat    ChatML without a default system turn, the open turn
 *                 <|im_start|> "assistant\n" (transformers' enable_thinking default: the model
 *                 opens its own <think> block); qwen3-chat-no-thinking adds the empty block
 *                 "<think>\n\n</think>\n\n" (enable_thinking=False)
 */
#ifndef FT_GENERATE_PROMPT_H
#define FT_GENERATE_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

enum { FT_BYTE_BOS = 256, FT_BYTE_EOS = 257, FT_BYTE_PAD = 258, FT_BYTE_VOCAB = 259 };

typedef enum ft_template {
    FT_TEMPLATE_NONE = 0,
    FT_TEMPLATE_ALPACA,
    FT_TEMPLATE_LLAMA3_CHAT,
    FT_TEMPLATE_LLAMA31_CHAT,
    FT_TEMPLATE_LLAMA2_CHAT,
    FT_TEMPLATE_CHATML,       /* <|im_start|>role\n...<|im_end|>\n, no default system */
    FT_TEMPLATE_QWEN2_CHAT,   /* ChatML + "You are a helpful assistant." when no system */
    FT_TEMPLATE_QWEN25_CHAT,  /* ChatML + Qwen2.5's default system prompt */
    FT_TEMPLATE_MISTRAL_CHAT, /* Mistral v0.3: <s>[INST] [system\n\n]prompt[/INST] */
    FT_TEMPLATE_QWEN3_CHAT,   /* ChatML, Qwen3 with thinking enabled (no default system) */
    FT_TEMPLATE_QWEN3_CHAT_NO_THINKING, /* the same + an empty <think></think> block */
    FT_TEMPLATE_SMOLLM2_CHAT, /* ChatML + SmolLM2-Instruct's default system prompt */
} ft_template;

/* "none" | "alpaca" | "llama3-chat" | "llama3.1-chat" (also "llama31-chat", the former
 * spelling) | "llama2-chat" | "chatml" | "qwen2-chat" |
 * "qwen2.5-chat" | "mistral-chat" | "qwen3-chat" | "qwen3-chat-no-thinking" | "smollm2-chat";
 * -1 if unknown. */
int ft_template_parse(const char *name, ft_template *t);
const char *ft_template_name(ft_template t);

typedef struct ft_text_codec {
    const ft_tokenizer *tok; /* borrowed; NULL with byte tokens */
    bool byte_tokens;
    int32_t bos, eos;        /* -1: none */
    bool add_bos;            /* templates none/alpaca: start with BOS when there is one */
} ft_text_codec;

/* A codec over a tokenizer; BOS/EOS from the tokenizer, else from the model config. */
void ft_text_codec_tokenizer(ft_text_codec *c, const ft_tokenizer *tok, int32_t model_bos,
                             int32_t model_eos);
void ft_text_codec_bytes(ft_text_codec *c);

/* The prompt's token ids after applying the template. system (chat templates) and
 * input (alpaca) may be NULL. *ids is malloc'd. */
int ft_prompt_encode(const ft_text_codec *c, ft_template t, const char *system,
                     const char *prompt, const char *input, int32_t **ids, int *n_ids,
                     ft_error *err);

/* Ids that end a completion: EOS and the template's end-of-turn token; at most max,
 * returns how many. */
int ft_prompt_stop_ids(const ft_text_codec *c, ft_template t, int32_t *stops, int max);

/* Text of generated ids (special tokens skipped; byte tokens: ids >= 256 skipped).
 * *text is malloc'd and NUL-terminated; *len excludes the NUL. */
int ft_completion_decode(const ft_text_codec *c, const int32_t *ids, int n, char **text,
                         size_t *len, ft_error *err);

/* Copies s[0..len) to a malloc'd NUL-terminated string that is valid UTF-8, each byte
 * of an invalid sequence replaced by U+FFFD (for JSON output of byte-token models). */
char *ft_utf8_sanitize(const char *s, size_t len);

#endif
