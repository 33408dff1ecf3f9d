/* The alpaca-style prompts and the plain text template, the format dispatch
 * (prep_render_json), format and template names, and prep_template_init. The chat templates
 * are in prep_chat.c, the render buffer in prep_render.c. */
#include "prep/prep_template_internal.h"
#include "util/input_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stanford_alpaca PROMPT_DICT, exact, plus a final "\n" so that the response starts on its own
 * line (the original appends the output directly after "### Response:"). */
const char prep_alpaca_prompt_input[] =
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n";
const char prep_alpaca_prompt_no_input[] =
    "Below is an instruction that describes a task. Write a response that appropriately "
    "completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:\n";

static const char samsum_instruction[] = "Summarize this dialogue.";

/* ---- alpaca-style prompts ---- */

/* Emits a prompt template: {instruction} and {input} are replaced by the values (never scanned
 * for special tokens); a special token written in the template itself (e.g. "<|eot_id|>",
 * "<s>") becomes its id. Everything else is literal text. */
static int emit_prompt(const prep_template *t, prep_render *r, const char *tpl, const char *ins,
                       size_t ins_len, const char *inp, size_t inp_len, ft_error *err)
{
    size_t run = 0, i = 0;
    while (tpl[i]) {
        const char *val = NULL;
        size_t val_len = 0, skip = 0;
        int32_t special = -1;
        if (strncmp(tpl + i, "{instruction}", 13) == 0) {
            val = ins, val_len = ins_len, skip = 13;
        } else if (strncmp(tpl + i, "{input}", 7) == 0) {
            val = inp, val_len = inp_len, skip = 7;
        } else if (tpl[i] == '<') {
            const char *close = strchr(tpl + i, '>');
            if (close && close - (tpl + i) < 96) {
                char name[100];
                size_t k = (size_t)(close - (tpl + i)) + 1;
                memcpy(name, tpl + i, k);
                name[k] = 0;
                int32_t id = ft_tokenizer_token_id(t->tok, name);
                if (id >= 0 && ft_tokenizer_is_special(t->tok, id))
                    special = id, skip = k;
            }
        }
        if (!skip) {
            i++;
            continue;
        }
        if (prep_add_text(r, tpl + run, i - run, false, err))
            return -1;
        if (val ? prep_add_text(r, val, val_len, false, err)
                : prep_add_special(r, special, false, err))
            return -1;
        i += skip;
        run = i;
    }
    return prep_add_text(r, tpl + run, i - run, false, err);
}

/* A string member; absent is allowed (value "") when optional. */
static int get_str(json_t *obj, const char *key, bool optional, const char **s, size_t *n,
                   ft_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (!optional)
            return ft_fail(err, "missing field \"%s\"", key);
        *s = "", *n = 0;
        return 0;
    }
    if (!json_is_string(v))
        return ft_fail(err, "field \"%s\" is not a string", key);
    *s = json_string_value(v), *n = json_string_length(v);
    return 0;
}

static int render_instruction(const prep_template *t, const char *ins, size_t ins_len,
                              const char *inp, size_t inp_len, const char *out, size_t out_len,
                              prep_render *r, ft_error *err)
{
    const char *tpl = inp_len ? t->prompt_input : t->prompt_no_input;
    if (prep_add_special(r, t->bos, false, err) ||
        emit_prompt(t, r, tpl, ins, ins_len, inp, inp_len, err) ||
        prep_add_text(r, out, out_len, true, err) || prep_add_special(r, t->eos, true, err))
        return -1;
    return 0;
}

int prep_render_json(const prep_template *t, json_t *obj, prep_render *r, ft_error *err)
{
    prep_render_reset(r);
    const char *a, *b, *c;
    size_t an, bn, cn;
    switch (t->format) {
    case PREP_FORMAT_ALPACA:
        if (get_str(obj, "instruction", false, &a, &an, err) ||
            get_str(obj, "input", true, &b, &bn, err) || get_str(obj, "output", false, &c, &cn, err))
            return -1;
        return render_instruction(t, a, an, b, bn, c, cn, r, err);
    case PREP_FORMAT_DOLLY:
        if (get_str(obj, "instruction", false, &a, &an, err) ||
            get_str(obj, "context", true, &b, &bn, err) ||
            get_str(obj, "response", false, &c, &cn, err))
            return -1;
        return render_instruction(t, a, an, b, bn, c, cn, r, err);
    case PREP_FORMAT_SAMSUM:
        if (get_str(obj, "dialogue", false, &b, &bn, err) ||
            get_str(obj, "summary", false, &c, &cn, err))
            return -1;
        return render_instruction(t, samsum_instruction, strlen(samsum_instruction), b, bn, c, cn,
                                  r, err);
    case PREP_FORMAT_TEXT:
        if (get_str(obj, "text", false, &a, &an, err))
            return -1;
        return prep_render_text(t, a, an, r, err);
    case PREP_FORMAT_CHAT:
        return prep_render_chat(t, obj, r, err);
    case PREP_FORMAT_AUTO:
        break;
    }
    return ft_fail(err, "internal: format not resolved");
}

int prep_render_text(const prep_template *t, const char *s, size_t n, prep_render *r,
                     ft_error *err)
{
    prep_render_reset(r);
    if (n == 0)
        return ft_fail(err, "empty text");
    if (prep_add_special(r, t->bos, false, err) || prep_add_text(r, s, n, true, err) ||
        prep_add_special(r, t->eos, true, err))
        return -1;
    return 0;
}

/* ---- names, detection ---- */

prep_format prep_detect_format(json_t *obj)
{
    if (!json_is_object(obj))
        return PREP_FORMAT_AUTO;
#define HAS(k) (json_object_get(obj, k) != NULL)
    if (HAS("messages") || HAS("conversations")) /* ShareGPT's are chat records */
        return PREP_FORMAT_CHAT;
    if (HAS("instruction") && HAS("output"))
        return PREP_FORMAT_ALPACA;
    if (HAS("instruction") && HAS("response"))
        return PREP_FORMAT_DOLLY;
    if (HAS("dialogue") && HAS("summary"))
        return PREP_FORMAT_SAMSUM;
    if (HAS("text"))
        return PREP_FORMAT_TEXT;
#undef HAS
    return PREP_FORMAT_AUTO;
}

static const char *const format_names[] = { "auto", "alpaca", "dolly", "samsum", "chat", "text" };

const char *prep_format_name(prep_format f) { return format_names[f]; }

int prep_format_parse(const char *s, prep_format *f)
{
    if (strcmp(s, "sharegpt") == 0) { /* read as chat: prep_sharegpt.h */
        *f = PREP_FORMAT_CHAT;
        return 0;
    }
    for (int i = 0; i < (int)(sizeof format_names / sizeof *format_names); i++)
        if (strcmp(s, format_names[i]) == 0) {
            *f = (prep_format)i;
            return 0;
        }
    return -1;
}

int prep_template_parse(const char *s, prep_template_kind *k)
{
    static const struct {
        const char *name;
        prep_template_kind kind;
    } names[] = {
        { "auto", PREP_TPL_AUTO },
        { "alpaca", PREP_TPL_ALPACA },
        { "llama3-chat", PREP_TPL_LLAMA3_CHAT },
        { "chat-llama3", PREP_TPL_LLAMA3_CHAT },
        { "llama3.1-chat", PREP_TPL_LLAMA31_CHAT },
        { "chat-llama3.1", PREP_TPL_LLAMA31_CHAT },
        { "llama31-chat", PREP_TPL_LLAMA31_CHAT }, /* ftmpi-generate's former spelling */
        { "llama2-chat", PREP_TPL_LLAMA2_CHAT },
        { "chat-llama2", PREP_TPL_LLAMA2_CHAT },
        { "text", PREP_TPL_TEXT },
        { "chatml", PREP_TPL_CHATML },
        { "qwen2-chat", PREP_TPL_QWEN2_CHAT },
        { "qwen2.5-chat", PREP_TPL_QWEN25_CHAT },
        { "mistral-chat", PREP_TPL_MISTRAL_CHAT },
        { "qwen3-chat", PREP_TPL_QWEN3_CHAT },
        { "smollm2-chat", PREP_TPL_SMOLLM2_CHAT },
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(s, names[i].name) == 0) {
            *k = names[i].kind;
            return 0;
        }
    return -1;
}

/* ---- init ---- */

static int read_whole(const char *path, char **out, ft_error *err)
{
    char *buf;
    size_t len;
    if (ft_input_read(path, "a prompt template", FT_INPUT_MAX_SMALL, &buf, &len, err))
        return -1;
    if (strlen(buf) != len) {
        free(buf);
        return ft_fail(err, "%s: prompt template contains a NUL byte", path);
    }
    if (!strstr(buf, "{instruction}")) {
        free(buf);
        return ft_fail(err, "%s: prompt template has no {instruction} placeholder", path);
    }
    *out = buf;
    return 0;
}

static bool compatible(prep_format f, prep_template_kind k)
{
    switch (f) {
    case PREP_FORMAT_ALPACA:
    case PREP_FORMAT_DOLLY:
    case PREP_FORMAT_SAMSUM: return k == PREP_TPL_ALPACA;
    case PREP_FORMAT_CHAT:
        return k == PREP_TPL_LLAMA3_CHAT || k == PREP_TPL_LLAMA31_CHAT ||
               k == PREP_TPL_LLAMA2_CHAT || k == PREP_TPL_CHATML || k == PREP_TPL_QWEN2_CHAT ||
               k == PREP_TPL_QWEN25_CHAT || k == PREP_TPL_MISTRAL_CHAT || k == PREP_TPL_QWEN3_CHAT ||
               k == PREP_TPL_SMOLLM2_CHAT;
    case PREP_FORMAT_TEXT: return k == PREP_TPL_TEXT;
    case PREP_FORMAT_AUTO: break;
    }
    return false;
}

static int32_t special_id(const ft_tokenizer *tok, const char *name)
{
    int32_t id = ft_tokenizer_token_id(tok, name);
    return id >= 0 && ft_tokenizer_is_special(tok, id) ? id : -1;
}

int prep_template_init(prep_template *t, prep_format format, prep_template_kind kind,
                       const char *prompt_file, const char *prompt_file_no_input,
                       const ft_tokenizer *tok, const char *eos_token, ft_error *err)
{
    memset(t, 0, sizeof *t);
    t->tok = tok;
    t->format = format;
    t->sentencepiece = strcmp(ft_tokenizer_kind(tok), "sentencepiece_bpe") == 0;
    t->im_start = t->im_end = -1;
    bool has_chatml = special_id(tok, "<|im_start|>") >= 0 && special_id(tok, "<|im_end|>") >= 0;
    if (kind == PREP_TPL_AUTO) {
        /* A tokenizer with the ChatML specials and without Llama 3's header tokens is a
         * ChatML model (Qwen, SmolLM); the plain ChatML layout adds no system turn. */
        if (format == PREP_FORMAT_CHAT && has_chatml && special_id(tok, "<|start_header_id|>") < 0)
            kind = PREP_TPL_CHATML;
        else if (format == PREP_FORMAT_CHAT)
            kind = t->sentencepiece ? PREP_TPL_LLAMA2_CHAT : PREP_TPL_LLAMA3_CHAT;
        else if (format == PREP_FORMAT_TEXT)
            kind = PREP_TPL_TEXT;
        else
            kind = PREP_TPL_ALPACA;
    }
    t->kind = kind;
    if (!compatible(format, kind))
        return ft_fail(err, "template does not fit %s records (alpaca/dolly/samsum: alpaca; "
                       "chat: llama3-chat, llama3.1-chat, llama2-chat, chatml, qwen2-chat, "
                       "qwen2.5-chat, qwen3-chat, smollm2-chat, mistral-chat; text: text)",
                       prep_format_name(format));
    if ((prompt_file || prompt_file_no_input) && kind != PREP_TPL_ALPACA)
        return ft_fail(err, "--prompt-template only applies to alpaca, dolly and samsum records");

    t->bos = ft_tokenizer_bos_id(tok);
    t->start_header = special_id(tok, "<|start_header_id|>");
    t->end_header = special_id(tok, "<|end_header_id|>");
    t->eot = special_id(tok, "<|eot_id|>");
    bool llama3 = kind == PREP_TPL_LLAMA3_CHAT || kind == PREP_TPL_LLAMA31_CHAT;
    if (llama3 && (t->start_header < 0 || t->end_header < 0 || t->eot < 0))
        return ft_fail(err, "the Llama 3 chat template needs <|start_header_id|>, "
                       "<|end_header_id|> and <|eot_id|> special tokens; this tokenizer lacks "
                       "them (use --template llama2-chat for a Llama 2 tokenizer)");
    bool chatml = kind == PREP_TPL_CHATML || kind == PREP_TPL_QWEN2_CHAT ||
                  kind == PREP_TPL_QWEN25_CHAT || kind == PREP_TPL_QWEN3_CHAT ||
                  kind == PREP_TPL_SMOLLM2_CHAT;
    if (chatml && !has_chatml)
        return ft_fail(err, "the ChatML templates need <|im_start|> and <|im_end|> special "
                       "tokens; this tokenizer lacks them (name another template with --template)");
    if (chatml) {
        t->im_start = special_id(tok, "<|im_start|>");
        t->im_end = special_id(tok, "<|im_end|>");
        t->bos = -1; /* the Qwen/ChatML templates put no BOS in front */
    }
    t->inst = special_id(tok, "[INST]");
    t->inst_end = special_id(tok, "[/INST]");
    if (kind == PREP_TPL_MISTRAL_CHAT && (t->inst < 0 || t->inst_end < 0))
        return ft_fail(err, "the mistral-chat template (Mistral v0.3) needs [INST] and [/INST] "
                       "special tokens; this tokenizer lacks them (name another template with "
                       "--template)");
    if (eos_token) {
        t->eos = ft_tokenizer_token_id(tok, eos_token);
        if (t->eos < 0)
            return ft_fail(err, "--eos %s: no such token in the tokenizer", eos_token);
    } else if (llama3) {
        t->eos = t->eot;
    } else if (chatml) {
        t->eos = t->im_end;
    } else if (kind == PREP_TPL_LLAMA2_CHAT || kind == PREP_TPL_MISTRAL_CHAT) {
        t->eos = ft_tokenizer_eos_id(tok);
    } else {
        t->eos = special_id(tok, "<|end_of_text|>");
        if (t->eos < 0)
            t->eos = ft_tokenizer_eos_id(tok);
    }
    if (t->eos < 0)
        return ft_fail(err, "the tokenizer names no EOS token; pass --eos TOKEN");

    static const char *const attr[] = { "", "alpaca", "chat-llama3", "chat-llama3.1",
                                        "chat-llama2", "text", "chat-chatml", "chat-qwen2",
                                        "chat-qwen2.5", "chat-mistral", "chat-qwen3",
                                        "chat-smollm2" };
    snprintf(t->name, sizeof t->name, "%s%s", attr[kind],
             prompt_file || prompt_file_no_input ? "-custom" : "");
    if (kind == PREP_TPL_ALPACA) {
        const char *fi = prompt_file, *fn = prompt_file_no_input ? prompt_file_no_input : prompt_file;
        if (fi ? read_whole(fi, &t->prompt_input, err) : !(t->prompt_input = strdup(prep_alpaca_prompt_input)))
            goto fail;
        if (fn ? read_whole(fn, &t->prompt_no_input, err)
               : !(t->prompt_no_input = strdup(prep_alpaca_prompt_no_input)))
            goto fail;
    }
    return 0;
fail:
    if (!err || !err->msg[0])
        prep_oom(err);
    prep_template_free(t);
    return -1;
}

void prep_template_free(prep_template *t)
{
    free(t->prompt_input);
    free(t->prompt_no_input);
    t->prompt_input = t->prompt_no_input = NULL;
}
