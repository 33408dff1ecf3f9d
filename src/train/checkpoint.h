/* Sharded checkpoints (doc/formats.md "Checkpoint file"): one HDF5 file of named,
 * full-shape tensors that every rank writes its slices of, collectively, in one pass;
 * no rank gathers a tensor. Written under NAME.tmp, closed, fsynced and renamed; the
 * `latest` pointer moves only after that. A checkpoint written by N ranks at ZeRO
 * stage s is read by any number of ranks at any stage. */
#ifndef FT_TRAIN_CHECKPOINT_H
#define FT_TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "comm/comm.h"
#include "config/run_config.h"
#include "model/lora.h"
#include "shard/engine.h"
#include "train/schedule_meta.h"

typedef struct ft_ckpt_position {
    long step;             /* training steps done (skipped steps included) */
    long optimizer_step;   /* updates applied: AdamW's bias-correction count */
    int64_t data_position; /* global sample index of the next step's first sample */
    ft_schedule_meta schedule; /* load only: the schedule the checkpoint was trained under */
    /* the run's tokenizer (io/tok_fingerprint.h), a root attribute; "" when unknown */
    char tokenizer_fingerprint[17];
    /* LoRA: the base's content identity (io/weights_identity.h), the /lora attribute
     * base_hash; "" when the base was not read from a file */
    char base_hash[17];
} ft_ckpt_position;

/* Creates dir with its parents and checks that it is writable (rank 0), and tells every
 * rank the verdict. Collective. */
int ft_checkpoint_prepare_dir(const char *dir, ft_comm *comm, ft_error *err);

/* Writes <dir>/step-NNNNNN.h5, updates <dir>/latest, prunes to keep_last. Collective.
 * A LoRA run (cfg's lora group) passes the adapter layout and engine: the file holds
 * the adapters and their optimizer state, and /lora says what they are. */
int ft_checkpoint_save(const char *dir, const ft_run_config *cfg, const ft_model_layout *layout,
                       ft_engine *e, ft_comm *comm, const ft_ckpt_position *pos, int seq_len,
                       bool *direct, ft_error *err);

/* The checkpoint `resume` names: "auto" = <dir>/latest if present; a path; NULL/"none".
 * Sets *path (malloc'd, NULL when there is nothing to resume). */
int ft_checkpoint_resolve(const ft_run_config *cfg, char **path, ft_error *err);

/* Loads engine state from path after checking the model shape against layout and every
 * tensor's content hash. Collective. direct_io: read the tensors raw (io/extent_io.h).
 * *direct (both functions): whether every rank moved its tensor bytes with O_DIRECT
 * (false with direct_io off, or where the file system refused it). */
/* lora: the run's adapters (NULL: full fine-tuning); a LoRA checkpoint resumes only a
 * LoRA run of the same adapters, a full one only a full run (train/ckpt_lora.h). */
int ft_checkpoint_load(const char *path, const ft_model_layout *layout, ft_engine *e,
                       const ft_lora_config *lora, ft_comm *comm, ft_ckpt_position *pos,
                       bool direct_io, bool *direct, ft_error *err);

#endif
