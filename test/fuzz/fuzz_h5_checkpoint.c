/* Fuzzer: a checkpoint file -> ft_checkpoint_load, the resume path: kind, /config against
 * the run's model, every tensor group's shapes and types, the content hashes, /meta step and
 * data position. The base is a real checkpoint of a tiny model written by ft_checkpoint_save
 * at start-up (one rank, MPI started as a singleton); the input edits it (fuzz_h5.h). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "fuzz_h5.h"
#include "train/checkpoint.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ft_model_config tiny = {
    .vocab_size = 16, .hidden_size = 8, .intermediate_size = 16, .num_hidden_layers = 1,
    .num_attention_heads = 2, .num_key_value_heads = 1, .head_dim = 4,
    .max_position_embeddings = 32, .rms_norm_eps = 1e-5, .rope_theta = 10000.0,
    .tie_word_embeddings = false, .bos_token_id = 1, .eos_token_id = 2,
};
static ft_model_layout layout;
static ft_backend *be;
static ft_comm *comm;
static ft_engine *engine;
static char base[1024];

static void die(const char *what, const ft_error *err)
{
    fprintf(stderr, "fuzz_h5_checkpoint: %s: %s\n", what, err->msg);
    exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_mpi_init(argc, argv); /* the writer creates on MPI_COMM_SELF */
    ft_error err;
    const ft_engine_options opt = {
        .zero_stage = 0,
        .precision = ft_precision_resolve(FT_DTYPE_F32, FT_DTYPE_F32, FT_DTYPE_F32),
        .optimizer = FT_OPT_ADAMW };
    if (ft_model_layout_build(&layout, &tiny, &err) || ft_backend_cpu_create(&be, &err) ||
        ft_comm_mpi_create(&comm, &err) ||
        ft_engine_create(&engine, &layout, be, comm, &opt, &err) ||
        ft_engine_init_random(engine, 7, 0.02, &err))
        die("setting up the engine", &err);
    ft_run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char cfg_path[] = "fuzz.cfg", text[] = "max_steps = 10;\n";
    cfg.path = cfg_path;
    cfg.text = text;
    cfg.param_dtype = FT_DTYPE_F32;
    cfg.optimizer.type = FT_OPT_ADAMW;
    cfg.global_batch_size = 1;
    cfg.seed = 7;
    const ft_ckpt_position pos = { .step = 10, .optimizer_step = 9, .data_position = 40 };
    bool direct;
    if (ft_checkpoint_save(fuzz_tmpdir(), &cfg, &layout, engine, comm, &pos, 8, &direct, &err))
        die("writing the base checkpoint", &err);
    snprintf(base, sizeof base, "%s", fuzz_path("step-000010.h5"));
    /* the unedited base must load, or the fuzzer would only ever see error paths */
    ft_ckpt_position back;
    if (ft_checkpoint_load(base, &layout, engine, NULL, comm, &back, false, &direct, &err) ||
        back.step != pos.step || back.data_position != pos.data_position)
        die("reading the base checkpoint back", &err);
    return 0;
}

#define M(name) "/model/model." name
static const char *const objects[] = { "/", "/config", "/meta", "/model", "/optim",
                                       "/optim/master", "/optim/m", "/optim/v" };
static const char *const attrs[] = {
    "ftmpi_format", "format_version", "vocab_size", "hidden_size", "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "max_position_embeddings", "tie_word_embeddings", "rms_norm_eps", "rope_theta",
    "rope_scaling_type", "step", "optimizer_step", "data_position", "world_size",
    "zero_stage", "seed", "global_batch_size", "seq_len", "param_dtype", "optimizer",
    "config", "content_hash", "dtype",
};
static const char *const datasets[] = {
    M("embed_tokens.weight"), M("layers.0.self_attn.q_proj.weight"), M("norm.weight"),
    "/model/lm_head.weight", "/optim/master/model.embed_tokens.weight",
    "/optim/master/model.layers.0.mlp.up_proj.weight", "/optim/m/model.norm.weight",
    "/optim/v/model.layers.0.post_attention_layernorm.weight",
};
static const fuzz_h5_names names = { objects, sizeof objects / sizeof objects[0], attrs,
                                     sizeof attrs / sizeof attrs[0], datasets,
                                     sizeof datasets / sizeof datasets[0] };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes in = { data, size };
    const char *path = fuzz_path("input.h5");
    if (fuzz_h5_mutate(base, path, &names, &in))
        return 0;
    ft_ckpt_position pos;
    bool direct;
    ft_error err;
    (void)ft_checkpoint_load(path, &layout, engine, NULL, comm, &pos, false, &direct, &err);
    fuzz_h5_check_closed("ft_checkpoint_load");
    return 0;
}
