/* The tokenized examples of one rank, in input order: ids and loss mask of each example,
 * concatenated. The mask rides in bit 31 of each entry (ids are < 2^31), so tokens and mask
 * travel together through sorting, exchange and packing.
 *
 * Example layout: [BOS] prompt... response... EOS with mask 1 on the response and EOS; the first
 * token of every example always has mask 0 (doc/formats.md: it is never the target of the
 * previous document).
 */
#ifndef FT_PREP_EXAMPLES_H
#define FT_PREP_EXAMPLES_H

#include <stdint.h>
#include <stdio.h>

#include "prep/prep_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#define PREP_TARGET 0x80000000u
#define PREP_ID(x) ((int32_t)((x) & ~PREP_TARGET))

typedef enum prep_truncate {
    PREP_TRUNCATE_RESPONSE, /* keep the first max_len tokens if a target remains, else drop */
    PREP_TRUNCATE_DROP,     /* drop every example longer than max_len */
} prep_truncate;

typedef enum prep_outcome { PREP_ADDED, PREP_TRUNCATED, PREP_DROPPED } prep_outcome;

typedef struct prep_examples {
    int64_t n, cap;
    int64_t *off; /* [n+1]: example i is tok[off[i], off[i+1]) */
    uint32_t *tok;
    size_t ntok, tok_cap;
} prep_examples;

int prep_examples_init(prep_examples *ex, ft_error *err);
void prep_examples_free(prep_examples *ex);

static inline int32_t prep_example_len(const prep_examples *ex, int64_t i)
{
    return (int32_t)(ex->off[i + 1] - ex->off[i]);
}

/* Encodes the pieces of r (text with special-token parsing off) and appends the example, or
 * not (*outcome), per the truncation policy with rows of max_len tokens. */
int prep_examples_add(prep_examples *ex, const prep_render *r, const ft_tokenizer *t,
                      ft_tok_scratch *s, int max_len, prep_truncate policy, prep_outcome *outcome,
                      ft_error *err);

/* Writes examples [first, end) as JSON lines {"ids":[...],"mask":[...]} (the --dump-examples
 * format, also the golden files' format). */
int prep_examples_dump(const prep_examples *ex, int64_t first, int64_t end, FILE *out,
                       ft_error *err);

#endif
