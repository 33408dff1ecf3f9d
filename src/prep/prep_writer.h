/* Writes one dataset file (doc/formats.md) from examples spread over the ranks.
 *
 * Every rank knows the global plan (lengths of all examples, which rank holds each, the
 * packing). Rows are owned in contiguous blocks (rank r: rows [R*r/P, R*(r+1)/P)); each rank
 * sends the tokens of its examples to the owners of their rows (one MPI_Alltoallv), builds
 * its block of rows and writes it with one collective hyperslab write per dataset. One rank
 * writes through ft_dataset_write. The file is the same for any number of ranks.
 */
#ifndef FT_PREP_WRITER_H
#define FT_PREP_WRITER_H

#include <mpi.h>
#include <stdint.h>

#include "io/dataset.h"
#include "prep/prep_examples.h"
#include "prep/prep_pack.h"
#include "util/error.h"

typedef struct prep_global {
    int64_t n;            /* examples over all ranks */
    const int32_t *len;   /* [n] */
    const int32_t *owner; /* [n] rank holding example e */
    const int64_t *gidx;  /* [local n] global index of each local example (increasing) */
} prep_global;

typedef struct prep_set_stats {
    int64_t rows, documents, tokens, targets, padding;
} prep_set_stats;

/* Collective. list[0..n_list) are the global example indices of the set in packing order,
 * plan their packing. info gives seq_len, vocab_size, bos/eos/pad ids, tokenizer_hash and
 * template; rows, n_documents and n_target_tokens are filled in here. */
int prep_write_set(MPI_Comm comm, const char *path, const prep_examples *ex, const prep_global *g,
                   const int64_t *list, int64_t n_list, const prep_plan *plan,
                   const ft_dataset_info *info, prep_set_stats *stats, ft_error *err);

#endif
