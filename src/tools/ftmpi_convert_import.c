/* ftmpi-convert import: a Hugging Face directory of one of ftmpi's families
 * (config.json + safetensors, single or sharded) -> an ftmpi weights file. The HF
 * names map to the layout's by ftmpi_convert_names.c (GPT-NeoX's fused q/k/v is
 * split into the three layout tensors on the way).
 *
 * Everything is checked before the output is created (config, the set of tensors,
 * their shapes and dtypes), so a bad input never leaves a half-written file. Tensors
 * then stream through one fixed buffer: pread a chunk from the shard, convert if
 * asked, write the chunk's hyperslab; memory does not grow with the model. The
 * file is written as OUT.tmp and renamed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/hf_config.h"
#include "io/weights.h"
#include "model/layout.h"
#include "io/tok_fingerprint.h"
#include "tools/ftmpi_convert.h"
#include "util/output_file.h"
#include "util/path_join.h"

typedef struct import_opts {
    cv_common common;
    const char *dtype; /* "auto", "bf16", "fp32" */
    bool allow_extra;
    const char *hf_dir, *out;
} import_opts;

/* Where each HF tensor of the model comes from. */
typedef struct source_ref {
    int shard;
    const ft_st_tensor *t;
} source_ref;

typedef struct hf_model {
    ft_model_config config;
    ft_hf_config_info info;
    ft_model_layout layout;
    int n_shards;
    ft_st_file *shards;
    cv_hf_tensor *hf; /* the model's HF tensors, in layout order */
    int n_hf;
    source_ref *src;  /* per HF tensor */
    uint64_t total_bytes; /* source bytes of the tensors used */
    int n_extra;      /* skipped with --allow-extra */
    int n_bf16, n_f16, n_f32;
} hf_model;

static void hf_model_free(hf_model *m)
{
    for (int i = 0; i < m->n_shards; i++)
        ft_st_close(&m->shards[i]);
    free(m->shards);
    free(m->src);
    free(m->hf);
    ft_model_layout_free(&m->layout);
}

static const ft_tensor_info *layout_tensor(const ft_model_layout *l, int i)
{
    for (int u = 0; u < l->n_units; u++) {
        if (i < l->units[u].n_tensors)
            return &l->units[u].tensors[i];
        i -= l->units[u].n_tensors;
    }
    return NULL;
}

static int hf_index(const hf_model *m, const char *name)
{
    for (int i = 0; i < m->n_hf; i++)
        if (strcmp(m->hf[i].name, name) == 0)
            return i;
    return -1;
}

/* Opens the shards named by the index, or the single model.safetensors. */
static int open_shards(hf_model *m, const char *dir, ft_st_index *idx, bool *have_idx,
                       ft_error *err)
{
    char path[4096];
    ft_path_join(path, sizeof path, dir, "model.safetensors.index.json");
    *have_idx = cv_exists(path);
    if (*have_idx) {
        if (ft_st_index_read(idx, path, err))
            return -1;
        m->n_shards = idx->n_files;
    } else {
        ft_path_join(path, sizeof path, dir, "model.safetensors");
        if (!cv_exists(path)) {
            ft_path_join(path, sizeof path, dir, "pytorch_model.bin");
            bool bin = cv_exists(path);
            return ft_fail(err, "%s: no model.safetensors or model.safetensors.index.json%s", dir,
                           bin ? " (only pytorch_model.bin: save the model with "
                                 "save_pretrained(..., safe_serialization=True) first)" : "");
        }
        m->n_shards = 1;
    }
    m->shards = calloc((size_t)m->n_shards, sizeof *m->shards);
    if (!m->shards)
        return ft_fail(err, "out of host memory");
    for (int i = 0; i < m->n_shards; i++)
        m->shards[i].fd = -1;
    for (int i = 0; i < m->n_shards; i++) {
        ft_path_join(path, sizeof path, dir,
                     *have_idx ? idx->unique_files[i] : "model.safetensors");
        /* any dtype: old GPT-NeoX/GPT-J saves hold BOOL mask buffers, skipped by
         * name in map_tensors; the tensors used must be weights (checked there) */
        if (ft_st_open(&m->shards[i], path, FT_ST_ANY_DTYPE, err))
            return -1;
    }
    return 0;
}

/* Checks that the index and the shards agree: every weight_map entry is in the shard
 * it names. */
static int check_index(const hf_model *m, const char *dir, const ft_st_index *idx,
                       ft_error *err)
{
    for (int i = 0; i < idx->n; i++) {
        int s = 0;
        while (s < idx->n_files && strcmp(idx->unique_files[s], idx->files[i]) != 0)
            s++;
        if (!ft_st_find(&m->shards[s], idx->names[i])) {
            char index[4200];
            ft_path_join(index, sizeof index, dir, "model.safetensors.index.json");
            return ft_fail(err, "%s: lists tensor '%s' in %s, which does not contain it", index,
                           idx->names[i], idx->files[i]);
        }
    }
    return 0;
}

/* Maps every shard tensor to the layout; rejects duplicates, unexpected tensors
 * (unless allowed), missing tensors, wrong shapes. */
static int map_tensors(hf_model *m, const import_opts *o, const ft_st_index *idx,
                       bool have_idx, ft_error *err)
{
    const ft_model_layout *l = &m->layout;
    if (cv_hf_tensors(l, &m->hf, &m->n_hf, err))
        return -1;
    m->src = calloc((size_t)m->n_hf, sizeof *m->src);
    if (!m->src)
        return ft_fail(err, "out of host memory");
    for (int i = 0; i < m->n_hf; i++)
        m->src[i].shard = -1;
    const char *first_extra = NULL, *first_extra_file = NULL;
    int n_extra = 0;
    for (int s = 0; s < m->n_shards; s++) {
        const ft_st_file *f = &m->shards[s];
        for (int k = 0; k < f->n_tensors; k++) {
            const ft_st_tensor *t = &f->tensors[k];
            if (cv_hf_ignored(t->name)) /* a buffer, not a weight */
                continue;
            if (have_idx && !ft_st_index_lookup(idx, t->name))
                fprintf(stderr, "ftmpi-convert: warning: %s: tensor '%s' is not listed in "
                        "model.safetensors.index.json (used anyway)\n", f->path, t->name);
            int i = hf_index(m, t->name);
            const char *alias = i < 0 ? cv_hf_alias(&m->config, t->name) : NULL;
            if (alias)
                i = hf_index(m, alias);
            if (i < 0) {
                if (!first_extra) {
                    first_extra = t->name;
                    first_extra_file = f->path;
                }
                n_extra++;
                continue;
            }
            if (m->src[i].shard >= 0)
                return ft_fail(err, "%s: tensor '%s' is also in %s; a tensor must be stored "
                               "once", f->path, t->name, m->shards[m->src[i].shard].path);
            if (!ft_st_dtype_is_weight(t->dtype))
                return ft_fail(err, "%s: tensor '%s' has dtype %s; ftmpi reads only BF16, F16 "
                               "and F32 weights", f->path, t->name, ft_st_dtype_name(t->dtype));
            m->src[i] = (source_ref){ s, t };
        }
    }
    if (n_extra && !o->allow_extra)
        return ft_fail(err, "%s: tensor '%s' is not part of a %s model with this config.json"
                       "%s (%d unexpected tensor%s; check num_hidden_layers and "
                       "tie_word_embeddings, or pass --allow-extra to skip them)",
                       first_extra_file, first_extra, ft_model_family_of(&m->config)->architecture,
                       strcmp(first_extra, "lm_head.weight") == 0 && m->config.tie_word_embeddings
                           ? " (tie_word_embeddings is true)" : "",
                       n_extra, n_extra == 1 ? "" : "s");
    if (n_extra)
        fprintf(stderr, "ftmpi-convert: warning: skipping %d tensor%s not in the model, e.g. "
                "'%s' (--allow-extra)\n", n_extra, n_extra == 1 ? "" : "s", first_extra);
    m->n_extra = n_extra;
    for (int i = 0; i < m->n_hf; i++) {
        const cv_hf_tensor *ti = &m->hf[i];
        const source_ref *r = &m->src[i];
        if (r->shard < 0)
            return ft_fail(err, "%s: tensor '%s' [%llu%s%llu] is missing (config.json: %d layers, "
                           "tie_word_embeddings %s)", o->hf_dir, ti->name,
                           (unsigned long long)ti->shape[0], ti->ndim == 2 ? "," : "",
                           ti->ndim == 2 ? (unsigned long long)ti->shape[1] : 0ull,
                           m->config.num_hidden_layers,
                           m->config.tie_word_embeddings ? "true" : "false");
        const ft_st_tensor *t = r->t;
        bool ok = t->ndim == ti->ndim && t->shape[0] == ti->shape[0] &&
                  (ti->ndim == 1 || t->shape[1] == ti->shape[1]);
        if (!ok) {
            char got[128] = "[";
            for (int d = 0; d < t->ndim; d++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", d ? "," : "",
                         (unsigned long long)t->shape[d]);
            snprintf(got + strlen(got), sizeof got - strlen(got), "]");
            return ft_fail(err, "%s: tensor '%s' has shape %s, config.json implies [%llu%s%llu]",
                           m->shards[r->shard].path, ti->name, got,
                           (unsigned long long)ti->shape[0], ti->ndim == 2 ? "," : "",
                           ti->ndim == 2 ? (unsigned long long)ti->shape[1] : 0ull);
        }
        m->n_bf16 += t->dtype == FT_ST_BF16;
        m->n_f16 += t->dtype == FT_ST_F16;
        m->n_f32 += t->dtype == FT_ST_F32;
        m->total_bytes += ft_st_tensor_bytes(t);
    }
    return 0;
}

static int load_hf(hf_model *m, const import_opts *o, ft_error *err)
{
    char path[4096];
    ft_path_join(path, sizeof path, o->hf_dir, "config.json");
    if (!cv_is_dir(o->hf_dir))
        return ft_fail(err, "%s: not a directory (give the Hugging Face model directory)",
                       o->hf_dir);
    if (ft_hf_config_read(path, &m->config, &m->info, err) ||
        ft_model_layout_build(&m->layout, &m->config, err))
        return -1;
    ft_st_index idx = { 0 };
    bool have_idx = false;
    int rc = open_shards(m, o->hf_dir, &idx, &have_idx, err) ||
             (have_idx && check_index(m, o->hf_dir, &idx, err)) ||
             map_tensors(m, o, &idx, have_idx, err);
    ft_st_index_free(&idx);
    return rc ? -1 : 0;
}

/* Streams HF tensor i into the dataset(s) of its layout part(s); adds each dataset's
 * content hash attribute. A chunk never crosses a run of the fused layout (a head's
 * rows of q, k or v), so it lands in one hyperslab of one dataset. */
static int copy_tensor(ft_h5file *h, const hf_model *m, int i, ft_st_dtype out, void *inbuf,
                       void *outbuf, size_t half, ft_error *err)
{
    const cv_hf_tensor *ht = &m->hf[i];
    const ft_st_file *sf = &m->shards[m->src[i].shard];
    const ft_st_tensor *t = m->src[i].t;
    const ft_tensor_info *parts[3];
    hid_t d[3] = { -1, -1, -1 };
    uint64_t hash[3] = { 0, 0, 0 };
    char dpath[3][256];
    int rc = 0;
    for (int p = 0; p < ht->n_parts && !rc; p++) {
        parts[p] = layout_tensor(&m->layout, ht->part[p]);
        snprintf(dpath[p], sizeof dpath[p], "/model/%s", parts[p]->name);
        d[p] = H5Dopen2(h->id, dpath[p], H5P_DEFAULT);
        if (d[p] < 0)
            rc = ft_fail(err, "%s: cannot open %s", h->path, dpath[p]);
    }
    const size_t in_sz = ft_st_dtype_size(t->dtype), out_sz = ft_st_dtype_size(out);
    const size_t big = in_sz > out_sz ? in_sz : out_sz;
    const size_t chunk = cv_chunk_elems(half, big, ht->ndim == 2 ? ht->shape[1] : 0);
    hid_t mtype = out == FT_ST_BF16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_FLOAT;
    for (uint64_t lo = 0; lo < ht->numel && !rc;) {
        int p;
        uint64_t off, run;
        cv_hf_locate(ht, lo, &p, &off, &run);
        const size_t n = (size_t)(run < chunk ? run : chunk);
        const ft_tensor_info *ti = parts[p];
        hsize_t dims[2] = { (hsize_t)ti->shape[0], (hsize_t)ti->shape[1] };
        void *data = t->dtype == out ? inbuf : outbuf;
        rc = ft_st_read(sf, t, lo * in_sz, inbuf, n * in_sz, err);
        if (!rc) {
            cv_convert(t->dtype, out, inbuf, data, n);
            hash[p] += ft_weights_hash_part(off, data, n, (int)out_sz);
            rc = cv_h5_transfer(h, d[p], dpath[p], ti->ndim, dims, off, off + n, mtype, data,
                                true, err);
        }
        lo += n;
    }
    for (int p = 0; p < ht->n_parts; p++) {
        if (!rc)
            rc = ft_h5_attr_write_i64(h, d[p], "content_hash", (int64_t)hash[p], err);
        if (d[p] >= 0)
            H5Dclose(d[p]);
    }
    return rc;
}

/* The fingerprint of HF_DIR/tokenizer.json into fp ("" when there is none, or, with a
 * note, when it cannot be read: the weights are what is imported). */
static void tokenizer_fingerprint(const import_opts *o, char fp[FT_TOK_FINGERPRINT_LEN])
{
    char path[4200];
    fp[0] = '\0';
    ft_path_join(path, sizeof path, o->hf_dir, "tokenizer.json");
    if (!cv_exists(path))
        return;
    ft_error err = { { 0 }, 0 };
    if (ft_tok_fingerprint_file(path, fp, &err)) {
        fp[0] = '\0';
        if (!o->common.quiet)
            fprintf(stderr, "ftmpi-convert: note: %s; no tokenizer fingerprint recorded\n",
                    err.msg);
    }
}

static int write_weights(const hf_model *m, const import_opts *o, ft_st_dtype out,
                         const char *tok_fp, uint64_t *written, ft_error *err)
{
    char tmp[4096];
    if (ft_output_tmp_name(tmp, sizeof tmp, o->out, err))
        return -1;
    /* renaming over a shard being read would destroy it */
    for (int i = 0; i < m->n_shards; i++)
        if (ft_output_not_input(o->out, "OUT", m->shards[i].path, "input", err))
            return -1;
    size_t half = o->common.buffer_bytes / 2;
    void *inbuf = malloc(half), *outbuf = malloc(half);
    if (!inbuf || !outbuf) {
        free(inbuf);
        free(outbuf);
        return ft_fail(err, "out of host memory for the %zu-byte buffer (try --buffer-size)",
                       o->common.buffer_bytes);
    }
    ft_h5file h;
    int rc = ft_h5_create(&h, tmp, MPI_COMM_SELF, err);
    if (rc) {
        free(inbuf);
        free(outbuf);
        return -1;
    }
    rc = ft_h5_write_kind(&h, "weights", err) ||
         ft_weights_write_config(&h, &m->config, err) ||
         ft_tok_fingerprint_write(&h, tok_fp, err) ||
         ft_weights_create_tensors(&h, "/model", &m->layout,
                                   out == FT_ST_BF16 ? FT_FILE_BF16 : FT_FILE_F32, err);
    /* the whole file's space before any tensor byte: a full disk is one line here, not a
     * failed write and a close that cannot finish (room for the hash attributes too) */
    rc = rc || ft_h5_reserve(&h, (64u << 10) + 512u * (uint64_t)m->layout.total_tensors, err);
    for (int i = 0; i < m->n_hf && !rc; i++) {
        rc = copy_tensor(&h, m, i, out, inbuf, outbuf, half, err);
        *written += m->hf[i].numel * ft_st_dtype_size(out);
        if (!rc && !o->common.quiet && isatty(STDERR_FILENO))
            fprintf(stderr, "\rimport: %d/%d tensors", i + 1, m->n_hf);
    }
    if (!o->common.quiet && isatty(STDERR_FILENO))
        fprintf(stderr, "\n");
    free(inbuf);
    free(outbuf);
    ft_error cerr;
    if (ft_h5_close(&h, &cerr) && !rc)
        rc = ft_fail(err, "%s", cerr.msg);
    int fd = rc ? -1 : open(tmp, O_RDONLY | O_CLOEXEC);
    if (!rc && (fd < 0 || fsync(fd) != 0)) /* durable before it gets its final name */
        rc = ft_fail(err, "%s: fsync failed: %s", tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (!rc && rename(tmp, o->out) != 0)
        rc = ft_fail(err, "%s: cannot rename to %s: %s", tmp, o->out, strerror(errno));
    if (rc)
        unlink(tmp);
    return rc;
}

static int parse(int argc, char **argv, import_opts *o)
{
    static const struct option longopts[] = {
        { "dtype", required_argument, 0, 'd' }, { "allow-extra", no_argument, 0, 'x' },
        { "buffer-size", required_argument, 0, 'b' }, { "stats", no_argument, 0, 's' },
        { "quiet", no_argument, 0, 'q' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    *o = (import_opts){ .common = { .buffer_bytes = CV_DEFAULT_BUFFER }, .dtype = "auto" };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hq", longopts, NULL)) != -1) {
        uint64_t sz;
        switch (c) {
        case 'd': o->dtype = optarg; break;
        case 'x': o->allow_extra = true; break;
        case 's': o->common.stats = true; break;
        case 'q': o->common.quiet = true; break;
        case 'b':
            if (cv_parse_size(optarg, &sz) || sz < 4096 || sz > ((uint64_t)1 << 40))
                return cv_usage_error("import", "--buffer-size '%s': give a size >= 4KiB", optarg);
            o->common.buffer_bytes = (size_t)sz;
            break;
        case 'h': fputs(cv_usage_import, stdout); return -1;
        default: return cv_usage_error("import", "unknown option");
        }
    }
    if (strcmp(o->dtype, "auto") && strcmp(o->dtype, "bf16") && strcmp(o->dtype, "fp32"))
        return cv_usage_error("import", "--dtype '%s': use bf16, fp32 or auto", o->dtype);
    if (argc - optind != 2)
        return cv_usage_error("import", "expected HF_DIR and OUT.h5");
    o->hf_dir = argv[optind];
    o->out = argv[optind + 1];
    return 0;
}

int cv_import_main(int argc, char **argv)
{
    import_opts o;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc < 0 ? CV_EXIT_OK : prc;
    double t0 = cv_now();
    hf_model m = { 0 };
    ft_error err = { { 0 }, 0 };
    if (load_hf(&m, &o, &err)) {
        hf_model_free(&m);
        return cv_report(&err);
    }
    /* auto: bf16 stays bf16 bit for bit; anything else becomes fp32, losslessly */
    ft_st_dtype out = strcmp(o.dtype, "bf16") == 0   ? FT_ST_BF16
                      : strcmp(o.dtype, "fp32") == 0 ? FT_ST_F32
                      : (m.n_f16 == 0 && m.n_f32 == 0) ? FT_ST_BF16 : FT_ST_F32;
    if (m.info.notes[0] && !o.common.quiet)
        fprintf(stderr, "ftmpi-convert: note: %s\n", m.info.notes);
    if (out == FT_ST_BF16 && (m.n_f32 || m.n_f16) && !o.common.quiet)
        fprintf(stderr, "ftmpi-convert: note: rounding %d F32/F16 tensors to bf16 (--dtype bf16)\n",
                m.n_f32 + m.n_f16);
    uint64_t written = 0;
    char tok_fp[FT_TOK_FINGERPRINT_LEN];
    tokenizer_fingerprint(&o, tok_fp);
    int rc = write_weights(&m, &o, out, tok_fp, &written, &err);
    if (!rc && !o.common.quiet)
        printf("imported %s -> %s: %d tensors in %d shard%s, %lld parameters, %s%s%s-> %s\n",
               o.hf_dir, o.out, m.n_hf, m.n_shards, m.n_shards == 1 ? "" : "s",
               (long long)m.layout.total_numel, m.n_bf16 ? "BF16 " : "", m.n_f16 ? "F16 " : "",
               m.n_f32 ? "F32 " : "", out == FT_ST_BF16 ? "bf16" : "fp32");
    if (!rc && o.common.stats)
        cv_print_stats("import", m.total_bytes, t0);
    hf_model_free(&m);
    return rc ? cv_report(&err) : CV_EXIT_OK;
}
