/* KV-cached forward of the model for generation.
 *
 * The decoder runs the trainer's block, ft_block_forward (src/model/block.h), on the
 * tokens that are new since the last call, and keeps the keys and values of all
 * earlier positions in a ft_kv_cache. What differs from training is only where the
 * block's k and v go and which attention reads them (the block's attention hook):
 *
 *   x = embed(ids)                                   new tokens only, [n, H]
 *   per layer: x = ft_block_forward(x)               the family's block, whatever it is;
 *              its k, v (after RoPE) land in cache rows len..len+n-1, and attention
 *              reads cache rows 0..len+n-1 (causal, the family's sliding window)
 *   logits = Norm_f(x[last]) Wout^T (+ b)             last new token only, [V] fp32
 *
 * Attention of the first chunk of a sequence (empty cache) is the trainer's
 * flash-attention forward on that chunk; later chunks and single decode steps use
 * the backend's attention_decode against the cache. A prompt longer than max_chunk
 * tokens is prefilled in chunks. Every position starts at 0 with the first token
 * (one document), as the trainer numbers the positions of a document.
 *
 * Precision: parameters, activations and the cache are stored in opt.dtype, the
 * precision of the parameters the source hands out (a bf16 checkpoint decodes in
 * bf16, on the GPU and the CPU, with the trainer's bf16 recipe: fp32 statistics,
 * fp32 accumulation, fp32 logits); fp32 parameters decode in fp32.
 *
 * Parameters come from an ft_param_source (acquired and released unit by unit, like
 * the model does); activations, RoPE tables and the cache are owned by the decoder. */
#ifndef FT_GENERATE_DECODER_H
#define FT_GENERATE_DECODER_H

#include <stdint.h>

#include "backend/backend.h"
#include "generate/kv_cache.h"
#include "model/layout.h"
#include "model/model.h"
#include "util/error.h"

typedef struct ft_decoder ft_decoder;

typedef struct ft_decoder_options {
    int capacity;  /* positions the cache holds (prompt + generated); <= max_position_embeddings */
    int max_chunk; /* tokens per forward call (activation buffers); 0: 256 */
    ft_dtype dtype; /* storage of the source's parameters, activations and cache */
} ft_decoder_options;

/* layout and src are borrowed and must outlive the decoder. */
int ft_decoder_create(ft_decoder **out, const ft_model_layout *layout, ft_backend *be,
                      const ft_param_source *src, const ft_decoder_options *opt, ft_error *err);
void ft_decoder_free(ft_decoder *d);

/* Applies LoRA adapters in every block from now on (a LoRA run's eval samples): the
 * decoder acquires layer l's adapter unit beside the block. adapters is copied; what it
 * points to must outlive the decoder. */
int ft_decoder_set_adapters(ft_decoder *d, const ft_lora_adapters *adapters, ft_error *err);

/* Starts a new sequence (empties the cache). */
void ft_decoder_reset(ft_decoder *d);

/* Appends n tokens to the sequence and writes the logits that predict the token after
 * the last of them, [vocab] on the host. Prefill is one call with the prompt; each
 * decode step is a call with n = 1. Fails (sequence unchanged) on an id outside the
 * vocabulary or when the cache would overflow. */
int ft_decoder_append(ft_decoder *d, const int32_t *ids, int n, float *logits_host,
                      ft_error *err);

int ft_decoder_len(const ft_decoder *d);      /* positions in the cache */
int ft_decoder_capacity(const ft_decoder *d);
int ft_decoder_vocab(const ft_decoder *d);

#endif
