/* Fuzzer: ftmpi-prep's input side on one file: format detection, the reader (JSON Lines, a
 * JSON array, raw text lines, a whole text file), the templates and the tokenization of each
 * record into examples, with the Llama 3 and Llama 2 tokenizers of test/data (loaded once).
 *
 * Input: two control bytes (tokenizer, input kind, format, template, truncation, the
 * number of ranks to split the file over; seq_len), then the file. The file is read once as
 * one rank and once split over 2-4 ranks: every record must be seen exactly once either way
 * (prep_reader.h), so the totals must agree. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "prep/prep_examples.h"
#include "prep/prep_reader.h"
#include "prep/prep_template.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* in the build tree, where `make fuzzers` unpacks the real tokenizers (test/data/Makefile.inc) */
static const char *const files[] = {
    "test/data/tokenizers/llama3/tokenizer.json",
    "test/data/tokenizers/llama2/tokenizer.json",
};
static ft_tokenizer *tok[2];
static ft_tok_scratch *scratch[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *build = getenv("FT_BUILDDIR") ? getenv("FT_BUILDDIR") : FUZZ_BUILDDIR;
    for (int i = 0; i < 2; i++) {
        char path[4096];
        ft_error err;
        snprintf(path, sizeof path, "%s/%s", build, files[i]);
        if (ft_tokenizer_load(path, &tok[i], &err)) {
            fprintf(stderr, "fuzz_prep_jsonl: %s\n", err.msg);
            exit(1);
        }
        scratch[i] = ft_tok_scratch_new(tok[i]);
    }
    return 0;
}

typedef struct counts {
    const prep_template *tpl;
    const ft_tokenizer *tok;
    ft_tok_scratch *scratch;
    prep_render render;
    prep_examples ex;
    int max_len;
    prep_truncate truncate;
    int64_t records, bad;
} counts;

static int on_bad(void *vc, int64_t where, const char *problem, ft_error *err)
{
    counts *c = vc;
    c->bad++;
    return 0;
}

static int on_record(void *vc, json_t *obj, const char *text, size_t len, int64_t where,
                     ft_error *err)
{
    counts *c = vc;
    ft_error why;
    int rc = obj ? prep_render_json(c->tpl, obj, &c->render, &why)
                 : prep_render_text(c->tpl, text, len, &c->render, &why);
    if (rc) {
        c->bad++;
        return 0;
    }
    c->records++;
    prep_outcome out;
    return prep_examples_add(&c->ex, &c->render, c->tok, c->scratch, c->max_len, c->truncate,
                             &out, err);
}

/* Reads the file as `nranks` ranks; returns -1 on a fatal error. */
static int read_all(const char *path, prep_input_kind kind, int nranks, counts *c)
{
    ft_error err;
    prep_reader_cb cb = { on_record, on_bad, c };
    if (prep_examples_init(&c->ex, &err))
        return -1;
    int rc = 0;
    for (int r = 0; r < nranks && rc == 0; r++) {
        prep_read_result res;
        memset(&res, 0, sizeof res);
        rc = prep_read_share(path, 0, kind, r, nranks, &cb, &res, &err);
    }
    prep_examples_free(&c->ex);
    prep_render_free(&c->render);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const unsigned a = data[0], b = data[1];
    const int which = a & 1;
    const prep_input_kind kind = (prep_input_kind)((a >> 1) % 3);
    const prep_format formats[] = { PREP_FORMAT_AUTO,  PREP_FORMAT_ALPACA, PREP_FORMAT_DOLLY,
                                    PREP_FORMAT_SAMSUM, PREP_FORMAT_CHAT,  PREP_FORMAT_TEXT };
    const prep_template_kind kinds[] = { PREP_TPL_AUTO,         PREP_TPL_ALPACA,
                                         PREP_TPL_LLAMA3_CHAT,  PREP_TPL_LLAMA31_CHAT,
                                         PREP_TPL_LLAMA2_CHAT,  PREP_TPL_TEXT };
    prep_format fmt = kind == PREP_INPUT_JSON ? formats[(a >> 3) % 6] : PREP_FORMAT_TEXT;
    const prep_template_kind tk = kinds[(b >> 5) % 6];
    const prep_truncate truncate = (a & 0x80) ? PREP_TRUNCATE_DROP : PREP_TRUNCATE_RESPONSE;
    const int nranks = 2 + (a >> 6) % 3;
    const int max_len = 2 + (b & 0x1f) * 8;
    const char *path = fuzz_write_file("input.jsonl", data + 2, size - 2);

    ft_error err;
    if (fmt == PREP_FORMAT_AUTO) {
        if (prep_detect_file_format(path, &fmt, &err) || fmt == PREP_FORMAT_AUTO)
            return 0;
    }
    prep_template tpl;
    memset(&tpl, 0, sizeof tpl);
    if (prep_template_init(&tpl, fmt, tk, NULL, NULL, tok[which], NULL, &err))
        return 0;
    counts one = { .tpl = &tpl, .tok = tok[which], .scratch = scratch[which],
                   .max_len = max_len, .truncate = truncate };
    counts many = one;
    int rc1 = read_all(path, kind, 1, &one);
    int rc2 = read_all(path, kind, nranks, &many);
    prep_template_free(&tpl);
    if (rc1 == 0 && rc2 == 0 && (one.records != many.records || one.bad != many.bad)) {
        fprintf(stderr, "1 rank read %lld records + %lld bad, %d ranks %lld + %lld\n",
                (long long)one.records, (long long)one.bad, nranks, (long long)many.records,
                (long long)many.bad);
        abort();
    }
    return 0;
}
