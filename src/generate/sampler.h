/* Choosing the next token from the logits.
 *
 *   temperature = 0: greedy, the argmax (the lowest id among equal maxima).
 *   temperature > 0: a draw from softmax(logits / T), restricted first to the top_k
 *   largest logits (top_k = 0: no limit), then to the nucleus: the smallest set of the
 *   most probable remaining tokens whose probabilities (renormalised over what top-k
 *   kept) sum to at least top_p (top_p = 1: no limit). Candidates are ranked by logit,
 *   ties by lower id, so top_k = 1 is exactly greedy.
 *
 * Draws are a pure function of (seed, stream, step) through the counter-based RNG
 * (src/util/rng.h): the same prompt (stream) with the same seed gives the same tokens
 * wherever and in whatever order it is generated. */
#ifndef FT_GENERATE_SAMPLER_H
#define FT_GENERATE_SAMPLER_H

#include <stdint.h>

#include "util/error.h"

typedef struct ft_sampler_config {
    double temperature; /* >= 0 */
    int top_k;          /* >= 0; 0 = all */
    double top_p;       /* (0, 1] */
    uint64_t seed;
} ft_sampler_config;

typedef struct ft_sampler ft_sampler;

/* Checks the ranges; the message names the option. */
int ft_sampler_config_check(const ft_sampler_config *c, ft_error *err);

int ft_sampler_create(ft_sampler **out, const ft_sampler_config *c, int vocab, ft_error *err);
void ft_sampler_free(ft_sampler *s);

/* The token for logits[vocab] (host), at draw `step` of `stream`. */
int32_t ft_sampler_pick(ft_sampler *s, const float *logits, uint64_t stream, uint64_t step);

/* The argmax (lowest id among equal maxima); NaN logits are never chosen. */
int32_t ft_argmax(const float *logits, int vocab);

#endif
