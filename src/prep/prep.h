/* ftmpi-prep: instruction / chat / text data -> packed dataset file (doc/prep.md).
 *
 * Pipeline (every rank, collectively): read this rank's byte range of each input, render
 * each record with the template, tokenize it (prompt and response apart) -> local examples;
 * gather the example lengths; split train/eval and order (shuffle) by the seed; pack by the
 * lengths; exchange tokens to the owners of the rows; write each file collectively. The
 * output is identical for any number of ranks.
 */
#ifndef FT_PREP_PREP_H
#define FT_PREP_PREP_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "prep/prep_examples.h"
#include "prep/prep_pack.h"
#include "prep/prep_reader.h"
#include "prep/prep_template.h"
#include "util/error.h"

typedef struct prep_options {
    const char *tokenizer;
    const char *const *inputs;
    int n_inputs;
    const char *out, *eval_out;
    prep_format format;          /* AUTO: from the first record that looks like one */
    prep_input_kind input_kind;  /* JSON, or raw text (--text, --text-unit) */
    prep_template_kind template_kind;
    const char *prompt_template, *prompt_template_no_input;
    const char *eos_token, *pad_token; /* NULL: defaults (doc/prep.md) */
    int seq_len;
    prep_pack_mode pack;
    prep_truncate truncate;
    double eval_fraction;
    uint64_t seed;
    bool shuffle;
    bool strict;
    int max_reported; /* bad records printed (the rest are counted) */
    const char *dump_examples;
    bool quiet;
} prep_options;

void prep_options_default(prep_options *o);

/* Collective over comm. Returns 0, or -1 with err filled on the one rank that should print it
 * (other ranks get an empty message). Bad records go to stderr as `file:line: problem`
 * from rank 0; the summary to stdout from rank 0 unless quiet. */
int prep_run(const prep_options *o, MPI_Comm comm, ft_error *err);

#endif
