#include "train/plan.h"

#include <mpi.h>
#include <string.h>

#include "io/dataset.h"
#include "io/weights.h"
#include "model/model.h"
#include "shard/engine.h"
#include "train/mfu.h"
#include "train/plan_lora.h"

static int plan_shape(const ft_run_config *cfg, ft_model_config *mc, ft_error *err)
{
    *mc = cfg->model;
    if (!cfg->model_weights)
        return 0;
    ft_h5file f;
    if (ft_h5_open(&f, cfg->model_weights, MPI_COMM_SELF, err))
        return -1;
    int rc = ft_h5_check_kind(&f, "weights", err) || ft_weights_read_config(&f, mc, err);
    ft_h5_close(&f, NULL);
    return rc ? -1 : 0;
}

static int plan_seq_len(const ft_run_config *cfg, int given, int *seq_len, ft_error *err)
{
    if (given > 0) {
        *seq_len = given;
        return 0;
    }
    ft_dataset ds;
    if (ft_dataset_open(&ds, cfg->train_data, MPI_COMM_SELF, err))
        return ft_fail(err, "--plan: cannot read seq_len from data.train (%s); give --seq-len T",
                       cfg->train_data);
    *seq_len = ds.info.seq_len;
    ft_dataset_close(&ds);
    return 0;
}

ft_engine_options ft_run_engine_options(const ft_run_config *cfg, int T)
{
    /* the CUDA backend's side lane runs the update beside the next forward */
    const bool lanes = cfg->device && !strcmp(cfg->device, "cuda");
    return (ft_engine_options){ .zero_stage = cfg->zero_stage, .precision = cfg->numerics,
                                .optimizer = cfg->optimizer.type,
                                .offload_optimizer = cfg->offload_optimizer,
                                .lookup_tokens = lanes ? (size_t)cfg->micro_batch_size * T : 0 };
}

size_t ft_run_head_budget(const ft_run_config *cfg, double device_bytes)
{
    const size_t MiB = (size_t)1 << 20;
    if (cfg->head_memory_mib > 0)
        return (size_t)cfg->head_memory_mib * MiB;
    const size_t share = device_bytes > 0 ? (size_t)(device_bytes / 64) : 0;
    return share > 64 * MiB ? share : 64 * MiB;
}

ft_ckpt_keep ft_run_ckpt_keep(const ft_run_config *cfg)
{
    if (cfg->checkpoint_keep_attention)
        return FT_CKPT_KEEP_ATTENTION;
    return cfg->checkpoint_keep_attention_output ? FT_CKPT_KEEP_ATTENTION_OUTPUT
                                                 : FT_CKPT_KEEP_NOTHING;
}

/* How the log and the plan name each keep setting: in a checkpointing phrase, as the
 * config lines that choose it, and what the recomputing blocks keep (NULL: nothing). */
static const struct {
    const char *phrase, *setting, *kept;
} keep_words[] = {
    [FT_CKPT_KEEP_NOTHING] = { "", "", NULL },
    [FT_CKPT_KEEP_ATTENTION_OUTPUT] = { ", attention's output kept",
                                        "; checkpoint_keep_attention_output = true",
                                        "attention's output (checkpoint_keep_attention_output)" },
    [FT_CKPT_KEEP_ATTENTION] = { ", attention kept", "; checkpoint_keep_attention = true",
                                 "their attention halves (checkpoint_keep_attention)" },
};

const char *ft_ckpt_keep_phrase(ft_ckpt_keep keep) { return keep_words[keep].phrase; }

ft_model_options ft_run_model_options(const ft_run_config *cfg, int T, double device_bytes)
{
    return (ft_model_options){ .max_batch = cfg->micro_batch_size, .seq_len = T,
                               .activation_checkpointing = cfg->activation_checkpointing,
                               .checkpoint_layers = cfg->checkpoint_layers,
                               .checkpoint_keep = ft_run_ckpt_keep(cfg),
                               .head_budget_bytes = ft_run_head_budget(cfg, device_bytes),
                               .dtype = cfg->numerics.activations };
}

int ft_plan_rank_bytes(const ft_plan_models *pm, const ft_run_config *cfg, int P, int T,
                       double device_bytes, double *device, double *host, ft_error *err)
{
    const ft_engine_options eo = ft_run_engine_options(cfg, T);
    const ft_model_options mo = ft_run_model_options(cfg, T, device_bytes);
    ft_plan_parts parts;
    if (ft_plan_parts_estimate(pm, &eo, &mo, P, &parts, err))
        return -1;
    *device = (double)ft_plan_parts_device(&parts);
    *host = (double)ft_plan_parts_host(&parts);
    return 0;
}

/* A full fine-tuning row's middle columns, in GiB. */
static void print_full_columns(FILE *out, const ft_plan_parts *p)
{
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    const ft_engine_memory *m = &p->trained;
    fprintf(out, "%8.2f %8.2f %9.2f %8.2f %11.2f", m->params / GiB, m->grads / GiB,
            m->optimizer / GiB, (m->gathered + m->scratch) / GiB, p->activations / GiB);
}

static int print_rows(FILE *out, const ft_run_config *cfg, const ft_plan_options *po,
                      const ft_plan_models *pm, int T, ft_error *err)
{
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    const bool lora = ft_plan_models_lora(pm);
    for (int stage = 0; stage <= 3; stage++)
        for (int offload = 0; offload <= 1; offload++)
            for (int ckpt = 0; ckpt <= 1; ckpt++) {
                ft_engine_options eo = ft_run_engine_options(cfg, T);
                eo.zero_stage = stage;
                eo.offload_optimizer = offload;
                ft_model_options mo = ft_run_model_options(cfg, T, po->device_gib * GiB);
                mo.activation_checkpointing = ckpt;
                ft_plan_parts parts;
                if (ft_plan_parts_estimate(pm, &eo, &mo, po->world_size, &parts, err))
                    return -1;
                const double device = (double)ft_plan_parts_device(&parts);
                const double host = (double)ft_plan_parts_host(&parts);
                int mine = stage == cfg->zero_stage && ckpt == cfg->activation_checkpointing &&
                           offload == cfg->offload_optimizer;
                fprintf(out, "%c %5d %7s %4s | ", mine ? '*' : ' ', stage, offload ? "yes" : "no",
                        ckpt ? "on" : "off");
                (lora ? ft_plan_lora_print_columns : print_full_columns)(out, &parts);
                fprintf(out, " | %8.2f %8.2f | %s\n", device / GiB, host / GiB,
                        device <= po->device_gib * GiB ? "yes" : "no");
                if (mine)
                    fprintf(out, "  (this config: device total %.0f bytes)\n", device);
                if (mine && lora)
                    ft_plan_lora_print_bytes(out, &parts);
            }
    return 0;
}

/* What the recompute of checkpointing's first ckpt blocks keeping keep adds to a step's
 * model FLOPs (train/mfu.h: 6 N a token, 4 N + 6 N_adapters with LoRA, and the visible
 * keys of rows of T tokens, one document a row), as a fraction: ckpt - 1 blocks' recompute
 * (the last checkpointed block keeps its forward's activations). */
static double recompute_share(const ft_plan_models *pm, int T, int ckpt, ft_ckpt_keep keep)
{
    if (ckpt < 2)
        return 0.0;
    const ft_model_config *mc = &pm->model->config;
    const double N = (double)ft_mfu_matmul_params(pm->model);
    const double per_token = ft_plan_models_lora(pm)
                                 ? 4.0 * N + 6.0 * (double)pm->adapters->total_numel
                                 : 6.0 * N;
    const double model = T * (per_token + ft_mfu_flops_per_key(mc) * ft_model_mean_keys(mc, T));
    return (ckpt - 1) * ft_model_recompute_flops(mc, T, T, keep) / model;
}

/* The device total of the config with checkpointing as given (ckpt 0: off; else the
 * first ckpt blocks, keeping keep); -1 on error. */
static double device_total(const ft_run_config *cfg, const ft_plan_options *po,
                           const ft_plan_models *pm, int T, int ckpt, ft_ckpt_keep keep,
                           ft_error *err)
{
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    const ft_engine_options eo = ft_run_engine_options(cfg, T);
    ft_model_options mo = ft_run_model_options(cfg, T, po->device_gib * GiB);
    mo.activation_checkpointing = ckpt > 0;
    mo.checkpoint_layers = ckpt;
    mo.checkpoint_keep = keep;
    ft_plan_parts parts;
    if (ft_plan_parts_estimate(pm, &eo, &mo, po->world_size, &parts, err))
        return -1.0;
    return (double)ft_plan_parts_device(&parts);
}

/* The fastest checkpointing with which the config's stage and offload fit the device:
 * of the settings that fit, the one whose recompute costs the fewest FLOPs a micro-batch
 * (ft_model_recompute_flops; on a tie the smaller device total). The candidates: none,
 * then the first k = 2 .. L blocks recomputing (k = 1 saves nothing: that block keeps
 * its set for the backward), keeping nothing, attention's output or the attention half
 * (model/ckpt_keep.h). Each block kept whole costs a set of activations and saves its
 * recompute; a kept attention half costs about a fifth of a set and saves about a third
 * of a recompute, a kept attention output about 6 % of a set and a sixth of a recompute
 * (the Llama-3.2-1B shape, seq_len 4096). */
static int print_fit(FILE *out, const ft_run_config *cfg, const ft_plan_options *po,
                     const ft_plan_models *pm, int T, ft_error *err)
{
    const double GiB = 1024.0 * 1024.0 * 1024.0, limit = po->device_gib * GiB;
    const ft_model_config *mc = &pm->model->config;
    const int L = mc->num_hidden_layers;
    const long tokens = (long)cfg->micro_batch_size * T;
    static const ft_ckpt_keep keeps[] = { FT_CKPT_KEEP_NOTHING, FT_CKPT_KEEP_ATTENTION_OUTPUT,
                                          FT_CKPT_KEEP_ATTENTION };
    double per_block[3];
    for (int i = 0; i < 3; i++)
        per_block[i] = ft_model_recompute_flops(mc, tokens, T, keeps[i]);
    int best_k = -1;
    ft_ckpt_keep best_keep = FT_CKPT_KEEP_NOTHING;
    double best_cost = 0.0, best_device = 0.0;
    for (int k = 0; k <= L; k += k == 0 ? 2 : 1)
        for (int i = 0; i < (k > 0 ? 3 : 1); i++) {
            const ft_ckpt_keep keep = keeps[i];
            const double cost = k > 0 ? (k - 1) * per_block[i] : 0.0;
            if (best_k >= 0 && cost > best_cost)
                continue;
            const double d = device_total(cfg, po, pm, T, k, keep, err);
            if (d < 0)
                return -1;
            if (d > limit || (best_k >= 0 && cost == best_cost && d >= best_device))
                continue;
            best_k = k;
            best_keep = keep;
            best_cost = cost;
            best_device = d;
        }
    fprintf(out, "fastest fit at stage %d%s: ", cfg->zero_stage,
            cfg->offload_optimizer ? " with offload" : "");
    if (best_k < 0) {
        fprintf(out, "none: even with every block checkpointed the device total is over %.1f "
                     "GiB (see the other stages and offload)\n", po->device_gib);
        return 0;
    }
    const char *keep = keep_words[best_keep].setting, *kept = keep_words[best_keep].phrase;
    const double share = 100.0 * recompute_share(pm, T, best_k, best_keep);
    if (best_k == 0)
        fprintf(out, "activation_checkpointing = false (device %.2f GiB)\n", best_device / GiB);
    else if (best_k < L)
        fprintf(out, "activation_checkpointing = true; checkpoint_layers = %d%s (blocks 0-%d "
                     "of %d recompute%s; device %.2f GiB; recompute +%.1f %% of the step's "
                     "model FLOPs)\n", best_k, keep, best_k - 1, L, kept, best_device / GiB,
                share);
    else
        fprintf(out, "activation_checkpointing = true%s (every block recomputes%s; device "
                     "%.2f GiB; recompute +%.1f %% of the step's model FLOPs)\n", keep, kept,
                best_device / GiB, share);
    return 0;
}

int ft_plan_print(FILE *out, const ft_run_config *cfg, const ft_plan_options *po, ft_error *err)
{
    ft_model_config mc;
    ft_model_layout layout;
    int T = 0;
    if (plan_shape(cfg, &mc, err) || plan_seq_len(cfg, po->seq_len, &T, err) ||
        ft_model_layout_build(&layout, &mc, err))
        return -1;
    ft_lora_config lora;
    ft_model_layout adapters;
    if (ft_plan_lora_open(cfg, &layout, &lora, &adapters, err)) {
        ft_model_layout_free(&layout);
        return -1;
    }
    const ft_plan_models pm = { &layout, &lora, &adapters };
    const int P = po->world_size;
    fprintf(out,
            "ftmpi plan: %s on %d rank%s: %.3f B parameters, micro-batch %d x seq_len %d, "
            "precision %s, param_dtype %s, %s\n",
            cfg->path, P, P > 1 ? "s" : "", ft_model_config_param_count(&mc) / 1e9,
            cfg->micro_batch_size, T, ft_dtype_name(cfg->numerics.weights),
            ft_dtype_name(cfg->numerics.params), cfg->optimizer.type == FT_OPT_ADAMW ? "AdamW" : "SGD");
    if (ft_plan_models_lora(&pm))
        ft_plan_lora_print_trained(out, &pm);
    fprintf(out, "GiB per rank (rank 0; activations in %s); * = this config; fits = device "
                 "total <= %.1f GiB\n", ft_dtype_name(cfg->numerics.activations), po->device_gib);
    const int ckpt = ft_model_checkpointed_blocks(cfg->activation_checkpointing,
                                                  cfg->checkpoint_layers, mc.num_hidden_layers);
    if (ckpt > 0 && ckpt < mc.num_hidden_layers)
        fprintf(out, "ckpt on: blocks 0-%d of %d recompute, the others keep their activations "
                     "(checkpoint_layers = %d)\n", ckpt - 1, mc.num_hidden_layers, ckpt);
    const ft_ckpt_keep keep = ft_run_ckpt_keep(cfg);
    if (keep_words[keep].kept)
        fprintf(out, "ckpt on: the recomputing blocks keep %s\n", keep_words[keep].kept);
    if (ckpt > 0)
        fprintf(out, "ckpt on: the recompute adds %.1f %% to the step's model FLOPs (the "
                     "forward of %d block%s, less what the backward does not read)\n",
                100.0 * recompute_share(&pm, T, ckpt, keep), ckpt - 1,
                ckpt - 1 == 1 ? "" : "s");
    if (ft_plan_models_lora(&pm))
        ft_plan_lora_print_header(out);
    else
        fprintf(out, "  stage offload ckpt |   params    grads optimizer gathered activations |"
                     "   device     host | fits\n");
    int rc = print_rows(out, cfg, po, &pm, T, err) ||
             print_fit(out, cfg, po, &pm, T, err);
    if (ft_plan_models_lora(&pm))
        ft_model_layout_free(&adapters);
    ft_model_layout_free(&layout);
    return rc;
}
