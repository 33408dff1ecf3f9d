#include "train/run_length.h"

#include <math.h>

#include "io/dataset.h"

long ft_run_length_steps(double num_epochs, int64_t rows, int global_batch_size)
{
    const double steps = ceil(num_epochs * (double)rows / (double)global_batch_size);
    return steps < 1.0 ? 1 : (long)steps;
}

double ft_run_length_epoch(int64_t samples, int64_t rows)
{
    return rows > 0 ? (double)samples / (double)rows : 0.0;
}

int ft_run_length_resolve(ft_run_config *cfg, bool eval_only, ft_error *err)
{
    if (cfg->num_epochs <= 0 || eval_only)
        return 0;
    ft_dataset_info di;
    if (ft_dataset_read_info(cfg->train_data, MPI_COMM_WORLD,
                             "data.train (num_epochs counts its rows)", &di, err))
        return -1; /* a missing file: exit 2 */
    const int64_t rows = di.rows;
    cfg->max_steps = ft_run_length_steps(cfg->num_epochs, rows, cfg->global_batch_size);
    if (cfg->optimizer.warmup_steps > cfg->max_steps) {
        ft_fail(err, "%s: %ld is greater than the %ld steps of num_epochs %g (%lld rows of %s "
                "in global batches of %d); lower it or train longer",
                ft_run_config_where(cfg, "optimizer.warmup_steps"), cfg->optimizer.warmup_steps,
                cfg->max_steps, cfg->num_epochs, (long long)rows, cfg->train_data,
                cfg->global_batch_size);
        err->flags |= FT_ERR_SHARED | FT_ERR_CONFIG;
        return -1;
    }
    return 0;
}
