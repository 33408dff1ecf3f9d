#include "generate/generate.h"

#include <stdlib.h>

const char *ft_stop_reason_name(ft_stop_reason r)
{
    switch (r) {
    case FT_STOP_EOS: return "eos";
    case FT_STOP_LENGTH: return "length";
    case FT_STOP_CONTEXT: return "context";
    }
    return "?";
}

static int is_stop(const ft_gen_options *o, int32_t id)
{
    for (int i = 0; i < o->n_stop; i++)
        if (o->stop_ids[i] == id)
            return 1;
    return 0;
}

int ft_generate(ft_decoder *d, ft_sampler *s, const int32_t *prompt, int n_prompt,
                const ft_gen_options *o, uint64_t stream, ft_gen_result *r, ft_error *err)
{
    *r = (ft_gen_result){ .stop = FT_STOP_LENGTH };
    if (n_prompt < 1)
        return ft_fail(err, "empty prompt");
    if (n_prompt > ft_decoder_capacity(d))
        return ft_fail(err, "the prompt has %d tokens; the context holds %d (the model's "
                       "max_position_embeddings or the cache size)",
                       n_prompt, ft_decoder_capacity(d));
    ft_decoder_reset(d);
    const int vocab = ft_decoder_vocab(d);
    float *logits = malloc((size_t)vocab * sizeof(float));
    r->ids = malloc(((size_t)o->max_new_tokens + 1) * sizeof(int32_t));
    if (!logits || !r->ids) {
        free(logits);
        free(r->ids);
        r->ids = NULL;
        return ft_fail(err, "out of host memory");
    }
    int rc = ft_decoder_append(d, prompt, n_prompt, logits, err);
    for (int step = 0; !rc && step < o->max_new_tokens; step++) {
        const int32_t tok = ft_sampler_pick(s, logits, stream, (uint64_t)step);
        if (is_stop(o, tok)) {
            r->stop = FT_STOP_EOS;
            break;
        }
        r->ids[r->n++] = tok;
        if (r->n == o->max_new_tokens) {
            r->stop = FT_STOP_LENGTH;
            break;
        }
        if (ft_decoder_len(d) == ft_decoder_capacity(d)) {
            r->stop = FT_STOP_CONTEXT;
            break;
        }
        rc = ft_decoder_append(d, &tok, 1, logits, err);
    }
    free(logits);
    if (rc) {
        free(r->ids);
        r->ids = NULL;
        r->n = 0;
        return -1;
    }
    return 0;
}
