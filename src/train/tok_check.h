/* One tokenizer per run. model.weights, data.train, data.eval and a resume checkpoint may
 * each record the fingerprint of the tokenizer they were made with (io/tok_fingerprint.h);
 * a run whose files record two different ones would train on, or score, ids that mean
 * other tokens to the model (loss 10 instead of 2, and exit 0). The first file that records
 * one sets the run's tokenizer; every later one must agree, unless the configuration says
 * allow_tokenizer_mismatch. Files that record none (older files, synthetic data) pass. */
#ifndef FT_TRAIN_TOK_CHECK_H
#define FT_TRAIN_TOK_CHECK_H

#include "config/run_config.h"
#include "io/tok_fingerprint.h"
#include "util/error.h"

typedef struct ft_tok_identity {
    char fp[FT_TOK_FINGERPRINT_LEN]; /* the run's tokenizer; "" while unknown */
    char key[32], path[1100];        /* the first file that recorded it */
} ft_tok_identity;

/* File `path` (config key `key`) records fingerprint fp ("" = none). Adopts it as the
 * run's tokenizer when none is known yet; refuses a different one with one line naming
 * both files and the override, marked FT_ERR_SHARED | FT_ERR_CONFIG (every rank read the
 * same attributes: exit 2). */
int ft_tok_identity_meet(ft_tok_identity *id, const ft_run_config *cfg, const char *key,
                         const char *path, const char *fp, ft_error *err);

#endif
