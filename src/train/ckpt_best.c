#include "train/ckpt_best.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "train/ckpt_dir.h"
#include "util/durable.h"
#include "util/output_file.h"
#include "util/path_join.h"

int ft_ckpt_best_read(const char *dir, char *name, size_t len, double *loss, ft_error *err)
{
    char path[1100], line[600];
    ft_path_join(path, sizeof path, dir, FT_CKPT_BEST);
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? 1 : ft_fail(err, "%s: cannot read: %s", path, strerror(errno));
    const int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char file[512];
    long step;
    if (!got || sscanf(line, "%511s %lf", file, loss) != 2 ||
        ft_ckpt_step_of_name(file, &step) != 0 || strlen(file) >= len)
        return ft_fail(err, "%s: not a keep_best record (\"step-NNNNNN.h5 <eval loss>\"); "
                       "delete it to start the comparison afresh", path);
    snprintf(name, len, "%s", file);
    return 0;
}

int ft_ckpt_best_write(const char *dir, long step, double loss, ft_error *err)
{
    char path[1100], tmp[1110];
    ft_path_join(path, sizeof path, dir, FT_CKPT_BEST);
    FILE *f;
    /* made new: a symlink planted at best.tmp is not written through (util/output_file.h) */
    if (ft_output_tmp_name(tmp, sizeof tmp, path, err) || ft_output_fopen_tmp(tmp, &f, err))
        return -1;
    /* %.17g: the loss read back compares equal to the one written */
    const int bad = fprintf(f, "step-%06ld.h5 %.17g\n", step, loss) < 0;
    if (fclose(f) || bad)
        return ft_fail(err, "%s: cannot write: %s", tmp, strerror(errno));
    return ft_commit_file(tmp, path, err);
}
