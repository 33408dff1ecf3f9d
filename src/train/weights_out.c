#include "train/weights_out.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "comm/agree.h"
#include "io/h5file.h"
#include "io/tok_fingerprint.h"
#include "io/weights.h"
#include "util/durable.h"
#include "util/output_file.h"

/* After a failure every rank knows of (shared err): rank 0 removes the partial file and
 * names a full file system as such, since that is what to fix. */
static void abandon(const char *path, const char *tmp, int rank, ft_error *err)
{
    if (rank == 0) {
        char dir[1100];
        ft_path_dir(path, dir, sizeof dir);
        struct statvfs vfs;
        const int full = strstr(err->msg, strerror(ENOSPC)) != NULL ||
                         strstr(err->msg, strerror(EDQUOT)) != NULL ||
                         (statvfs(dir, &vfs) == 0 && vfs.f_bavail == 0);
        unlink(tmp);
        if (full)
            ft_fail(err, "%s: file system full while writing %s (removed); free space in %s "
                    "or give another path", path, tmp, dir);
    }
    ft_share_error(MPI_COMM_WORLD, 0, err);
}

int ft_weights_out_save(const char *path, const ft_model_layout *layout, const char *tok_fp,
                        ft_engine *e, bool direct_io, int rank, ft_error *err)
{
    const MPI_Comm world = MPI_COMM_WORLD;
    char tmp[1100];
    if (ft_agree(world, ft_output_tmp_name(tmp, sizeof tmp, path, err), err))
        return -1;
    ft_h5file f;
    if (ft_agree(world, ft_h5_create(&f, tmp, world, err), err)) {
        if (rank == 0)
            unlink(tmp);
        return -1;
    }
    int rc = ft_h5_write_kind(&f, "weights", err) ||
             ft_weights_write_config(&f, &layout->config, err) ||
             ft_tok_fingerprint_write(&f, tok_fp, err) ||
             ft_weights_create_tensors(&f, "/model", layout, FT_FILE_F32, err);
    if (direct_io) /* collective: on every rank whatever rc says */
        ft_h5_attach_raw(&f, world, true);
    rc = ft_agree(world, rc, err);
    /* the whole file's space at once: a full disk shows here, before any tensor byte,
     * rather than at a different tensor on every rank */
    const uint64_t extra = (64u << 10) + 512u * (uint64_t)layout->total_tensors;
    if (!rc)
        rc = ft_agree(world, rank == 0 ? ft_h5_reserve(&f, extra, err) : 0, err);
    if (!rc)
        rc = ft_agree(world, ft_engine_save(e, &f, "/model", err), err);
    /* the close flushes each rank's last bytes and HDF5's metadata: it can fail too */
    ft_error close_err;
    const int crc = ft_h5_close(&f, &close_err);
    if (!rc && ft_agree(world, crc, &close_err)) {
        *err = close_err;
        rc = -1;
    }
    if (!rc)
        rc = ft_agree(world, rank == 0 ? ft_commit_file(tmp, path, err) : 0, err);
    if (rc)
        abandon(path, tmp, rank, err);
    return rc ? -1 : 0;
}
