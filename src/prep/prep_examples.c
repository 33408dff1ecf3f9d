#include "prep/prep_examples.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int prep_examples_init(prep_examples *ex, ft_error *err)
{
    memset(ex, 0, sizeof *ex);
    ex->cap = 1024;
    ex->off = malloc((size_t)(ex->cap + 1) * sizeof *ex->off);
    if (!ex->off)
        return ft_fail(err, "out of host memory");
    ex->off[0] = 0;
    return 0;
}

void prep_examples_free(prep_examples *ex)
{
    free(ex->off);
    free(ex->tok);
    memset(ex, 0, sizeof *ex);
}

static int reserve_tok(prep_examples *ex, size_t extra, ft_error *err)
{
    if (ex->ntok + extra <= ex->tok_cap)
        return 0;
    size_t cap = ex->tok_cap ? ex->tok_cap : 1 << 16;
    while (cap < ex->ntok + extra)
        cap *= 2;
    uint32_t *nt = realloc(ex->tok, cap * sizeof *nt);
    if (!nt)
        return ft_fail(err, "out of host memory (%zu tokens)", cap);
    ex->tok = nt, ex->tok_cap = cap;
    return 0;
}

int prep_examples_add(prep_examples *ex, const prep_render *r, const ft_tokenizer *t,
                      ft_tok_scratch *s, int max_len, prep_truncate policy, prep_outcome *outcome,
                      ft_error *err)
{
    if (ex->n == ex->cap) {
        int64_t cap = 2 * ex->cap;
        int64_t *no = realloc(ex->off, (size_t)(cap + 1) * sizeof *no);
        if (!no)
            return ft_fail(err, "out of host memory");
        ex->off = no, ex->cap = cap;
    }
    size_t begin = ex->ntok;
    for (size_t p = 0; p < r->n; p++) {
        const prep_piece *pc = &r->pieces[p];
        uint32_t flag = pc->target ? PREP_TARGET : 0;
        if (pc->special >= 0) {
            if (reserve_tok(ex, 1, err))
                goto fail;
            ex->tok[ex->ntok++] = (uint32_t)pc->special | flag;
            continue;
        }
        int32_t *ids;
        size_t n;
        if (ft_tokenizer_encode_with(t, s, r->text + pc->off, pc->len, false, &ids, &n, err))
            goto fail;
        if (reserve_tok(ex, n, err)) {
            free(ids);
            goto fail;
        }
        for (size_t i = 0; i < n; i++)
            ex->tok[ex->ntok + i] = (uint32_t)ids[i] | flag;
        ex->ntok += n;
        free(ids);
    }
    size_t len = ex->ntok - begin;
    if (len == 0) {
        *outcome = PREP_DROPPED;
        return 0;
    }
    ex->tok[begin] &= ~PREP_TARGET;
    *outcome = PREP_ADDED;
    if (len > (size_t)max_len) {
        size_t first_target = 0;
        while (first_target < len && !(ex->tok[begin + first_target] & PREP_TARGET))
            first_target++;
        if (policy == PREP_TRUNCATE_DROP || first_target >= (size_t)max_len) {
            ex->ntok = begin;
            *outcome = PREP_DROPPED;
            return 0;
        }
        ex->ntok = begin + (size_t)max_len;
        *outcome = PREP_TRUNCATED;
    }
    ex->off[++ex->n] = (int64_t)ex->ntok;
    return 0;
fail:
    ex->ntok = begin;
    return -1;
}

int prep_examples_dump(const prep_examples *ex, int64_t first, int64_t end, FILE *out,
                       ft_error *err)
{
    for (int64_t i = first; i < end; i++) {
        const uint32_t *t = ex->tok + ex->off[i];
        int32_t n = prep_example_len(ex, i);
        fputs("{\"ids\":[", out);
        for (int32_t k = 0; k < n; k++)
            fprintf(out, k ? ",%d" : "%d", PREP_ID(t[k]));
        fputs("],\"mask\":[", out);
        for (int32_t k = 0; k < n; k++)
            fputs(k ? (t[k] & PREP_TARGET ? ",1" : ",0") : (t[k] & PREP_TARGET ? "1" : "0"), out);
        fputs("]}\n", out);
    }
    if (ferror(out))
        return ft_fail(err, "cannot write the example dump: %s", strerror(errno));
    return 0;
}
