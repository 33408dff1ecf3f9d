/* A LoRA checkpoint's base with the adapters merged, as a weights file
 * (io/lora_ckpt.h: ft_lora_merge_to_weights). The base is checked against the
 * checkpoint first (family and shape from /config, base_hash); then units go one at a
 * time: a block is read whole in fp32, its adapters added (model/lora_merge.h) and
 * written; the embedding and head stream through the buffer unchanged. */
#include "io/lora_ckpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/tok_fingerprint.h"
#include "io/weights_identity.h"
#include "model/lora_merge.h"

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
    if (b->family != c->family)
        return ft_fail(err, "%s is a %s model, the base of %s a %s model; give the base the "
                       "adapters were trained on", base, ft_model_family_of(b)->name, ckpt,
                       ft_model_family_of(c)->name);
    for (size_t i = 1; i < sizeof f / sizeof f[0]; i++)
        if (f[i].have != f[i].want)
            return ft_fail(err, "%s has %s %lld, the base of %s has %lld; give the base the "
                           "adapters were trained on", base, f[i].name, f[i].have, ckpt,
                           f[i].want);
    return 0;
}

typedef struct merge_job {
    ft_h5file ckpt, base, out;
    ft_model_config c;
    ft_lora_ckpt lc;
    bool have_lc;
    ft_model_layout bl;  /* the base layout */
    const char *group;   /* the adapters' group in the checkpoint */
} merge_job;

static int open_model(ft_h5file *h, const char *path, const char *what, ft_model_config *c,
                      ft_error *err)
{
    char kind[64] = "";
    if (ft_h5_open(h, path, MPI_COMM_SELF, err))
        return -1;
    if (ft_h5_attr_read_str(h, h->id, "ftmpi_format", kind, sizeof kind, err) ||
        (strcmp(kind, "weights") != 0 && strcmp(kind, "checkpoint") != 0))
        return ft_fail(err, "%s: not an ftmpi weights or checkpoint file (%s)", path, what);
    return ft_h5_check_kind(h, kind, err) || ft_weights_read_config(h, c, err) ? -1 : 0;
}

/* Opens the base and checks it against the checkpoint. */
static int open_base(merge_job *j, const char *ckpt, const char *path, ft_error *err)
{
    if (!path[0])
        return ft_fail(err, "%s records no base weights file (its base was random-initialised "
                       "or not named); give the base weights file", ckpt);
    ft_model_config b;
    if (open_model(&j->base, path, "the base", &b, err))
        return ft_fail_context(err, "the base of %s", ckpt);
    if (ft_lora_ckpt_is(&j->base))
        return ft_fail(err, "%s is itself a LoRA checkpoint; the base is a weights file or a "
                       "full checkpoint", path);
    if (check_same_shape(path, &b, ckpt, &j->c, err) || ft_model_layout_build(&j->bl, &b, err) ||
        ft_weights_check_tensors(&j->base, "/model", &j->bl, err))
        return -1;
    if (j->lc.base_hash[0]) {
        char have[FT_WEIGHTS_IDENTITY_LEN];
        if (ft_weights_identity(&j->base, "/model", &j->bl, have, err))
            return -1;
        if (strcmp(have, j->lc.base_hash) != 0)
            return ft_fail(err, "%s has content identity %s, but %s was trained on a base with "
                           "base_hash %s; give that base", path, have, ckpt, j->lc.base_hash);
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

/* Block `layer`: base + its adapters, merged, written. */
static int merge_block(merge_job *j, int layer, ft_error *err)
{
    const ft_unit_layout *bu = &j->bl.units[ft_layout_block_unit(layer)];
    const ft_unit_layout *au = &j->lc.layout.units[layer];
    float *w = malloc(bu->numel * sizeof *w), *a = malloc(au->numel * sizeof *a);
    int rc = w && a ? 0 : ft_fail(err, "out of host memory for block %d (%zu parameters)", layer,
                                  bu->numel);
    rc = rc || ft_weights_read_range(&j->base, "/model", bu, 0, bu->numel, w, err) ||
         ft_weights_read_range(&j->ckpt, j->group, au, 0, au->numel, a, err) ||
         ft_lora_merge_block(bu, w, au, a, &j->lc.lora, err) ||
         ft_weights_write_range(&j->out, "/model", bu, 0, bu->numel, w, err);
    free(w);
    free(a);
    return rc ? -1 : 0;
}

/* Whether every base tensor is stored as bf16 (u16 bits with dtype "bfloat16"). */
static bool base_all_bf16(const merge_job *j)
{
    bool all = true;
    for (int i = 0; i < j->bl.total_tensors && all; i++) {
        char path[FT_TENSOR_NAME_MAX + 16], tag[32] = "";
        snprintf(path, sizeof path, "/model/%s", ft_model_layout_tensor_at(&j->bl, i)->name);
        hid_t d = H5Dopen2(j->base.id, path, H5P_DEFAULT);
        ft_error e;
        all = d >= 0 && ft_h5_attr_exists(d, "dtype") &&
              ft_h5_attr_read_str(&j->base, d, "dtype", tag, sizeof tag, &e) == 0 &&
              strcmp(tag, "bfloat16") == 0;
        if (d >= 0)
            H5Dclose(d);
    }
    return all;
}

static int write_merged(merge_job *j, const char *path, ft_file_dtype dtype, size_t buffer_bytes,
                        ft_error *err)
{
    if (ft_h5_create(&j->out, path, MPI_COMM_SELF, err))
        return -1;
    /* the tokenizer the run recorded, else the base's: generation checks it */
    char fp[FT_TOK_FINGERPRINT_LEN] = "";
    ft_error ignore;
    if (ft_tok_fingerprint_read(&j->ckpt, fp, &ignore) || !fp[0])
        ft_tok_fingerprint_read(&j->base, fp, &ignore);
    int rc = ft_h5_write_kind(&j->out, "weights", err) ||
             ft_weights_write_config(&j->out, &j->bl.config, err) ||
             ft_tok_fingerprint_write(&j->out, fp, err) ||
             ft_weights_create_tensors(&j->out, "/model", &j->bl, dtype, err);
    const size_t n = buffer_bytes / sizeof(float) > 0 ? buffer_bytes / sizeof(float) : 1;
    float *buf = rc ? NULL : malloc(n * sizeof *buf);
    if (!rc && !buf)
        rc = ft_fail(err, "out of host memory for a %zu-byte buffer", buffer_bytes);
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

int ft_lora_merge_to_weights(const char *ckpt, const char *out, const ft_lora_merge_options *o,
                             ft_lora_merge_result *r, ft_error *err)
{
    merge_job j;
    memset(&j, 0, sizeof j);
    memset(r, 0, sizeof *r);
    j.ckpt.id = j.base.id = -1;
    j.group = o->group ? o->group : "/model";
    int rc = open_model(&j.ckpt, ckpt, "the LoRA checkpoint", &j.c, err);
    if (!rc && !ft_lora_ckpt_is(&j.ckpt))
        rc = ft_fail(err, "%s has no /lora group: it is not a LoRA checkpoint", ckpt);
    if (!rc)
        rc = ft_lora_ckpt_read(&j.ckpt, &j.c, j.group, &j.lc, err);
    j.have_lc = !rc;
    if (!rc)
        snprintf(r->base, sizeof r->base, "%s", o->base ? o->base : j.lc.base_weights);
    rc = rc || open_base(&j, ckpt, r->base, err);
    if (!rc) {
        r->dtype = o->dtype >= 0 ? (ft_file_dtype)o->dtype
                   : base_all_bf16(&j) ? FT_FILE_BF16 : FT_FILE_F32;
        r->rank = j.lc.lora.rank;
        r->alpha = j.lc.lora.alpha;
        snprintf(r->targets, sizeof r->targets, "%s", j.lc.targets);
        r->parameters = (long long)j.bl.total_numel;
        rc = write_merged(&j, out, r->dtype, o->buffer_bytes, err);
    }
    ft_error cerr;
    if (j.base.id >= 0)
        ft_h5_close(&j.base, &cerr);
    if (j.ckpt.id >= 0)
        ft_h5_close(&j.ckpt, &cerr);
    if (j.have_lc)
        ft_lora_ckpt_free(&j.lc);
    ft_model_layout_free(&j.bl);
    return rc ? -1 : 0;
}
