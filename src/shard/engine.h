/* The parameter engine: owns parameters, gradients and optimizer state unit by unit
 * (src/model/layout.h), hands units to the model through an ft_param_source, reduces
 * gradients across ranks and runs the optimizer.
 *
 * zero_stage 0 is plain data parallelism: every rank holds every unit; gradients are
 * summed with one all-reduce per unit at the end of the accumulation window (stage 1:
 * a reduce-scatter, each rank updating its slice), started beside the backward.
 * Stages 1-3 are ZeRO: each rank owns one contiguous slice of every unit's
 * optimizer state (1), also of its gradients (2), also of its parameters (3, gathered
 * unit by unit around their use and freed after). See engine_internal.h for what
 * each stage keeps.
 *
 * Precision (ft_engine_options.precision, the run's policy). With params = bf16 the
 * optimizer updates an fp32 master copy and the working parameters are its bf16
 * rounding (the values the model sees are exactly bf16 values). weights says how
 * they are handed to the model: fp32 values (stage 3
 * then stores and gathers bf16 bits and widens them), or bf16 bits (the mixed-precision
 * recipe: resident units and gathers hold bits only, and stage 3 makes each rank's bits
 * from its master shard at gather time instead of storing them). Gradients are fp32.
 */
#ifndef FT_SHARD_ENGINE_H
#define FT_SHARD_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "config/run_config.h"
#include "io/h5file.h"
#include "model/layout.h"
#include "model/model.h"

typedef struct ft_engine ft_engine;

typedef struct ft_engine_options {
    int zero_stage;
    /* the run's precision policy (util/precision.h): params (the working values;
     * bf16 with an fp32 master), weights (how the source hands them out: fp32, or
     * bf16 bits, which needs params bf16) and reduction (bf16: half the bytes, partial
     * sums rounded to bf16) */
    ft_precision precision;
    ft_optimizer_type optimizer;
    /* fp32 master and optimizer moments in host memory, updated by the CPU; the
     * device keeps working parameters and gradients only */
    bool offload_optimizer;
    /* A frozen engine (the base model under LoRA) keeps the working parameters only,
     * in precision.weights/params (engine_frozen.c): no gradients, master, optimizer
     * state or offload (offload_optimizer is ignored). Its source has grads and
     * grad_done NULL; zero_grads is a no-op and reduce_grads, grad_norm and step fail
     * with a message; check_finite reports the values as the last fill loaded them (the
     * only way they change); only the PARAMS field exists. */
    bool frozen;
    /* Tokens of a micro-batch's embedding lookup, on a backend whose updates run beside
     * the next forward (ft_engine_announce_lookup); 0: none. With stage 0, the bf16 recipe
     * and AdamW, the engine keeps a table of that many embedding rows (scratch). */
    size_t lookup_tokens;
} ft_engine_options;

/* Bytes of model state this rank holds, by kind. */
typedef struct ft_engine_memory {
    size_t params;    /* working parameters held between steps */
    size_t grads;     /* persistent gradient accumulators */
    size_t optimizer; /* master copy and optimizer moments */
    size_t gathered;  /* stage 2-3 pools: gathered units and transient unit gradients */
    size_t scratch;   /* staging for all-gathers */
    size_t host;      /* offload: master, moments and gradient staging in host memory */
    size_t host_pinned; /* of host, page-locked (the transfers' buffers; 0 in a plan) */
} ft_engine_memory;

int ft_engine_create(ft_engine **out, const ft_model_layout *layout, ft_backend *be,
                     ft_comm *comm, const ft_engine_options *opt, ft_error *err);
void ft_engine_free(ft_engine *e);

/* What ft_engine_create would allocate on rank 0 of world_size ranks, without
 * allocating (the memory planner). */
int ft_engine_estimate(const ft_model_layout *layout, int world_size,
                       const ft_engine_options *opt, ft_engine_memory *mem, ft_error *err);

/* Parameters from the seed (ft_model_init_range) or from a weights-file group. */
int ft_engine_init_random(ft_engine *e, uint64_t seed, double std, ft_error *err);
int ft_engine_load(ft_engine *e, const ft_h5file *f, const char *group, ft_error *err);
/* Parameters from any source of fp32 values: fill writes unit u's elements [begin,
 * end) (this rank's slice) into dst; e.g. a PEFT adapter directory
 * (ft_peft_adapter_read_range). Collective. */
typedef int (*ft_engine_fill_fn)(void *ctx, const ft_unit_layout *u, size_t begin, size_t end,
                                 float *dst, ft_error *err);
int ft_engine_init_from(ft_engine *e, ft_engine_fill_fn fill, void *ctx, ft_error *err);
/* The last initialisation or load (any of the three above), this rank: seconds spent
 * producing the values (random numbers, file reads) and placing them (uploads, gathers,
 * the working copies), for the start-up line. */
void ft_engine_fill_seconds(const ft_engine *e, double *values, double *placing);
/* Writes the fp32 master values (frozen: the working values) into existing datasets
 * of group: each rank writes its own slice (collective). */
int ft_engine_save(ft_engine *e, const ft_h5file *f, const char *group, ft_error *err);

/* Checkpoint state, tensor by tensor under a group of HF-named full-shape datasets:
 * the working parameters (in the file's dtype), the fp32 master (kept separately only
 * with bf16 parameters), AdamW's m and v (SGD: the momentum in m). Every rank reads or
 * writes exactly its own slice of each tensor (collective). hashes (may be NULL)
 * receives each tensor's partial content hash, indexed by the tensor's position over
 * all units in layout order (ft_weights_hash_part). */
typedef enum ft_state_field {
    FT_STATE_PARAMS, FT_STATE_MASTER, FT_STATE_M, FT_STATE_V
} ft_state_field;

bool ft_engine_has_field(const ft_engine *e, ft_state_field field);
int ft_engine_write_field(ft_engine *e, const ft_h5file *f, const char *group,
                          ft_state_field field, uint64_t *hashes, ft_error *err);
/* Reading PARAMS or MASTER sets the master and the working parameters. */
int ft_engine_read_field(ft_engine *e, const ft_h5file *f, const char *group,
                         ft_state_field field, uint64_t *hashes, ft_error *err);
void ft_engine_set_step_count(ft_engine *e, long step);

ft_param_source ft_engine_param_source(ft_engine *e);

void ft_engine_zero_grads(ft_engine *e);
/* Says whether the micro-batch about to run ends the accumulation window (its
 * gradient contributions are the last before the reduction): with a backend that has a
 * side lane, on one rank, each unit's sum of squares for the gradient norm then starts
 * there as soon as the unit's gradient is final, beside the rest of the backward.
 * Optional: without the call the norm makes every sum itself. */
void ft_engine_set_final_micro(ft_engine *e, bool final);
/* Sums gradients over ranks (end of the accumulation window). */
int ft_engine_reduce_grads(ft_engine *e, ft_error *err);
/* Global L2 norm of the (reduced) gradient. */
/* Where NaN or Inf is in the state a checkpoint holds (engine_finite.c). */
#define FT_ENGINE_NONFINITE_PARAMS 1    /* the fp32 master parameters */
#define FT_ENGINE_NONFINITE_OPTIMIZER 2 /* the optimizer's moments */
typedef struct ft_engine_finite {
    int unit;   /* the lowest unit holding a non-finite value on any rank, -1: none */
    int what;   /* FT_ENGINE_NONFINITE_* over all units and ranks */
    int tensor; /* the unit's first such tensor (its index in the unit's layout); -1 when
                   none, or not found (a trainable engine whose only "non-finite" sums
                   were finite values above 1e154) */
    long long element; /* a trainable engine: the first such element of that tensor (its
                          flat row-major index, over all ranks); -1 when not known (a
                          frozen engine records tensors only) or none */
} ft_engine_finite;

/* Checks the master parameters and optimizer state of every rank's shard for NaN/Inf;
 * for a frozen engine, the fp32 values its last fill loaded, tensor by tensor. Finding
 * any, a trainable engine locates the first one (lowest unit, then lowest element of the
 * unit in any of the buffers). Collective: every rank gets the same answer. */
int ft_engine_check_finite(ft_engine *e, ft_engine_finite *out, ft_error *err);

int ft_engine_grad_norm(ft_engine *e, double *norm, ft_error *err);
/* One optimizer step at learning rate lr with the gradient multiplied by grad_mult
 * (the clipping coefficient). */
int ft_engine_step(ft_engine *e, const ft_optimizer_config *o, double lr, double grad_mult,
                   ft_error *err);

/* Reports a failure that happened inside a parameter-source callback (a collective
 * that failed while the model ran), or 0. Check after each micro-batch. */
int ft_engine_status(ft_engine *e, ft_error *err);

long ft_engine_step_count(const ft_engine *e);
/* Elements of all units / of unit u after padding to a multiple of the world size. */
size_t ft_engine_padded_total(const ft_engine *e);
size_t ft_engine_padded_unit(const ft_engine *e, int unit);
ft_engine_memory ft_engine_memory_usage(const ft_engine *e);

/* Work the engine runs beside compute rather than after it (its choices at creation:
 * backend, stage, rank count, recipe, the FTMPI_*_OVERLAP switches), a mask of: */
#define FT_ENGINE_BESIDE_UPDATE 1 /* the optimizer's update, beside the next forward */
#define FT_ENGINE_BESIDE_NORM 2   /* the gradient norm's sums, beside the backward */
#define FT_ENGINE_BESIDE_REDUCE 4 /* the gradient reductions, beside the backward */
#define FT_ENGINE_BESIDE_GATHER 8 /* the updated parameters' all-gathers, beside the
                                     next forward */
#define FT_ENGINE_BESIDE_LOOKUP 16 /* with the update: the next lookup's embedding rows
                                      first (ft_engine_announce_lookup) */
unsigned ft_engine_beside_compute(const ft_engine *e);

/* Announces the ids the next training forward will look up (rows of len ids, stride apart,
 * host memory, copied): where the update runs beside the next forward in the bf16 recipe,
 * the next step then updates those rows of the embedding first, and that forward's lookup
 * waits only for them instead of the whole embedding's update (engine_lookup.c). Optional:
 * call before ft_engine_step; the bits are the same without. */
void ft_engine_announce_lookup(ft_engine *e, const uint32_t *tokens, int rows, size_t stride,
                               int len);
/* Lookups served that way so far. */
long ft_engine_lookups_served(const ft_engine *e);

/* Copies unit u's working parameters (fp32, all n elements) to host memory.
 * Collective: every rank calls it for the same unit. */
int ft_engine_download_params(ft_engine *e, int unit, float *host, ft_error *err);
/* Copies unit u's gradient to host memory (stages 0-1 only: the others keep only a
 * shard); after reduce_grads on several ranks at stage 1 only the rank's own slice holds
 * the reduced values (the reduction is a reduce-scatter). */
void ft_engine_download_grads(ft_engine *e, int unit, float *host);

#endif
