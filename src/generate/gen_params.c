#include "generate/gen_params.h"
#include "io/tok_fingerprint.h"

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/h5file.h"
#include "util/input_file.h"
#include "io/weights.h"
#include "model/init.h"
#include "util/bf16.h"
#include "util/path_join.h"

/* ---------------------------------------------------------------- resident units */

static int alloc_units(ft_gen_params *p, ft_error *err)
{
    const size_t es = ft_dtype_size(p->dtype);
    p->units = calloc((size_t)p->layout.n_units, sizeof *p->units);
    if (!p->units)
        return ft_fail(err, "out of host memory");
    for (int u = 0; u < p->layout.n_units; u++) {
        size_t bytes = p->layout.units[u].numel * es;
        p->units[u] = p->be->ops->alloc(p->be, bytes ? bytes : sizeof(float));
        if (!p->units[u])
            return ft_fail(err, "cannot allocate %zu MiB of parameters on the %s backend",
                           p->layout.total_numel * es >> 20, p->be->name);
    }
    return 0;
}

/* Uploads n fp32 values into unit u in the params' dtype; host is rounded in place
 * to bf16 when needed (exact for values read from bf16 tensors). */
static void upload_unit(ft_gen_params *p, int u, float *host, size_t n)
{
    if (p->dtype == FT_DTYPE_BF16) {
        uint16_t *bits = (uint16_t *)host; /* rounds front to back: bits[i] overwrites
                                            * bytes of host[i/2], already read */
        for (size_t i = 0; i < n; i++)
            bits[i] = ft_f32_to_bf16(host[i]);
    }
    p->be->ops->upload(p->be, p->units[u], host, n * ft_dtype_size(p->dtype));
    p->be->ops->sync(p->be); /* host is freed or reused next */
}

static int new_params(ft_gen_params **out, const ft_model_config *c, ft_dtype dt,
                      ft_backend *be, ft_error *err)
{
    *out = NULL;
    if (ft_model_config_validate(c, err))
        return -1;
    ft_gen_params *p = calloc(1, sizeof *p);
    if (!p)
        return ft_fail(err, "out of host memory");
    p->be = be;
    p->dtype = dt;
    if (ft_model_layout_build(&p->layout, c, err)) {
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void ft_gen_params_free(ft_gen_params *p)
{
    if (!p)
        return;
    if (p->units)
        for (int u = 0; u < p->layout.n_units; u++)
            p->be->ops->free(p->be, p->units[u]);
    free(p->units);
    ft_model_layout_free(&p->layout);
    free(p);
}

int ft_gen_params_init_random(ft_gen_params **out, const ft_model_config *c, uint64_t seed,
                              double std, ft_dtype dt, ft_backend *be, ft_error *err)
{
    ft_gen_params *p;
    if (new_params(&p, c, dt, be, err))
        return -1;
    if (alloc_units(p, err)) {
        ft_gen_params_free(p);
        return -1;
    }
    for (int u = 0; u < p->layout.n_units; u++) {
        const ft_unit_layout *ul = &p->layout.units[u];
        float *host = malloc(ul->numel * sizeof(float) + 1);
        if (!host) {
            ft_gen_params_free(p);
            return ft_fail(err, "out of host memory");
        }
        ft_model_init_range(ul, 0, ul->numel, seed, std, host);
        upload_unit(p, u, host, ul->numel);
        free(host);
    }
    snprintf(p->path, sizeof p->path, "(random, seed %llu)", (unsigned long long)seed);
    *out = p;
    return 0;
}

/* ---------------------------------------------------------------- source */

static const void *src_acquire(void *ctx, int unit)
{
    return ((ft_gen_params *)ctx)->units[unit];
}
static void *src_grads(void *ctx, int unit) { return NULL; }
static void src_release(void *ctx, int unit) {}
static void src_grad_done(void *ctx, int unit) {}

ft_param_source ft_gen_params_source(ft_gen_params *p)
{
    return (ft_param_source){ .ctx = p, .plan = NULL, .acquire = src_acquire,
                              .grads = src_grads, .release = src_release,
                              .grad_done = src_grad_done };
}

/* ---------------------------------------------------------------- files */

/* A directory names its checkpoint through the one-line pointer file `latest`. */
static int resolve_path(const char *path, char *out, size_t len, ft_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return ft_fail(err, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if ((size_t)snprintf(out, len, "%s", path) >= len)
            return ft_fail(err, "%s: path too long", path);
        return 0;
    }
    char latest[1100], name[512] = "";
    ft_path_join(latest, sizeof latest, path, "latest");
    if (access(latest, F_OK) != 0)
        return ft_fail(err, "%s is a directory without a 'latest' checkpoint pointer; give a "
                       "checkpoint or weights file", path);
    FILE *fp;
    if (ft_input_fopen(latest, "a checkpoint pointer (one file name)", 4096, &fp, err))
        return -1;
    char *ok = fgets(name, sizeof name, fp);
    fclose(fp);
    name[strcspn(name, "\r\n")] = '\0';
    if (!ok || !name[0] || strchr(name, '/'))
        return ft_fail(err, "%s: does not name a checkpoint file", latest);
    if (ft_path_join(out, len, path, name))
        return ft_fail(err, "%s: path too long", path);
    return 0;
}

static int link_exists(hid_t file, const char *a, const char *b)
{
    return H5Lexists(file, a, H5P_DEFAULT) > 0 && (!b || H5Lexists(file, b, H5P_DEFAULT) > 0);
}

static int choose_group(ft_gen_params *p, const ft_h5file *f, ft_gen_param_group which,
                        ft_error *err)
{
    const int has_master = p->is_checkpoint && link_exists(f->id, "/optim", "/optim/master");
    if (which == FT_GEN_PARAMS_MASTER && !has_master)
        return ft_fail(err, "%s: has no /optim/master (only checkpoints of bf16 training keep "
                       "a separate fp32 master); use --params model", f->path);
    const int master = which == FT_GEN_PARAMS_MASTER || (which == FT_GEN_PARAMS_AUTO && has_master);
    snprintf(p->group, sizeof p->group, "%s", master ? "/optim/master" : "/model");
    return 0;
}

/* The storage of the group's tensors, from its first one (the embedding): every
 * tensor of a group is written with one dtype (ft_weights_create_tensors). */
static ft_dtype group_dtype(const ft_model_layout *l, const ft_h5file *f, const char *group)
{
    char dpath[FT_TENSOR_NAME_MAX + 64];
    snprintf(dpath, sizeof dpath, "%s/%s", group, l->units[0].tensors[0].name);
    hid_t d = H5Dopen2(f->id, dpath, H5P_DEFAULT);
    if (d < 0)
        return FT_DTYPE_F32; /* ft_weights_check_tensors names the problem */
    hid_t t = H5Dget_type(d);
    const int bf16 = H5Tget_class(t) == H5T_INTEGER && H5Tget_size(t) == 2;
    H5Tclose(t);
    H5Dclose(d);
    return bf16 ? FT_DTYPE_BF16 : FT_DTYPE_F32;
}

/* Compares the hashes of what was read with the tensors' content_hash attributes.
 * Checkpoints always carry them; weights files may. */
static int verify_unit_hashes(const ft_gen_params *p, const ft_h5file *f,
                              const ft_unit_layout *u, const uint64_t *h, ft_error *err)
{
    for (int t = 0; t < u->n_tensors; t++) {
        char dpath[FT_TENSOR_NAME_MAX + 64];
        snprintf(dpath, sizeof dpath, "%s/%s", p->group, u->tensors[t].name);
        hid_t d = H5Dopen2(f->id, dpath, H5P_DEFAULT);
        if (d < 0)
            return ft_fail(err, "%s: cannot open %s", f->path, dpath);
        int64_t want = 0;
        int has = ft_h5_attr_exists(d, "content_hash");
        int rc = has ? ft_h5_attr_read_i64(f, d, "content_hash", &want, err) : 0;
        H5Dclose(d);
        if (rc)
            return -1;
        if (!has) {
            if (p->is_checkpoint)
                return ft_fail(err, "%s: %s has no content hash (incomplete checkpoint?)",
                               f->path, dpath);
            continue;
        }
        if ((uint64_t)want != h[t])
            return ft_fail(err, "%s: %s does not match its content hash (corrupt file)",
                           f->path, dpath);
    }
    return 0;
}

/* The first tensor of a unit's host copy holding NaN or Inf: -1 when none. */
static int nonfinite_tensor(const ft_unit_layout *ul, const float *host)
{
    for (int t = 0; t < ul->n_tensors; t++)
        for (size_t i = 0; i < ul->tensors[t].numel; i++)
            if (!isfinite(host[ul->tensors[t].offset + i]))
                return t;
    return -1;
}

static int read_units(ft_gen_params *p, const ft_h5file *f, bool allow_nonfinite, ft_error *err)
{
    for (int u = 0; u < p->layout.n_units; u++) {
        const ft_unit_layout *ul = &p->layout.units[u];
        float *host = malloc(ul->numel * sizeof(float) + 1);
        uint64_t *h = calloc((size_t)ul->n_tensors + 1, sizeof *h);
        int rc = !host || !h ? ft_fail(err, "out of host memory") : 0;
        rc = rc || ft_weights_read_range_hashed(f, p->group, ul, 0, ul->numel, host, h, err) ||
             verify_unit_hashes(p, f, ul, h, err);
        const int bad = rc || allow_nonfinite ? -1 : nonfinite_tensor(ul, host);
        if (bad >= 0)
            rc = ft_fail(err, "%s: %s/%s holds NaN or Inf: generating from it gives nothing "
                         "useful; use an earlier checkpoint, or --allow-nonfinite to run it "
                         "anyway", p->path, p->group, ul->tensors[bad].name);
        if (!rc)
            upload_unit(p, u, host, ul->numel);
        free(host);
        free(h);
        if (rc)
            return -1;
    }
    return 0;
}

int ft_gen_params_load(ft_gen_params **out, const char *path, ft_gen_param_group which,
                       bool allow_nonfinite, ft_backend *be, ft_error *err)
{
    *out = NULL;
    char file[1100];
    if (resolve_path(path, file, sizeof file, err))
        return -1;
    ft_h5file f;
    if (ft_h5_open(&f, file, MPI_COMM_SELF, err))
        return -1;
    char kind[64] = "";
    ft_model_config c;
    ft_gen_params *p = NULL;
    int rc = 0;
    if (!ft_h5_attr_exists(f.id, "ftmpi_format") ||
        ft_h5_attr_read_str(&f, f.id, "ftmpi_format", kind, sizeof kind, err))
        rc = ft_fail(err, "%s: not an ftmpi file (no ftmpi_format attribute)", file);
    else if (strcmp(kind, "weights") != 0 && strcmp(kind, "checkpoint") != 0)
        rc = ft_fail(err, "%s: is a '%s' file; expected a weights file or a checkpoint", file,
                     kind);
    char tok_fp[FT_TOK_FINGERPRINT_LEN] = "";
    rc = rc || ft_h5_check_kind(&f, kind, err) || ft_weights_read_config(&f, &c, err) ||
         ft_tok_fingerprint_read(&f, tok_fp, err);
    if (!rc && new_params(&p, &c, FT_DTYPE_F32, be, err))
        rc = ft_fail_context(err, "%s: /config", file);
    if (!rc) {
        p->is_checkpoint = strcmp(kind, "checkpoint") == 0;
        snprintf(p->tokenizer_fingerprint, sizeof p->tokenizer_fingerprint, "%s", tok_fp);
        snprintf(p->path, sizeof p->path, "%s", file);
        rc = choose_group(p, &f, which, err) ||
             ft_weights_check_tensors(&f, p->group, &p->layout, err);
        if (!rc)
            p->dtype = group_dtype(&p->layout, &f, p->group);
        rc = rc || alloc_units(p, err) || read_units(p, &f, allow_nonfinite, err);
    }
    ft_h5_close(&f, NULL);
    if (rc) {
        ft_gen_params_free(p);
        return -1;
    }
    *out = p;
    return 0;
}
