/* A PEFT adapter directory against a run's lora settings, and as a weights file for
 * the engine (io/peft_adapter.h). */
#include "io/peft_adapter.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/weights.h"
#include "util/path_join.h"

int ft_peft_adapter_check_config(const ft_peft_adapter *a, const ft_lora_config *lora,
                                 ft_error *err)
{
    const ft_model_config *c = &a->layout.config;
    if (a->lora.rank == lora->rank && a->lora.sites == lora->sites &&
        fabs(a->lora.alpha - lora->alpha) <= 1e-12 * fabs(lora->alpha))
        return 0;
    char have[160] = "", want[160] = "";
    for (int s = 0; s < FT_LORA_N_SITES; s++) {
        const char *name = ft_lora_site_hf_name(c, (ft_lora_site)s);
        if (name && ft_lora_has_site(&a->lora, (ft_lora_site)s))
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", have[0] ? "," : "",
                     name);
        if (name && ft_lora_has_site(lora, (ft_lora_site)s))
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", want[0] ? "," : "",
                     name);
    }
    char config[4200];
    ft_path_join(config, sizeof config, a->dir, FT_PEFT_CONFIG_NAME);
    return ft_fail(err, "%s: r %d, lora_alpha %g, target_modules %s; the run's lora group has "
                   "rank %d, alpha %g, targets %s: set the lora group to the adapter's", config,
                   a->lora.rank, a->lora.alpha, have, lora->rank, lora->alpha, want);
}

int ft_peft_adapter_write_weights(const ft_peft_adapter *a, const char *path, ft_error *err)
{
    ft_h5file f;
    if (ft_h5_create(&f, path, MPI_COMM_SELF, err))
        return -1;
    int rc = ft_h5_write_kind(&f, "weights", err) ||
             ft_weights_write_config(&f, &a->layout.config, err) ||
             ft_weights_create_tensors(&f, "/model", &a->layout, FT_FILE_F32, err);
    for (int u = 0; u < a->layout.n_units && !rc; u++) {
        const ft_unit_layout *ul = &a->layout.units[u];
        float *buf = malloc(ul->numel * sizeof *buf);
        rc = !buf ? ft_fail(err, "out of host memory for layer %d's adapters", ul->layer)
             : ft_peft_adapter_read_range(a, ul, 0, ul->numel, buf, err) ||
               ft_weights_write_range(&f, "/model", ul, 0, ul->numel, buf, err);
        free(buf);
    }
    ft_error cerr;
    if (ft_h5_close(&f, &cerr) && !rc)
        rc = ft_fail(err, "%s", cerr.msg);
    return rc ? -1 : 0;
}
