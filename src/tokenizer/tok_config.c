/* tokenizer.json pipeline sections -> ft_tokenizer: normalizer, pre_tokenizer, decoder, and
 * the BOS/EOS ids (post_processor, sibling tokenizer_config.json). Each unsupported component
 * is rejected by name with its JSON path; nothing is silently approximated. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_dir_file.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tok_utf8.h"

/* HF's ByteLevel(use_regex=true) pattern (GPT-2). */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static char *dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static const char *type_of(json_t *obj)
{
    return json_string_value(json_object_get(obj, "type"));
}

/* Reads obj[key] as a string; fails with the path when missing or not a string. */
static int get_string(const ft_tokenizer *t, json_t *obj, const char *key, const char *where,
                      const char **s, size_t *n, ft_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v))
        return ft_fail(err, "%s: %s.%s: expected a string", t->name, where, key);
    *s = json_string_value(v);
    *n = json_string_length(v);
    return 0;
}

/* Reads a {"String": "..."} pattern (the Regex form is not supported where this is used). */
static int get_literal_pattern(const ft_tokenizer *t, json_t *obj, const char *where,
                               const char **s, size_t *n, ft_error *err)
{
    json_t *pat = json_object_get(obj, "pattern");
    json_t *str = json_object_get(pat, "String");
    if (!json_is_object(pat) || !json_is_string(str))
        return ft_fail(err, "%s: %s.pattern: expected {\"String\": \"...\"} (Regex patterns are "
                            "not supported here)",
                       t->name, where);
    *s = json_string_value(str);
    *n = json_string_length(str);
    if (*n == 0)
        return ft_fail(err, "%s: %s.pattern: the pattern is empty", t->name, where);
    return 0;
}

/* Parses one normalizer, pre-tokenizer or decoder found at path `where`. */
typedef int (*component_parser)(ft_tokenizer *t, json_t *c, const char *where, ft_error *err);

/* A "Sequence" component of any of the three sections: the elements of its array `member`
 * ("normalizers", "pretokenizers", "decoders"), each parsed in order by `parse` at the path
 * where.member[i]. */
static int parse_sequence(ft_tokenizer *t, json_t *seq, const char *member, const char *where,
                          component_parser parse, ft_error *err)
{
    json_t *list = json_object_get(seq, member);
    if (!json_is_array(list))
        return ft_fail(err, "%s: %s.%s: expected an array", t->name, where, member);
    char sub[256];
    for (size_t i = 0; i < json_array_size(list); i++) {
        snprintf(sub, sizeof sub, "%s.%s[%zu]", where, member, i);
        if (parse(t, json_array_get(list, i), sub, err) < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ normalizer */

static int add_norm(ft_tokenizer *t, tok_norm_step st, ft_error *err)
{
    tok_norm_step *p = realloc(t->norm, (t->n_norm + 1) * sizeof *p);
    if (!p) {
        free(st.pattern);
        free(st.content);
        return ft_fail(err, "%s: normalizer: out of memory", t->name);
    }
    t->norm = p;
    t->norm[t->n_norm++] = st;
    return 0;
}

static int parse_normalizer(ft_tokenizer *t, json_t *n, const char *where, ft_error *err)
{
    if (!n || json_is_null(n))
        return 0;
    const char *type = type_of(n);
    if (!json_is_object(n) || !type)
        return ft_fail(err, "%s: %s: expected null or an object with a \"type\"", t->name, where);
    if (strcmp(type, "Sequence") == 0)
        return parse_sequence(t, n, "normalizers", where, parse_normalizer, err);
    tok_norm_step st = {0};
    const char *s, *c;
    size_t sn, cn;
    if (strcmp(type, "NFC") == 0) {
        st.kind = TOK_NORM_NFC; /* Qwen2/2.5/3 */
        return add_norm(t, st, err);
    }
    if (strcmp(type, "Prepend") == 0) {
        if (get_string(t, n, "prepend", where, &c, &cn, err) < 0)
            return -1;
        st.kind = TOK_NORM_PREPEND;
    } else if (strcmp(type, "Replace") == 0) {
        if (get_literal_pattern(t, n, where, &s, &sn, err) < 0 ||
            get_string(t, n, "content", where, &c, &cn, err) < 0)
            return -1;
        st.kind = TOK_NORM_REPLACE;
        st.pattern = dup_bytes(s, sn);
        st.pattern_len = sn;
        if (!st.pattern)
            return ft_fail(err, "%s: normalizer: out of memory", t->name);
    } else {
        return ft_fail(err, "%s: %s: normalizer type \"%s\" is not supported (supported: Sequence, "
                            "NFC, Prepend, Replace with a String pattern)",
                       t->name, where, type);
    }
    st.content = dup_bytes(c, cn);
    st.content_len = cn;
    if (!st.content) {
        free(st.pattern);
        return ft_fail(err, "%s: normalizer: out of memory", t->name);
    }
    return add_norm(t, st, err);
}

/* ------------------------------------------------------------------ pre-tokenizer */

static int add_stage(ft_tokenizer *t, tok_stage st, const char *where, ft_error *err)
{
    if (t->n_stages == TOK_MAX_STAGES) {
        pcre2_code_free(st.re);
        return ft_fail(err, "%s: %s: more than %d pre-tokenizer stages are not supported", t->name,
                       where, TOK_MAX_STAGES);
    }
    t->stages[t->n_stages++] = st;
    return 0;
}

static int add_regex_stage(ft_tokenizer *t, const char *pattern, size_t n, const char *where,
                           ft_error *err)
{
    char why[512];
    tok_stage st = {.kind = TOK_STAGE_REGEX};
    if (tok_regex_compile(pattern, n, &st.re, why, sizeof why) < 0)
        return ft_fail(err, "%s: %s.pattern: %s", t->name, where, why);
    return add_stage(t, st, where, err);
}

static int bool_field(json_t *obj, const char *key, bool dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static int parse_pre_tokenizer(ft_tokenizer *t, json_t *p, const char *where, ft_error *err)
{
    if (!p || json_is_null(p))
        return 0;
    const char *type = type_of(p);
    if (!json_is_object(p) || !type)
        return ft_fail(err, "%s: %s: expected null or an object with a \"type\"", t->name, where);
    if (strcmp(type, "Sequence") == 0)
        return parse_sequence(t, p, "pretokenizers", where, parse_pre_tokenizer, err);
    if (strcmp(type, "Split") == 0) {
        if (t->byte_level)
            return ft_fail(err, "%s: %s: a Split after ByteLevel is not supported", t->name, where);
        const char *behavior = json_string_value(json_object_get(p, "behavior"));
        if (!behavior || strcmp(behavior, "Isolated") != 0)
            return ft_fail(err, "%s: %s.behavior: \"%s\" is not supported (only \"Isolated\")",
                           t->name, where, behavior ? behavior : "(missing)");
        if (bool_field(p, "invert", false))
            return ft_fail(err, "%s: %s.invert: true is not supported", t->name, where);
        json_t *pat = json_object_get(p, "pattern");
        json_t *re = json_object_get(pat, "Regex");
        json_t *lit = json_object_get(pat, "String");
        if (json_is_string(re))
            return add_regex_stage(t, json_string_value(re), json_string_length(re), where, err);
        if (json_is_string(lit)) {
            /* A literal: escape every ASCII punctuation character for the regex. */
            tok_buf esc = {0};
            const char *s = json_string_value(lit);
            int rc = 0;
            for (size_t i = 0; i < json_string_length(lit) && rc == 0; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                                  (c >= 'A' && c <= 'Z')))
                    rc = tok_buf_append(&esc, "\\", 1);
                if (rc == 0)
                    rc = tok_buf_append(&esc, &s[i], 1);
            }
            if (rc == 0 && esc.len == 0)
                rc = ft_fail(err, "%s: %s.pattern: the pattern is empty", t->name, where);
            else if (rc < 0)
                rc = ft_fail(err, "%s: %s: out of memory", t->name, where);
            else
                rc = add_regex_stage(t, esc.data, esc.len, where, err);
            tok_buf_free(&esc);
            return rc;
        }
        return ft_fail(err, "%s: %s.pattern: expected {\"Regex\": \"...\"} or {\"String\": \"...\"}",
                       t->name, where);
    }
    if (strcmp(type, "Digits") == 0) {
        bool individual = bool_field(p, "individual_digits", false);
        if (t->metaspace != TOK_META_NONE)
            return ft_fail(err, "%s: %s: Digits after Metaspace is not supported", t->name, where);
        if (t->byte_level) /* HF splits the byte-level spelling: see tok_stage */
            return add_stage(t, (tok_stage){.kind = TOK_STAGE_BYTE_DIGITS, .individual = individual},
                             where, err);
        return individual ? add_regex_stage(t, "\\p{N}", 5, where, err)
                          : add_regex_stage(t, "\\p{N}+", 6, where, err);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        if (t->byte_level)
            return ft_fail(err, "%s: %s: a second ByteLevel is not supported", t->name, where);
        if (t->metaspace != TOK_META_NONE)
            return ft_fail(err, "%s: %s: ByteLevel after Metaspace is not supported", t->name, where);
        t->byte_level = true;
        /* HF: per piece, the prefix space first, then the GPT-2 regex. */
        if (bool_field(p, "add_prefix_space", false) &&
            add_stage(t, (tok_stage){.kind = TOK_STAGE_PREFIX_SPACE}, where, err) < 0)
            return -1;
        if (bool_field(p, "use_regex", true))
            return add_regex_stage(t, gpt2_pattern, sizeof gpt2_pattern - 1, where, err);
        return 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        /* Mistral v0.3 style; the Llama 2 legacy layout does the same with normalizers. */
        const char *rep = json_string_value(json_object_get(p, "replacement"));
        const char *scheme = json_string_value(json_object_get(p, "prepend_scheme"));
        if (t->byte_level || t->n_stages > 0 || t->metaspace != TOK_META_NONE)
            return ft_fail(err, "%s: %s: Metaspace combined with another pre-tokenizer is not "
                                "supported", t->name, where);
        if (!rep || strcmp(rep, "\xe2\x96\x81") != 0)
            return ft_fail(err, "%s: %s.replacement: only \"\xe2\x96\x81\" is supported", t->name, where);
        if (bool_field(p, "split", true))
            return ft_fail(err, "%s: %s.split: true is not supported (Metaspace with split false "
                                "only, as Mistral v0.3)", t->name, where);
        if (!scheme) /* files older than prepend_scheme: add_prefix_space */
            scheme = bool_field(p, "add_prefix_space", true) ? "always" : "never";
        if (strcmp(scheme, "first") == 0)
            t->metaspace = TOK_META_FIRST;
        else if (strcmp(scheme, "always") == 0)
            t->metaspace = TOK_META_ALWAYS;
        else if (strcmp(scheme, "never") == 0)
            t->metaspace = TOK_META_NEVER;
        else
            return ft_fail(err, "%s: %s.prepend_scheme: \"%s\" is not one of first, always, never",
                           t->name, where, scheme);
        return 0;
    }
    return ft_fail(err, "%s: %s: pre_tokenizer type \"%s\" is not supported (supported: Sequence, "
                        "Split with behavior Isolated, Digits, ByteLevel, Metaspace with split false)",
                   t->name, where, type);
}

/* ------------------------------------------------------------------ decoder */

static int add_dec(ft_tokenizer *t, tok_dec_step st, ft_error *err)
{
    tok_dec_step *p = realloc(t->dec, (t->n_dec + 1) * sizeof *p);
    if (!p) {
        free(st.pattern);
        free(st.content);
        return ft_fail(err, "%s: decoder: out of memory", t->name);
    }
    t->dec = p;
    t->dec[t->n_dec++] = st;
    return 0;
}

static int size_field(const ft_tokenizer *t, json_t *obj, const char *key, const char *where,
                      size_t *out, ft_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return ft_fail(err, "%s: %s.%s: expected a non-negative integer", t->name, where, key);
    *out = (size_t)json_integer_value(v);
    return 0;
}

static int parse_decoder(ft_tokenizer *t, json_t *d, const char *where, ft_error *err)
{
    const char *type = type_of(d);
    if (!json_is_object(d) || !type)
        return ft_fail(err, "%s: %s: expected null or an object with a \"type\"", t->name, where);
    tok_dec_step st = {0};
    if (strcmp(type, "Sequence") == 0) {
        return parse_sequence(t, d, "decoders", where, parse_decoder, err);
    } else if (strcmp(type, "ByteLevel") == 0) {
        st.kind = TOK_DEC_BYTE_LEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        st.kind = TOK_DEC_BYTE_FALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        st.kind = TOK_DEC_FUSE;
    } else if (strcmp(type, "Replace") == 0) {
        const char *s, *c;
        size_t sn, cn;
        if (get_literal_pattern(t, d, where, &s, &sn, err) < 0 ||
            get_string(t, d, "content", where, &c, &cn, err) < 0)
            return -1;
        st.kind = TOK_DEC_REPLACE;
        st.pattern = dup_bytes(s, sn);
        st.pattern_len = sn;
        st.content = dup_bytes(c, cn);
        st.content_len = cn;
        if (!st.pattern || !st.content) {
            free(st.pattern);
            free(st.content);
            return ft_fail(err, "%s: decoder: out of memory", t->name);
        }
    } else if (strcmp(type, "Strip") == 0) {
        const char *c;
        size_t cn;
        uint32_t cp;
        if (get_string(t, d, "content", where, &c, &cn, err) < 0 ||
            size_field(t, d, "start", where, &st.start, err) < 0 ||
            size_field(t, d, "stop", where, &st.stop, err) < 0)
            return -1;
        if (cn == 0 || tok_utf8_next((const unsigned char *)c, cn, &cp) != (int)cn)
            return ft_fail(err, "%s: %s.content: expected exactly one character", t->name, where);
        st.kind = TOK_DEC_STRIP;
        st.pattern = dup_bytes(c, cn);
        st.pattern_len = cn;
        if (!st.pattern)
            return ft_fail(err, "%s: decoder: out of memory", t->name);
    } else {
        return ft_fail(err, "%s: %s: decoder type \"%s\" is not supported (supported: Sequence, "
                            "ByteLevel, Replace, ByteFallback, Fuse, Strip)",
                       t->name, where, type);
    }
    return add_dec(t, st, err);
}

int tok_config_pipeline(ft_tokenizer *t, json_t *root, ft_error *err)
{
    if (parse_normalizer(t, json_object_get(root, "normalizer"), "normalizer", err) < 0 ||
        parse_pre_tokenizer(t, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", err) < 0)
        return -1;
    if (t->n_stages > 0 && !t->byte_level)
        return ft_fail(err, "%s: pre_tokenizer: a Split or Digits without ByteLevel is not "
                            "supported", t->name);
    json_t *dec = json_object_get(root, "decoder");
    t->has_decoder = dec && !json_is_null(dec);
    if (t->has_decoder && parse_decoder(t, dec, "decoder", err) < 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ BOS / EOS */

/* bos_token/eos_token/pad_token in tokenizer_config.json: a string or {"content": "..."}
 * names the token; null (Qwen3's bos_token) means there is none, as transformers reads it.
 * Returns the id, -1 for an explicit null, -2 when the key is absent. */
static int32_t config_token(const ft_tokenizer *t, json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    if (!v)
        return -2;
    if (json_is_object(v))
        v = json_object_get(v, "content");
    return json_is_string(v) ? ft_tokenizer_token_id(t, json_string_value(v)) : -1;
}

/* A token key that names a token the vocabulary lacks would silently become "none". */
static int check_config_token(const ft_tokenizer *t, json_t *cfg, const char *key,
                              const char *cfg_path, ft_error *err)
{
    json_t *v = json_object_get(cfg, key);
    json_t *content = json_is_object(v) ? json_object_get(v, "content") : v;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(content)) {
        ft_fail(err, "%s: %s: expected a string, {\"content\": \"...\"} or null", cfg_path, key);
        err->flags |= FT_ERR_CONFIG;
        return -1;
    }
    if (ft_tokenizer_token_id(t, json_string_value(content)) < 0) {
        ft_fail(err, "%s: %s \"%.200s\" is not a token of %s (is the file from another "
                     "tokenizer?)", cfg_path, key, json_string_value(content), t->name);
        err->flags |= FT_ERR_CONFIG;
        return -1;
    }
    return 0;
}

static int32_t template_token_id(const ft_tokenizer *t, json_t *proc, const char *name)
{
    json_t *ids = json_object_get(json_object_get(json_object_get(proc, "special_tokens"), name),
                                  "ids");
    json_t *first = json_array_get(ids, 0);
    if (json_is_integer(first) && json_integer_value(first) >= 0 &&
        json_integer_value(first) < t->n_ids)
        return (int32_t)json_integer_value(first);
    return ft_tokenizer_token_id(t, name);
}

/* TemplateProcessing "single": a special token before $A is the BOS, one after it the EOS. */
static void from_template(ft_tokenizer *t, json_t *proc, int32_t *bos, int32_t *eos)
{
    const char *type = type_of(proc);
    if (!type)
        return;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(proc, "processors");
        for (size_t i = 0; i < json_array_size(list); i++)
            from_template(t, json_array_get(list, i), bos, eos);
        return;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return;
    json_t *single = json_object_get(proc, "single");
    bool seen_sequence = false;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *item = json_array_get(single, i);
        if (json_object_get(item, "Sequence")) {
            seen_sequence = true;
            continue;
        }
        const char *name = json_string_value(json_object_get(json_object_get(item, "SpecialToken"), "id"));
        if (!name)
            continue;
        int32_t id = template_token_id(t, proc, name);
        if (!seen_sequence && *bos < 0)
            *bos = id;
        else if (seen_sequence && *eos < 0)
            *eos = id;
    }
}

static int32_t fallback_id(const ft_tokenizer *t, const char *first, const char *second)
{
    int32_t id = ft_tokenizer_token_id(t, first);
    return id >= 0 ? id : ft_tokenizer_token_id(t, second);
}

int tok_config_bos_eos(ft_tokenizer *t, json_t *root, const char *path, ft_error *err)
{
    int32_t bos = -2, eos = -2, pad = -2;
    if (path) {
        /* tokenizer_config.json next to tokenizer.json is what transformers reads; where it
         * names a token (or null), that is the answer. */
        json_t *cfg = NULL;
        int rc = ft_tok_dir_json(path, "tokenizer_config.json", &cfg, err);
        if (rc < 0)
            return -1;
        if (rc > 0) {
            char *cfg_path = ft_tok_dir_path(path, "tokenizer_config.json");
            rc = !cfg_path ? ft_fail(err, "%s: out of memory", t->name)
                 : check_config_token(t, cfg, "bos_token", cfg_path, err) ||
                           check_config_token(t, cfg, "eos_token", cfg_path, err) ||
                           check_config_token(t, cfg, "pad_token", cfg_path, err)
                     ? -1 : 0;
            free(cfg_path);
            bos = config_token(t, cfg, "bos_token");
            eos = config_token(t, cfg, "eos_token");
            pad = config_token(t, cfg, "pad_token");
            json_decref(cfg);
            if (rc < 0)
                return -1;
        }
    }
    /* Without a config key: the post-processor's template, then the usual names (a bare
     * tokenizer.json, as in tests and conversions). */
    int32_t tb = -1, te = -1;
    from_template(t, json_object_get(root, "post_processor"), &tb, &te);
    if (bos == -2)
        bos = tb >= 0 ? tb : fallback_id(t, "<|begin_of_text|>", "<s>");
    if (eos == -2)
        eos = te >= 0 ? te : fallback_id(t, "<|end_of_text|>", "</s>");
    t->bos_id = bos;
    t->eos_id = eos;
    t->pad_id = pad >= 0 ? pad : -1;
    return 0;
}
