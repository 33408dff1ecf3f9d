/* Fuzzer: the training/eval dataset file -> ft_dataset_open (kind, attributes, shapes and
 * types of tokens/loss_mask/segment) and ft_dataset_read_rows, as the background loader does
 * (independent POSIX access). The input edits a small valid dataset file (fuzz_h5.h). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_h5.h"
#include "io/dataset.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ROWS 3
#define SEQ 7
static char base[1024];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_mpi_init(argc, argv); /* the writer creates on MPI_COMM_SELF */
    ft_dataset_info info = { .rows = ROWS, .seq_len = SEQ, .vocab_size = 64, .bos_token_id = 1,
                             .eos_token_id = 2, .pad_token_id = 0, .n_documents = 4,
                             .n_target_tokens = 9, .tokenizer_hash = "0123456789abcdef",
                             .template_name = "alpaca" };
    uint32_t tokens[ROWS * (SEQ + 1)];
    uint8_t mask[ROWS * (SEQ + 1)];
    int32_t segment[ROWS * (SEQ + 1)];
    for (int i = 0; i < ROWS * (SEQ + 1); i++) {
        tokens[i] = (uint32_t)(i * 7 % 64);
        mask[i] = (uint8_t)(i % 3 == 0);
        segment[i] = i % (SEQ + 1) < 4;
    }
    snprintf(base, sizeof base, "%s", fuzz_path("base.h5"));
    ft_error err;
    if (ft_dataset_write(base, &info, tokens, mask, segment, &err)) {
        fprintf(stderr, "fuzz_h5_dataset: %s\n", err.msg);
        exit(1);
    }
    /* the unedited base must open, or the fuzzer would only ever see error paths */
    ft_dataset ds;
    if (ft_dataset_open(&ds, base, MPI_COMM_NULL, &err) || ds.info.rows != ROWS) {
        fprintf(stderr, "fuzz_h5_dataset: reading the base back: %s\n", err.msg);
        exit(1);
    }
    ft_dataset_close(&ds);
    return 0;
}

static const char *const objects[] = { "/", "/tokens", "/loss_mask", "/segment" };
static const char *const attrs[] = { "ftmpi_format",  "format_version", "seq_len",
                                     "vocab_size",    "bos_token_id",   "eos_token_id",
                                     "pad_token_id",  "n_documents",    "n_target_tokens",
                                     "tokenizer_hash", "template" };
static const char *const datasets[] = { "/tokens", "/loss_mask", "/segment" };
static const fuzz_h5_names names = { objects, 4, attrs, 11, datasets, 3 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes in = { data, size };
    const char *path = fuzz_path("input.h5");
    if (fuzz_h5_mutate(base, path, &names, &in))
        return 0;
    ft_dataset ds;
    ft_error err;
    if (ft_dataset_open(&ds, path, MPI_COMM_NULL, &err) == 0) {
        /* read the first and the last row, and the first again (the trainer's buffers are
         * sized from its own seq_len; bound what a tiny file may make this harness allocate) */
        const int64_t rows[3] = { 0, ds.info.rows - 1, 0 };
        const size_t w = (size_t)ds.info.seq_len + 1;
        if (w <= 4096) {
            uint32_t *tok = malloc(3 * w * sizeof *tok);
            uint8_t *mask = malloc(3 * w);
            int32_t *seg = malloc(3 * w * sizeof *seg);
            if (tok && mask && seg)
                (void)ft_dataset_read_rows(&ds, rows, 3, tok, mask, seg, &err);
            free(tok);
            free(mask);
            free(seg);
        }
        ft_dataset_close(&ds);
    }
    fuzz_h5_check_closed("ft_dataset_open/read_rows");
    return 0;
}
