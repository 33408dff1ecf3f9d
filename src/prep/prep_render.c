/* The render buffer (prep_template.h's prep_render): the pieces a template appends, text runs
 * merged as HF encodes them. Apart from the templates so that the alpaca-style prompts
 * (prep_template.c) and the chat templates (prep_chat.c) append through one set of rules. */
#include "prep/prep_template_internal.h"

#include <stdlib.h>
#include <string.h>

void prep_render_reset(prep_render *r) { r->n = r->len = 0; }

void prep_render_free(prep_render *r)
{
    free(r->pieces);
    free(r->text);
    memset(r, 0, sizeof *r);
}

int prep_oom(ft_error *err) { return ft_fail(err, "out of host memory"); }

static int push_piece(prep_render *r, prep_piece p, ft_error *err)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        prep_piece *np = realloc(r->pieces, cap * sizeof *np);
        if (!np)
            return prep_oom(err);
        r->pieces = np, r->cap = cap;
    }
    r->pieces[r->n++] = p;
    return 0;
}

int prep_add_special(prep_render *r, int32_t id, bool target, ft_error *err)
{
    if (id < 0)
        return 0;
    return push_piece(r, (prep_piece){ 0, 0, id, target }, err);
}

/* Appends text to the last piece when it is text with the same target flag (one encode call,
 * as HF encodes the text between two special tokens in one go), else starts a new piece. */
int prep_add_text(prep_render *r, const char *s, size_t n, bool target, ft_error *err)
{
    if (n == 0)
        return 0;
    if (r->len + n > r->text_cap) {
        size_t cap = r->text_cap ? r->text_cap : 256;
        while (cap < r->len + n)
            cap *= 2;
        char *nt = realloc(r->text, cap);
        if (!nt)
            return prep_oom(err);
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

int prep_add_cstr(prep_render *r, const char *s, bool target, ft_error *err)
{
    return prep_add_text(r, s, strlen(s), target, err);
}
