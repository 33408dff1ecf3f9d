/* tokenizer.json -> ft_tokenizer: file reading, the BPE model (vocab, merges, options), the
 * added tokens and the lookup tables; the pipeline sections are parsed in tok_config.c.
 * Errors name the file and the JSON path: "tokenizer.json: model.merges[12]: ...". */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_bytelevel.h"
#include "tokenizer/tok_internal.h"
#include "util/input_file.h"

/* Ids above this are rejected: they would make the per-id tables absurdly large and no real
 * vocabulary comes close (Llama 3: 128,256). */
#define MAX_ID (1 << 24)

/* Per-id string table under construction: strings are appended to a pool (each followed by a
 * NUL, so ft_tokenizer_token can hand them out); offsets stay valid when the pool moves. */
typedef struct table {
    tok_buf pool;
    uint32_t *off, *len;
} table;

static int table_set(table *tb, int32_t id, const char *s, size_t n)
{
    if (n >= UINT32_MAX || tb->pool.len + n + 1 > UINT32_MAX)
        return -1;
    tb->off[id] = (uint32_t)tb->pool.len;
    tb->len[id] = (uint32_t)n;
    if (tok_buf_append(&tb->pool, s, n) < 0 || tok_buf_append(&tb->pool, "", 1) < 0)
        return -1;
    return 0;
}

static int parse_id(json_t *v, int32_t *id)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= MAX_ID)
        return -1;
    *id = (int32_t)json_integer_value(v);
    return 0;
}

static bool opt_bool(json_t *obj, const char *key)
{
    return json_is_true(json_object_get(obj, key));
}

/* Checks the model options we do not implement are off. */
static int check_model_options(const ft_tokenizer *t, json_t *model, ft_error *err)
{
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!type)
        return ft_fail(err, "%s: model.type: missing (expected \"BPE\")", t->name);
    if (strcmp(type, "BPE") != 0)
        return ft_fail(err, "%s: model.type: \"%s\" is not supported (only \"BPE\": Llama 2/3 style "
                            "tokenizers)",
                       t->name, type);
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) != 0.0)
        return ft_fail(err, "%s: model.dropout: BPE dropout is not supported (set it to null)",
                       t->name);
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(model, affixes[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return ft_fail(err, "%s: model.%s: not supported (must be null)", t->name, affixes[i]);
    }
    json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk) && !json_is_string(unk))
        return ft_fail(err, "%s: model.unk_token: expected a string or null", t->name);
    return 0;
}

/* First pass: the largest id, so the per-id tables can be sized. */
static int scan_ids(const ft_tokenizer *t, json_t *vocab, json_t *added, int32_t *n_ids,
                    ft_error *err)
{
    int32_t max = -1;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        int32_t id;
        if (parse_id(v, &id) < 0)
            return ft_fail(err, "%s: model.vocab[\"%s\"]: expected an id in 0..%d", t->name, key,
                           MAX_ID - 1);
        if (id > max)
            max = id;
    }
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        int32_t id;
        if (!json_is_object(a) || parse_id(json_object_get(a, "id"), &id) < 0)
            return ft_fail(err, "%s: added_tokens[%zu]: expected an object with an id in 0..%d",
                           t->name, i, MAX_ID - 1);
        if (!json_is_string(json_object_get(a, "content")))
            return ft_fail(err, "%s: added_tokens[%zu].content: expected a string", t->name, i);
        if (id > max)
            max = id;
    }
    if (max < 0)
        return ft_fail(err, "%s: model.vocab: empty vocabulary", t->name);
    *n_ids = max + 1;
    return 0;
}

/* The model key of a vocab token: its raw bytes for byte-level models. Returns 1 when the
 * token is not spelled in the byte alphabet (it can never be produced), -1 on OOM. */
static int add_key(ft_tokenizer *t, table *keys, int32_t id, const char *s, size_t n)
{
    if (!t->byte_level)
        return table_set(keys, id, s, n);
    size_t at = keys->pool.len;
    int rc = tok_bytelevel_unmap(s, n, &keys->pool);
    if (rc != 0)
        return rc;
    keys->off[id] = (uint32_t)at;
    keys->len[id] = (uint32_t)(keys->pool.len - at);
    return 0;
}

static int parse_vocab(ft_tokenizer *t, json_t *vocab, table *strs, table *keys, bool *has_key,
                       ft_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        int32_t id = (int32_t)json_integer_value(v); /* validated by scan_ids */
        size_t n = strlen(key);
        if (t->id_flags[id] & TOK_ID_PRESENT)
            return ft_fail(err, "%s: model.vocab[\"%s\"]: id %ld is already used by \"%.*s\"",
                           t->name, key, (long)id, (int)strs->len[id], strs->pool.data + strs->off[id]);
        t->id_flags[id] |= TOK_ID_PRESENT;
        if (table_set(strs, id, key, n) < 0)
            return ft_fail(err, "%s: model.vocab: out of memory", t->name);
        int rc = add_key(t, keys, id, key, n);
        if (rc < 0)
            return ft_fail(err, "%s: model.vocab: out of memory", t->name);
        has_key[id] = rc == 0;
    }
    return 0;
}

/* HF does not take the "id" of an added token from the file: a token already in the model
 * vocabulary keeps its model id, any other gets the next id after the model vocabulary (its
 * entry count) or after the largest added id so far (AddedVocabulary::add_tokens; HF only
 * logs a warning when the file disagrees). A file whose ids disagree would make ftmpi's ids
 * differ from the file's own numbering, so it is rejected. */
static int32_t hf_added_id(const ft_tokenizer *t, const char *content, size_t len,
                           int32_t model_size, int32_t max_assigned)
{
    int32_t id = tok_index_get(&t->by_string, content, len);
    if (id >= 0)
        return id;
    if (max_assigned < 0)
        return model_size;
    return max_assigned >= model_size ? max_assigned + 1 : model_size;
}

static int parse_added(ft_tokenizer *t, json_t *added, int32_t model_size, table *strs,
                       ft_error *err)
{
    size_t n = json_array_size(added);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added)
        return ft_fail(err, "%s: added_tokens: out of memory", t->name);
    int32_t max_assigned = -1;
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(added, i);
        json_t *content = json_object_get(a, "content");
        int32_t id = (int32_t)json_integer_value(json_object_get(a, "id"));
        const char *c = json_string_value(content);
        size_t clen = json_string_length(content);
        if (clen == 0)
            return ft_fail(err, "%s: added_tokens[%zu].content: empty token", t->name, i);
        for (size_t j = 0; j < t->n_added; j++)
            if (t->added[j].len == clen && memcmp(t->added[j].content, c, clen) == 0)
                return ft_fail(err, "%s: added_tokens[%zu]: \"%s\" is listed twice", t->name, i, c);
        /* The index reads the string pool, which table_set below may move (realloc) as added
         * tokens are appended: point it at the pool as it is now. */
        t->by_string.pool = strs->pool.data;
        int32_t hf_id = hf_added_id(t, c, clen, model_size, max_assigned);
        if (hf_id != id)
            return ft_fail(err, "%s: added_tokens[%zu]: \"%s\" has id %ld but Hugging Face "
                                "tokenizers would give it id %ld (tokens in model.vocab keep "
                                "their id, new ones are numbered from the vocabulary size in "
                                "file order)",
                           t->name, i, c, (long)id, (long)hf_id);
        if (id > max_assigned)
            max_assigned = id;
        tok_added *tok = &t->added[t->n_added++];
        tok->id = id;
        tok->len = json_string_length(content);
        tok->content = malloc(tok->len + 1);
        if (!tok->content)
            return ft_fail(err, "%s: added_tokens: out of memory", t->name);
        memcpy(tok->content, json_string_value(content), tok->len + 1);
        tok->special = opt_bool(a, "special");
        tok->lstrip = opt_bool(a, "lstrip");
        tok->rstrip = opt_bool(a, "rstrip");
        tok->single_word = opt_bool(a, "single_word");
        tok->normalized = opt_bool(a, "normalized");
        /* HF's id_to_token looks at added tokens first, so their content wins. */
        if (table_set(strs, tok->id, tok->content, tok->len) < 0)
            return ft_fail(err, "%s: added_tokens: out of memory", t->name);
        t->id_flags[tok->id] |= TOK_ID_PRESENT | TOK_ID_ADDED;
        if (tok->special)
            t->id_flags[tok->id] |= TOK_ID_SPECIAL;
    }
    return 0;
}

/* Normalized added tokens are matched on normalized text, so their content is normalized
 * too (HF does the same). */
static int build_tries(ft_tokenizer *t, ft_error *err)
{
    tok_buf norm = {0};
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        int rc;
        if (a->normalized && t->n_norm > 0) {
            rc = tok_normalize(t, a->content, a->len, &norm);
            if (rc == 0)
                rc = tok_trie_add(&t->norm_trie, norm.data, norm.len, (int32_t)i);
            if (rc == 0 && (norm.len != a->len || memcmp(norm.data, a->content, a->len) != 0)) {
                tok_added *m = &t->added[i];
                m->norm_content = malloc(norm.len + 1);
                rc = m->norm_content ? 0 : -1;
                if (rc == 0) {
                    memcpy(m->norm_content, norm.data, norm.len);
                    m->norm_content[norm.len] = '\0';
                    m->norm_len = norm.len;
                    t->id_flags[m->id] |= TOK_ID_RESPELLED;
                }
            }
        } else if (a->normalized) {
            rc = tok_trie_add(&t->norm_trie, a->content, a->len, (int32_t)i);
        } else {
            rc = tok_trie_add(&t->raw_trie, a->content, a->len, (int32_t)i);
        }
        if (rc < 0) {
            tok_buf_free(&norm);
            return ft_fail(err, "%s: added_tokens: out of memory", t->name);
        }
    }
    tok_buf_free(&norm);
    return 0;
}

/* A merge is "a b" (one space) or ["a", "b"]. Sets *skip for "#version" header lines, which
 * HF drops before numbering ranks. */
static int merge_parts(const ft_tokenizer *t, json_t *m, size_t i, const char **a, size_t *an,
                       const char **b, size_t *bn, bool *skip, ft_error *err)
{
    *skip = false;
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        if (n >= 8 && memcmp(s, "#version", 8) == 0) {
            *skip = true;
            return 0;
        }
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
            return ft_fail(err, "%s: model.merges[%zu]: \"%s\" must be two tokens separated by one "
                                "space",
                           t->name, i, s);
        *a = s;
        *an = (size_t)(sp - s);
        *b = sp + 1;
        *bn = n - *an - 1;
        if (*an == 0 || *bn == 0)
            return ft_fail(err, "%s: model.merges[%zu]: \"%s\" has an empty token", t->name, i, s);
        return 0;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *an = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *bn = json_string_length(json_array_get(m, 1));
        if (*an == 0 || *bn == 0)
            return ft_fail(err, "%s: model.merges[%zu]: a token of the pair is empty", t->name, i);
        return 0;
    }
    return ft_fail(err, "%s: model.merges[%zu]: expected string or [a,b] pair", t->name, i);
}

static int parse_merges(ft_tokenizer *t, json_t *merges, ft_error *err)
{
    size_t n = json_array_size(merges);
    if (tok_pairmap_init(&t->merges, n) < 0)
        return ft_fail(err, "%s: model.merges: out of memory", t->name);
    tok_buf cat = {0};
    uint32_t rank = 0;
    for (size_t i = 0; i < n; i++) {
        const char *a = NULL, *b = NULL;
        size_t an = 0, bn = 0;
        bool skip;
        if (merge_parts(t, json_array_get(merges, i), i, &a, &an, &b, &bn, &skip, err) < 0)
            goto fail;
        if (skip)
            continue;
        /* Merges name tokens by their vocabulary strings; by_string holds only the model
         * vocabulary at this point. */
        int32_t ia = tok_index_get(&t->by_string, a, an);
        int32_t ib = tok_index_get(&t->by_string, b, bn);
        cat.len = 0;
        if (tok_buf_append(&cat, a, an) < 0 || tok_buf_append(&cat, b, bn) < 0) {
            ft_fail(err, "%s: model.merges: out of memory", t->name);
            goto fail;
        }
        int32_t im = tok_index_get(&t->by_string, cat.data, cat.len);
        if (ia < 0 || ib < 0 || im < 0) {
            const char *what = ia < 0 ? a : ib < 0 ? b : cat.data;
            int what_len = (int)(ia < 0 ? an : ib < 0 ? bn : cat.len);
            ft_fail(err, "%s: model.merges[%zu]: token \"%.*s\" is not in model.vocab", t->name, i,
                    what_len, what);
            goto fail;
        }
        tok_pairmap_put(&t->merges, ia, ib, rank++, im);
    }
    tok_buf_free(&cat);
    return 0;
fail:
    tok_buf_free(&cat);
    return -1;
}

static int parse_model(ft_tokenizer *t, json_t *root, ft_error *err)
{
    json_t *model = json_object_get(root, "model");
    if (!model)
        return ft_fail(err, "%s: model: missing (a tokenizer.json needs a \"model\" object)", t->name);
    if (!json_is_object(model))
        return ft_fail(err, "%s: model: expected an object", t->name);
    if (check_model_options(t, model, err) < 0)
        return -1;
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return ft_fail(err, "%s: model.vocab: expected an object {token: id}", t->name);
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges))
        return ft_fail(err, "%s: model.merges: expected an array", t->name);
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added))
        return ft_fail(err, "%s: added_tokens: expected an array", t->name);

    if (scan_ids(t, vocab, added, &t->n_ids, err) < 0)
        return -1;
    size_t n = (size_t)t->n_ids;
    table strs = {{0}, calloc(n, sizeof(uint32_t)), calloc(n, sizeof(uint32_t))};
    table keys = {{0}, calloc(n, sizeof(uint32_t)), calloc(n, sizeof(uint32_t))};
    bool *has_key = calloc(n, sizeof *has_key);
    t->id_flags = calloc(n, 1);
    int rc = -1;
    if (!strs.off || !strs.len || !keys.off || !keys.len || !has_key || !t->id_flags) {
        ft_fail(err, "%s: out of memory for %zu ids", t->name, n);
        goto done;
    }
    if (parse_vocab(t, vocab, &strs, &keys, has_key, err) < 0)
        goto done;

    /* The pools are final for the model vocabulary: index it, resolve merges, then add the
     * added tokens (which may only grow the string pool, so re-point the index after). */
    t->keys = keys.pool.data;
    t->key_off = keys.off;
    t->key_len = keys.len;
    keys = (table){{0}, NULL, NULL};
    if (tok_index_init(&t->by_key, json_object_size(vocab), t->keys, t->key_off, t->key_len) < 0 ||
        tok_index_init(&t->by_string, json_object_size(vocab) + json_array_size(added), strs.pool.data,
                       strs.off, strs.len) < 0) {
        ft_fail(err, "%s: out of memory for the vocabulary index", t->name);
        goto done;
    }
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (!(t->id_flags[id] & TOK_ID_PRESENT))
            continue;
        tok_index_put(&t->by_string, id, false);
        if (has_key[id])
            tok_index_put(&t->by_key, id, false);
    }
    if (parse_merges(t, merges, err) < 0)
        goto done;

    if (parse_added(t, added, (int32_t)json_object_size(vocab), &strs, err) < 0)
        goto done;
    t->strs = strs.pool.data;
    t->str_off = strs.off;
    t->str_len = strs.len;
    strs = (table){{0}, NULL, NULL};
    t->by_string.pool = t->strs;
    for (size_t i = 0; i < t->n_added; i++)
        tok_index_put(&t->by_string, t->added[i].id, true);

    t->ignore_merges = opt_bool(model, "ignore_merges");
    t->byte_fallback = opt_bool(model, "byte_fallback");
    t->fuse_unk = opt_bool(model, "fuse_unk");
    t->unk_id = -1;
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        t->unk_id = tok_index_get(&t->by_key, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0)
            t->unk_id = tok_index_get(&t->by_string, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0) {
            ft_fail(err, "%s: model.unk_token: \"%s\" is not in model.vocab", t->name,
                    json_string_value(unk));
            goto done;
        }
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_fallback_id[b] = tok_index_get(&t->by_key, name, 6);
        char one = (char)b;
        t->byte_char_id[b] = t->byte_level ? tok_index_get(&t->by_key, &one, 1) : -1;
    }
    rc = 0;
done:
    tok_buf_free(&strs.pool);
    free(strs.off);
    free(strs.len);
    tok_buf_free(&keys.pool);
    free(keys.off);
    free(keys.len);
    free(has_key);
    return rc;
}

static int load_json(const char *buf, size_t len, const char *name, const char *path,
                     ft_tokenizer **out, ft_error *err)
{
    *out = NULL;
    ft_tokenizer *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name))) {
        free(t);
        return ft_fail(err, "%s: out of memory", name);
    }
    t->hash = tok_fnv1a64(buf, len);
    t->unk_id = t->bos_id = t->eos_id = t->pad_id = -1;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_ALLOW_NUL, &je);
    if (!root) {
        ft_fail(err, "%s: line %d column %d: invalid JSON: %s (is the file truncated or not a "
                     "tokenizer.json?)",
                name, je.line, je.column, je.text);
        goto fail;
    }
    if (!json_is_object(root)) {
        ft_fail(err, "%s: expected a JSON object at the top level (a Hugging Face tokenizer.json)",
                name);
        goto fail;
    }
    if (tok_config_pipeline(t, root, err) < 0 || parse_model(t, root, err) < 0 ||
        build_tries(t, err) < 0 || tok_config_bos_eos(t, root, path, err) < 0)
        goto fail;
    t->kind = t->byte_level ? "byte_level_bpe" : "sentencepiece_bpe";
    json_decref(root);
    *out = t;
    return 0;
fail:
    json_decref(root);
    ft_tokenizer_free(t);
    return -1;
}

int ft_tokenizer_load_buffer(const char *json, size_t len, const char *name, ft_tokenizer **out,
                             ft_error *err)
{
    return load_json(json, len, name ? name : "(buffer)", NULL, out, err);
}

int ft_tokenizer_load(const char *path, ft_tokenizer **out, ft_error *err)
{
    char *buf;
    size_t len;
    *out = NULL;
    /* a FIFO or /dev/zero as tokenizer.json: one line, not a hang (util/input_file.h) */
    if (ft_input_read(path, "a tokenizer.json", FT_INPUT_MAX_TOKENIZER, &buf, &len, err) < 0)
        return -1;
    int rc = load_json(buf, len, path, path, out, err);
    free(buf);
    return rc;
}

void ft_tokenizer_free(ft_tokenizer *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->strs);
    free(t->str_off);
    free(t->str_len);
    free(t->id_flags);
    tok_index_free(&t->by_string);
    free(t->keys);
    free(t->key_off);
    free(t->key_len);
    tok_index_free(&t->by_key);
    tok_pairmap_free(&t->merges);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].norm_content);
    }
    free(t->added);
    tok_trie_free(&t->raw_trie);
    tok_trie_free(&t->norm_trie);
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].pattern);
        free(t->norm[i].content);
    }
    free(t->norm);
    for (size_t i = 0; i < t->n_stages; i++)
        pcre2_code_free(t->stages[i].re);
    for (size_t i = 0; i < t->n_dec; i++) {
        free(t->dec[i].pattern);
        free(t->dec[i].content);
    }
    free(t->dec);
    free(t);
}

/* ------------------------------------------------------------------ accessors */

int32_t ft_tokenizer_token_id(const ft_tokenizer *t, const char *token)
{
    return tok_index_get(&t->by_string, token, strlen(token));
}

const char *tok_spelling(const ft_tokenizer *t, int32_t id, size_t *len)
{
    if (t->id_flags[id] & TOK_ID_RESPELLED) {
        /* rare (normalized added tokens under a normalizer): a scan of the added tokens; the
         * last one with this id wins, as in HF's id -> token map */
        for (size_t i = t->n_added; i-- > 0;)
            if (t->added[i].id == id && t->added[i].norm_content) {
                *len = t->added[i].norm_len;
                return t->added[i].norm_content;
            }
    }
    *len = t->str_len[id];
    return t->strs + t->str_off[id];
}

const char *ft_tokenizer_token(const ft_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_ids || !(t->id_flags[id] & TOK_ID_PRESENT))
        return NULL;
    size_t len;
    return tok_spelling(t, id, &len);
}

bool ft_tokenizer_is_special(const ft_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_ids && (t->id_flags[id] & TOK_ID_SPECIAL);
}

int32_t ft_tokenizer_bos_id(const ft_tokenizer *t) { return t->bos_id; }
int32_t ft_tokenizer_eos_id(const ft_tokenizer *t) { return t->eos_id; }
int32_t ft_tokenizer_pad_id(const ft_tokenizer *t) { return t->pad_id; }
int ft_tokenizer_vocab_size(const ft_tokenizer *t) { return t->n_ids; }
const char *ft_tokenizer_kind(const ft_tokenizer *t) { return t->kind; }
uint64_t ft_tokenizer_hash(const ft_tokenizer *t) { return t->hash; }
