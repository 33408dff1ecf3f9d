/* Parameters for generation: every unit of the model resident on the backend, read
 * once from a weights file or a checkpoint (doc/formats.md) by one process, with no
 * sharding and no optimizer state, in the precision the file stores them (fp32, or
 * bf16: then generation runs in bf16). Handed to the decoder (and to ft_model_logits in
 * tests) through an ft_param_source whose acquire() returns the resident unit.
 *
 * Ownership: ft_gen_params_load / _init_random return an object the caller frees
 * with ft_gen_params_free, before the backend. The layout inside is owned by it. */
#ifndef FT_GENERATE_GEN_PARAMS_H
#define FT_GENERATE_GEN_PARAMS_H

#include <stdint.h>

#include "backend/backend.h"
#include "model/layout.h"
#include "model/model.h"
#include "util/error.h"

/* Which tensors of a checkpoint to read. Weights files only have /model. */
typedef enum ft_gen_param_group {
    FT_GEN_PARAMS_AUTO = 0, /* /optim/master when present (full precision), else /model */
    FT_GEN_PARAMS_MODEL,    /* /model: the working parameters (bf16 values with bf16 training) */
    FT_GEN_PARAMS_MASTER,   /* /optim/master; an error when the file has none */
} ft_gen_param_group;

typedef struct ft_gen_params {
    ft_model_layout layout;
    ft_backend *be;       /* borrowed */
    ft_dtype dtype;       /* storage of the units: the file's (bf16 tensors stay bf16) */
    void **units;         /* [n_units] flat unit buffers on the backend, stored as dtype */
    char path[1100];      /* the file actually read (a directory resolved to its latest) */
    char group[32];       /* "/model" or "/optim/master" */
    int is_checkpoint;
    char tokenizer_fingerprint[17]; /* what the file records (io/tok_fingerprint.h), or "" */
} ft_gen_params;

/* Loads from `path`: a weights file, a checkpoint file, or a checkpoint directory
 * (its `latest` pointer is followed). Checks the file kind, the config, every
 * tensor's shape and, where the file records it, every tensor's content hash.
 * Reads the file alone (MPI_COMM_SELF): every rank may call it independently. A tensor
 * holding NaN or Inf is refused (its output would be garbage or nothing at all) unless
 * allow_nonfinite. */
int ft_gen_params_load(ft_gen_params **out, const char *path, ft_gen_param_group which,
                       bool allow_nonfinite, ft_backend *be, ft_error *err);

/* A model of the given shape with the trainer's random initialisation (tests), stored
 * as dt (bf16: the fp32 initialisation rounded, as a bf16 weights file holds it). */
int ft_gen_params_init_random(ft_gen_params **out, const ft_model_config *c, uint64_t seed,
                              double std, ft_dtype dt, ft_backend *be, ft_error *err);

void ft_gen_params_free(ft_gen_params *p);

/* The resident units as a parameter source (no gradients: grads() returns NULL). */
ft_param_source ft_gen_params_source(ft_gen_params *p);

#endif
