/* The chat templates: a messages record (or a ShareGPT conversation) rendered piece for piece
 * as the HF chat_template of Llama 3/3.1, ChatML (Qwen2/2.5, SmolLM2), Qwen3, Mistral v0.3 or
 * Llama 2 chat renders it (doc/prep.md). Apart from the alpaca-style prompts (prep_template.c)
 * because the two share nothing but the render buffer (prep_render.c). */
#include "prep/prep_template_internal.h"
#include "prep/prep_sharegpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char llama31_system_head[] =
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

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
        return prep_oom(err);
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
    if (prep_add_special(r, t->start_header, false, err) || prep_add_cstr(r, role, false, err) ||
        prep_add_special(r, t->end_header, false, err) || prep_add_cstr(r, "\n\n", false, err) ||
        (head && prep_add_cstr(r, head, false, err)) || prep_add_text(r, c, n, asst, err) ||
        prep_add_special(r, asst ? t->eos : t->eot, asst, err))
        return -1;
    return 0;
}

static int render_llama3(const prep_template *t, const chat_msg *m, size_t n, prep_render *r,
                         ft_error *err)
{
    if (prep_add_special(r, t->bos, false, err))
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
    if (prep_add_special(r, t->im_start, false, err) || prep_add_cstr(r, role, false, err) ||
        prep_add_cstr(r, "\n", false, err) || prep_add_text(r, c, n, asst, err) ||
        prep_add_special(r, asst ? t->eos : t->im_end, asst, err) ||
        prep_add_cstr(r, "\n", false, err))
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
        if (prep_add_special(r, t->im_start, false, err) ||
            prep_add_cstr(r, "assistant\n", false, err))
            return -1;
        if (i > last_query && (i == n - 1 || rn > 0)) {
            while (rn && rs[0] == '\n') /* reasoning_content.strip('\n') */
                rs++, rn--;
            rstrip_nl(rs, &rn);
            lstrip_nl(&c, &cn);
            bool think = rn > 0;
            if (prep_add_cstr(r, "<think>\n", think, err) || prep_add_text(r, rs, rn, think, err) ||
                prep_add_cstr(r, "\n</think>\n\n", think, err))
                return -1;
        }
        if (prep_add_text(r, c, cn, true, err) || prep_add_special(r, t->eos, true, err) ||
            prep_add_cstr(r, "\n", false, err))
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
    if (prep_add_special(r, t->bos, false, err))
        return -1;
    for (size_t i = first; i < n; i++) {
        const char *c = m[i].content;
        size_t cn = m[i].content_len;
        int rc;
        if (strcmp(m[i].role, "user") == 0) {
            rc = prep_add_special(r, t->inst, false, err) || prep_add_cstr(r, " ", false, err) ||
                 (sys && i == last_user &&
                  (prep_add_text(r, sys->content, sys->content_len, false, err) ||
                   prep_add_cstr(r, "\n\n", false, err))) ||
                 prep_add_text(r, c, cn, false, err) ||
                 prep_add_special(r, t->inst_end, false, err);
        } else {
            strip(&c, &cn);
            rc = prep_add_cstr(r, " ", true, err) || prep_add_text(r, c, cn, true, err) ||
                 prep_add_special(r, t->eos, true, err);
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
                return prep_oom(err);
            int k = snprintf(joined, jn + 1, "<<SYS>>\n%.*s\n<</SYS>>\n\n", (int)sys->content_len,
                             sys->content);
            memcpy(joined + k, c, cn);
            c = joined, cn = (size_t)k + cn;
        }
        strip(&c, &cn);
        int rc;
        if (strcmp(m[i].role, "user") == 0) {
            rc = prep_add_special(r, t->bos, false, err) ||
                 prep_add_cstr(r, "[INST] ", false, err) ||
                 prep_add_text(r, c, cn, false, err) || prep_add_cstr(r, " [/INST]", false, err);
        } else {
            /* SentencePiece prepends "▁" to every separately encoded text, which is the
             * template's leading space; a byte-level tokenizer needs it written. */
            rc = (!t->sentencepiece && prep_add_cstr(r, " ", true, err)) ||
                 prep_add_text(r, c, cn, true, err) || prep_add_cstr(r, " ", true, err) ||
                 prep_add_special(r, t->eos, true, err);
        }
        free(joined);
        joined = NULL;
        if (rc)
            return -1;
    }
    return 0;
}

int prep_render_chat(const prep_template *t, json_t *obj, prep_render *r, ft_error *err)
{
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
