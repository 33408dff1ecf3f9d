/* The Llama model on a backend: forward and backward of one micro-batch.
 *
 * The model owns activations and scratch, never parameters. Parameters and their
 * gradients are reached unit by unit through an ft_param_source, which is how the
 * sharding engine gathers a unit just before it is used, frees it after, and learns
 * when a unit's gradient is complete. The model calls, in order:
 *   forward:  acquire(0) ... acquire(L) [blocks], head; backward in reverse;
 * and for every acquire a matching release. Each pass starts with plan(), which lists
 * the units in the order they will be acquired. grads(u) is only called between
 * acquire(u) and release(u); grad_done(u) follows the last write to unit u's grads.
 */
#ifndef FT_MODEL_MODEL_H
#define FT_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/ckpt_keep.h"
#include "model/layout.h"
#include "model/lora.h"
#include "util/error.h"

typedef struct ft_param_source {
    void *ctx;
    /* Announces the order of acquire() calls of the pass that starts (may be NULL):
     * lets a sharding engine prefetch the next unit while the current one computes. */
    void (*plan)(void *ctx, const int *units, int n);
    /* Returns the unit's parameters (flat, unit layout) on the backend, stored in the
     * model's dtype (ft_model_options.dtype). */
    const void *(*acquire)(void *ctx, int unit);
    /* Optional (NULL: acquire). acquire() for the embedding lookup, which reads only the
     * rows ids[0..n) (host copies of the ids it looks up) of the unit's leading matrix: a
     * source may return instead a table of just those rows, with *ids_dev (the caller's
     * backend ids on entry) set to the backend ids to read it with. Release as acquire. */
    const void *(*acquire_rows)(void *ctx, int unit, const int32_t *ids, size_t n,
                                const int32_t **ids_dev);
    /* Returns the unit's gradient accumulator (flat, stored as grad_dtype) on the
     * backend. */
    void *(*grads)(void *ctx, int unit);
    /* Optional (NULL: use grads). grads() for a caller that writes the unit's 2-D weights'
     * gradients (the unit's leading decay_numel elements) itself: *first is true when this
     * is the unit's first request since its gradient was reset (each step; at ZeRO stages
     * 2-3 each micro-batch), and then that part holds no value yet: every element of it
     * must be written (the weight-gradient GEMMs with beta 0) before anything adds to it.
     * The rest of the unit is zero as with grads(). */
    void *(*grads_first)(void *ctx, int unit, bool *first);
    void (*release)(void *ctx, int unit);
    /* Called once per micro-batch when unit's gradient contribution is complete. */
    void (*grad_done)(void *ctx, int unit);
    /* Storage of the gradients grads() returns: fp32 (accumulators; the default), or
     * bf16 (a bf16-reduced micro-batch gradient, with the model's dtype bf16). */
    ft_dtype grad_dtype;
} ft_param_source;

/* LoRA adapters as a decoder meets them (model/lora.h): their layout (unit l = layer
 * l), what they are, and the source that hands out their units. Borrowed. */
typedef struct ft_lora_adapters {
    const ft_model_layout *layout;
    const ft_lora_config *lora;
    ft_param_source src;
} ft_lora_adapters;

/* One micro-batch on the host, in dataset-row form (doc/formats.md). */
typedef struct ft_host_batch {
    int batch;              /* rows */
    int seq_len;            /* T; rows hold T+1 tokens */
    const uint32_t *tokens; /* [batch, T+1] */
    const uint8_t *loss_mask; /* [batch, T+1] */
    const int32_t *segment;   /* [batch, T+1] or NULL: one document per row */
    /* Training: the global sample number of row 0 (row r is sample first_sample + r,
     * the trainer's position in its data order), which LoRA dropout's masks follow
     * (model/lora.h), so that they do not depend on the rank or micro-batch. */
    int64_t first_sample;
} ft_host_batch;

typedef struct ft_model ft_model;

#define FT_HEAD_MIN_GROUP_ROWS 2048
/* Derived logits chunks of at least this many rows are a multiple of it (GEMM tiles). */
#define FT_HEAD_CHUNK_ALIGN 128

typedef struct ft_model_options {
    int max_batch;                 /* micro-batch rows the buffers are sized for */
    int seq_len;
    bool activation_checkpointing; /* keep only block inputs; recompute in backward */
    /* With activation_checkpointing: blocks 0 .. checkpoint_layers-1 recompute their
     * activations in the backward and the later ones keep theirs (memory for time,
     * a set of activations a block); 0, or the layer count or more: every block. */
    int checkpoint_layers;
    /* With activation_checkpointing: what each block that recomputes keeps of its
     * forward (model/ckpt_keep.h): nothing; attention's output and log-sum-exp, N Q
     * values and N heads floats a block for the recompute's attention (a sixth of it at
     * the Llama-3.2-1B shape, seq_len 4096); or the attention half, N (2 Q + 2 KV + H)
     * values for about a third of it (ft_model_recompute_flops). */
    ft_ckpt_keep checkpoint_keep;
    /* The LM head's memory (head.c): the dlogits of head_group_rows target rows are
     * kept together so that the output weight's gradient is one GEMM per group, and
     * the logits are computed head_chunk_rows at a time over their dlogits (derived:
     * a group), or, in the bf16 recipe with an output bias (GPT-J), as fp32 in a
     * buffer of their own (derived: an eighth of the budget, rounded down to
     * FT_HEAD_CHUNK_ALIGN rows). 0 derives them from head_budget_bytes (0: 256 MiB):
     * one group for the whole micro-batch when it fits, else groups of at least
     * FT_HEAD_MIN_GROUP_ROWS rows (or the micro-batch) even beyond the budget, since
     * thinner groups re-read the gradient more often. */
    size_t head_budget_bytes;
    int head_group_rows;
    int head_chunk_rows;
    /* Storage of activations, their gradients and the working parameters the source
     * hands out: fp32, or bf16 for the mixed-precision recipe (doc/design.md,
     * "Numerics"). Statistics, the loss and parameter gradients are fp32; the LM
     * head's logits are stored as the activations (head.c). */
    ft_dtype dtype;
    /* LoRA (model/lora.h; NULL or rank 0: none). The source's units are then frozen:
     * grads() and grad_done() are never called for them, and the embedding is not
     * acquired for a backward. The adapters, unit l of adapter_layout for layer l,
     * come from a second source (ft_model_set_adapters) in the blocks' order:
     * forward 0..L-1, backward L-1..0. Both must outlive the model. */
    const ft_lora_config *lora;
    const ft_model_layout *adapter_layout;
    uint64_t lora_dropout_seed; /* the run's seed: LoRA dropout's masks (lora->dropout > 0) */
} ft_model_options;

int ft_model_create(ft_model **out, const ft_model_layout *layout, ft_backend *be,
                    const ft_model_options *opt, ft_error *err);
/* The adapters' source (LoRA), copied; used by every later pass. */
void ft_model_set_adapters(ft_model *m, const ft_param_source *adapters);
void ft_model_free(ft_model *m);

/* How many blocks, from the first, recompute their activations in the backward: 0
 * without activation checkpointing, else checkpoint_layers with 0 or more than the
 * layer count meaning every block (ft_model_options). */
int ft_model_checkpointed_blocks(bool activation_checkpointing, int checkpoint_layers,
                                 int layers);

/* The mean number of keys a query of a row of seq_len tokens sees (causal, within the
 * sliding window if any, one document a row): (seq_len + 1) / 2 without a window. */
double ft_model_mean_keys(const ft_model_config *c, int seq_len);

/* The FLOPs one block's recompute costs for `tokens` tokens in rows of seq_len (the
 * matmuls' multiply-adds times 2 and attention's two products over the keys a query
 * sees, causal and windowed, without documents) with `keep` kept of its forward
 * (ft_model_options.checkpoint_keep): what the planner weighs checkpointing by. */
double ft_model_recompute_flops(const ft_model_config *c, long tokens, int seq_len,
                                ft_ckpt_keep keep);

/* Fills o's head_group_rows and head_chunk_rows where they are 0, from
 * head_budget_bytes, the vocabulary V, the micro-batch's tokens, the bytes of a dlogit
 * (the activations' storage) and whether the logits are fp32 chunks apart from the
 * dlogits (bf16 with an output bias): what ft_model_create does. */
void ft_model_resolve_head_rows(ft_model_options *o, size_t V, size_t tokens, size_t dlogit_bytes,
                                bool fp32_chunks);
/* Bytes of activation and scratch memory the model allocated on the backend. */
size_t ft_model_activation_bytes(const ft_model *m);
/* What ft_model_create would allocate, without allocating (the memory planner). */
size_t ft_model_estimate_activation_bytes(const ft_model_layout *layout,
                                          const ft_model_options *opt);

/* Forward and backward of one micro-batch. Gradients accumulate (+=) into the
 * source's grads, scaled so that the per-token gradient is grad_scale times the
 * gradient of that token's loss (pass 1 / number of target tokens in the global
 * batch). Returns the sum of the batch's target-token losses in *loss_sum and the
 * number of target tokens in *n_targets. */
int ft_model_train_micro(ft_model *m, const ft_param_source *src, const ft_host_batch *b,
                         float grad_scale, double *loss_sum, long *n_targets, ft_error *err);

/* Forward only: loss sum and target count, no gradients touched. */
int ft_model_eval_micro(ft_model *m, const ft_param_source *src, const ft_host_batch *b,
                        double *loss_sum, long *n_targets, ft_error *err);

/* Forward only: logits for every position, [batch*T, vocab] into host memory. */
int ft_model_logits(ft_model *m, const ft_param_source *src, const ft_host_batch *b,
                    float *logits_host, ft_error *err);

#endif
