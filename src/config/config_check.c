/* After the file and the overrides are merged: model.weights vs the shape keys,
 * required keys, defaults, derived values, model validation and the checks that
 * involve more than one key. Each message carries the file:line (or the override)
 * of the key at fault. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

/* Every path used here is in the schema (the tests exercise each use). */
static const ft_config_key *key(const char *path)
{
    return ft_config_find_key(path);
}

static bool is_set(const ft_config_state *st, const ft_config_key *k)
{
    return st->origin[ft_config_key_index(k)].set;
}

static int check_weights_vs_shape(ft_config_state *st, ft_error *err)
{
    if (!st->cfg->model_weights)
        return 0;
    for (size_t i = 0; i < ft_config_n_keys; i++) {
        const ft_config_key *k = &ft_config_keys[i];
        if ((k->flags & FT_KEY_SHAPE) && is_set(st, k))
            return ft_config_fail_at(st, k, err,
                                     "not allowed together with model.weights (the shape comes "
                                     "from the weights file)");
    }
    return 0;
}

bool ft_config_group_present(const ft_config_state *st, const ft_config_key *k)
{
    const char *dot = strrchr(k->path, '.');
    const size_t n = dot ? (size_t)(dot - k->path) + 1 : 0; /* "lora." */
    for (size_t i = 0; i < ft_config_n_keys; i++)
        if (strncmp(ft_config_keys[i].path, k->path, n) == 0 &&
            (st->origin[i].set || st->origin[i].group_present))
            return true;
    return false;
}

static int apply_defaults(ft_config_state *st, ft_error *err)
{
    bool weights = st->cfg->model_weights != NULL;
    for (size_t i = 0; i < ft_config_n_keys; i++) {
        const ft_config_key *k = &ft_config_keys[i];
        if (is_set(st, k))
            continue;
        if ((k->flags & FT_KEY_REQUIRED) || ((k->flags & FT_KEY_SHAPE_REQUIRED) && !weights))
            return ft_fail(err, "%s: %s: required key is missing%s", st->path, k->path,
                           (k->flags & FT_KEY_SHAPE_REQUIRED) ? " (or give model.weights)" : "");
        /* with weights the trainer fills cfg->model from the file: leave it zeroed */
        if ((k->flags & FT_KEY_SHAPE) && weights)
            continue;
        if (k->flags & FT_KEY_DERIVED)
            continue;
        if ((k->flags & FT_KEY_OPTIONAL_GROUP) && !ft_config_group_present(st, k))
            continue;
        if (ft_config_store_default(st->cfg, k) < 0)
            return ft_fail(err, "%s: out of memory", st->path);
    }
    return 0;
}

/* num_key_value_heads defaults to num_attention_heads (no GQA) and head_dim to
 * hidden_size / num_attention_heads, which must then divide evenly. */
static int derive_shape(ft_config_state *st, ft_error *err)
{
    ft_model_config *m = &st->cfg->model;
    if (!is_set(st, key("model.num_key_value_heads")))
        m->num_key_value_heads = m->num_attention_heads;
    if (!is_set(st, key("model.head_dim"))) {
        if (m->hidden_size % m->num_attention_heads != 0)
            return ft_config_fail_at(st, key("model.num_attention_heads"), err,
                                     "%d does not divide hidden_size (%d); set model.head_dim "
                                     "explicitly",
                                     m->num_attention_heads, m->hidden_size);
        m->head_dim = m->hidden_size / m->num_attention_heads;
    }
    return 0;
}

/* A rope_scaling parameter without a scaling type would be silently ignored. */
static int check_rope_scaling_used(ft_config_state *st, ft_error *err)
{
    if (st->cfg->model.rope_scaling.type != FT_ROPE_SCALING_NONE)
        return 0;
    static const char prefix[] = "model.rope_scaling.";
    const ft_config_key *type = key("model.rope_scaling.type");
    for (size_t i = 0; i < ft_config_n_keys; i++) {
        const ft_config_key *k = &ft_config_keys[i];
        if (k != type && strncmp(k->path, prefix, sizeof prefix - 1) == 0 && is_set(st, k))
            return ft_config_fail_at(st, k, err,
                                     "has no effect unless model.rope_scaling.type = \"llama3\"");
    }
    return 0;
}

/* ft_model_config_validate names the field first ("head_dim: 33 must be even"):
 * turn that into the key's location. */
static int validate_model(ft_config_state *st, ft_error *err)
{
    ft_error merr;
    ft_error_clear(&merr);
    if (ft_model_config_validate(&st->cfg->model, &merr) == 0)
        return 0;
    const char *colon = strstr(merr.msg, ": ");
    if (colon) {
        char path[256];
        snprintf(path, sizeof path, "model.%.*s", (int)(colon - merr.msg), merr.msg);
        const ft_config_key *k = ft_config_find_key(path);
        if (k)
            return ft_config_fail_at(st, k, err, "%s", colon + 2);
    }
    return ft_fail(err, "%s: model: %s", st->path, merr.msg);
}

/* Of two keys in conflict, the one to name: a command-line override when only one of
 * them is (the value just given is the likelier mistake), else `a`. */
static const ft_config_key *blame(const ft_config_state *st, const char *a, const char *b)
{
    const ft_config_key *ka = key(a), *kb = key(b);
    const bool oa = st->origin[ft_config_key_index(ka)].override != NULL;
    const bool ob = st->origin[ft_config_key_index(kb)].override != NULL;
    return ob && !oa ? kb : ka;
}

/* The run's length is max_steps or num_epochs (converted to steps when the trainer
 * knows the dataset's rows): exactly one. */
static int check_run_length(ft_config_state *st, ft_error *err)
{
    const bool steps = is_set(st, key("max_steps")), epochs = is_set(st, key("num_epochs"));
    if (steps && epochs)
        return ft_config_fail_at(st, blame(st, "num_epochs", "max_steps"), err,
                                 "give max_steps or num_epochs, not both");
    if (!steps && !epochs)
        return ft_fail(err, "%s: max_steps: required key is missing (or give num_epochs)",
                       st->path);
    return 0;
}

/* keep_best judges checkpoints by their evaluations. */
static int check_keep_best(ft_config_state *st, ft_error *err)
{
    const ft_run_config *c = st->cfg;
    if (!c->keep_best)
        return 0;
    if (!c->checkpoint_dir)
        return ft_config_fail_at(st, key("keep_best"), err,
                                 "needs checkpoint_dir (where the checkpoints are kept)");
    if (!c->eval_data || c->eval_every <= 0)
        return ft_config_fail_at(st, key("keep_best"), err,
                                 "needs data.eval and eval_every > 0 (the best checkpoint is "
                                 "the one with the lowest eval loss)");
    return 0;
}

/* Sample generations run at evaluations through the generation decoder, in the
 * precision of the parameters the engine hands out (fp32, or bf16 with the bf16 recipe). */
static int check_eval_prompts(ft_config_state *st, ft_error *err)
{
    const ft_run_config *c = st->cfg;
    if (!c->eval_prompts)
        return 0;
    if (!c->eval_tokenizer)
        return ft_config_fail_at(st, key("eval_prompts"), err,
                                 "needs eval_tokenizer (the model's tokenizer.json, or \"bytes\")");
    if (c->eval_every <= 0)
        return ft_config_fail_at(st, key("eval_prompts"), err,
                                 "samples are generated at evaluations: set eval_every and data.eval");
    return 0;
}

static int check_cross_keys(ft_config_state *st, ft_error *err)
{
    const ft_run_config *c = st->cfg;
    if (check_run_length(st, err) < 0 || check_keep_best(st, err) < 0 ||
        check_eval_prompts(st, err) < 0)
        return -1;
    if (c->checkpoint_layers > 0 && !c->activation_checkpointing) /* else silently nothing */
        return ft_config_fail_at(st, key("checkpoint_layers"), err,
                                 "needs activation_checkpointing = true (it says how many blocks "
                                 "recompute)");
    if (c->checkpoint_keep_attention && !c->activation_checkpointing)
        return ft_config_fail_at(st, key("checkpoint_keep_attention"), err,
                                 "needs activation_checkpointing = true (it says what the "
                                 "recomputing blocks keep)");
    if (c->checkpoint_keep_attention_output && !c->activation_checkpointing)
        return ft_config_fail_at(st, key("checkpoint_keep_attention_output"), err,
                                 "needs activation_checkpointing = true (it says what the "
                                 "recomputing blocks keep)");
    if (c->checkpoint_keep_attention_output && c->checkpoint_keep_attention)
        return ft_config_fail_at(st, key("checkpoint_keep_attention_output"), err,
                                 "checkpoint_keep_attention = true keeps attention's output "
                                 "already; set one of the two");
    /* GPT-J's one shared norm feeds attention and MLP: its block is parallel whatever the
     * key says, and a false that is silently ignored would mislead */
    const ft_config_key *pr = key("model.parallel_residual");
    if (c->model.family == FT_FAMILY_GPTJ && is_set(st, pr) && !c->model.parallel_residual)
        return ft_config_fail_at(st, pr, err, "false does not apply to gptj, whose block is "
                                 "always parallel (one shared LayerNorm); remove the key");
    if (c->optimizer.min_lr > c->optimizer.lr) {
        const ft_config_key *k = blame(st, "optimizer.min_lr", "optimizer.lr");
        return k == key("optimizer.lr")
                   ? ft_config_fail_at(st, k, err, "%g is less than optimizer.min_lr (%g)",
                                       c->optimizer.lr, c->optimizer.min_lr)
                   : ft_config_fail_at(st, k, err, "%g is greater than optimizer.lr (%g)",
                                       c->optimizer.min_lr, c->optimizer.lr);
    }
    /* with num_epochs the trainer checks warmup_steps once max_steps is known */
    if (c->max_steps > 0 && c->optimizer.warmup_steps > c->max_steps) {
        const ft_config_key *k = blame(st, "optimizer.warmup_steps", "max_steps");
        return k == key("max_steps")
                   ? ft_config_fail_at(st, k, err, "%ld is less than optimizer.warmup_steps (%ld)",
                                       c->max_steps, c->optimizer.warmup_steps)
                   : ft_config_fail_at(st, k, err, "%ld is greater than max_steps (%ld)",
                                       c->optimizer.warmup_steps, c->max_steps);
    }
    if (c->resume && strcmp(c->resume, "auto") == 0 && !c->checkpoint_dir)
        return ft_config_fail_at(st, key("resume"), err,
                                 "\"auto\" needs checkpoint_dir (where to look for `latest`)");
    if (c->precision == FT_DTYPE_BF16 && c->param_dtype != FT_DTYPE_BF16) {
        if (is_set(st, key("model.param_dtype")))
            return ft_config_fail_at(st, blame(st, "model.param_dtype", "precision"), err,
                                     "precision = \"bf16\" works on bf16 parameters: set "
                                     "model.param_dtype = \"bf16\" or leave it out");
        st->cfg->param_dtype = FT_DTYPE_BF16;
    }
    if (c->eval_every > 0 && !c->eval_data)
        return ft_config_fail_at(st, key("eval_every"), err,
                                 "periodic evaluation needs data.eval (or set eval_every = 0)");
    return 0;
}

int ft_config_finish(ft_config_state *st, ft_error *err)
{
    if (check_weights_vs_shape(st, err) < 0 || apply_defaults(st, err) < 0)
        return -1;
    if (!st->cfg->model_weights) {
        if (derive_shape(st, err) < 0 || check_rope_scaling_used(st, err) < 0 ||
            validate_model(st, err) < 0)
            return -1;
    }
    if (check_cross_keys(st, err) < 0 || ft_config_check_lora(st, err) < 0)
        return -1;
    ft_run_config *c = st->cfg;
    c->numerics = ft_precision_resolve(c->precision, c->param_dtype, c->grad_reduce_dtype);
    return 0;
}
