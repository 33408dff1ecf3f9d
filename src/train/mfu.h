/* Model FLOPs utilisation: the model's FLOPs of a step over the devices' datasheet peak.
 *
 * Model FLOPs count what the model computes, not what ftmpi executes (activation
 * checkpointing's recomputation and skipped tiles do not change them), as PaLM
 * defines it:
 *   per token:  6 N, N = the parameters that take part in a matmul per token: every
 *               2-D weight of the blocks and the LM head (a tied head counts the
 *               embedding matrix once, as the head), not the embedding lookup, not
 *               norms or biases (forward 2 N, backward 4 N);
 *   per key:    12 L H d for each (query, key) pair the masks let through: QK^T and
 *               PV are 2 d FLOPs each per pair and head forward, twice that backward.
 * The visible pairs are counted exactly from the batch's segment ids: query i at
 * position p of its document sees min(p + 1, W) keys (W the sliding window, else
 * unbounded), so causal masking, packed documents and the window all count as run.
 */
#ifndef FT_TRAIN_MFU_H
#define FT_TRAIN_MFU_H

#include <stdbool.h>
#include <stdint.h>

#include "model/layout.h"
#include "util/dtype.h"

/* N: the matmul parameters of one token's forward (see above). */
long long ft_mfu_matmul_params(const ft_model_layout *l);

/* 12 L H d: model FLOPs per visible (query, key) pair, forward and backward. */
double ft_mfu_flops_per_key(const ft_model_config *c);

/* Visible (query, key) pairs of `rows` rows of T queries each, whose segment ids start
 * every `stride` elements (the dataset's rows are seq_len + 1 long); segment NULL is
 * one document per row. window 0: no sliding window. */
int64_t ft_mfu_visible_keys(const int32_t *segment, int rows, int stride, int T, int window);

/* A datasheet row: dense tensor-core peaks (no sparsity), TFLOP/s per GPU. */
typedef struct ft_peak_row {
    const char *label;    /* "H100 SXM" */
    const char *match[2]; /* substrings the driver's name must all hold (case-blind) */
    double bf16, tf32, fp32;
} ft_peak_row;

/* The first row whose substrings the device name holds, or NULL. */
const ft_peak_row *ft_mfu_peak_row(const char *device_name);

/* The peak MFU divides by, per device, in FLOP/s (0: unknown, MFU is not shown), and
 * where it comes from, for the start-up line. peak_tflops > 0 (the config) wins; else
 * a GPU's table row, in the column of the recipe's matmuls (bf16; fp32 runs cuBLASLt
 * with CUBLAS_COMPUTE_32F, no TF32, so the plain fp32 column); a CPU has no datasheet
 * peak ftmpi could trust. host_backend: the backend computes on the host's cores
 * (ft_backend.host_memory). */
typedef struct ft_peak {
    double flops;
    char source[256];
} ft_peak;
void ft_mfu_choose_peak(double peak_tflops, bool host_backend, const char *device_name,
                        ft_dtype precision, ft_peak *out);

#endif
