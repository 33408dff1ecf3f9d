/* Fuzzer: the weights file (model.weights, ftmpi-convert export, ftmpi-generate) ->
 * kind and format version, the /config attributes (ft_weights_read_config and the model
 * shape checks), every tensor's presence, rank, shape and type (ft_weights_check_tensors,
 * including the bfloat16 tag), then every unit's values (ft_weights_read_range). The input
 * edits a small valid weights file, fp32 or bf16, that ftmpi's writer made (fuzz_h5.h). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_h5.h"
#include "io/weights.h"
#include "model/layout.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[2][1024];

static const ft_model_config tiny = {
    .vocab_size = 16, .hidden_size = 8, .intermediate_size = 16, .num_hidden_layers = 1,
    .num_attention_heads = 2, .num_key_value_heads = 1, .head_dim = 4,
    .max_position_embeddings = 32, .rms_norm_eps = 1e-5, .rope_theta = 10000.0,
    .tie_word_embeddings = false, .bos_token_id = 1, .eos_token_id = 2,
};

static void write_base(const char *path, ft_file_dtype dtype)
{
    ft_model_layout l;
    ft_h5file f;
    ft_error err;
    int rc = ft_model_layout_build(&l, &tiny, &err) || ft_h5_create(&f, path, MPI_COMM_SELF, &err);
    rc = rc || ft_h5_write_kind(&f, "weights", &err) || ft_weights_write_config(&f, &tiny, &err) ||
         ft_weights_create_tensors(&f, "/model", &l, dtype, &err);
    for (int u = 0; !rc && u < l.n_units; u++) {
        float *v = malloc(l.units[u].numel * sizeof *v);
        for (size_t i = 0; v && i < l.units[u].numel; i++)
            v[i] = (float)i * 0.01f - 0.3f;
        rc = !v || ft_weights_write_range(&f, "/model", &l.units[u], 0, l.units[u].numel, v, &err);
        free(v);
    }
    if (rc || ft_h5_close(&f, &err)) {
        fprintf(stderr, "fuzz_h5_weights: %s\n", err.msg);
        exit(1);
    }
    ft_model_layout_free(&l);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_mpi_init(argc, argv); /* the writer creates on MPI_COMM_SELF */
    snprintf(base[0], sizeof base[0], "%s", fuzz_path("base_f32.h5"));
    snprintf(base[1], sizeof base[1], "%s", fuzz_path("base_bf16.h5"));
    write_base(base[0], FT_FILE_F32);
    write_base(base[1], FT_FILE_BF16);
    return 0;
}

#define T(name) "/model/model." name
static const char *const objects[] = { "/", "/config", "/model" };
static const char *const attrs[] = {
    "ftmpi_format", "format_version", "vocab_size", "hidden_size", "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "max_position_embeddings", "tie_word_embeddings", "rms_norm_eps", "rope_theta",
    "rope_scaling_type", "rope_scaling_factor", "rope_scaling_low_freq_factor",
    "rope_scaling_high_freq_factor", "rope_scaling_original_max_position_embeddings",
    "bos_token_id", "eos_token_id", "dtype",
};
static const char *const datasets[] = {
    T("embed_tokens.weight"), T("layers.0.self_attn.q_proj.weight"),
    T("layers.0.self_attn.k_proj.weight"), T("layers.0.mlp.down_proj.weight"),
    T("layers.0.input_layernorm.weight"), T("norm.weight"), "/model/lm_head.weight",
};
static const fuzz_h5_names names = { objects, 3, attrs, sizeof attrs / sizeof attrs[0],
                                     datasets, sizeof datasets / sizeof datasets[0] };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes in = { data, size };
    const char *path = fuzz_path("input.h5");
    if (fuzz_h5_mutate(base[fuzz_u8(&in) & 1], path, &names, &in))
        return 0;
    ft_h5file f;
    ft_error err;
    if (ft_h5_open(&f, path, MPI_COMM_NULL, &err) == 0) {
        ft_model_config c;
        ft_model_layout l;
        /* A valid but huge shape is the memory planner's business (issue #14, items 9 and
         * 14), not this reader's: read the tensors of models up to 1 M parameters. */
        if (ft_h5_check_kind(&f, "weights", &err) == 0 && ft_weights_read_config(&f, &c, &err) == 0 &&
            c.num_hidden_layers <= 64 && ft_model_config_param_count(&c) <= (1 << 20) &&
            ft_model_layout_build(&l, &c, &err) == 0) {
            if (ft_weights_check_tensors(&f, "/model", &l, &err) == 0)
                for (int u = 0; u < l.n_units; u++) {
                    float *v = malloc(l.units[u].numel * sizeof *v + 1);
                    if (v)
                        (void)ft_weights_read_range(&f, "/model", &l.units[u], 0, l.units[u].numel,
                                                    v, &err);
                    free(v);
                }
            ft_model_layout_free(&l);
        }
        ft_h5_close(&f, NULL);
    }
    fuzz_h5_check_closed("the weights reader");
    return 0;
}
