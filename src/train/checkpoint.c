#include "train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "comm/agree.h"
#include "io/tok_fingerprint.h"
#include "io/h5file.h"
#include "io/weights.h"
#include "model/family.h"
#include "model/model_fields.h"
#include "train/ckpt_best.h"
#include "train/ckpt_lora.h"
#include "config/config_lora.h"
#include "train/ckpt_dir.h"
#include "train/finite_guard.h"
#include "util/durable.h"
#include "util/make_dirs.h"
#include "util/output_file.h"
#include "util/path_join.h"


typedef struct field_group {
    ft_state_field field;
    const char *group;
} field_group;

static const field_group groups[] = {
    { FT_STATE_PARAMS, "/model" },
    { FT_STATE_MASTER, "/optim/master" },
    { FT_STATE_M, "/optim/m" },
    { FT_STATE_V, "/optim/v" },
};

/* Test hooks: FTMPI_FAULT=ckpt:<phase> kills every rank at that point of a write, which
 * is how the crash-safety test stands in for a job killed mid-checkpoint. */
static void fault_point(const char *phase)
{
    const char *f = getenv("FTMPI_FAULT");
    if (f && strncmp(f, "ckpt:", 5) == 0 && strcmp(f + 5, phase) == 0)
        raise(SIGKILL);
    /* ckpt:slow stalls every write after its model tensors, so that a test can
     * deliver a second signal while a checkpoint is being written */
    if (f && strcmp(f, "ckpt:slow") == 0 && strcmp(phase, "model") == 0)
        sleep(4);
}

/* Sums the ranks' partial hashes (mod 2^64). */
static int reduce_hashes(uint64_t *h, int n, ft_error *err)
{
    if (MPI_Allreduce(MPI_IN_PLACE, h, n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        return ft_fail(err, "MPI allreduce of checkpoint hashes failed");
    return 0;
}

static int write_hash_attrs(const ft_h5file *f, const char *group, const ft_model_layout *l,
                            const uint64_t *h, ft_error *err)
{
    for (int i = 0; i < l->total_tensors; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", group, ft_model_layout_tensor_at(l, i)->name);
        hid_t d = H5Dopen2(f->id, path, H5P_DEFAULT);
        int rc = d < 0 ? -1 : ft_h5_attr_write_i64(f, d, "content_hash", (int64_t)h[i], err);
        if (d >= 0)
            H5Dclose(d);
        if (rc)
            return ft_fail(err, "%s: cannot write the hash of %s", f->path, path);
    }
    return 0;
}

static int write_meta(const ft_h5file *f, const ft_run_config *cfg, ft_comm *comm,
                      const ft_ckpt_position *pos, int seq_len, ft_error *err)
{
    hid_t g = H5Gcreate2(f->id, "/meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return ft_fail(err, "%s: cannot create /meta", f->path);
    int rc = ft_h5_attr_write_i64(f, g, "step", pos->step, err) ||
             ft_h5_attr_write_i64(f, g, "optimizer_step", pos->optimizer_step, err) ||
             ft_h5_attr_write_i64(f, g, "data_position", pos->data_position, err) ||
             ft_h5_attr_write_i64(f, g, "world_size", comm->size, err) ||
             ft_h5_attr_write_i64(f, g, "zero_stage", cfg->zero_stage, err) ||
             ft_h5_attr_write_i64(f, g, "seed", cfg->seed, err) ||
             ft_h5_attr_write_i64(f, g, "global_batch_size", cfg->global_batch_size, err) ||
             ft_h5_attr_write_i64(f, g, "seq_len", seq_len, err) ||
             ft_h5_attr_write_str(f, g, "param_dtype",
                                  cfg->param_dtype == FT_DTYPE_BF16 ? "bf16" : "fp32", err) ||
             ft_h5_attr_write_str(f, g, "optimizer",
                                  cfg->optimizer.type == FT_OPT_ADAMW ? "adamw" : "sgd", err) ||
             ft_h5_attr_write_str(f, g, "ftmpi_version", PACKAGE_VERSION, err) ||
             ft_h5_attr_write_str(f, g, "config", cfg->text ? cfg->text : "", err) ||
             ft_schedule_meta_write(f, g, cfg, err);
    H5Gclose(g);
    return rc ? -1 : 0;
}

/* /lora for a LoRA run: the adapters' layout (units of kind FT_UNIT_ADAPTER) */
static int write_lora(const ft_h5file *f, const ft_run_config *cfg, const ft_model_layout *layout,
                      const char *base_hash, ft_error *err)
{
    if (layout->n_units == 0 || layout->units[0].kind != FT_UNIT_ADAPTER)
        return 0;
    ft_lora_config lc;
    return ft_run_config_lora(cfg, &layout->config, &lc, err) ||
           ft_ckpt_lora_write(f, cfg, &layout->config, &lc, base_hash, err);
}

/* Whether every rank moved its bytes with O_DIRECT so far. Collective. */
static bool all_direct(const ft_h5file *f)
{
    int d = f->raw && ft_extent_is_direct(f->raw);
    MPI_Allreduce(MPI_IN_PLACE, &d, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return d != 0;
}

/* Rank 0: makes tmp the checkpoint `name` in dir and points `latest` at it. */
static int publish(const char *dir, const char *name, const char *tmp, ft_error *err)
{
    char path[1100], latest[1100], latest_tmp[1100];
    ft_path_join(path, sizeof path, dir, name);
    ft_path_join(latest, sizeof latest, dir, FT_CKPT_LATEST);
    ft_path_join(latest_tmp, sizeof latest_tmp, dir, FT_CKPT_LATEST ".tmp");
    if (ft_commit_file(tmp, path, err))
        return -1;
    fault_point("renamed");
    FILE *fp; /* latest.tmp made new: never written through a planted symlink */
    if (ft_output_fopen_tmp(latest_tmp, &fp, err))
        return -1;
    if (fprintf(fp, "%s\n", name) < 0 || fflush(fp)) {
        fclose(fp);
        unlink(latest_tmp);
        return ft_fail(err, "%s: cannot write: %s", latest_tmp, strerror(errno));
    }
    if (fclose(fp) != 0) {
        unlink(latest_tmp);
        return ft_fail(err, "%s: cannot write: %s", latest_tmp, strerror(errno));
    }
    if (ft_commit_file(latest_tmp, latest, err))
        return -1;
    return 0;
}

int ft_checkpoint_prepare_dir(const char *dir, ft_comm *comm, ft_error *err)
{
    char msg[512] = "";
    if (comm->rank == 0) {
        char probe[1100];
        ft_error probe_err;
        ft_path_join(probe, sizeof probe, dir, ".ftmpi-write-test");
        int fd = -1;
        if (ft_make_dirs(dir))
            snprintf(msg, sizeof msg, "cannot create: %s", strerror(errno));
        else if (ft_output_create_tmp(probe, 0666, &fd, &probe_err)) /* never through a link */
            snprintf(msg, sizeof msg, "cannot write there: %.400s", probe_err.msg);
        if (fd >= 0) {
            close(fd);
            unlink(probe);
        }
    }
    /* every rank learns rank 0's verdict, so no rank waits for a checkpoint that
     * cannot happen */
    MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (!msg[0])
        return 0;
    ft_fail(err, "checkpoint_dir %s: %s", dir, msg);
    if (err)
        err->flags |= FT_ERR_SHARED; /* every rank holds rank 0's verdict */
    return -1;
}

/* Writes every group of state into the open file f. Each rank writes its own slices and
 * can fail alone (a full disk hits ranks at different tensors), so the ranks agree on
 * the outcome after every phase (ft_agree) and all take the same collective path. */
static int write_state(ft_h5file *f, const ft_run_config *cfg, const ft_model_layout *layout,
                       ft_engine *e, ft_comm *comm, const ft_ckpt_position *pos, int seq_len,
                       uint64_t *h, ft_error *err)
{
    const int nt = layout->total_tensors;
    const ft_file_dtype model_dtype = cfg->param_dtype == FT_DTYPE_BF16 ? FT_FILE_BF16 : FT_FILE_F32;
    int rc = ft_h5_write_kind(f, "checkpoint", err) ||
             ft_weights_write_config(f, &layout->config, err) ||
             ft_tok_fingerprint_write(f, pos->tokenizer_fingerprint, err) ||
             write_meta(f, cfg, comm, pos, seq_len, err) || write_lora(f, cfg, layout, pos->base_hash, err);
    if (ft_agree(MPI_COMM_WORLD, rc, err))
        return -1;
    /* every dataset first, then the whole file's space at once: a full disk shows here,
     * before any tensor byte, rather than at a different tensor on every rank */
    for (size_t g = 0; g < sizeof groups / sizeof groups[0] && !rc; g++)
        if (ft_engine_has_field(e, groups[g].field))
            rc = ft_weights_create_tensors(f, groups[g].group, layout,
                                           g == 0 ? model_dtype : FT_FILE_F32, err);
    if (ft_agree(MPI_COMM_WORLD, rc, err))
        return -1;
    /* room for the metadata still to come (hash attributes) */
    const uint64_t extra = (64u << 10) + 512u * 4u * (uint64_t)layout->total_tensors;
    rc = comm->rank == 0 ? ft_h5_reserve(f, extra, err) : 0;
    if (ft_agree(MPI_COMM_WORLD, rc, err))
        return -1;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        if (!ft_engine_has_field(e, groups[g].field))
            continue;
        memset(h, 0, (size_t)nt * sizeof *h);
        rc = ft_engine_write_field(e, f, groups[g].group, groups[g].field, h, err);
        if (ft_agree(MPI_COMM_WORLD, rc, err) || reduce_hashes(h, nt, err))
            return -1;
        rc = write_hash_attrs(f, groups[g].group, layout, h, err);
        if (ft_agree(MPI_COMM_WORLD, rc, err))
            return -1;
        if (g == 0)
            fault_point("model");
    }
    return 0;
}

/* After a failed write (every rank, shared err): rank 0 removes the partial file and
 * says what is left; a full file system is named as such, since that is what to fix. */
static void abandon(const char *dir, const char *tmp, ft_comm *comm, ft_error *err)
{
    if (comm->rank == 0) {
        struct statvfs vfs;
        const int full = strstr(err->msg, strerror(ENOSPC)) != NULL ||
                         strstr(err->msg, strerror(EDQUOT)) != NULL ||
                         (statvfs(dir, &vfs) == 0 && vfs.f_bavail == 0);
        unlink(tmp);
        char latest[512], pointer[1100], now[1700];
        ft_error ignored;
        ft_path_join(pointer, sizeof pointer, dir, FT_CKPT_LATEST);
        if (ft_ckpt_read_latest(dir, latest, sizeof latest, &ignored) == 0)
            snprintf(now, sizeof now, "%s still names %s", pointer, latest);
        else
            snprintf(now, sizeof now, "no earlier checkpoint in %s", dir);
        if (full)
            ft_fail(err, "checkpoint_dir %s: file system full while writing %s (removed); %s: "
                    "free space there (or lower keep_last) and resume", dir, tmp, now);
        else
            ft_fail_context(err, "%s removed, %s", tmp, now);
    }
    ft_share_error(MPI_COMM_WORLD, 0, err);
}

/* A checkpoint holding NaN or Inf would be resumed from and pointed to by `latest`: the
 * state is checked first, and such a state is never written (train/finite_guard.h). */
static int refuse_nonfinite(const char *dir, const ft_model_layout *layout, ft_engine *e,
                            long step, ft_error *err)
{
    char what[1100];
    ft_ckpt_step_path(what, sizeof what, dir, step);
    return ft_guard_before_write(e, layout, what, err);
}

int ft_checkpoint_save(const char *dir, const ft_run_config *cfg, const ft_model_layout *layout,
                       ft_engine *e, ft_comm *comm, const ft_ckpt_position *pos, int seq_len,
                       bool *direct, ft_error *err)
{
    if (refuse_nonfinite(dir, layout, e, pos->step, err) ||
        ft_checkpoint_prepare_dir(dir, comm, err))
        return -1;
    char name[64], tmp_name[80], tmp[1100];
    snprintf(name, sizeof name, "step-%06ld.h5", pos->step);
    snprintf(tmp_name, sizeof tmp_name, "%s.tmp", name);
    ft_path_join(tmp, sizeof tmp, dir, tmp_name);
    uint64_t *h = calloc((size_t)layout->total_tensors, sizeof *h);
    if (ft_agree(MPI_COMM_WORLD, h ? 0 : ft_fail(err, "out of host memory"), err)) {
        free(h);
        return -1;
    }
    ft_h5file f;
    if (ft_agree(MPI_COMM_WORLD, ft_h5_create(&f, tmp, MPI_COMM_WORLD, err), err)) {
        free(h);
        return -1;
    }
    if (cfg->direct_io)
        ft_h5_attach_raw(&f, MPI_COMM_WORLD, true);
    fault_point("created");
    int rc = write_state(&f, cfg, layout, e, comm, pos, seq_len, h, err);
    free(h);
    *direct = all_direct(&f);
    /* the close flushes each rank's last bytes and HDF5's metadata: it can fail too */
    ft_error close_err;
    const int crc = ft_h5_close(&f, &close_err);
    fault_point("closed");
    /* every rank's data is in the file before rank 0 makes it visible */
    if (!rc && ft_agree(MPI_COMM_WORLD, crc, &close_err)) {
        *err = close_err;
        rc = -1;
    }
    if (rc) {
        abandon(dir, tmp, comm, err);
        return -1;
    }
    int prc = comm->rank == 0 ? publish(dir, name, tmp, err) : 0;
    char best[512] = ""; /* keep_best's checkpoint survives pruning (train/ckpt_best.h) */
    if (comm->rank == 0 && !prc && cfg->keep_best) {
        double loss;
        prc = ft_ckpt_best_read(dir, best, sizeof best, &loss, err) < 0;
    }
    if (comm->rank == 0 && !prc)
        prc = ft_ckpt_prune(dir, cfg->keep_last, best[0] ? best : NULL, err);
    if (ft_agree(MPI_COMM_WORLD, prc, err))
        return -1;
    fault_point("saved"); /* the job dies right after a complete checkpoint */
    return 0;
}

int ft_checkpoint_resolve(const ft_run_config *cfg, char **path, ft_error *err)
{
    *path = NULL;
    if (!cfg->resume || strcmp(cfg->resume, "none") == 0)
        return 0;
    if (strcmp(cfg->resume, "auto") != 0) {
        *path = strdup(cfg->resume);
        return *path ? 0 : ft_fail(err, "out of host memory");
    }
    if (!cfg->checkpoint_dir)
        return ft_fail(err, "%s: resume = \"auto\" needs checkpoint_dir", cfg->path);
    char name[512];
    const int got = ft_ckpt_read_latest(cfg->checkpoint_dir, name, sizeof name, err);
    if (got)
        return got < 0 ? -1 : 0; /* no `latest` yet: a fresh start */
    size_t len = strlen(cfg->checkpoint_dir) + strlen(name) + 2;
    *path = malloc(len);
    if (!*path)
        return ft_fail(err, "out of host memory");
    ft_path_join(*path, len, cfg->checkpoint_dir, name);
    return 0;
}

/* What to do about a checkpoint this run cannot continue, for every refusal below. */
#define CKPT_REMEDY "; to train this model afresh use a new checkpoint_dir or resume = " \
                    "\"none\" (to continue the checkpoint, use its settings)"

static const char *family_name(int f)
{
    const ft_family_info *fi = ft_family_info_of((ft_model_family)f);
    return fi ? fi->name : "unknown";
}

static int check_shape(const char *path, const ft_model_config *have, const ft_model_config *want,
                       ft_error *err)
{
    if (have->family != want->family)
        return ft_fail(err, "%s: checkpoint of another model: model.family is %s there, %s in "
                       "this run" CKPT_REMEDY, path, family_name(have->family),
                       family_name(want->family));
    size_t nf;
    const ft_model_field *fields = ft_model_fields(&nf);
    for (size_t i = 0; i < nf; i++) {
        const ft_model_field *fd = &fields[i];
        double there = ft_model_field_get(have, fd), here = ft_model_field_get(want, fd);
        if (!fd->shape || fd->type == FT_FIELD_FAMILY || there == here)
            continue;
        return ft_fail(err, "%s: checkpoint of another model: %s is %.17g there, %.17g in this "
                       "run" CKPT_REMEDY, path, fd->attr, there, here);
    }
    return 0;
}

/* AdamW's moments are not SGD's momentum (nor the reverse): the optimizer recorded in
 * /meta must be this run's, which the engine's fields tell (only AdamW keeps v). */
static int check_optimizer(const ft_h5file *f, const char *path, ft_engine *e, ft_error *err)
{
    char there[32] = "";
    hid_t meta = H5Gopen2(f->id, "/meta", H5P_DEFAULT);
    if (meta < 0)
        return 0; /* reported with /meta's other attributes */
    const int known = ft_h5_attr_exists(meta, "optimizer") &&
                      ft_h5_attr_read_str(f, meta, "optimizer", there, sizeof there, err) == 0;
    H5Gclose(meta);
    const char *here = ft_engine_has_field(e, FT_STATE_V) ? "adamw" : "sgd";
    if (!known || strcmp(there, here) == 0)
        return 0;
    return ft_fail(err, "%s: checkpoint of an optimizer.type = \"%s\" run, \"%s\" in this run: "
                   "its optimizer state does not carry over; keep optimizer.type = \"%s\" to "
                   "resume" CKPT_REMEDY, path, there, here, there);
}

static int verify_hashes(const ft_h5file *f, const char *group, const ft_model_layout *l,
                         uint64_t *h, ft_error *err)
{
    const int nt = l->total_tensors;
    if (reduce_hashes(h, nt, err))
        return -1;
    for (int i = 0; i < nt; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", group, ft_model_layout_tensor_at(l, i)->name);
        hid_t d = H5Dopen2(f->id, path, H5P_DEFAULT);
        int64_t want = 0;
        int rc = d < 0 || ft_h5_attr_read_i64(f, d, "content_hash", &want, err);
        if (d >= 0)
            H5Dclose(d);
        if (rc)
            return ft_fail(err, "%s: %s has no content hash (incomplete checkpoint?)", f->path,
                           path);
        if ((uint64_t)want != h[i])
            return ft_fail(err, "%s: %s does not match its content hash (corrupt file); use an "
                           "earlier checkpoint", f->path, path);
    }
    return 0;
}

/* The /meta counters are trusted by the loop (step numbering, data order, AdamW's
 * bias correction): a value ftmpi never writes means a damaged or forged file. */
static int check_position(const char *path, int64_t step, int64_t opt_step, int64_t data_pos,
                          ft_error *err)
{
    if (step < 0 || step > LONG_MAX / 2)
        return ft_fail(err, "%s: /meta step %lld is not a step count; use another checkpoint",
                       path, (long long)step);
    if (opt_step < 0 || opt_step > step)
        return ft_fail(err, "%s: /meta optimizer_step %lld is not within 0..step (%lld); use "
                       "another checkpoint", path, (long long)opt_step, (long long)step);
    if (data_pos < 0)
        return ft_fail(err, "%s: /meta data_position %lld is negative; use another checkpoint",
                       path, (long long)data_pos);
    return 0;
}

int ft_checkpoint_load(const char *path, const ft_model_layout *layout, ft_engine *e,
                       const ft_lora_config *lora, ft_comm *comm, ft_ckpt_position *pos,
                       bool direct_io, bool *direct, ft_error *err)
{
    (void)comm;
    ft_h5file f;
    const int opened = ft_h5_open(&f, path, MPI_COMM_WORLD, err);
    if (ft_agree(MPI_COMM_WORLD, opened, err)) { /* one line for all ranks */
        if (opened == 0)
            ft_h5_close(&f, NULL);
        return -1;
    }
    if (direct_io)
        ft_h5_attach_raw(&f, MPI_COMM_WORLD, false);
    ft_model_config have;
    const int nt = layout->total_tensors;
    uint64_t *h = calloc((size_t)nt, sizeof *h);
    int rc = !h ? ft_fail(err, "out of host memory") : 0;
    rc = rc || ft_h5_check_kind(&f, "checkpoint", err) ||
         ft_weights_read_config(&f, &have, err) ||
         ft_tok_fingerprint_read(&f, pos->tokenizer_fingerprint, err) ||
         check_shape(path, &have, &layout->config, err) ||
         ft_ckpt_lora_check(&f, &layout->config, lora, err) || check_optimizer(&f, path, e, err);
    /* parameters: the fp32 master when the file has one, else the model tensors */
    const int has_master = !rc && H5Lexists(f.id, "/optim/master", H5P_DEFAULT) > 0;
    const char *pgroup = has_master ? "/optim/master" : "/model";
    rc = rc || ft_weights_check_tensors(&f, pgroup, layout, err) ||
         ft_engine_read_field(e, &f, pgroup, has_master ? FT_STATE_MASTER : FT_STATE_PARAMS, h,
                              err) ||
         verify_hashes(&f, pgroup, layout, h, err);
    for (int g = 2; g < 4 && !rc; g++) {
        if (!ft_engine_has_field(e, groups[g].field))
            continue;
        memset(h, 0, (size_t)nt * sizeof *h);
        rc = ft_weights_check_tensors(&f, groups[g].group, layout, err) ||
             ft_engine_read_field(e, &f, groups[g].group, groups[g].field, h, err) ||
             verify_hashes(&f, groups[g].group, layout, h, err);
    }
    int64_t step = 0, data_pos = 0, opt_step = 0;
    hid_t meta = rc ? -1 : H5Gopen2(f.id, "/meta", H5P_DEFAULT);
    if (!rc && (meta < 0 || ft_h5_attr_read_i64(&f, meta, "step", &step, err) ||
                ft_h5_attr_read_i64(&f, meta, "optimizer_step", &opt_step, err) ||
                ft_h5_attr_read_i64(&f, meta, "data_position", &data_pos, err)))
        rc = ft_fail(err, "%s: /meta step or data_position missing (incomplete checkpoint?)",
                     path);
    if (!rc)
        ft_schedule_meta_read(&f, meta, &pos->schedule);
    if (meta >= 0)
        H5Gclose(meta);
    if (!rc)
        rc = check_position(path, step, opt_step, data_pos, err);
    free(h);
    *direct = all_direct(&f);
    ft_h5_close(&f, NULL);
    if (rc)
        return -1;
    pos->step = (long)step;
    pos->optimizer_step = (long)opt_step;
    pos->data_position = data_pos;
    ft_engine_set_step_count(e, (long)opt_step);
    return 0;
}
