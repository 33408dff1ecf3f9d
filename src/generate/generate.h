/* The generation loop of one prompt: prefill the prompt into the KV cache, then pick a
 * token from the logits, stop or append it, repeat.
 *
 *   logits = decoder.append(prompt)
 *   for step = 0, 1, ...:
 *       tok = sampler.pick(logits, stream, step)
 *       tok is a stop id       -> done ("eos"; tok is not part of the completion)
 *       keep tok
 *       max_new_tokens reached -> done ("length")
 *       cache full             -> done ("context")
 *       logits = decoder.append(tok)
 */
#ifndef FT_GENERATE_GENERATE_H
#define FT_GENERATE_GENERATE_H

#include <stdint.h>

#include "generate/decoder.h"
#include "generate/sampler.h"

typedef enum ft_stop_reason {
    FT_STOP_EOS = 0,  /* a stop id was generated */
    FT_STOP_LENGTH,   /* max_new_tokens generated */
    FT_STOP_CONTEXT,  /* the KV cache (context window) is full */
} ft_stop_reason;

const char *ft_stop_reason_name(ft_stop_reason r); /* "eos" | "length" | "context" */

typedef struct ft_gen_options {
    int max_new_tokens;      /* >= 0 */
    const int32_t *stop_ids; /* may be NULL when n_stop == 0 */
    int n_stop;
} ft_gen_options;

typedef struct ft_gen_result {
    int32_t *ids;            /* generated ids, stop id excluded; malloc'd, caller frees */
    int n;
    ft_stop_reason stop;
} ft_gen_result;

/* Generates a completion of prompt[0..n_prompt) from an empty sequence (the decoder is
 * reset first). stream identifies the prompt for the sampler's random draws. */
int ft_generate(ft_decoder *d, ft_sampler *s, const int32_t *prompt, int n_prompt,
                const ft_gen_options *o, uint64_t stream, ft_gen_result *r, ft_error *err);

#endif
