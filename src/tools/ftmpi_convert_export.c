/* ftmpi-convert export: an ftmpi weights file or checkpoint -> a Hugging Face
 * directory (config.json, model.safetensors or shards + index, tokenizer files).
 *
 * Only /config and /model are read, so checkpoints (which add /optim and /meta)
 * export like weights files. Shards are planned up front (a safetensors header
 * lists every tensor before the data), then each tensor streams through one fixed
 * buffer from its HDF5 dataset into the shard. Files are written as NAME.tmp and
 * renamed when complete; config.json and the index come last. Tensors get their
 * family's HF names (ftmpi_convert_names.c; GPT-NeoX's q, k and v are fused back
 * into query_key_value).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/hf_config.h"
#include "io/lora_ckpt.h"
#include "io/weights.h"
#include "model/layout.h"
#include "tools/ftmpi_convert.h"
#include "train/ckpt_dir.h"
#include "util/path_join.h"

typedef cv_export_opts export_opts;

typedef struct out_tensor {
    const cv_hf_tensor *ht;
    const ft_tensor_info *parts[3]; /* its layout tensor(s) */
    ft_st_dtype stored; /* dtype in the HDF5 file */
    uint64_t bytes;     /* in the output dtype */
    int shard;
} out_tensor;

static int flatten(const ft_model_layout *l, cv_hf_tensor **hf, out_tensor **out, int *n,
                   ft_error *err)
{
    if (cv_hf_tensors(l, hf, n, err))
        return -1;
    *out = calloc((size_t)*n, sizeof **out);
    if (!*out)
        return ft_fail(err, "out of host memory");
    for (int k = 0; k < *n; k++) {
        (*out)[k].ht = &(*hf)[k];
        for (int p = 0; p < (*hf)[k].n_parts; p++)
            (*out)[k].parts[p] = ft_model_layout_tensor_at(l, (*hf)[k].part[p]);
    }
    return 0;
}

/* Opens a weights or checkpoint file and reads its model config. */
int cv_open_model(ft_h5file *h, const char *path, ft_model_config *c, ft_error *err)
{
    if (ft_h5_open(h, path, MPI_COMM_SELF, err))
        return -1;
    char kind[64] = "";
    if (ft_h5_attr_read_str(h, h->id, "ftmpi_format", kind, sizeof kind, err) ||
        (strcmp(kind, "weights") != 0 && strcmp(kind, "checkpoint") != 0)) {
        ft_fail(err, "%s: not an ftmpi weights or checkpoint file (ftmpi_format '%s')", path,
                kind);
        return -1;
    }
    return ft_h5_check_kind(h, kind, err) || ft_weights_read_config(h, c, err) ? -1 : 0;
}

/* Greedy shard plan in tensor order: a new shard when the next tensor would push the
 * current one over max (a tensor larger than max gets a shard of its own). */
static int plan_shards(out_tensor *ts, int n, uint64_t max)
{
    int shard = 0;
    uint64_t cur = 0;
    for (int i = 0; i < n; i++) {
        if (cur > 0 && cur + ts[i].bytes > max) {
            shard++;
            cur = 0;
        }
        ts[i].shard = shard;
        cur += ts[i].bytes;
    }
    return shard + 1;
}

static void shard_name(char *buf, size_t len, int s, int n_shards)
{
    if (n_shards == 1)
        snprintf(buf, len, "model.safetensors");
    else
        snprintf(buf, len, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
}

static bool is_model_file(const char *name)
{
    size_t n = strlen(name);
    return strcmp(name, "model.safetensors") == 0 ||
           strcmp(name, "model.safetensors.index.json") == 0 ||
           (strncmp(name, "model-", 6) == 0 && n > 12 && strcmp(name + n - 12, ".safetensors") == 0);
}

/* Creates out_dir, or checks that it holds no model files (removes them with --force,
 * so that stale shards of an earlier export cannot mix with the new ones). */
int cv_prepare_dir(const export_opts *o, ft_error *err)
{
    if (!cv_exists(o->out_dir)) {
        if (mkdir(o->out_dir, 0755) != 0)
            return ft_fail(err, "%s: cannot create directory: %s", o->out_dir, strerror(errno));
        return 0;
    }
    if (!cv_is_dir(o->out_dir))
        return ft_fail(err, "%s: exists and is not a directory", o->out_dir);
    DIR *dir = opendir(o->out_dir);
    if (!dir)
        return ft_fail(err, "%s: cannot list: %s", o->out_dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(dir)) && !rc) {
        if (!is_model_file(e->d_name))
            continue;
        if (!o->force) {
            rc = ft_fail(err, "%s: already holds %s; choose an empty directory or pass --force "
                         "to replace the model files", o->out_dir, e->d_name);
            break;
        }
        char p[4096];
        ft_path_join(p, sizeof p, o->out_dir, e->d_name);
        if (unlink(p) != 0)
            rc = ft_fail(err, "%s: cannot remove: %s", p, strerror(errno));
    }
    closedir(dir);
    return rc;
}

/* Streams one HF tensor from its dataset(s) into the shard writer; a chunk never
 * crosses a run of a fused tensor's layout (ftmpi_convert_names.c). */
static int copy_tensor(const ft_h5file *h, const out_tensor *ot, ft_st_dtype out,
                       ft_st_writer *w, void *inbuf, void *outbuf, size_t half, ft_error *err)
{
    const cv_hf_tensor *ht = ot->ht;
    hid_t d[3] = { -1, -1, -1 };
    char dpath[3][256];
    int rc = 0;
    for (int p = 0; p < ht->n_parts && !rc; p++) {
        snprintf(dpath[p], sizeof dpath[p], "/model/%s", ot->parts[p]->name);
        d[p] = H5Dopen2(h->id, dpath[p], H5P_DEFAULT);
        if (d[p] < 0)
            rc = ft_fail(err, "%s: cannot open %s", h->path, dpath[p]);
    }
    const size_t in_sz = ft_st_dtype_size(ot->stored), out_sz = ft_st_dtype_size(out);
    const size_t chunk = cv_chunk_elems(half, in_sz > out_sz ? in_sz : out_sz,
                                        ht->ndim == 2 ? ht->shape[1] : 0);
    hid_t mtype = ot->stored == FT_ST_BF16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_FLOAT;
    for (uint64_t lo = 0; lo < ht->numel && !rc;) {
        int p;
        uint64_t off, run;
        cv_hf_locate(ht, lo, &p, &off, &run);
        const size_t n = (size_t)(run < chunk ? run : chunk);
        const ft_tensor_info *ti = ot->parts[p];
        hsize_t dims[2] = { (hsize_t)ti->shape[0], (hsize_t)ti->shape[1] };
        void *data = ot->stored == out ? inbuf : outbuf;
        rc = cv_h5_transfer(h, d[p], dpath[p], ti->ndim, dims, off, off + n, mtype, inbuf, false,
                            err);
        if (!rc) {
            cv_convert(ot->stored, out, inbuf, data, n);
            rc = ft_st_writer_append(w, data, n * out_sz, err);
        }
        lo += n;
    }
    for (int p = 0; p < ht->n_parts; p++)
        if (d[p] >= 0)
            H5Dclose(d[p]);
    return rc;
}

static int write_shard(const ft_h5file *h, out_tensor *ts, int n, int s, int n_shards,
                       ft_st_dtype out, const export_opts *o, void *inbuf, void *outbuf,
                       size_t half, ft_error *err)
{
    ft_st_spec *specs = calloc((size_t)n, sizeof *specs);
    if (!specs)
        return ft_fail(err, "out of host memory");
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ts[i].shard == s) {
            const cv_hf_tensor *ht = ts[i].ht;
            specs[k] = (ft_st_spec){ .name = ht->name, .dtype = out, .ndim = ht->ndim };
            specs[k].shape[0] = ht->shape[0];
            specs[k].shape[1] = ht->shape[1];
            k++;
        }
    char name[64], path[4200], final[4096];
    shard_name(name, sizeof name, s, n_shards);
    ft_path_join(final, sizeof final, o->out_dir, name);
    snprintf(path, sizeof path, "%s.tmp", final);
    static const char *const mk[] = { "format" }, *const mv[] = { "pt" };
    ft_st_writer w;
    int rc = ft_st_writer_open(&w, path, specs, k, mk, mv, 1, err);
    free(specs);
    if (rc)
        return -1;
    for (int i = 0; i < n && !rc; i++)
        if (ts[i].shard == s)
            rc = copy_tensor(h, &ts[i], out, &w, inbuf, outbuf, half, err);
    if (rc) {
        ft_st_writer_abort(&w);
        return -1;
    }
    if (ft_st_writer_close(&w, err)) {
        unlink(path);
        return -1;
    }
    if (rename(path, final) != 0)
        return ft_fail(err, "%s: cannot rename to %s: %s", path, final, strerror(errno));
    return 0;
}

static int write_index(const out_tensor *ts, int n, int n_shards, const export_opts *o,
                       uint64_t total, ft_error *err)
{
    const char **names = calloc((size_t)n, sizeof *names);
    char (*files)[64] = calloc((size_t)n, sizeof *files);
    const char **fp = calloc((size_t)n, sizeof *fp);
    int rc = -1;
    if (names && files && fp) {
        for (int i = 0; i < n; i++) {
            names[i] = ts[i].ht->name;
            shard_name(files[i], sizeof files[i], ts[i].shard, n_shards);
            fp[i] = files[i];
        }
        char path[4096], tmp[4200];
        ft_path_join(path, sizeof path, o->out_dir, "model.safetensors.index.json");
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        rc = ft_st_index_write(tmp, total, names, fp, n, err);
        if (!rc && rename(tmp, path) != 0)
            rc = ft_fail(err, "%s: cannot rename: %s", tmp, strerror(errno));
    } else {
        ft_fail(err, "out of host memory");
    }
    free(names);
    free(files);
    free(fp);
    return rc;
}

/* --tokenizer: a directory (copies the tokenizer files transformers writes that it has, the
 * chat template's own files included: transformers 5 keeps the template in
 * chat_template.jinja, and a directory without it has no apply_chat_template) or one file. */
static int copy_tokenizer(const export_opts *o, ft_error *err)
{
    static const char *const names[] = { "tokenizer.json", "tokenizer_config.json",
                                         "special_tokens_map.json", "tokenizer.model",
                                         "chat_template.jinja", "chat_template.json",
                                         "added_tokens.json", "vocab.json", "merges.txt",
                                         "generation_config.json" };
    char src[4096], dst[4096];
    if (!cv_is_dir(o->tokenizer)) {
        const char *base = strrchr(o->tokenizer, '/');
        base = base ? base + 1 : o->tokenizer;
        ft_path_join(dst, sizeof dst, o->out_dir, base);
        return cv_copy_file(o->tokenizer, dst, err);
    }
    int copied = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ft_path_join(src, sizeof src, o->tokenizer, names[i]);
        if (!cv_exists(src))
            continue;
        ft_path_join(dst, sizeof dst, o->out_dir, names[i]);
        if (cv_copy_file(src, dst, err))
            return -1;
        copied++;
    }
    if (copied == 0)
        return ft_fail(err, "%s: no tokenizer.json, tokenizer_config.json, "
                       "special_tokens_map.json, tokenizer.model, chat template, vocab.json "
                       "or merges.txt to copy", o->tokenizer);
    return 0;
}

int cv_export_run(const export_opts *o, uint64_t *moved, ft_error *err)
{
    ft_h5file h;
    ft_model_config c;
    ft_model_layout l = { 0 };
    out_tensor *ts = NULL;
    cv_hf_tensor *hf = NULL;
    void *inbuf = NULL, *outbuf = NULL;
    int n = 0, rc = cv_open_model(&h, o->in, &c, err);
    bool opened = h.id >= 0;
    if (!rc && ft_lora_ckpt_is(&h))
        rc = ft_fail(err, "%s is a LoRA checkpoint (its /model holds adapters only): use "
                     "'ftmpi-convert export --adapter' for a PEFT adapter or 'ftmpi-convert "
                     "merge' for a full model with the adapters merged in", o->in);
    if (!rc)
        rc = ft_model_layout_build(&l, &c, err) || ft_weights_check_tensors(&h, "/model", &l, err) ||
             flatten(&l, &hf, &ts, &n, err);
    int n_bf16 = 0;
    for (int i = 0; i < n && !rc; i++) {
        for (int p = 0; p < ts[i].ht->n_parts && !rc; p++) {
            char dpath[256];
            snprintf(dpath, sizeof dpath, "/model/%s", ts[i].parts[p]->name);
            hid_t d = H5Dopen2(h.id, dpath, H5P_DEFAULT);
            int dt = d < 0 ? -1 : cv_h5_dataset_dtype(&h, d);
            if (d >= 0)
                H5Dclose(d);
            if (dt < 0)
                rc = ft_fail(err, "%s: %s is neither fp32 nor bf16", o->in, dpath);
            else if (p > 0 && (ft_st_dtype)dt != ts[i].stored)
                rc = ft_fail(err, "%s: %s and %s are stored in different types; they are "
                             "exported as one tensor", o->in, ts[i].parts[0]->name, dpath);
            ts[i].stored = (ft_st_dtype)dt;
        }
        n_bf16 += ts[i].stored == FT_ST_BF16;
    }
    ft_st_dtype out = FT_ST_F32;
    if (strcmp(o->dtype, "bf16") == 0 || (strcmp(o->dtype, "auto") == 0 && n_bf16 == n))
        out = FT_ST_BF16;
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        ts[i].bytes = ts[i].ht->numel * ft_st_dtype_size(out);
        total += ts[i].bytes;
    }
    int n_shards = rc ? 0 : plan_shards(ts, n, o->max_shard);
    if (!rc)
        rc = cv_prepare_dir(o, err);
    const size_t half = o->common.buffer_bytes / 2;
    if (!rc && (!(inbuf = malloc(half)) || !(outbuf = malloc(half))))
        rc = ft_fail(err, "out of host memory for the buffer (try --buffer-size)");
    for (int s = 0; s < n_shards && !rc; s++) {
        rc = write_shard(&h, ts, n, s, n_shards, out, o, inbuf, outbuf, half, err);
        if (!rc && !o->common.quiet && isatty(STDERR_FILENO))
            fprintf(stderr, "\rexport: %d/%d shards", s + 1, n_shards);
    }
    if (!o->common.quiet && isatty(STDERR_FILENO) && n_shards > 0)
        fprintf(stderr, "\n");
    if (!rc && n_shards > 1)
        rc = write_index(ts, n, n_shards, o, total, err);
    if (!rc && o->tokenizer)
        rc = copy_tokenizer(o, err);
    if (!rc) {
        char path[4096], tmp[4200];
        ft_path_join(path, sizeof path, o->out_dir, "config.json");
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        rc = ft_hf_config_write(tmp, &c, out == FT_ST_BF16 ? "bfloat16" : "float32", err);
        if (!rc && rename(tmp, path) != 0)
            rc = ft_fail(err, "%s: cannot rename: %s", tmp, strerror(errno));
    }
    char shown[4200];
    ft_path_join(shown, sizeof shown, o->out_dir, "");
    if (!rc && !o->common.quiet)
        printf("exported %s -> %s: %d tensors in %d shard%s (%s), %lld parameters, %s%s\n",
               o->in, shown, n, n_shards, n_shards == 1 ? "" : "s",
               n_shards == 1 ? "model.safetensors" : "model.safetensors.index.json",
               (long long)l.total_numel, out == FT_ST_BF16 ? "bf16" : "fp32",
               o->tokenizer ? ", tokenizer copied" : "");
    *moved = total;
    free(inbuf);
    free(outbuf);
    free(ts);
    free(hf);
    ft_model_layout_free(&l);
    if (opened) {
        ft_error cerr;
        ft_h5_close(&h, &cerr);
    }
    return rc;
}

/* export's and merge's options (ftmpi_convert.h). */
int cv_parse_export_opts(int argc, char **argv, const char *sub, const char *usage,
                         bool with_adapter, const char *operands, export_opts *o)
{
    static const struct option export_longopts[] = {
        { "dtype", required_argument, 0, 'd' }, { "max-shard-size", required_argument, 0, 'm' },
        { "tokenizer", required_argument, 0, 't' }, { "force", no_argument, 0, 'f' },
        { "buffer-size", required_argument, 0, 'b' }, { "stats", no_argument, 0, 's' },
        { "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' },
        { "adapter", no_argument, 0, 'a' }, { "base", required_argument, 0, 'B' }, { 0, 0, 0, 0 },
    };
    /* merge: the same without --adapter */
    static const struct option merge_longopts[] = {
        { "base", required_argument, 0, 'B' }, { "dtype", required_argument, 0, 'd' },
        { "max-shard-size", required_argument, 0, 'm' },
        { "tokenizer", required_argument, 0, 't' }, { "force", no_argument, 0, 'f' },
        { "buffer-size", required_argument, 0, 'b' }, { "stats", no_argument, 0, 's' },
        { "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    *o = (export_opts){ .common = { .buffer_bytes = CV_DEFAULT_BUFFER }, .dtype = "auto",
                        .max_shard = 5000000000ull };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hqf", with_adapter ? export_longopts : merge_longopts,
                            NULL)) != -1) {
        uint64_t sz;
        switch (c) {
        case 'd': o->dtype = optarg; break;
        case 'm':
            if (cv_parse_size(optarg, &o->max_shard))
                return cv_usage_error(sub, "--max-shard-size '%s': give a size such as 5GB, "
                                      "500MB or 2GiB", optarg);
            break;
        case 't': o->tokenizer = optarg; break;
        case 'f': o->force = true; break;
        case 'a': o->adapter = true; break;
        case 'B': o->base = optarg; break;
        case 's': o->common.stats = true; break;
        case 'q': o->common.quiet = true; break;
        case 'b':
            if (cv_parse_size(optarg, &sz) || sz < 4096 || sz > ((uint64_t)1 << 40))
                return cv_usage_error(sub, "--buffer-size '%s': give a size >= 4KiB", optarg);
            o->common.buffer_bytes = (size_t)sz;
            break;
        case 'h': fputs(usage, stdout); return -1;
        default: return cv_usage_error(sub, "unknown option");
        }
    }
    if (strcmp(o->dtype, "auto") && strcmp(o->dtype, "bf16") && strcmp(o->dtype, "fp32"))
        return cv_usage_error(sub, "--dtype '%s': use bf16, fp32 or auto", o->dtype);
    if (argc - optind != 2)
        return cv_usage_error(sub, "expected %s", operands);
    o->in = argv[optind];
    o->out_dir = argv[optind + 1];
    return 0;
}

static int parse(int argc, char **argv, export_opts *o)
{
    const int rc = cv_parse_export_opts(argc, argv, "export", cv_usage_export, true,
                                        "WEIGHTS_OR_CHECKPOINT and OUT_DIR", o);
    if (rc)
        return rc;
    if (o->base && !o->adapter)
        return cv_usage_error("export", "--base names an adapter's base model; it needs --adapter");
    if (o->adapter && (o->tokenizer || o->max_shard != 5000000000ull))
        return cv_usage_error("export", "--tokenizer and --max-shard-size are for model "
                              "exports, not --adapter");
    return 0;
}

/* A checkpoint directory stands for the checkpoint its `latest` names, as in
 * ftmpi-generate; path (len bytes) receives the file to read. */
static int resolve_input(const char *in, char *path, size_t len, ft_error *err)
{
    if (!cv_is_dir(in)) {
        snprintf(path, len, "%s", in);
        return 0;
    }
    char name[512];
    int rc = ft_ckpt_read_latest(in, name, sizeof name, err);
    if (rc > 0)
        return ft_fail(err, "%s is a directory without a '%s' checkpoint pointer; give a "
                       "checkpoint or weights file", in, FT_CKPT_LATEST);
    if (rc < 0)
        return -1;
    if (ft_path_join(path, len, in, name))
        return ft_fail(err, "%s: path too long", in);
    return 0;
}

int cv_run_export(const export_opts *o, const char *what, cv_export_fn run)
{
    double t0 = cv_now();
    ft_error err = { { 0 }, 0 };
    uint64_t moved = 0;
    char in_path[4200];
    if (resolve_input(o->in, in_path, sizeof in_path, &err))
        return cv_report(&err);
    export_opts resolved = *o;
    resolved.in = in_path;
    if (run(&resolved, &moved, &err))
        return cv_report(&err);
    if (o->common.stats)
        cv_print_stats(what, moved, t0);
    return CV_EXIT_OK;
}

int cv_export_main(int argc, char **argv)
{
    export_opts o;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc < 0 ? CV_EXIT_OK : prc;
    return cv_run_export(&o, "export", o.adapter ? cv_adapter_export : cv_export_run);
}
