/* The model a run trains, from the run config to parameters in the engines: its shape
 * (model.weights' or the config's, with LoRA's adapter layout), the base weights, and
 * the trained parameters of a fresh run (model.weights, model.adapter or the seed).
 * A resumed run's parameters come from its checkpoint instead (trainer.c). */
#include <stdint.h>

#include "config/config_lora.h"
#include "io/peft_adapter.h"
#include "io/weights.h"
#include "io/weights_identity.h"
#include "train/trainer_internal.h"

int ft_trainer_resolve_model_shape(ft_trainer *t, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    ft_model_config mc = cfg->model;
    if (cfg->model_weights) {
        ft_h5file f;
        if (ft_h5_open(&f, cfg->model_weights, MPI_COMM_WORLD, err))
            return ft_fail_context(err, "model.weights");
        char fp[FT_TOK_FINGERPRINT_LEN];
        int rc = ft_h5_check_kind(&f, "weights", err) || ft_weights_read_config(&f, &mc, err) ||
                 ft_tok_fingerprint_read(&f, fp, err) ||
                 ft_tok_identity_meet(&t->tok, cfg, "model.weights", cfg->model_weights, fp, err);
        ft_h5_close(&f, NULL);
        if (rc)
            return -1;
    }
    t->train_layout = &t->layout;
    if (ft_model_layout_build(&t->layout, &mc, err))
        return -1;
    if (ft_run_config_lora(cfg, &mc, &t->lora, err) ||
        ft_run_config_lora_outputs(cfg, &t->lora, err))
        return -1;
    if (!ft_lora_enabled(&t->lora))
        return 0;
    t->train_layout = &t->adapter_layout;
    return ft_lora_layout_build(&t->adapter_layout, &mc, &t->lora, err);
}

/* The model's weights into e (the frozen base with LoRA): model.weights, or the
 * seeded random initialisation. */
int ft_trainer_load_model_weights(ft_trainer *t, ft_engine *e, ft_error *err)
{
    const ft_run_config *cfg = t->cfg;
    if (!cfg->model_weights)
        return ft_engine_init_random(e, (uint64_t)cfg->seed, cfg->init_std, err);
    ft_h5file f;
    if (ft_h5_open(&f, cfg->model_weights, MPI_COMM_WORLD, err))
        return -1;
    if (cfg->direct_io)
        ft_h5_attach_raw(&f, MPI_COMM_WORLD, false);
    int rc = ft_weights_check_tensors(&f, "/model", &t->layout, err) ||
             ft_engine_load(e, &f, "/model", err);
    /* LoRA checkpoints name their base by content; a file without content hashes (not
     * written by ftmpi) has no identity, and its checkpoints are checked by shape only */
    ft_error no_identity;
    if (!rc && e == t->base &&
        ft_weights_identity(&f, "/model", &t->layout, t->base_hash, &no_identity))
        t->base_hash[0] = '\0';
    ft_h5_close(&f, NULL);
    return rc ? -1 : 0;
}

/* The trained parameters of a fresh run: the model, or with LoRA the adapters (PEFT's
 * initialisation from the seed: A uniform, B zero). */
static int peft_fill(void *ctx, const ft_unit_layout *u, size_t begin, size_t end, float *dst,
                     ft_error *err)
{
    return ft_peft_adapter_read_range(ctx, u, begin, end, dst, err);
}

/* The adapters of a PEFT directory (model.adapter), checked against the lora group. */
static int load_adapter_dir(ft_trainer *t, ft_error *err)
{
    const char *dir = t->cfg->model_adapter;
    ft_peft_adapter a;
    if (ft_peft_adapter_open(&a, dir, &t->layout.config, err))
        return ft_fail_context(err, "model.adapter");
    int rc = ft_peft_adapter_check_config(&a, &t->lora, err);
    if (rc)
        ft_fail_context(err, "%s", ft_run_config_where(t->cfg, "model.adapter"));
    rc = rc || ft_engine_init_from(t->engine, peft_fill, &a, err);
    ft_peft_adapter_close(&a);
    return rc ? -1 : 0;
}

int ft_trainer_load_parameters(ft_trainer *t, ft_error *err)
{
    if (!t->base)
        return ft_trainer_load_model_weights(t, t->engine, err);
    if (t->cfg->model_adapter)
        return load_adapter_dir(t, err);
    return ft_engine_init_random(t->engine, (uint64_t)t->cfg->seed, 0.0, err);
}
