#include "train/plan_parts.h"

#include <string.h>

int ft_plan_parts_estimate(const ft_plan_models *pm, const ft_engine_options *eo,
                           const ft_model_options *mo, int P, ft_plan_parts *out, ft_error *err)
{
    memset(out, 0, sizeof *out);
    ft_model_options m = *mo;
    m.lora = NULL;
    m.adapter_layout = NULL;
    if (!ft_plan_models_lora(pm)) {
        if (ft_engine_estimate(pm->model, P, eo, &out->trained, err))
            return -1;
    } else {
        ft_engine_options base_eo = *eo;
        base_eo.frozen = true;
        if (ft_engine_estimate(pm->model, P, &base_eo, &out->base, err) ||
            ft_engine_estimate(pm->adapters, P, eo, &out->trained, err))
            return -1;
        m.lora = pm->lora;
        m.adapter_layout = pm->adapters;
    }
    out->activations = ft_model_estimate_activation_bytes(pm->model, &m);
    return 0;
}

size_t ft_plan_engine_device(const ft_engine_memory *m)
{
    return m->params + m->grads + m->optimizer + m->gathered + m->scratch;
}

size_t ft_plan_parts_device(const ft_plan_parts *p)
{
    return ft_plan_engine_device(&p->trained) + ft_plan_engine_device(&p->base) + p->activations;
}

size_t ft_plan_parts_host(const ft_plan_parts *p) { return p->trained.host + p->base.host; }
