#include "generate/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_utf8.h"

/* ---------------------------------------------------------------- templates */

static const char *const template_names[] = { "none", "alpaca", "llama3-chat", "llama3.1-chat",
                                               "llama2-chat", "chatml", "qwen2-chat",
                                               "qwen2.5-chat", "mistral-chat", "qwen3-chat",
                                               "qwen3-chat-no-thinking", "smollm2-chat" };

int ft_template_parse(const char *name, ft_template *t)
{
    if (strcmp(name, "llama31-chat") == 0) { /* the former spelling */
        *t = FT_TEMPLATE_LLAMA31_CHAT;
        return 0;
    }
    for (int i = 0; i < (int)(sizeof template_names / sizeof template_names[0]); i++)
        if (strcmp(name, template_names[i]) == 0) {
            *t = (ft_template)i;
            return 0;
        }
    return -1;
}

const char *ft_template_name(ft_template t) { return template_names[t]; }

static const char alpaca_input[] =
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request.\n\n### Instruction:\n";
static const char alpaca_no_input[] =
    "Below is an instruction that describes a task. Write a response that appropriately "
    "completes the request.\n\n### Instruction:\n";

static const char llama31_system_head[] =
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

/* ---------------------------------------------------------------- codec */

void ft_text_codec_tokenizer(ft_text_codec *c, const ft_tokenizer *tok, int32_t model_bos,
                             int32_t model_eos)
{
    int32_t bos = ft_tokenizer_bos_id(tok), eos = ft_tokenizer_eos_id(tok);
    *c = (ft_text_codec){ .tok = tok, .bos = bos >= 0 ? bos : model_bos,
                          .eos = eos >= 0 ? eos : model_eos, .add_bos = true };
}

void ft_text_codec_bytes(ft_text_codec *c)
{
    *c = (ft_text_codec){ .byte_tokens = true, .bos = FT_BYTE_BOS, .eos = FT_BYTE_EOS,
                          .add_bos = true };
}

/* A growing id list. */
typedef struct idbuf {
    int32_t *v;
    int n, cap;
} idbuf;

static int push(idbuf *b, int32_t id, ft_error *err)
{
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        int32_t *v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v)
            return ft_fail(err, "out of host memory");
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = id;
    return 0;
}

/* Appends the ids of len bytes of text; special-token names are plain text here. */
static int push_text(const ft_text_codec *c, idbuf *b, const char *text, size_t len,
                     ft_error *err)
{
    if (c->byte_tokens) {
        for (size_t i = 0; i < len; i++)
            if (push(b, (unsigned char)text[i], err))
                return -1;
        return 0;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (len > 0 && ft_tokenizer_encode(c->tok, text, len, false, &ids, &n, err))
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = push(b, ids[i], err);
    free(ids);
    return rc;
}

static int push_str(const ft_text_codec *c, idbuf *b, const char *s, ft_error *err)
{
    return push_text(c, b, s, strlen(s), err);
}

/* The id of a special token the template needs. */
static int push_special(const ft_text_codec *c, idbuf *b, const char *name, ft_template t,
                        ft_error *err)
{
    int32_t id = ft_tokenizer_token_id(c->tok, name);
    if (id < 0)
        return ft_fail(err, "--template %s needs the token %s, which the tokenizer does not "
                       "have (use the tokenizer of the model the template is for)",
                       ft_template_name(t), name);
    return push(b, id, err);
}

/* Jinja's |trim: whitespace off both ends. */
static void trimmed(const char *s, const char **start, size_t *len)
{
    const char *ws = " \t\n\r\f\v";
    size_t n = strlen(s);
    while (n > 0 && strchr(ws, *s))
        s++, n--;
    while (n > 0 && strchr(ws, s[n - 1]))
        n--;
    *start = s;
    *len = n;
}

/* Llama 3 message: <|start_header_id|>role<|end_header_id|> "\n\n" [head] trim(content)
 * <|eot_id|>; content NULL: the open assistant header that the completion follows. */
static int llama3_turn(const ft_text_codec *c, idbuf *b, ft_template t, const char *role,
                       const char *head, const char *content, ft_error *err)
{
    if (push_special(c, b, "<|start_header_id|>", t, err) || push_str(c, b, role, err) ||
        push_special(c, b, "<|end_header_id|>", t, err) || push_str(c, b, "\n\n", err))
        return -1;
    if (!content)
        return 0;
    const char *s;
    size_t n;
    trimmed(content, &s, &n);
    return (head && push_str(c, b, head, err)) || push_text(c, b, s, n, err) ||
           push_special(c, b, "<|eot_id|>", t, err);
}

static int encode_llama3(const ft_text_codec *c, idbuf *b, ft_template t, const char *system,
                         const char *prompt, ft_error *err)
{
    if (push_special(c, b, "<|begin_of_text|>", t, err))
        return -1;
    if (t == FT_TEMPLATE_LLAMA31_CHAT) /* 3.1 always opens with the dated system block */
        return llama3_turn(c, b, t, "system", llama31_system_head, system ? system : "", err) ||
               llama3_turn(c, b, t, "user", NULL, prompt, err) ||
               llama3_turn(c, b, t, "assistant", NULL, NULL, err);
    return (system && llama3_turn(c, b, t, "system", NULL, system, err)) ||
           llama3_turn(c, b, t, "user", NULL, prompt, err) ||
           llama3_turn(c, b, t, "assistant", NULL, NULL, err);
}

/* ChatML as the Qwen2/2.5/3 chat_templates render it with add_generation_prompt: [system turn]
 * <|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n; contents are not trimmed.
 * "role\n" + content is encoded as one text, as HF encodes the text between two specials;
 * content NULL is the open turn, followed by tail (Qwen3's empty think block) in that text. */
static int chatml_turn(const ft_text_codec *c, idbuf *b, ft_template t, const char *role,
                       const char *content, const char *tail, ft_error *err)
{
    const char *body = content ? content : tail ? tail : "";
    size_t rn = strlen(role), cn = strlen(body);
    char *s = malloc(rn + 1 + cn + 1);
    if (!s)
        return ft_fail(err, "out of host memory");
    memcpy(s, role, rn);
    s[rn] = '\n';
    memcpy(s + rn + 1, body, cn);
    int rc = push_special(c, b, "<|im_start|>", t, err) || push_text(c, b, s, rn + 1 + cn, err) ||
             (content && (push_special(c, b, "<|im_end|>", t, err) || push_str(c, b, "\n", err)));
    free(s);
    return rc ? -1 : 0;
}

static int encode_chatml(const ft_text_codec *c, idbuf *b, ft_template t, const char *system,
                         const char *prompt, ft_error *err)
{
    if (!system && t == FT_TEMPLATE_QWEN2_CHAT)
        system = "You are a helpful assistant.";
    if (!system && t == FT_TEMPLATE_QWEN25_CHAT)
        system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
    if (!system && t == FT_TEMPLATE_SMOLLM2_CHAT)
        system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
    const char *tail = t == FT_TEMPLATE_QWEN3_CHAT_NO_THINKING ? "<think>\n\n</think>\n\n" : NULL;
    return (system && chatml_turn(c, b, t, "system", system, NULL, err)) ||
           chatml_turn(c, b, t, "user", prompt, NULL, err) ||
           chatml_turn(c, b, t, "assistant", NULL, tail, err);
}

/* Mistral-7B-Instruct-v0.3: <s> [INST] " " + [system + "\n\n"] + prompt [/INST] (no trim;
 * [INST]/[/INST] are special tokens, the text between them one piece as HF encodes it). */
static int encode_mistral(const ft_text_codec *c, idbuf *b, const char *system,
                          const char *prompt, ft_error *err)
{
    size_t sn = system ? strlen(system) + 2 : 0, pn = strlen(prompt);
    char *s = malloc(1 + sn + pn + 1);
    if (!s)
        return ft_fail(err, "out of host memory");
    s[0] = ' ';
    if (system) {
        memcpy(s + 1, system, sn - 2);
        memcpy(s + 1 + sn - 2, "\n\n", 2);
    }
    memcpy(s + 1 + sn, prompt, pn);
    int rc = push_special(c, b, "<s>", FT_TEMPLATE_MISTRAL_CHAT, err) ||
             push_special(c, b, "[INST]", FT_TEMPLATE_MISTRAL_CHAT, err) ||
             push_text(c, b, s, 1 + sn + pn, err) ||
             push_special(c, b, "[/INST]", FT_TEMPLATE_MISTRAL_CHAT, err);
    free(s);
    return rc ? -1 : 0;
}

/* <s> "[INST] " strip("<<SYS>>\n" system "\n<</SYS>>\n\n" prompt) " [/INST]" */
static int encode_llama2(const ft_text_codec *c, idbuf *b, const char *system, const char *prompt,
                         ft_error *err)
{
    if (push_special(c, b, "<s>", FT_TEMPLATE_LLAMA2_CHAT, err))
        return -1;
    const char *sys_open = "<<SYS>>\n", *sys_close = "\n<</SYS>>\n\n";
    const size_t sn = system ? strlen(system) : 0, pn = strlen(prompt);
    char *joined = malloc(strlen(sys_open) + sn + strlen(sys_close) + pn + 1);
    if (!joined)
        return ft_fail(err, "out of host memory");
    size_t n = 0;
    if (system) {
        memcpy(joined + n, sys_open, strlen(sys_open)), n += strlen(sys_open);
        memcpy(joined + n, system, sn), n += sn;
        memcpy(joined + n, sys_close, strlen(sys_close)), n += strlen(sys_close);
    }
    memcpy(joined + n, prompt, pn), n += pn;
    joined[n] = '\0';
    const char *s;
    size_t len;
    trimmed(joined, &s, &len);
    int rc = push_str(c, b, "[INST] ", err) || push_text(c, b, s, len, err) ||
             push_str(c, b, " [/INST]", err);
    free(joined);
    return rc;
}

static int encode_alpaca(const ft_text_codec *c, idbuf *b, const char *prompt, const char *input,
                         ft_error *err)
{
    const int with_input = input && input[0];
    return push_str(c, b, with_input ? alpaca_input : alpaca_no_input, err) ||
           push_str(c, b, prompt, err) ||
           (with_input && (push_str(c, b, "\n\n### Input:\n", err) || push_str(c, b, input, err))) ||
           push_str(c, b, "\n\n### Response:\n", err);
}

int ft_prompt_encode(const ft_text_codec *c, ft_template t, const char *system,
                     const char *prompt, const char *input, int32_t **ids, int *n_ids,
                     ft_error *err)
{
    *ids = NULL;
    *n_ids = 0;
    if (t != FT_TEMPLATE_NONE && t != FT_TEMPLATE_ALPACA && !c->tok)
        return ft_fail(err, "--template %s needs a tokenizer (--tokenizer tokenizer.json)",
                       ft_template_name(t));
    idbuf b = { 0 };
    int rc = 0;
    if ((t == FT_TEMPLATE_NONE || t == FT_TEMPLATE_ALPACA) && c->add_bos && c->bos >= 0)
        rc = push(&b, c->bos, err);
    if (!rc) {
        switch (t) {
        case FT_TEMPLATE_NONE: rc = push_str(c, &b, prompt, err); break;
        case FT_TEMPLATE_ALPACA: rc = encode_alpaca(c, &b, prompt, input, err); break;
        case FT_TEMPLATE_LLAMA3_CHAT:
        case FT_TEMPLATE_LLAMA31_CHAT: rc = encode_llama3(c, &b, t, system, prompt, err); break;
        case FT_TEMPLATE_LLAMA2_CHAT: rc = encode_llama2(c, &b, system, prompt, err); break;
        case FT_TEMPLATE_CHATML:
        case FT_TEMPLATE_QWEN2_CHAT:
        case FT_TEMPLATE_QWEN25_CHAT:
        case FT_TEMPLATE_QWEN3_CHAT:
        case FT_TEMPLATE_QWEN3_CHAT_NO_THINKING:
        case FT_TEMPLATE_SMOLLM2_CHAT:
            rc = encode_chatml(c, &b, t, system, prompt, err);
            break;
        case FT_TEMPLATE_MISTRAL_CHAT: rc = encode_mistral(c, &b, system, prompt, err); break;
        }
    }
    if (!rc && b.n == 0)
        rc = ft_fail(err, "the prompt is empty and there is no BOS token to start from");
    if (rc) {
        free(b.v);
        return -1;
    }
    *ids = b.v;
    *n_ids = b.n;
    return 0;
}

int ft_prompt_stop_ids(const ft_text_codec *c, ft_template t, int32_t *stops, int max)
{
    int n = 0;
    if (c->eos >= 0 && n < max)
        stops[n++] = c->eos;
    if ((t == FT_TEMPLATE_LLAMA3_CHAT || t == FT_TEMPLATE_LLAMA31_CHAT) && c->tok && n < max) {
        int32_t eot = ft_tokenizer_token_id(c->tok, "<|eot_id|>");
        if (eot >= 0 && eot != c->eos)
            stops[n++] = eot;
    }
    if ((t == FT_TEMPLATE_CHATML || t == FT_TEMPLATE_QWEN2_CHAT || t == FT_TEMPLATE_QWEN25_CHAT ||
         t == FT_TEMPLATE_QWEN3_CHAT || t == FT_TEMPLATE_QWEN3_CHAT_NO_THINKING ||
         t == FT_TEMPLATE_SMOLLM2_CHAT) &&
        c->tok && n < max) {
        int32_t end = ft_tokenizer_token_id(c->tok, "<|im_end|>"); /* Qwen's EOS is <|endoftext|> */
        if (end >= 0 && end != c->eos)
            stops[n++] = end;
    }
    return n;
}

int ft_completion_decode(const ft_text_codec *c, const int32_t *ids, int n, char **text,
                         size_t *len, ft_error *err)
{
    if (!c->byte_tokens)
        return ft_tokenizer_decode(c->tok, ids, (size_t)n, true, text, len, err);
    char *s = malloc((size_t)n + 1);
    if (!s)
        return ft_fail(err, "out of host memory");
    size_t k = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < 256)
            s[k++] = (char)ids[i];
    s[k] = '\0';
    *text = s;
    *len = k;
    return 0;
}

/* ---------------------------------------------------------------- UTF-8 */

char *ft_utf8_sanitize(const char *s, size_t len)
{
    char *out = malloc(3 * len + 1);
    if (!out)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k = 0;
    while (i < len) {
        uint32_t cp;
        int l = tok_utf8_next(u + i, len - i, &cp); /* < 0: not well-formed at i */
        if (l > 0) {
            memcpy(out + k, s + i, (size_t)l);
            k += (size_t)l;
            i += (size_t)l;
        } else {
            memcpy(out + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    out[k] = '\0';
    return out;
}
