/* Internals of the parameter engine (see engine.h).
 *
 * Geometry. Unit u has n elements, padded to n_pad = ceil(n / P) * P so it splits
 * evenly; rank r owns the slice [r*S, (r+1)*S) with S = n_pad / P. The padding tail
 * is always zero and never leaves the engine.
 *
 * What each stage keeps per rank (fp32 unless noted):
 *   stage 0: full params [n_pad], full grads [n_pad], optimizer state over [0, n)
 *   stage 1: full params, full grads (reduced over the own slice only: a reduce-scatter),
 *            optimizer state and master over the own slice
 *   stage 2: full params, grad shard [S], optimizer state over the own slice
 *   stage 3: param shard [S] (bf16 bits when precision.params = bf16, else the master;
 *            none when the model takes bf16 bits and the master is on the device:
 *            the bits are made from it at gather time), grad shard [S], optimizer
 *            state over the own slice; full units exist only while gathered, in a
 *            pool of gather buffers
 * With precision.weights bf16 the resident units (stages 0-2) and the gathered units hold
 * bf16 bits only.
 * Stages 2 and 3 accumulate gradients in transient full-unit buffers that are
 * reduce-scattered into the shard when the model reports the unit done (grad_done).
 * A frozen engine keeps only the working parameters: full at stages 0-2 (bf16 bits
 * when the model takes bits, else fp32 values), the shard at stage 3 (shard_bf16 with
 * precision.params bf16, else dev_shard), and the stage-3 gather pool.
 */
#ifndef FT_SHARD_ENGINE_INTERNAL_H
#define FT_SHARD_ENGINE_INTERNAL_H

#include "shard/engine.h"

/* Pools of full-unit buffers (stages 2-3), as few as the overlap needs: gathers hold
 * the current unit and the prefetched next one, gradients the open unit and the one
 * being reduce-scattered. A tied head adds one to each (the embedding is gathered
 * and its gradient open while the head runs). The arrays have room for the maximum;
 * n_gather and n_grad slots are used. */
#define FT_GATHER_POOL 3
#define FT_GRAD_POOL 3

typedef struct engine_unit {
    size_t numel, padded, shard; /* n, n_pad, S */
    size_t opt_begin, opt_end;   /* range of the unit this rank's optimizer updates */
    void *full;        /* stages 0-2: resident working params [n_pad], precision.weights */
    float *master;     /* fp32 master over [opt_begin, opt_end) (stage 0: only for bf16 or
                          offload); in host memory with offload */
    uint16_t *shard_bf16; /* stage 3 + bf16: working param shard [S] */
    float *dev_shard;  /* stage 3 + fp32 + (offload or frozen): working param shard [S] on
                          the device */
    float *m, *v;      /* optimizer state over the opt range */
    float *grad_full;  /* stages 0-1: [n_pad] */
    float *grad_shard; /* stages 2-3: [S] */
    int grad_unset;    /* stages 0-1: grad_full's 2-D part holds no value yet (engine_unset.c) */
    int update_pending; /* its update runs on the side lane, not yet awaited (engine_overlap.c) */
    int reset_deferred; /* zero_grads left its reset to the unit's first gradient request */
    int sum_started;    /* its gradient's sum of squares is queued on the side lane */
    ft_comm_request *reduce_req; /* stages 0-1: its reduction, started and not yet waited
                                    for (engine_reduce.c) */
    int reduce_started;          /* ... started in this window (waited for or not) */
    ft_comm_request *gather_req; /* stages 1-2: the all-gather of its updated bits, started
                                    and not yet waited for (engine_overlap.c) */
    int loaded_nonfinite; /* frozen: the first tensor whose loaded own slice held NaN/Inf
                             on this rank, -1 none (engine_frozen.c) */
} engine_unit;

typedef enum { SLOT_EMPTY, SLOT_PENDING, SLOT_READY } slot_state;

/* A gathered unit (stage 3). */
typedef struct gather_slot {
    int unit;           /* -1 when empty */
    int refs;           /* acquires not yet released */
    slot_state state;
    float *params;      /* [max n_pad] fp32 (precision.weights fp32) */
    uint16_t *bits;     /* [max n_pad] bf16: the gather itself (precision.params bf16), widened
                           into params unless the model takes bits */
    ft_comm_request *req;
    unsigned long last_use;
} gather_slot;

/* A unit's transient full gradient (stages 2-3). */
typedef struct grad_slot {
    int unit;           /* -1 when empty */
    int open;           /* between first grads() and grad_done() */
    void *full;         /* [max n_pad], fp32, or bf16 with bf16 staging */
    float *shard_tmp;   /* [max S]: the reduce-scatter result, added to grad_shard */
    uint16_t *bits_full;  /* bf16 reduction of an fp32 full: the values sent */
    uint16_t *bits_shard; /* bf16 reduction: the values received */
    ft_comm_request *req;
    int unset;          /* the 2-D part holds no value yet (engine_unset.c) */
} grad_slot;

/* The next forward's embedding rows ahead of its update (engine_lookup.c). */
typedef struct engine_lookup {
    int32_t *next_ids;  /* host [cap]: the announced ids of the next lookup */
    size_t n_next;      /* 0: none announced */
    int32_t *ids;       /* host [cap]: the armed lookup's ids */
    size_t n, cap;
    int32_t *upload;    /* host [2 cap]: the distinct rows, then each id's row of the table */
    int32_t *slot;      /* host [vocab]: a row's place in the table while arming, else -1 */
    void *buf;          /* on the backend: the table, its rows, the remapped ids */
    uint16_t *table;    /* in buf: [distinct, hidden] bf16, the rows' updated bits */
    int32_t *rows_dev, *remap_dev; /* in buf, after the table */
    size_t distinct;
    int armed;          /* the table is queued and serves the lookup of ids[0..n) */
    long served;        /* lookups that read the table */
} engine_lookup;

/* The offloaded optimizer's host buffers (engine_offload.c). */
typedef struct engine_offload {
    float *grad[2];    /* [max opt range] the gradient slices brought down, by turn parity */
    uint16_t *bits[2]; /* bf16 recipe: [max opt range] the working bits the host rounds */
    int pinned;        /* from the device backend's host_alloc (else the host backend's) */
    int in_step;       /* between ft_engine_offload_begin and _end */
    int turn;          /* the step's current turn (unit order), from 0 */
} engine_offload;

struct ft_engine {
    ft_model_layout layout;
    double fill_values_s, fill_placing_s; /* the last fill_from's split (engine_params.c) */
    ft_backend *be;
    ft_backend *opt_be;    /* where the optimizer runs: be, or a host CPU backend (offload) */
    ft_comm *comm;
    ft_engine_options opt;
    int rank, size;
    engine_unit *units;
    size_t max_padded, max_shard;
    long step;
    /* the moments may hold other values than the zeros they were allocated with: an
     * update or a checkpoint's read has written them */
    int moments_written;
    ft_engine_memory mem;

    engine_offload offload; /* offload_optimizer: the host's turn buffers */
    /* offload at stage 0 with bits: [max n_pad], where loading gathers the fp32 unit */
    float *dev_master;
    /* publishing working params: fp32 or bf16 shard staging for all-gathers */
    float *stage_f32;      /* frozen: [max S], its load staging (engine_frozen.c) */
    uint16_t *stage_bits;  /* [max S] */
    uint16_t *gather_bits; /* [max n_pad] (bf16 publish into full) */
    /* stages 0-1 with bf16 gradient reduction: staging [max n_pad] each (the second only
     * with early_reduce), the unit each holds (-1 none), the next to use
     * (engine_reduce.c) */
    uint16_t *bits_slot[2];
    int bits_unit[2], bits_next;

    gather_slot gather[FT_GATHER_POOL];
    grad_slot grads[FT_GRAD_POOL];
    int n_gather, n_grad;  /* slots in use: 2, or 3 with a tied head */
    int *plan;             /* current pass order, [plan_cap] */
    int plan_len, plan_pos, plan_cap;
    unsigned long clock;
    int failed;            /* a collective failed inside a source callback */
    int dry_run;           /* ft_engine_estimate: count, do not allocate */
    int unset_mode;        /* ft_unset_mode: what a gradient reset leaves in the 2-D part */
    int overlap;           /* the update runs on the backend's side lane (engine_overlap.c) */
    int side_pending;      /* the side lane holds work (updates, norm sums) the main lane
                              has not awaited as a whole: settling has something to do */
    int early_norm;        /* sums of squares beside the backward (engine_overlap.c) */
    int final_micro;       /* the current micro-batch ends the accumulation window */
    double *norm_sums;     /* early_norm: [n_units] on the backend */
    int early_reduce;      /* stages 0-1: reductions beside the backward (engine_reduce.c) */
    int gather_overlap;    /* stages 1-2: the updated bits' all-gathers beside the next
                              forward (engine_overlap.c) */
    int lookup_ahead;      /* the next lookup's rows before the embedding's update
                              (engine_lookup.c) */
    engine_lookup lookup;
    ft_error error;
};

void *ft_engine_alloc(ft_engine *e, size_t bytes, size_t *counter);
/* A collective inside a source callback (or a deferred one) failed: the engine keeps the
 * first error (ft_engine_status reports it), "WHAT of unit UNIT failed" where the
 * transport left no message of its own (engine_source.c). */
void ft_engine_record_failure(ft_engine *e, const char *what, int unit);

/* Gradient resets that leave the 2-D weights' part unset for a writer (engine_unset.c). */
typedef enum {
    FT_UNSET_LEAVE,  /* the previous values stay there (the default) */
    FT_UNSET_NEVER,  /* zero everything (FTMPI_GRADS_ZERO_ALL=1) */
    FT_UNSET_POISON  /* NaN there (test hook FTMPI_GRADS_POISON_UNSET=1) */
} ft_unset_mode;
int ft_engine_unset_mode_from_env(void);
/* Resets unit's gradient full[n_pad] (esize bytes an element): the tail zeroed, the 2-D
 * part unset (*unset = 1) unless the mode or the unit has none. */
void ft_engine_reset_grad(ft_engine *e, int unit, void *full, size_t esize, int *unset);
/* Zeroes the 2-D part if it is unset, so that adding to it is right. */
void ft_engine_settle_grad(ft_engine *e, int unit, void *full, size_t esize, int *unset);
/* Stages 0-1: settles every unit (before gradients are reduced or measured). */
void ft_engine_settle_all_grads(ft_engine *e);

/* The optimizer's update beside the next step's forward (engine_overlap.c). */
int ft_engine_overlap_wanted(const ft_engine *e);
/* The step's updates start on the side lane; each unit's completes mark `unit`. */
void ft_engine_overlap_begin(ft_engine *e);
void ft_engine_overlap_unit_done(ft_engine *e, int unit);
void ft_engine_overlap_end(ft_engine *e);
/* Orders the main lane after unit's pending update (the source's acquire). */
void ft_engine_await_update(ft_engine *e, int unit);
/* Orders the main lane after all the side lane's work (updates, norm sums) and makes the
 * deferred gradient resets: what every entry point that touches the state outside
 * acquire calls first. */
void ft_engine_settle_updates(ft_engine *e);
/* zero_grads: 1 when unit's reset is left to its first gradient request (its update may
 * still be reading the gradient on the side lane), 0 when the caller resets it now. */
int ft_engine_defer_reset(ft_engine *e, int unit);
/* A gradient request: makes unit's deferred reset, if any (after its acquire). */
void ft_engine_take_deferred_reset(ft_engine *e, int unit);
/* Stages 1-2 in the bf16 recipe: the update writes a unit's bits into its own slice of
 * the working parameters and the all-gather in place starts at once; the step returns
 * without waiting, acquire waits for the unit's gather (ft_engine_await_update) and
 * settling for all. start: nonzero when the gather could not start (it was waited). */
int ft_engine_gather_overlap_wanted(const ft_engine *e);
int ft_engine_start_deferred_gather(ft_engine *e, int unit, ft_error *err);

/* The gradient norm's sums beside the backward: grad_done of unit on the window's last
 * micro-batch queues its sum of squares on the side lane (when early_norm); the norm
 * takes every queued sum into each[] (after settling) and says which with 1 in got[]. */
int ft_engine_early_norm_wanted(const ft_engine *e);
void ft_engine_early_norm_unit(ft_engine *e, int unit);
/* Several ranks: unit's reduction was waited for (its gradient is final): its sum starts. */
void ft_engine_early_norm_reduced(ft_engine *e, int unit);
void ft_engine_early_norm_take(ft_engine *e, double *each, unsigned char *got);

/* Stages 0-1 on several ranks (engine_reduce.c): grad_done of unit on the window's last
 * micro-batch starts its reduction (when early_reduce; nonzero: it could not start);
 * reduce_full_grads starts the rest and waits for all; finish waits for the started ones
 * without reporting (before a gradient is reset or freed). */
int ft_engine_early_reduce_wanted(const ft_engine *e);
int ft_engine_early_reduce_unit(ft_engine *e, int unit);
int ft_engine_reduce_full_grads(ft_engine *e, ft_error *err);
void ft_engine_finish_early_reduces(ft_engine *e);

/* The next forward's embedding rows ahead of the embedding's update (engine_lookup.c):
 * wanted needs the overlap and the bf16 recipe's bits; arm takes the announced ids (main
 * lane, before the step's fork; 1: armed); preview queues the table on the side lane
 * (after the fork, before the units' updates; param, grad and p as unit 0's update
 * gets them); acquire serves a lookup of exactly the armed ids (NULL: acquire it the
 * normal way); loads disarm. */
size_t ft_engine_lookup_bytes(const ft_engine *e); /* its buffer (0: none), at creation */
int ft_engine_lookup_wanted(const ft_engine *e);
int ft_engine_lookup_arm(ft_engine *e);
void ft_engine_lookup_preview(ft_engine *e, const float *param, const float *grad,
                              const ft_adamw_params *p);
const void *ft_engine_lookup_acquire(ft_engine *e, int unit, const int32_t *ids, size_t n,
                                     const int32_t **ids_dev);
void ft_engine_lookup_disarm(ft_engine *e);
void ft_engine_lookup_free(ft_engine *e);

/* The model takes bf16 bits (the mixed-precision recipe). */
static inline int ft_engine_hands_bits(const ft_engine *e)
{
    return e->opt.precision.weights == FT_DTYPE_BF16;
}

/* Stages 2-3 with a bf16 reduction under the recipe: the model writes each unit's
 * micro-batch gradient in bf16 straight into the slot that is reduce-scattered (what
 * FSDP does with reduce_dtype bf16), halving the staging; the rank's shard still
 * accumulates micro-batches in fp32. */
static inline int ft_engine_bf16_grad_staging(const ft_engine *e)
{
    return !e->opt.frozen && e->opt.zero_stage >= 2 && (e->opt.precision.reduction == FT_DTYPE_BF16) && ft_engine_hands_bits(e);
}

/* Starts the all-gather of unit u's working bf16 bits into dst[n_pad]: from the
 * stored shard, or made from the master shard into dst's own slice and gathered in
 * place. */
int ft_engine_start_bits_gather(ft_engine *e, int unit, uint16_t *dst, ft_comm_request **req);
/* Optimizer-side memory: the host with offload, else the device. */
void *ft_engine_alloc_opt(ft_engine *e, size_t bytes, size_t *device_counter);

/* Elements in unit u's optimizer range. */
static inline size_t ft_engine_opt_len(const ft_engine *e, const engine_unit *u)
{
    return e->opt.zero_stage == 0 ? u->numel : u->shard;
}

static inline size_t ft_min_size(size_t a, size_t b) { return a < b ? a : b; }

/* This rank's slice of unit u in unit coordinates, clipped to the real elements. */
static inline void ft_engine_own_range(const ft_engine *e, const engine_unit *u, size_t *b,
                                       size_t *end)
{
    *b = ft_min_size((size_t)e->rank * u->shard, u->numel);
    *end = ft_min_size(*b + u->shard, u->numel);
}

/* Recomputes working params from the master over the opt range and distributes them
 * (stage 0: in place; 1-2: all-gather into full; 3: the bf16 shard). */
int ft_engine_publish_params(ft_engine *e, int unit, ft_error *err);
/* The same after an optimizer update that already wrote the bf16 rounding of the
 * master into ft_engine_update_bits(e, unit): only what follows the rounding. */
int ft_engine_publish_updated(ft_engine *e, int unit, ft_error *err);
/* Where the optimizer can write unit's bf16 working copy in its update pass
 * (ft_adamw_params.bf16_out), indexed like the master; NULL where publishing makes
 * it: fp32 working parameters, offload (the update runs on the host), and stage 3 in
 * the bf16 recipe, which keeps no bf16 shard (each gather rounds the master). */
uint16_t *ft_engine_update_bits(ft_engine *e, int unit);

/* full[n_pad] = concatenation of every rank's shard[S] (fp32; shard may be full's own
 * slice: in place). */
int ft_engine_gather_f32(ft_engine *e, float *full, const float *shard, size_t S, ft_error *err);
/* full[n_pad] = every rank's bf16 bits[S], as bits where the model takes bits, else
 * widened to fp32. */
int ft_engine_gather_bits_into(ft_engine *e, void *full, const uint16_t *bits, size_t S,
                               ft_error *err);

/* The reduced gradient over unit eu's optimizer range (this rank's). */
static inline float *ft_engine_opt_grads(engine_unit *eu)
{
    return eu->grad_full ? eu->grad_full + eu->opt_begin : eu->grad_shard;
}

/* ---- engine_offload.c: offload_optimizer's host buffers and turns ---- */
void ft_engine_offload_allocate(ft_engine *e);
void ft_engine_offload_free(ft_engine *e);
/* A step's turns, a unit each in update order: begin queues first_unit's gradient down;
 * turn waits for this turn's gradient, queues next_unit's (-1: none) and returns this
 * turn's gradient on the host; end waits for every copy. */
void ft_engine_offload_begin(ft_engine *e, int first_unit);
float *ft_engine_offload_turn(ft_engine *e, int next_unit);
void ft_engine_offload_end(ft_engine *e);
/* Where the host's AdamW writes this turn's working bits (opt coordinates). */
uint16_t *ft_engine_offload_bits(ft_engine *e);
/* Publishing after a host update (bits_ready: its AdamW wrote the bits). */
int ft_engine_offload_publish(ft_engine *e, int unit, int bits_ready, ft_error *err);

/* Forgets gathered units (their parameters changed). */
void ft_engine_invalidate_gathered(ft_engine *e);

/* Completes outstanding gradient reductions: reduce-scatters (stages 2-3), reductions
 * started beside the backward (stages 0-1). */
int ft_engine_flush_grads(ft_engine *e, ft_error *err);

/* The frozen engine (engine_frozen.c; ft_engine_options.frozen): its buffers, its load
 * staging held only while a load or initialisation fills it (begin_fill allocates it
 * again after an earlier fill released it; end_fill releases it), where a unit's own
 * fp32 slice is assembled when loading (the host buffer, or on a host backend the
 * device memory it goes to), making that slice its working storage, its working values
 * of [b, end) as fp32 host memory, and the error of the calls it refuses. */
void ft_engine_frozen_allocate_unit(ft_engine *e, engine_unit *eu);
void ft_engine_frozen_allocate_scratch(ft_engine *e);
int ft_engine_frozen_begin_fill(ft_engine *e, ft_error *err);
void ft_engine_frozen_end_fill(ft_engine *e);
float *ft_engine_frozen_slice_target(ft_engine *e, engine_unit *eu, float *host);
/* Where a device backend's slice of unit eu is uploaded to before frozen_adopt. */
float *ft_engine_frozen_landing(ft_engine *e, engine_unit *eu);
int ft_engine_frozen_adopt(ft_engine *e, int unit, const float *slice, ft_error *err);
const float *ft_engine_frozen_values(ft_engine *e, int unit, size_t b, size_t end, float *host);
int ft_engine_frozen_refuse(ft_error *err, const char *what);
int ft_engine_frozen_check_finite(ft_engine *e, ft_engine_finite *out, ft_error *err);

#endif
