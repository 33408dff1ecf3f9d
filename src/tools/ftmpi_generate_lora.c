/* ftmpi-generate on a LoRA checkpoint (adapters only, doc/formats.md): the adapters are
 * merged into their base once, into a temporary weights file, so that the session loads
 * nothing but plain weights files. */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "io/lora_ckpt.h"
#include "tools/ftmpi_generate.h"
#include "train/ckpt_dir.h"
#include "util/input_file.h"
#include "util/path_join.h"

/* Whether path (a file, or a checkpoint directory's `latest`) is a LoRA checkpoint, and
 * the file into file. Anything unreadable is "no": the session reports it. */
static bool is_lora_checkpoint(const char *path, char *file, size_t len)
{
    char name[512];
    ft_error err;
    snprintf(file, len, "%s", path);
    if (ft_ckpt_read_latest(path, name, sizeof name, &err) == 0)
        ft_path_join(file, len, path, name);
    if (ft_input_check(file, "an HDF5 file", &err) != 0)
        return false;
    /* a file that is not HDF5 is the session's to report, in one line: no error stack */
    H5E_auto2_t func;
    void *data;
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const bool hdf5 = H5Fis_hdf5(file) > 0;
    H5Eset_auto2(H5E_DEFAULT, func, data);
    ft_h5file h;
    if (!hdf5 || ft_h5_open(&h, file, MPI_COMM_SELF, &err))
        return false;
    const bool lora = ft_lora_ckpt_is(&h);
    ft_h5_close(&h, &err);
    return lora;
}

/* Rank 0 merges a LoRA checkpoint's adapters into its base (io/lora_ckpt.h), into a new
 * weights file `merged` that the session then loads like any other (every rank reads
 * it; rank 0 removes it once all have). merged[0] stays 0 for other models. Every rank
 * returns rank 0's outcome. */
int gen_lora_merge_for_session(gen_cli *c, int rank, char *merged, size_t len, ft_error *err)
{
    char file[4200];
    merged[0] = '\0';
    /* every rank takes the same (collective) path, whatever its own look at the file */
    int lora = is_lora_checkpoint(c->s.model_path, file, sizeof file);
    MPI_Allreduce(MPI_IN_PLACE, &lora, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!lora)
        return 0;
    const char *tmpdir = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp";
    int pid = (int)getpid(), rc = 0;
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char name[64];
    snprintf(name, sizeof name, "ftmpi-generate-lora-%d.h5", pid);
    ft_path_join(merged, len, tmpdir, name);
    if (rank == 0) {
        ft_h5file h;
        bool master = false;
        if (c->s.params != FT_GEN_PARAMS_MODEL && ft_h5_open(&h, file, MPI_COMM_SELF, err) == 0) {
            master = H5Lexists(h.id, "/optim", H5P_DEFAULT) > 0 &&
                     H5Lexists(h.id, "/optim/master", H5P_DEFAULT) > 0;
            ft_h5_close(&h, err);
        }
        if (c->s.params == FT_GEN_PARAMS_MASTER && !master)
            rc = ft_fail(err, "%s has no /optim/master (--params master)", file);
        const ft_lora_merge_options o = { .group = master ? "/optim/master" : "/model",
                                          .dtype = -1, .buffer_bytes = (size_t)64 << 20 };
        ft_lora_merge_result r;
        unlink(merged);
        rc = rc || ft_lora_merge_to_weights(file, merged, &o, &r, err);
        if (rc)
            unlink(merged);
        else if (c->verbose)
            fprintf(stderr, "ftmpi-generate: %s: LoRA rank %d, alpha %g, targets %s (%s) merged "
                    "into %s\n", file, r.rank, r.alpha, r.targets, o.group, r.base);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(err->msg, sizeof err->msg, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rc) {
        merged[0] = '\0';
        return -1;
    }
    c->s.model_path = merged;
    c->s.params = FT_GEN_PARAMS_MODEL; /* the merged file is a weights file */
    return 0;
}
