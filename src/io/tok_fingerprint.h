/* The tokenizer's identity, recorded in the files made with it (datasets by ftmpi-prep,
 * weights by ftmpi-convert import, checkpoints and final weights by training) so that data,
 * models and ftmpi-generate's --tokenizer made with different tokenizers are refused
 * instead of training or answering nonsense. The fingerprint covers what decides the ids
 * (vocabulary, merges, added and special tokens, normalizer, pre-tokenizer), not the bytes
 * of tokenizer.json, so a file re-saved with other formatting or key order keeps it; its
 * exact definition is in doc/formats.md ("Tokenizer fingerprint"). */
#ifndef FT_IO_TOK_FINGERPRINT_H
#define FT_IO_TOK_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>

#include "io/h5file.h"
#include "util/error.h"

/* 16 lowercase hex digits and the NUL. */
#define FT_TOK_FINGERPRINT_LEN 17
/* The root attribute of dataset, weights and checkpoint files that holds it. */
#define FT_TOK_FINGERPRINT_ATTR "tokenizer_fingerprint"

/* The fingerprint of the tokenizer.json at path (or of the tokenizer.json in the
 * directory path). */
int ft_tok_fingerprint_file(const char *path, char out[FT_TOK_FINGERPRINT_LEN], ft_error *err);

/* The same over tokenizer.json's text (len bytes); name is used in messages. */
int ft_tok_fingerprint_json(const char *json, size_t len, const char *name,
                            char out[FT_TOK_FINGERPRINT_LEN], ft_error *err);

/* Reads the file's root attribute into out; "" when the file has none (files written
 * before fingerprints, synthetic data). */
int ft_tok_fingerprint_read(const ft_h5file *f, char out[FT_TOK_FINGERPRINT_LEN], ft_error *err);
/* Writes it (collective on f's communicator); nothing when fp is "" or NULL. */
int ft_tok_fingerprint_write(const ft_h5file *f, const char *fp, ft_error *err);

/* Whether two recorded fingerprints contradict each other: both known and different. */
bool ft_tok_fingerprint_conflict(const char *a, const char *b);

#endif
