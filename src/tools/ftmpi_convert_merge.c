/* ftmpi-convert merge: a LoRA checkpoint + its base weights -> a Hugging Face model
 * directory with the adapters merged in (W += alpha/r B A, model/lora_merge.h).
 *
 * The base is checked first: the shape and family the checkpoint's /config records,
 * and, when the checkpoint has a base_hash, the base's content identity
 * (io/weights_identity.h). Then the merged model is written unit by unit into a
 * temporary weights file inside OUT_DIR (a block and its adapters in memory at a
 * time; the embedding and head stream through the buffer), which export turns into
 * the HF directory (names, sharding, config.json, tokenizer) before it is removed.
 * Memory is one block, not the model.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/weights.h"
#include "io/weights_identity.h"
#include "model/lora_merge.h"
#include "tools/ftmpi_convert.h"

#define MERGE_TMP_NAME ".ftmpi-merge.h5"

/* The fields that make a model's tensors: the base must have the checkpoint's. */
static int check_same_shape(const char *base, const ft_model_config *b, const char *ckpt,
                            const ft_model_config *c, ft_error *err)
{
    const struct { const char *name; long long have, want; } f[] = {
        { "model_family", b->family, c->family },
        { "vocab_size", b->vocab_size, c->vocab_size },
        { "hidden_size", b->hidden_size, c->hidden_size },
        { "intermediate_size", b->intermediate_size, c->intermediate_size },
        { "num_hidden_layers", b->num_hidden_layers, c->num_hidden_layers },
        { "num_attention_heads", b->num_attention_heads, c->num_attention_heads },
        { "num_key_value_heads", b->num_key_value_heads, c->num_key_value_heads },
        { "head_dim", b->head_dim, c->head_dim },
        { "tie_word_embeddings", b->tie_word_embeddings, c->tie_word_embeddings },
        { "attention_bias", b->attention_bias, c->attention_bias },
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].have != f[i].want) {
            if (i == 0)
                return ft_fail(err, "%s is a %s model, the base of %s a %s model; give the base "
                               "the adapters were trained on (--base)", base,
                               ft_model_family_of(b)->name, ckpt, ft_model_family_of(c)->name);
            return ft_fail(err, "%s has %s %lld, the base of %s has %lld; give the base the "
                           "adapters were trained on (--base)", base, f[i].name, f[i].have, ckpt,
                           f[i].want);
        }
    return 0;
}

typedef struct merge_job {
    ft_h5file ckpt, base, out;
    ft_model_config c;
    cv_lora_ckpt lc;
    ft_model_layout bl;  /* the base layout */
    ft_st_dtype dtype;   /* of the merged model */
    char base_path[4096];
} merge_job;

/* Opens the base and checks it against the checkpoint. */
static int open_base(merge_job *j, const char *ckpt, const char *override, ft_error *err)
{
    const char *path = override ? override : j->lc.base_weights;
    if (!path[0])
        return ft_fail(err, "%s records no base weights file (its base was random-initialised "
                       "or not named); give the base with --base BASE.h5", ckpt);
    snprintf(j->base_path, sizeof j->base_path, "%s", path);
    ft_model_config b;
    if (cv_open_model(&j->base, path, &b, err))
        return ft_fail_context(err, "the base of %s", ckpt);
    if (cv_has_lora(&j->base))
        return ft_fail(err, "%s is itself a LoRA checkpoint; the base is a weights file or a "
                       "full checkpoint", path);
    if (check_same_shape(path, &b, ckpt, &j->c, err) ||
        ft_model_layout_build(&j->bl, &b, err) ||
        ft_weights_check_tensors(&j->base, "/model", &j->bl, err))
        return -1;
    if (j->lc.base_hash[0]) {
        char have[FT_WEIGHTS_IDENTITY_LEN];
        if (ft_weights_identity(&j->base, "/model", &j->bl, have, err))
            return -1;
        if (strcmp(have, j->lc.base_hash) != 0)
            return ft_fail(err, "%s has content identity %s, but %s was trained on a base with "
                           "base_hash %s; give that base (--base)", path, have, ckpt,
                           j->lc.base_hash);
    }
    return 0;
}

/* Copies a unit without adapters through buf (n floats at a time). */
static int copy_unit(merge_job *j, const ft_unit_layout *u, float *buf, size_t n, ft_error *err)
{
    for (size_t lo = 0; lo < u->numel; lo += n) {
        const size_t hi = lo + n < u->numel ? lo + n : u->numel;
        if (ft_weights_read_range(&j->base, "/model", u, lo, hi, buf, err) ||
            ft_weights_write_range(&j->out, "/model", u, lo, hi, buf, err))
            return -1;
    }
    return 0;
}

/* Block l: base + its adapters, merged, written. */
static int merge_block(merge_job *j, int layer, ft_error *err)
{
    const ft_unit_layout *bu = &j->bl.units[ft_layout_block_unit(layer)];
    const ft_unit_layout *au = &j->lc.layout.units[layer];
    float *w = malloc(bu->numel * sizeof *w), *a = malloc(au->numel * sizeof *a);
    int rc = w && a ? 0 : ft_fail(err, "out of host memory for block %d (%zu parameters)", layer,
                                  bu->numel);
    rc = rc || ft_weights_read_range(&j->base, "/model", bu, 0, bu->numel, w, err) ||
         ft_weights_read_range(&j->ckpt, "/model", au, 0, au->numel, a, err) ||
         ft_lora_merge_block(bu, w, au, a, &j->lc.lora, err) ||
         ft_weights_write_range(&j->out, "/model", bu, 0, bu->numel, w, err);
    free(w);
    free(a);
    return rc ? -1 : 0;
}

/* Writes the merged model to path (a weights file). */
static int write_merged(merge_job *j, const char *path, size_t buffer_bytes, ft_error *err)
{
    if (ft_h5_create(&j->out, path, MPI_COMM_SELF, err))
        return -1;
    int rc = ft_h5_write_kind(&j->out, "weights", err) ||
             ft_weights_write_config(&j->out, &j->bl.config, err) ||
             ft_weights_create_tensors(&j->out, "/model", &j->bl,
                                       j->dtype == FT_ST_BF16 ? FT_FILE_BF16 : FT_FILE_F32, err);
    const size_t n = buffer_bytes / sizeof(float);
    float *buf = rc ? NULL : malloc(n * sizeof *buf);
    if (!rc && !buf)
        rc = ft_fail(err, "out of host memory for the buffer (try --buffer-size)");
    for (int u = 0; u < j->bl.n_units && !rc; u++) {
        const ft_unit_layout *ul = &j->bl.units[u];
        rc = ul->kind == FT_UNIT_BLOCK ? merge_block(j, ul->layer, err)
                                       : copy_unit(j, ul, buf, n, err);
    }
    free(buf);
    ft_error cerr;
    if (ft_h5_close(&j->out, &cerr) && !rc)
        rc = ft_fail(err, "%s", cerr.msg);
    return rc ? -1 : 0;
}

/* Whether every base tensor is stored as bf16 (auto keeps bf16 bases bf16). */
static bool base_all_bf16(const merge_job *j)
{
    for (int i = 0; i < j->bl.total_tensors; i++) {
        char path[FT_TENSOR_NAME_MAX + 16];
        snprintf(path, sizeof path, "/model/%s", ft_model_layout_tensor_at(&j->bl, i)->name);
        hid_t d = H5Dopen2(j->base.id, path, H5P_DEFAULT);
        const int dt = d < 0 ? -1 : cv_h5_dataset_dtype(&j->base, d);
        if (d >= 0)
            H5Dclose(d);
        if (dt != FT_ST_BF16)
            return false;
    }
    return true;
}

static int run_merge(cv_export_opts *o, const char *base_override, uint64_t *moved,
                     ft_error *err)
{
    merge_job j;
    memset(&j, 0, sizeof j);
    j.ckpt.id = j.base.id = -1;
    int rc = cv_open_model(&j.ckpt, o->in, &j.c, err);
    bool have_lora = false;
    if (!rc && !cv_has_lora(&j.ckpt))
        rc = ft_fail(err, "%s has no /lora group: it is not a LoRA checkpoint (a full model "
                     "exports with 'ftmpi-convert export')", o->in);
    if (!rc)
        rc = cv_lora_read(&j.ckpt, &j.c, &j.lc, err);
    have_lora = !rc;
    rc = rc || open_base(&j, o->in, base_override, err);
    if (!rc)
        j.dtype = strcmp(o->dtype, "bf16") == 0 ? FT_ST_BF16
                  : strcmp(o->dtype, "fp32") == 0 ? FT_ST_F32
                  : base_all_bf16(&j) ? FT_ST_BF16 : FT_ST_F32;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/" MERGE_TMP_NAME, o->out_dir);
    rc = rc || cv_prepare_dir(o, err);
    if (!rc) {
        unlink(tmp); /* a killed merge's leftover */
        rc = write_merged(&j, tmp, o->common.buffer_bytes, err);
    }
    if (!rc) {
        cv_export_opts e = *o;
        e.in = tmp;
        e.dtype = "auto"; /* the temporary file is already in the output dtype */
        e.common.quiet = true;
        rc = cv_export_run(&e, moved, err);
    }
    unlink(tmp);
    if (!rc && !o->common.quiet)
        printf("merged %s (rank %d, alpha %g, targets %s) into %s -> %s/: %lld parameters, %s\n",
               o->in, j.lc.lora.rank, j.lc.lora.alpha, j.lc.targets, j.base_path, o->out_dir,
               (long long)j.bl.total_numel, j.dtype == FT_ST_BF16 ? "bf16" : "fp32");
    ft_error cerr;
    if (j.base.id >= 0)
        ft_h5_close(&j.base, &cerr);
    if (j.ckpt.id >= 0)
        ft_h5_close(&j.ckpt, &cerr);
    if (have_lora)
        cv_lora_free(&j.lc);
    ft_model_layout_free(&j.bl);
    return rc ? -1 : 0;
}

static int parse(int argc, char **argv, cv_export_opts *o, const char **base)
{
    static const struct option longopts[] = {
        { "base", required_argument, 0, 'B' }, { "dtype", required_argument, 0, 'd' },
        { "max-shard-size", required_argument, 0, 'm' },
        { "tokenizer", required_argument, 0, 't' }, { "force", no_argument, 0, 'f' },
        { "buffer-size", required_argument, 0, 'b' }, { "stats", no_argument, 0, 's' },
        { "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    *o = (cv_export_opts){ .common = { .buffer_bytes = CV_DEFAULT_BUFFER }, .dtype = "auto",
                           .max_shard = 5000000000ull };
    *base = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hqf", longopts, NULL)) != -1) {
        uint64_t sz;
        switch (c) {
        case 'B': *base = optarg; break;
        case 'd': o->dtype = optarg; break;
        case 'm':
            if (cv_parse_size(optarg, &o->max_shard))
                return cv_usage_error("merge", "--max-shard-size '%s': give a size such as 5GB, "
                                      "500MB or 2GiB", optarg);
            break;
        case 't': o->tokenizer = optarg; break;
        case 'f': o->force = true; break;
        case 's': o->common.stats = true; break;
        case 'q': o->common.quiet = true; break;
        case 'b':
            if (cv_parse_size(optarg, &sz) || sz < 4096 || sz > ((uint64_t)1 << 40))
                return cv_usage_error("merge", "--buffer-size '%s': give a size >= 4KiB", optarg);
            o->common.buffer_bytes = (size_t)sz;
            break;
        case 'h': fputs(cv_usage_merge, stdout); return -1;
        default: return cv_usage_error("merge", "unknown option");
        }
    }
    if (strcmp(o->dtype, "auto") && strcmp(o->dtype, "bf16") && strcmp(o->dtype, "fp32"))
        return cv_usage_error("merge", "--dtype '%s': use bf16, fp32 or auto", o->dtype);
    if (argc - optind != 2)
        return cv_usage_error("merge", "expected LORA_CHECKPOINT and OUT_DIR");
    o->in = argv[optind];
    o->out_dir = argv[optind + 1];
    return 0;
}

int cv_merge_main(int argc, char **argv)
{
    cv_export_opts o;
    const char *base;
    int prc = parse(argc, argv, &o, &base);
    if (prc)
        return prc < 0 ? CV_EXIT_OK : prc;
    double t0 = cv_now();
    ft_error err = { { 0 }, 0 };
    uint64_t moved = 0;
    char in_path[4200];
    if (cv_resolve_input(o.in, in_path, sizeof in_path, &err))
        return cv_report(&err);
    o.in = in_path;
    if (run_merge(&o, base, &moved, &err))
        return cv_report(&err);
    if (o.common.stats)
        cv_print_stats("merge", moved, t0);
    return CV_EXIT_OK;
}
