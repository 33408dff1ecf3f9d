/* What the log says about the run before its first step: the model, the batch, memory
 * and sharding, the basis of MFU, where each rank runs; and the size and speed of a
 * checkpoint transfer, for the lines of set-up and the loop alike. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm/world.h"
#include "train/metrics.h"
#include "train/mfu.h"
#include "train/plan.h"
#include "train/trainer_internal.h"
#include "util/units.h"

/* "2.10s, 4.56 GB at 2.17 GB/s, O_DIRECT": a checkpoint transfer for the log line. */
void ft_trainer_io_summary(char *buf, size_t len, const char *path, double seconds, bool direct)
{
    struct stat st;
    const double gb = stat(path, &st) == 0 ? (double)st.st_size / 1e9 : 0.0;
    snprintf(buf, len, "%.2fs, %.2f GB at %.2f GB/s, %s", seconds, gb,
             seconds > 0 ? gb / seconds : 0.0, direct ? "O_DIRECT" : "page cache");
}

/* Engine memory of the run: the trained engine's and the frozen base's. */
static ft_engine_memory run_memory(ft_trainer *t)
{
    ft_engine_memory m = ft_engine_memory_usage(t->engine);
    if (t->base) {
        const ft_engine_memory b = ft_engine_memory_usage(t->base);
        m.params += b.params;
        m.grads += b.grads;
        m.optimizer += b.optimizer;
        m.gathered += b.gathered;
        m.scratch += b.scratch;
        m.host += b.host;
        m.host_pinned += b.host_pinned;
    }
    return m;
}

/* Memory per rank in the log, each figure once in a readable unit; the exact bytes go
 * to the metrics file ("memory" record) for scripts and tests. */
static void print_memory(ft_trainer *t, const ft_engine_memory *mem)
{
    const size_t act = ft_model_activation_bytes(t->model);
    const double v[] = { (double)mem->params, (double)mem->grads, (double)mem->optimizer,
                         (double)mem->gathered, (double)mem->scratch, (double)act,
                         (double)mem->host };
    static const char *const keys[] = { "params", "grads", "optimizer", "gathered",
                                        "staging", "activations", "host" };
    char h[7][32], ckpt[80];
    for (int i = 0; i < 7; i++)
        ft_format_bytes(h[i], sizeof h[i], v[i]);
    const int L = t->layout.config.num_hidden_layers;
    const int k = ft_model_checkpointed_blocks(t->cfg->activation_checkpointing,
                                               t->cfg->checkpoint_layers, L);
    const char *kept = ft_ckpt_keep_phrase(ft_run_ckpt_keep(t->cfg));
    if (k == 0)
        snprintf(ckpt, sizeof ckpt, "off");
    else if (k < L)
        snprintf(ckpt, sizeof ckpt, "on for blocks 0-%d of %d%s", k - 1, L, kept);
    else
        snprintf(ckpt, sizeof ckpt, "on%s", kept);
    fprintf(t->out,
            "ftmpi: memory per rank: params %s, grads %s, optimizer %s, gathered units %s, "
            "staging %s, activations %s (checkpointing %s)\n",
            h[0], h[1], h[2], h[3], h[4], h[5], ckpt);
    if (t->cfg->offload_optimizer) {
        char pinned[80] = "";
        if (mem->host_pinned) { /* the transfers overlap the host's update (engine_offload.c) */
            char b[32];
            ft_format_bytes(b, sizeof b, (double)mem->host_pinned);
            snprintf(pinned, sizeof pinned, " (%s of it page-locked for the transfers)", b);
        }
        fprintf(t->out, "ftmpi: optimizer offloaded: %s of master weights and moments in "
                        "host memory%s\n", h[6], pinned);
    }
    ft_metrics_values(t->metrics, "memory", 0, keys, v, 7);
}

/* What the trained engine runs beside compute (engine.h), one line: a user timing a
 * run (or an FTMPI_*_OVERLAP=0 comparison) sees what is on. */
static void print_beside_compute(ft_trainer *t)
{
    static const struct {
        unsigned bit;
        const char *what;
    } parts[] = {
        { FT_ENGINE_BESIDE_UPDATE, "the optimizer's update (beside the next forward)" },
        { FT_ENGINE_BESIDE_LOOKUP, "the next lookup's embedding rows (before the update)" },
        { FT_ENGINE_BESIDE_NORM, "the gradient norm's sums (beside the backward)" },
        { FT_ENGINE_BESIDE_REDUCE, "the gradient reductions (beside the backward)" },
        { FT_ENGINE_BESIDE_GATHER, "the parameter all-gathers (beside the next forward)" },
    };
    const unsigned on = ft_engine_beside_compute(t->engine);
    fprintf(t->out, "ftmpi: beside compute:");
    const char *sep = " ";
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (on & parts[i].bit) {
            fprintf(t->out, "%s%s", sep, parts[i].what);
            sep = ", ";
        }
    fprintf(t->out, "%s\n", on ? "" : " nothing (each runs after the work it follows)");
}

void ft_trainer_print_startup(ft_trainer *t)
{
    if (!t->out)
        return;
    const ft_model_config *c = &t->layout.config;
    const ft_run_config *cfg = t->cfg;
    ft_engine_memory mem = run_memory(t);
    fprintf(t->out,
            "ftmpi: model %s, %lld params (%d layers, hidden %d, ffn %d, heads %d/%d kv, "
            "head_dim %d, vocab %d%s)\n",
            ft_model_family_of(c)->name, ft_model_config_param_count(c), c->num_hidden_layers,
            c->hidden_size,
            c->intermediate_size, c->num_attention_heads, c->num_key_value_heads, c->head_dim,
            c->vocab_size, c->tie_word_embeddings ? ", tied" : "");
    fprintf(t->out,
            "ftmpi: %d rank%s, backend %s, collectives %s, zero_stage %d, global batch %d = %d "
            "ranks x micro %d x accum %d, seq_len %d, %ld tokens/step\n",
            t->comm->size, t->comm->size > 1 ? "s" : "", t->be->name,
            t->dev_comm ? t->dev_comm->name : t->comm->name, cfg->zero_stage,
            cfg->global_batch_size, t->comm->size, cfg->micro_batch_size, t->accum, t->seq_len,
            (long)cfg->global_batch_size * t->seq_len);
    if (t->base) {
        char targets[256];
        ft_lora_targets_string(c, &t->lora, targets, sizeof targets);
        fprintf(t->out, "ftmpi: LoRA rank %d, alpha %g (scale %g) on %s: %zu trained parameters "
                        "(%.3f %% of the model's), the model frozen\n",
                t->lora.rank, t->lora.alpha, ft_lora_scale(&t->lora), targets,
                t->adapter_layout.total_numel,
                100.0 * (double)t->adapter_layout.total_numel / (double)t->layout.total_numel);
    }
    print_memory(t, &mem);
    fprintf(t->out,
            "ftmpi: sharding: %d units, %zu elements padded to %zu (%zu in the embedding, %zu "
            "per block)\n",
            t->layout.n_units, t->layout.total_numel,
            ft_engine_padded_total(t->base ? t->base : t->engine),
            ft_engine_padded_unit(t->base ? t->base : t->engine, 0),
            ft_engine_padded_unit(t->base ? t->base : t->engine, ft_layout_block_unit(0)));
    if (t->base)
        fprintf(t->out, "ftmpi: sharding the adapters: %d units, %zu elements padded to %zu\n",
                t->adapter_layout.n_units, t->adapter_layout.total_numel,
                ft_engine_padded_total(t->engine));
    print_beside_compute(t);
    fflush(t->out);
}

/* Once: what MFU divides by and where the peak comes from (train/mfu.h), and the
 * start-up phases so far. */
void ft_trainer_print_mfu_basis(ft_trainer *t, const ft_peak *peak)
{
    if (!t->out)
        return;
    const ft_model_config *c = &t->layout.config;
    const double T = t->seq_len, W = c->sliding_window;
    /* visible keys per query of a full-length causal row, for the reader's estimate */
    const double keys = W > 0 && W < T ? W - W * (W - 1) / (2 * T) : (T + 1) / 2;
    char basis[128];
    if (t->base) /* LoRA: the frozen matmuls have no weight gradient */
        snprintf(basis, sizeof basis, "4 x %lld frozen matmul params + 6 x %zu adapter params",
                 ft_mfu_matmul_params(&t->layout), t->adapter_layout.total_numel);
    else
        snprintf(basis, sizeof basis, "6 x %lld matmul params", ft_mfu_matmul_params(&t->layout));
    fprintf(t->out,
            "ftmpi: model FLOPs per token %.3g = %s + %.3g per visible key (%.0f keys a query "
            "in a one-document row)\n",
            t->flops_per_token + t->flops_per_key * keys, basis, t->flops_per_key, keys);
    if (peak->flops > 0)
        fprintf(t->out, "ftmpi: MFU peak %.4g TFLOP/s per rank (%s)\n", peak->flops / 1e12,
                peak->source);
    else
        fprintf(t->out, "ftmpi: %s\n", peak->source);
    if (t->startup) {
        char line[512];
        ft_startup_format(t->startup, line, sizeof line);
        fprintf(t->out, "ftmpi: %s\n", line);
    }
    fflush(t->out);
}

/* One line per rank, printed in rank order by rank 0. */
int ft_trainer_log_rank_placement(ft_trainer *t, ft_error *err)
{
    char line[400], host[256];
    if (gethostname(host, sizeof host - 1))
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    char dev[32];
    if (t->be->device >= 0)
        snprintf(dev, sizeof dev, "%s:%d", t->be->name, t->be->device);
    else
        snprintf(dev, sizeof dev, "%s (host)", t->be->name);
    snprintf(line, sizeof line, "ftmpi: rank %d of %d on %s, node-local rank %d of %d, device %s",
             t->comm->rank, t->comm->size, host, t->comm->local_rank, t->comm->local_size, dev);
    char *all = t->comm->rank == 0 ? malloc(sizeof line * (size_t)t->comm->size) : NULL;
    if (t->comm->rank == 0 && !all)
        return ft_fail(err, "out of host memory");
    ft_world_gather(MPI_COMM_WORLD, line, sizeof line, all, 0);
    if (t->out)
        for (int r = 0; r < t->comm->size; r++)
            fprintf(t->out, "%s\n", all + (size_t)r * sizeof line);
    free(all);
    return 0;
}
