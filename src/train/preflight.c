/* Start-up checks of what the run will need later (train/preflight.h). */
#include "train/preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "comm/agree.h"
#include "util/output_file.h"
#include "train/plan.h"

#define GIB 1073741824.0

/* The planner's arithmetic before any allocation: on the CPU backend every byte is host
 * memory, and a run that cannot fit the node (ranks on it x bytes per rank) would grow
 * until the kernel kills it with no message. */
int ft_preflight_host_memory(ft_trainer *t, ft_error *err)
{
    double device = 0, host = 0;
    const ft_plan_models pm = { &t->layout, &t->lora, &t->adapter_layout };
    if (ft_plan_rank_bytes(&pm, t->cfg, t->comm->size, t->seq_len,
                           (double)t->be->memory_total, &device, &host, err))
        return -1;
    const double node = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    const double need = (device + host) * t->comm->local_size;
    int rc = 0;
    if (node > 0 && need > node)
        rc = ft_fail(err, "%s: this run needs %.1f GiB per rank x %d rank%s on this node = "
                     "%.1f GiB, the node has %.1f GiB; see ftmpi --plan (more ranks, a higher "
                     "zero_stage, activation_checkpointing) or a smaller model",
                     t->cfg->path, (device + host) / GIB, t->comm->local_size,
                     t->comm->local_size > 1 ? "s" : "", need / GIB, node / GIB);
    return ft_agree(MPI_COMM_WORLD, rc, err); /* nodes may differ: the ranks agree */
}

/* final_weights is written after the last step: a directory that is missing or not
 * writable is found now (rank 0 creates and removes its .tmp), not after training. */
int ft_preflight_final_weights(ft_trainer *t, ft_error *err)
{
    int rc = 0;
    const ft_run_config *cfg = t->cfg;
    /* renamed over an input, it would destroy the file the run started from */
    if (t->comm->rank == 0 &&
        (ft_output_not_input(cfg->final_weights, "final_weights", cfg->model_weights,
                             "model.weights", err) ||
         ft_output_not_input(cfg->final_weights, "final_weights", cfg->train_data, "data.train",
                             err) ||
         ft_output_not_input(cfg->final_weights, "final_weights", cfg->eval_data, "data.eval",
                             err) ||
         ft_output_replaceable(cfg->final_weights, "final_weights", err)))
        rc = -1;
    if (t->comm->rank == 0 && !rc) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", t->cfg->final_weights);
        /* made new as the real write will be: a symlink or FIFO planted at the .tmp
         * name is refused now, not after training */
        int fd = -1;
        if (ft_output_create_tmp(tmp, 0666, &fd, err))
            rc = ft_fail_context(err, "final_weights");
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
    }
    return ft_agree(MPI_COMM_WORLD, rc, err);
}

/* data.eval is first read at the first evaluation, maybe hours in: a file that cannot
 * serve is refused now, before step 1, with the checks the evaluation would make. */
int ft_preflight_eval_data(ft_trainer *t, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    ft_dataset_info di;
    if (ft_dataset_read_info(cfg->eval_data, MPI_COMM_WORLD, "data.eval", &di, err))
        return -1;
    int rc = 0;
    if (ft_tok_identity_meet(&t->tok, cfg, "data.eval", cfg->eval_data, di.tokenizer_fingerprint,
                             err))
        return -1; /* marked shared: the same attributes on every rank */
    if (di.seq_len != t->seq_len)
        rc = ft_fail(err, "data.eval: %s: seq_len %d differs from data.train's %d (%s); "
                     "prepare both with the same --seq-len", cfg->eval_data, di.seq_len,
                     t->seq_len, cfg->train_data);
    else if (di.vocab_size > t->layout.config.vocab_size)
        rc = ft_fail(err, "data.eval: %s: dataset vocab_size %d exceeds the model's %d (wrong "
                     "tokenizer for this model?)", cfg->eval_data, di.vocab_size,
                     t->layout.config.vocab_size);
    if (rc)
        err->flags |= FT_ERR_SHARED | FT_ERR_CONFIG; /* the same facts on every rank */
    return rc;
}
