#include "prep/prep_template.h"
#include "prep/prep_sharegpt.h"
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
static const char llama31_system_head[] =
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

/* ---- render buffer ---- */

void prep_render_reset(prep_render *r) { r->n = r->len = 0; }

void prep_render_free(prep_render *r)
{
    free(r->pieces);
    free(r->text);
    memset(r, 0, sizeof *r);
}

static int oom(ft_error *err) { return ft_fail(err, "out of host memory"); }

static int push_piece(prep_render *r, prep_piece p, ft_error *err)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        prep_piece *np = realloc(r->pieces, cap * sizeof *np);
        if (!np)
            return oom(err);
        r->pieces = np, r->cap = cap;
    }
    r->pieces[r->n++] = p;
    return 0;
}

static int add_special(prep_render *r, int32_t id, bool target, ft_error *err)
{
    if (id < 0)
        return 0;
    return push_piece(r, (prep_piece){ 0, 0, id, target }, err);
}

/* Appends text to the last piece when it is text with the same target flag (one encode call,
 * as HF encodes the text between two special tokens in one go), else starts a new piece. */
static int add_text(prep_render *r, const char *s, size_t n, bool target, ft_error *err)
{
    if (n == 0)
        return 0;
    if (r->len + n > r->text_cap) {
        size_t cap = r->text_cap ? r->text_cap : 256;
        while (cap < r->len + n)
            cap *= 2;
        char *nt = realloc(r->text, cap);
        if (!nt)
            return oom(err);
        r->text = nt, r->text_cap = cap;
    }
    memcpy(r->text + r->len, s, n);
    prep_piece *last = r->n ? &r->pieces[r->n - 1] : NULL;
    if (last && last->special < 0 && last->target == target && last->off + last->len == r->len) {
        last->len += n;
    } else if (push_piece(r, (prep_piece){ r->len, n, -1, target }, err)) {
        return -1;
    }
    r->len += n;
    return 0;
}

static int add_cstr(prep_render *r, const char *s, bool target, ft_error *err)
{
    return add_text(r, s, strlen(s), target, err);
}

/* ---- Python str.strip() (Jinja `trim`): Unicode whitespace at both ends ---- */

/* Length of the whitespace character starting at s[0..n), 0 if none. */
static size_t ws_at(const unsigned char *s, size_t n)
{
    if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0d) || (s[0] >= 0x1c && s[0] <= 0x20)))
        return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2;
    if (n >= 3) {
        if (s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) /* U+1680 */
            return 3;
        if (s[0] == 0xe2 && s[1] == 0x80 &&
            (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf)) /* U+2000-200A... */
            return s[2] >= 0x80 ? 3 : 0;
        if (s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) /* U+205F */
            return 3;
        if (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80) /* U+3000 */
            return 3;
    }
    return 0;
}

/* Length of the whitespace character ending at s[n-1], 0 if none. */
static size_t ws_before(const unsigned char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (ws_at(s + n - k, k) == k)
            return k;
    return 0;
}

static void strip(const char **s, size_t *n)
{
    const unsigned char *p = (const unsigned char *)*s;
    size_t len = *n, k;
    while (len && (k = ws_at(p, len)) > 0)
        p += k, len -= k;
    while (len && (k = ws_before(p, len)) > 0)
        len -= k;
    *s = (const char *)p, *n = len;
}

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
        if (add_text(r, tpl + run, i - run, false, err))
            return -1;
        if (val ? add_text(r, val, val_len, false, err) : add_special(r, special, false, err))
            return -1;
        i += skip;
        run = i;
    }
    return add_text(r, tpl + run, i - run, false, err);
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
    if (add_special(r, t->bos, false, err) ||
        emit_prompt(t, r, tpl, ins, ins_len, inp, inp_len, err) ||
        add_text(r, out, out_len, true, err) || add_special(r, t->eos, true, err))
        return -1;
    return 0;
}

/* ---- chat ---- */

typedef struct chat_msg {
    const char *role, *content;
    size_t content_len;
    const char *reasoning; /* "reasoning_content" (Qwen3), NULL when absent or null */
    size_t reasoning_len;
} chat_msg;

/* Validates messages: a non-empty array of {role, content} strings with at least one
 * assistant message. *out is malloc'd. */
static int get_messages(json_t *obj, chat_msg **out, size_t *n, ft_error *err)
{
    json_t *arr = json_object_get(obj, "messages");
    if (!arr)
        return ft_fail(err, "missing field \"messages\"");
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return ft_fail(err, "field \"messages\" is not a non-empty array");
    size_t m = json_array_size(arr);
    chat_msg *msgs = malloc(m * sizeof *msgs);
    if (!msgs)
        return oom(err);
    bool any_assistant = false;
    for (size_t i = 0; i < m; i++) {
        json_t *e = json_array_get(arr, i);
        json_t *role = json_object_get(e, "role"), *content = json_object_get(e, "content");
        if (!json_is_object(e) || !json_is_string(role) || !json_is_string(content)) {
            free(msgs);
            return ft_fail(err, "messages[%zu] is not an object with string \"role\" and "
                           "\"content\"", i);
        }
        const char *rs = json_string_value(role);
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant")) {
            free(msgs);
            return ft_fail(err, "messages[%zu]: role \"%.40s\" is not system, user or assistant",
                           i, rs);
        }
        if (strcmp(rs, "system") == 0 && i > 0) {
            free(msgs);
            return ft_fail(err, "messages[%zu]: a system message may only come first", i);
        }
        json_t *reasoning = json_object_get(e, "reasoning_content");
        if (reasoning && !json_is_null(reasoning) && !json_is_string(reasoning)) {
            free(msgs);
            return ft_fail(err, "messages[%zu]: \"reasoning_content\" is not a string or null", i);
        }
        any_assistant |= strcmp(rs, "assistant") == 0;
        msgs[i] = (chat_msg){ rs, json_string_value(content), json_string_length(content),
                              json_string_value(reasoning), json_string_length(reasoning) };
    }
    if (!any_assistant) {
        free(msgs);
        return ft_fail(err, "no assistant message (nothing to train on)");
    }
    *out = msgs, *n = m;
    return 0;
}

/* <|start_header_id|>role<|end_header_id|>\n\n{content|trim}<|eot_id|>; an assistant's content
 * and closing token (the EOS) are targets, the header is not. */
static int llama3_message(const prep_template *t, prep_render *r, const char *role,
                          const char *head, const char *c, size_t n, ft_error *err)
{
    bool asst = strcmp(role, "assistant") == 0;
    strip(&c, &n);
    if (add_special(r, t->start_header, false, err) || add_cstr(r, role, false, err) ||
        add_special(r, t->end_header, false, err) || add_cstr(r, "\n\n", false, err) ||
        (head && add_cstr(r, head, false, err)) || add_text(r, c, n, asst, err) ||
        add_special(r, asst ? t->eos : t->eot, asst, err))
        return -1;
    return 0;
}

static int render_llama3(const prep_template *t, const chat_msg *m, size_t n, prep_render *r,
                         ft_error *err)
{
    if (add_special(r, t->bos, false, err))
        return -1;
    size_t i = 0;
    if (t->kind == PREP_TPL_LLAMA31_CHAT) {
        /* 3.1 always opens with a dated system block holding the (trimmed) system message. */
        const char *sys = "";
        size_t sys_len = 0;
        if (strcmp(m[0].role, "system") == 0)
            sys = m[0].content, sys_len = m[0].content_len, i = 1;
        if (llama3_message(t, r, "system", llama31_system_head, sys, sys_len, err))
            return -1;
    }
    for (; i < n; i++)
        if (llama3_message(t, r, m[i].role, NULL, m[i].content, m[i].content_len, err))
            return -1;
    return 0;
}

/* ChatML, as the Qwen2/Qwen2.5 chat_template renders it: per message
 * <|im_start|>role\n{content}<|im_end|>\n with the content NOT stripped; when the first message
 * is not a system message, the Qwen templates first emit a system turn with their default
 * prompt. An assistant's content and its <|im_end|> (the EOS) are targets; the role header
 * and the "\n" after <|im_end|> are not (generation stops at <|im_end|>). */
static const char *chatml_default_system(prep_template_kind k)
{
    if (k == PREP_TPL_QWEN2_CHAT)
        return "You are a helpful assistant.";
    if (k == PREP_TPL_QWEN25_CHAT)
        return "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
    if (k == PREP_TPL_SMOLLM2_CHAT)
        return "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
    return NULL;
}

static int chatml_message(const prep_template *t, prep_render *r, const char *role,
                          const char *c, size_t n, ft_error *err)
{
    bool asst = strcmp(role, "assistant") == 0;
    if (add_special(r, t->im_start, false, err) || add_cstr(r, role, false, err) ||
        add_cstr(r, "\n", false, err) || add_text(r, c, n, asst, err) ||
        add_special(r, asst ? t->eos : t->im_end, asst, err) || add_cstr(r, "\n", false, err))
        return -1;
    return 0;
}

static int render_chatml(const prep_template *t, const chat_msg *m, size_t n, prep_render *r,
                         ft_error *err)
{
    const char *sys = chatml_default_system(t->kind);
    if (sys && strcmp(m[0].role, "system") != 0 &&
        chatml_message(t, r, "system", sys, strlen(sys), err))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (chatml_message(t, r, m[i].role, m[i].content, m[i].content_len, err))
            return -1;
    return 0;
}

/* ---- Qwen3 ---- */

static bool has_prefix(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && memcmp(s, p, k) == 0;
}

static bool has_suffix(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && memcmp(s + n - k, p, k) == 0;
}

/* First / last occurrence of the NUL-terminated needle in s[0..n), NULL if none. */
static const char *find_first(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0)
            return s + i;
    return NULL;
}

static const char *find_last(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;)
        if (memcmp(s + i, needle, k) == 0)
            return s + i;
    return NULL;
}

/* Python's lstrip('\n') / rstrip('\n'). */
static void lstrip_nl(const char **s, size_t *n)
{
    while (*n && **s == '\n')
        ++*s, --*n;
}

static void rstrip_nl(const char *s, size_t *n)
{
    (void)s;
    while (*n && s[*n - 1] == '\n')
        --*n;
}

/* Qwen3's chat_template for an assistant message: the reasoning is reasoning_content when
 * given, else the text between the last <think> before the first </think> and that </think>,
 * and the content what follows the last </think>; both lose their newlines at the seams. */
static void qwen3_split(const chat_msg *m, const char **c, size_t *cn, const char **r, size_t *rn)
{
    *c = m->content, *cn = m->content_len, *r = "", *rn = 0;
    if (m->reasoning) {
        *r = m->reasoning, *rn = m->reasoning_len;
        return;
    }
    const char *last_end = find_last(m->content, m->content_len, "</think>");
    if (!last_end)
        return;
    *c = last_end + 8;
    *cn = m->content_len - (size_t)(*c - m->content);
    lstrip_nl(c, cn);
    const char *first_end = find_first(m->content, m->content_len, "</think>");
    size_t before = (size_t)(first_end - m->content);
    rstrip_nl(m->content, &before);
    const char *open = find_last(m->content, before, "<think>");
    *r = open ? open + 7 : m->content;
    *rn = before - (size_t)(*r - m->content);
    lstrip_nl(r, rn);
}

/* Qwen3-*: ChatML without a default system turn. Assistant turns after the last user message
 * (one that is not a "<tool_response>...</tool_response>") open with
 * "<think>\n" reasoning "\n</think>\n\n" when they are the last message or have reasoning;
 * earlier turns lose their reasoning (the template strips it from the history). Targets: the
 * assistant content and its <|im_end|>, and a think block that holds reasoning (the model
 * writes it); an empty think block is prompt, as the enable_thinking=false generation prompt
 * puts it in front of the answer. */
static int render_qwen3(const prep_template *t, const chat_msg *m, size_t n, prep_render *r,
                        ft_error *err)
{
    size_t last_query = n - 1;
    for (size_t i = n; i-- > 0;)
        if (strcmp(m[i].role, "user") == 0 &&
            !(has_prefix(m[i].content, m[i].content_len, "<tool_response>") &&
              has_suffix(m[i].content, m[i].content_len, "</tool_response>"))) {
            last_query = i;
            break;
        }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].role, "assistant") != 0) {
            if (chatml_message(t, r, m[i].role, m[i].content, m[i].content_len, err))
                return -1;
            continue;
        }
        const char *c, *rs;
        size_t cn, rn;
        qwen3_split(&m[i], &c, &cn, &rs, &rn);
        if (add_special(r, t->im_start, false, err) || add_cstr(r, "assistant\n", false, err))
            return -1;
        if (i > last_query && (i == n - 1 || rn > 0)) {
            while (rn && rs[0] == '\n') /* reasoning_content.strip('\n') */
                rs++, rn--;
            rstrip_nl(rs, &rn);
            lstrip_nl(&c, &cn);
            bool think = rn > 0;
            if (add_cstr(r, "<think>\n", think, err) || add_text(r, rs, rn, think, err) ||
                add_cstr(r, "\n</think>\n\n", think, err))
                return -1;
        }
        if (add_text(r, c, cn, true, err) || add_special(r, t->eos, true, err) ||
            add_cstr(r, "\n", false, err))
            return -1;
    }
    return 0;
}

/* Templates whose turns must alternate: an optional system message (*sys, else NULL), then
 * user, assistant, user, ... from index *first. */
static int split_turns(const chat_msg *m, size_t n, const chat_msg **sys, size_t *first,
                       const char *template_name, ft_error *err)
{
    *sys = NULL;
    *first = 0;
    if (strcmp(m[0].role, "system") == 0)
        *sys = &m[0], *first = 1;
    for (size_t i = *first; i < n; i++) {
        bool user_turn = (i - *first) % 2 == 0;
        if ((strcmp(m[i].role, "user") == 0) != user_turn)
            return ft_fail(err, "messages[%zu]: roles must alternate user/assistant/user/... "
                           "(after an optional system message) for %s", i, template_name);
    }
    return 0;
}

/* Mistral-7B-Instruct-v0.3's template: <s>, then per user turn [INST] " " + content + [/INST]
 * (the system message, if any, goes in front of the LAST user content as system + "\n\n"),
 * per assistant turn " " + strip(content) + </s> (targets). [INST]/[/INST] are special
 * tokens in v0.3, so every text piece sits between specials as in HF's own encoding, and the
 * leading space keeps Metaspace(prepend_scheme first) from adding another "▁". */
static int render_mistral(const prep_template *t, const chat_msg *m, size_t n, prep_render *r,
                          ft_error *err)
{
    size_t first, last_user = 0;
    const chat_msg *sys;
    if (split_turns(m, n, &sys, &first, "mistral-chat", err))
        return -1;
    for (size_t i = first; i < n; i += 2)
        last_user = i;
    if (add_special(r, t->bos, false, err))
        return -1;
    for (size_t i = first; i < n; i++) {
        const char *c = m[i].content;
        size_t cn = m[i].content_len;
        int rc;
        if (strcmp(m[i].role, "user") == 0) {
            rc = add_special(r, t->inst, false, err) || add_cstr(r, " ", false, err) ||
                 (sys && i == last_user &&
                  (add_text(r, sys->content, sys->content_len, false, err) ||
                   add_cstr(r, "\n\n", false, err))) ||
                 add_text(r, c, cn, false, err) || add_special(r, t->inst_end, false, err);
        } else {
            strip(&c, &cn);
            rc = add_cstr(r, " ", true, err) || add_text(r, c, cn, true, err) ||
                 add_special(r, t->eos, true, err);
        }
        if (rc)
            return -1;
    }
    return 0;
}

/* HF Llama 2 template: per user turn  <s>"[INST] " + strip(content) + " [/INST]", per assistant
 * turn " " + strip(content) + " " </s>, the system message (raw) wrapped into the first user
 * content as "<<SYS>>\n" + system + "\n<</SYS>>\n\n" before the strip. */
static int render_llama2(const prep_template *t, const chat_msg *m, size_t n, prep_render *r,
                         ft_error *err)
{
    size_t first;
    const chat_msg *sys;
    if (split_turns(m, n, &sys, &first, "llama2-chat", err))
        return -1;
    char *joined = NULL;
    for (size_t i = first; i < n; i++) {
        const char *c = m[i].content;
        size_t cn = m[i].content_len;
        if (i == first && sys) {
            size_t jn = 8 + sys->content_len + 12 + cn;
            joined = malloc(jn + 1);
            if (!joined)
                return oom(err);
            int k = snprintf(joined, jn + 1, "<<SYS>>\n%.*s\n<</SYS>>\n\n", (int)sys->content_len,
                             sys->content);
            memcpy(joined + k, c, cn);
            c = joined, cn = (size_t)k + cn;
        }
        strip(&c, &cn);
        int rc;
        if (strcmp(m[i].role, "user") == 0) {
            rc = add_special(r, t->bos, false, err) || add_cstr(r, "[INST] ", false, err) ||
                 add_text(r, c, cn, false, err) || add_cstr(r, " [/INST]", false, err);
        } else {
            /* SentencePiece prepends "▁" to every separately encoded text, which is the
             * template's leading space; a byte-level tokenizer needs it written. */
            rc = (!t->sentencepiece && add_cstr(r, " ", true, err)) ||
                 add_text(r, c, cn, true, err) || add_cstr(r, " ", true, err) ||
                 add_special(r, t->eos, true, err);
        }
        free(joined);
        joined = NULL;
        if (rc)
            return -1;
    }
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
    case PREP_FORMAT_CHAT: {
        chat_msg *m = NULL;
        size_t n = 0;
        json_t *sharegpt = NULL; /* a conversations record as messages (prep_sharegpt.h) */
        if (prep_is_sharegpt(obj) && prep_sharegpt_to_messages(obj, &sharegpt, err))
            return -1;
        if (get_messages(sharegpt ? sharegpt : obj, &m, &n, err)) {
            json_decref(sharegpt);
            return -1;
        }
        int rc = t->kind == PREP_TPL_MISTRAL_CHAT ? render_mistral(t, m, n, r, err)
                 : t->kind == PREP_TPL_QWEN3_CHAT  ? render_qwen3(t, m, n, r, err)
                 : t->kind == PREP_TPL_LLAMA2_CHAT ? render_llama2(t, m, n, r, err)
                 : t->im_start >= 0              ? render_chatml(t, m, n, r, err)
                                                 : render_llama3(t, m, n, r, err);
        free(m);
        json_decref(sharegpt); /* after rendering: m points into it */
        return rc;
    }
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
    if (add_special(r, t->bos, false, err) || add_text(r, s, n, true, err) ||
        add_special(r, t->eos, true, err))
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
        oom(err);
    prep_template_free(t);
    return -1;
}

void prep_template_free(prep_template *t)
{
    free(t->prompt_input);
    free(t->prompt_no_input);
    t->prompt_input = t->prompt_no_input = NULL;
}
