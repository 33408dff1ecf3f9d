/* Reading a LoRA checkpoint (doc/formats.md, "LoRA checkpoint"): its /lora group and
 * the adapter tensors, and writing a weights file of its base with the adapters merged
 * in (W += alpha/r B A, model/lora_merge.h), for ftmpi-convert merge and for
 * ftmpi-generate on a LoRA checkpoint. One process (MPI_COMM_SELF). */
#ifndef FT_IO_LORA_CKPT_H
#define FT_IO_LORA_CKPT_H

#include <stdbool.h>
#include <stddef.h>

#include "io/h5file.h"
#include "io/weights.h"
#include "model/layout.h"
#include "model/lora.h"
#include "util/error.h"

typedef struct ft_lora_ckpt {
    ft_lora_config lora;
    char targets[512];       /* as stored: "q_proj,v_proj" */
    char base_weights[4096]; /* "" when the base was random-initialised */
    char base_hash[32];      /* "" when absent */
    ft_model_layout layout;  /* the adapter layout (owned) */
} ft_lora_ckpt;

/* Whether f has a /lora group (is a LoRA checkpoint). */
bool ft_lora_ckpt_is(const ft_h5file *f);

/* Reads and checks /lora for base shape c, builds the adapter layout and checks that
 * group (e.g. "/model") holds its tensors. Free with ft_lora_ckpt_free. */
int ft_lora_ckpt_read(const ft_h5file *f, const ft_model_config *c, const char *group,
                      ft_lora_ckpt *out, ft_error *err);
void ft_lora_ckpt_free(ft_lora_ckpt *l);

typedef struct ft_lora_merge_options {
    const char *base;     /* the base weights file; NULL: /lora base_weights */
    const char *group;    /* the adapters: "/model" or "/optim/master"; NULL: "/model" */
    int dtype;            /* FT_FILE_F32, FT_FILE_BF16, or -1: bf16 iff the base is all bf16 */
    size_t buffer_bytes;  /* streaming buffer for the units without adapters */
} ft_lora_merge_options;

typedef struct ft_lora_merge_result {
    char base[4096];      /* the base file read */
    int rank;
    double alpha;
    char targets[512];
    long long parameters; /* of the merged model */
    ft_file_dtype dtype;
} ft_lora_merge_result;

/* Writes out (a new weights file: the caller names a temporary) = the base of LoRA
 * checkpoint ckpt with its adapters merged, block by block (memory: one block and its
 * adapters). The base must have the checkpoint's family and shape and, when /lora has a
 * base_hash, that identity (io/weights_identity.h); each refusal is one line. */
int ft_lora_merge_to_weights(const char *ckpt, const char *out, const ft_lora_merge_options *o,
                             ft_lora_merge_result *r, ft_error *err);

#endif
