/* The lora group (model/lora.h) and model.adapter, after the file, the overrides and the
 * defaults. Which targets exist depends on the model's family, known only at start-up
 * with model.weights: ft_run_config_lora (config_lora.c) checks the names then. */
#include <stdio.h>
#include <string.h>

#include "config/config_internal.h"

/* Every path used here is in the schema (the tests exercise each use). */
static const ft_config_key *key(const char *path)
{
    return ft_config_find_key(path);
}

static const ft_config_origin *origin(const ft_config_state *st, const char *path)
{
    return &st->origin[ft_config_key_index(key(path))];
}

/* LoRA off is one state, all fields zero, whatever else the lora group held
 * (`lora.rank=0` given beside a file's full group). */
static void clear_lora(ft_run_config *c)
{
    c->lora_rank = 0;
    c->lora_alpha = 0.0;
    c->lora_dropout = 0.0;
    ft_config_free_strings(c->lora_targets);
    c->lora_targets = NULL;
}

/* model.adapter seeds the adapters: without LoRA there are none to seed. Of the two keys,
 * a command-line override is named when only one is (the value just given). */
static int check_adapter_without_lora(ft_config_state *st, ft_error *err)
{
    const ft_config_origin *rank = origin(st, "lora.rank");
    if (!rank->set)
        return ft_config_fail_at(st, key("model.adapter"), err,
                                 "needs LoRA: add a lora group that matches the adapter "
                                 "(lora = { rank = R; alpha = A; })");
    if (rank->override && !origin(st, "model.adapter")->override)
        return ft_config_fail_at(st, key("lora.rank"), err,
                                 "0 turns LoRA off, but model.adapter needs it");
    return ft_config_fail_at(st, key("model.adapter"), err,
                             "needs LoRA, which lora.rank = 0 turns off");
}

/* NULL (the key left out) means every projection of the family; a list given must name
 * something, each once (a repeat is a slip that would otherwise pass silently). An empty
 * list is stored as NULL, so it is told apart by the key being set. */
static int check_targets(ft_config_state *st, ft_error *err)
{
    const ft_config_key *k = key("lora.targets");
    char *const *t = st->cfg->lora_targets;
    if (!origin(st, "lora.targets")->set)
        return 0;
    if (!t || !t[0])
        return ft_config_fail_at(st, k, err,
                                 "an empty list trains nothing; name the projections, or leave "
                                 "the key out for every projection of the family");
    for (size_t i = 1; t[i]; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(t[i], t[j]) == 0)
                return ft_config_fail_at(st, k, err, "\"%s\" is listed twice", t[i]);
    return 0;
}

int ft_config_check_lora(ft_config_state *st, ft_error *err)
{
    ft_run_config *c = st->cfg;
    if (c->lora_rank == 0) {
        if (c->model_adapter)
            return check_adapter_without_lora(st, err);
        clear_lora(c);
        return 0;
    }
    /* alpha = 2 rank keeps the adapters' scale alpha / rank at 2 whatever the rank (the
     * issue's rank 16, alpha 32) */
    if (!origin(st, "lora.alpha")->set)
        c->lora_alpha = 2.0 * c->lora_rank;
    return check_targets(st, err);
}
