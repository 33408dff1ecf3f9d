/* The dataset file (doc/formats.md): packed rows of tokens, loss mask, segments.
 * Rows are read collectively: every rank of the file's communicator calls
 * ft_dataset_read_rows together, each with its own list of rows (possibly empty). */
#ifndef FT_IO_DATASET_H
#define FT_IO_DATASET_H

#include <stdint.h>

#include "io/h5file.h"

typedef struct ft_dataset_info {
    int64_t rows;
    int seq_len;          /* tokens per row = seq_len + 1 */
    int vocab_size;
    int bos_token_id, eos_token_id, pad_token_id;
    int64_t n_documents;
    int64_t n_target_tokens;
    char tokenizer_hash[80];
    char tokenizer_fingerprint[17]; /* io/tok_fingerprint.h; "" when the file has none */
    char template_name[64];
} ft_dataset_info;

typedef struct ft_dataset {
    ft_h5file file;
    ft_dataset_info info;
    hid_t tokens, loss_mask, segment;
} ft_dataset;

/* comm: the ranks that read collectively, or MPI_COMM_NULL for independent POSIX reads
 * by this process (what the background loader uses: no MPI calls). */
int ft_dataset_open(ft_dataset *ds, const char *path, MPI_Comm comm, ft_error *err);
void ft_dataset_close(ft_dataset *ds);

/* The description of the dataset at path: every rank of comm opens the file, takes its
 * info and closes it again. The ranks agree on the outcome (comm/agree.h,
 * ft_agree_config: a file one rank cannot read ends the job with one line and exit 2),
 * the message prefixed with `what`, the config key that named the file. */
int ft_dataset_read_info(const char *path, MPI_Comm comm, const char *what, ft_dataset_info *info,
                         ft_error *err);

/* Reads rows[0..n) (any order, repeats allowed) into tokens/loss_mask/segment,
 * each [n, seq_len+1], in the order given. Collective when opened on a communicator. */
int ft_dataset_read_rows(ft_dataset *ds, const int64_t *rows, int n, uint32_t *tokens,
                         uint8_t *loss_mask, int32_t *segment, ft_error *err);

/* Writes the root attributes of a dataset file (collective on f's communicator: every
 * rank passes the same info). */
int ft_dataset_write_attrs(const ft_h5file *f, const ft_dataset_info *info, ft_error *err);

/* The bytes to reserve (ft_h5_reserve) in a dataset file that has its attributes but
 * not yet its three row datasets: their data, the 1 MiB alignment of each, and room for
 * the metadata still to come. */
uint64_t ft_dataset_reserve_bytes(const ft_dataset_info *info);

/* Writes a whole dataset from one process (tests, generators). */
int ft_dataset_write(const char *path, const ft_dataset_info *info, const uint32_t *tokens,
                     const uint8_t *loss_mask, const int32_t *segment, ft_error *err);

#endif
