/* ftmpi-generate's batch mode: one JSON object of the --prompts file in, the session's
 * completion of it out, as an object for the batch runner (generate/batch.h) to write.
 * Which rank takes which line, and the output file, are the runner's. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "generate/batch.h"
#include "tools/ftmpi_generate.h"

typedef struct batch_ctx {
    const gen_cli *c;
    ft_gen_session *s;
    const char *path;
    long tokens;
} batch_ctx;

/* The helpers below name no file or line: batch_item adds "FILE:LINE: " once. */
static int optional_string(const json_t *in, const char *key, const char **v, ft_error *err)
{
    const json_t *x = json_object_get(in, key);
    *v = NULL;
    if (!x)
        return 0;
    if (!json_is_string(x))
        return ft_fail(err, "\"%s\" must be a string", key);
    *v = json_string_value(x);
    return 0;
}

static int ids_of(const json_t *in, int32_t **ids, int *n, ft_error *err)
{
    const json_t *arr = json_object_get(in, "ids");
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return ft_fail(err, "with --ids each line needs a non-empty \"ids\" array");
    size_t k = json_array_size(arr);
    if (k > INT_MAX)
        return ft_fail(err, "too many ids");
    *ids = malloc(k * sizeof **ids);
    if (!*ids)
        return ft_fail(err, "out of host memory");
    for (size_t i = 0; i < k; i++) {
        const json_t *x = json_array_get(arr, i);
        json_int_t v = json_is_integer(x) ? json_integer_value(x) : -1;
        if (v < 0 || v > INT32_MAX) {
            free(*ids);
            return ft_fail(err, "\"ids\"[%zu] is not a token id (an integer from 0 to the "
                           "vocabulary size - 1)", i);
        }
        (*ids)[i] = (int32_t)v;
    }
    *n = (int)k;
    return 0;
}

static int batch_item(void *vctx, const json_t *in, long index, long line, json_t **res,
                      ft_error *err)
{
    batch_ctx *b = vctx;
    const gen_cli *c = b->c;
    ft_gen_output out;
    int rc;
    if (c->ids_mode) {
        int32_t *ids = NULL;
        int n = 0;
        rc = ids_of(in, &ids, &n, err);
        if (!rc) {
            rc = ft_gen_session_run_ids(b->s, ids, n, (uint64_t)index, &out, err);
            free(ids);
        }
    } else {
        const char *prompt, *input, *system;
        rc = optional_string(in, "prompt", &prompt, err) ||
             optional_string(in, "input", &input, err) ||
             optional_string(in, "system", &system, err);
        if (!rc && !prompt)
            rc = ft_fail(err, "no \"prompt\" string");
        if (!rc && input && c->s.tmpl != FT_TEMPLATE_ALPACA)
            rc = ft_fail(err, "\"input\" is for --template alpaca");
        if (!rc)
            rc = ft_gen_session_run(b->s, prompt, input ? input : c->input,
                                    system ? system : c->system, (uint64_t)index, &out, err);
    }
    if (rc) {
        ft_fail_context(err, "%s:%ld", b->path, line);
        return -1;
    }
    json_t *o = json_deep_copy(in);
    json_t *ids = json_array();
    int bad = !o || !ids;
    for (int i = 0; i < out.n && !bad; i++)
        bad = json_array_append_new(ids, json_integer(out.ids[i])) != 0;
    if (!bad && out.text) {
        char *clean = ft_utf8_sanitize(out.text, out.text_len);
        bad = !clean || json_object_set_new(o, "completion", json_string(clean)) != 0;
        free(clean);
    }
    bad = bad || json_object_set_new(o, "ids", ids) != 0;
    ids = NULL;
    bad = bad || json_object_set_new(o, "stop", json_string(ft_stop_reason_name(out.stop))) != 0;
    b->tokens += out.n;
    ft_gen_output_free(&out);
    json_decref(ids);
    if (bad) {
        json_decref(o);
        return ft_fail(err, "out of host memory building the output of line %ld", line);
    }
    *res = o;
    return 0;
}

int gen_batch_run(const gen_cli *c, ft_gen_session *s, long *tokens, bool *report,
                  ft_error *err)
{
    batch_ctx b = { .c = c, .s = s, .path = c->prompts_path };
    const int rc = ft_batch_run(MPI_COMM_WORLD, c->prompts_path, c->out_path, batch_item, &b,
                                report, err);
    *tokens = b.tokens;
    return rc;
}
