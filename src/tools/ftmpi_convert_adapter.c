/* ftmpi-convert export --adapter: a LoRA checkpoint's adapters (doc/formats.md, "LoRA
 * checkpoint"; io/lora_ckpt.h) as a PEFT adapter directory (io/peft_adapter.h) that
 * peft.PeftModel.from_pretrained loads onto the Hugging Face base. Adapters are small (rank rows or columns per
 * projection), so they go one tensor at a time through memory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/lora_ckpt.h"
#include "io/peft_adapter.h"
#include "io/weights.h"
#include "tools/ftmpi_convert.h"
#include "util/path_join.h"

typedef struct h5_source {
    const ft_h5file *f;
    const ft_model_layout *l;
} h5_source;

/* The fp32 values of adapter tensor t from the checkpoint's /model. */
static int read_from_h5(void *ctx, const ft_tensor_info *t, float *dst, ft_error *err)
{
    const h5_source *s = ctx;
    int u, k;
    if (ft_model_layout_find(s->l, t->name, &u, &k))
        return ft_fail(err, "internal: %s is not in the adapter layout", t->name);
    return ft_weights_read_range(s->f, "/model", &s->l->units[u], t->offset, t->offset + t->numel,
                                 dst, err);
}

/* Whether every /model dataset of the layout is stored as bf16. */
static int all_bf16(const ft_h5file *f, const ft_model_layout *l, bool *yes, ft_error *err)
{
    *yes = true;
    for (int i = 0; i < l->total_tensors && *yes; i++) {
        char path[FT_TENSOR_NAME_MAX + 16];
        snprintf(path, sizeof path, "/model/%s", ft_model_layout_tensor_at(l, i)->name);
        hid_t d = H5Dopen2(f->id, path, H5P_DEFAULT);
        int dt = d < 0 ? -1 : cv_h5_dataset_dtype(f, d);
        if (d >= 0)
            H5Dclose(d);
        if (dt < 0)
            return ft_fail(err, "%s: %s is neither fp32 nor bf16", f->path, path);
        *yes = dt == FT_ST_BF16;
    }
    return 0;
}

/* Creates the directory, or refuses one that already holds an adapter (removes its
 * files with --force). */
static int prepare_adapter_dir(const cv_export_opts *o, ft_error *err)
{
    if (!cv_exists(o->out_dir))
        return mkdir(o->out_dir, 0755) == 0 ? 0 : ft_fail(err, "%s: cannot create directory: %s",
                                                          o->out_dir, strerror(errno));
    if (!cv_is_dir(o->out_dir))
        return ft_fail(err, "%s: exists and is not a directory", o->out_dir);
    static const char *const names[] = { FT_PEFT_CONFIG_NAME, FT_PEFT_WEIGHTS_NAME };
    for (int i = 0; i < 2; i++) {
        char p[4200];
        ft_path_join(p, sizeof p, o->out_dir, names[i]);
        if (!cv_exists(p))
            continue;
        if (!o->force)
            return ft_fail(err, "%s: already holds %s; choose an empty directory or pass "
                           "--force to replace the adapter", o->out_dir, names[i]);
        if (remove(p) != 0)
            return ft_fail(err, "%s: cannot remove: %s", p, strerror(errno));
    }
    return 0;
}

int cv_adapter_export(const cv_export_opts *o, uint64_t *moved, ft_error *err)
{
    ft_h5file h;
    ft_model_config c;
    ft_lora_ckpt lc = { 0 };
    int rc = cv_open_model(&h, o->in, &c, err);
    const bool opened = h.id >= 0;
    bool bf16 = false, have_lora = false;
    if (!rc && !ft_lora_ckpt_is(&h))
        rc = ft_fail(err, "%s has no /lora group: it is not a LoRA checkpoint (export it "
                     "without --adapter)", o->in);
    if (!rc)
        rc = ft_lora_ckpt_read(&h, &c, "/model", &lc, err);
    have_lora = !rc;
    rc = rc || all_bf16(&h, &lc.layout, &bf16, err);
    const ft_st_dtype out = strcmp(o->dtype, "bf16") == 0 || (strcmp(o->dtype, "auto") == 0 && bf16)
                                ? FT_ST_BF16 : FT_ST_F32;
    const char *base = o->base ? o->base : lc.base_weights;
    h5_source src = { &h, &lc.layout };
    rc = rc || prepare_adapter_dir(o, err) ||
         ft_peft_adapter_write(o->out_dir, &lc.layout, &lc.lora, base, out, read_from_h5, &src,
                               err);
    if (!rc) {
        *moved = lc.layout.total_numel * ft_st_dtype_size(out);
        if (!o->common.quiet)
        {
            char shown[4200];
            ft_path_join(shown, sizeof shown, o->out_dir, "");
            printf("exported adapter %s -> %s: %d tensors, rank %d, alpha %g, targets %s, "
                   "%lld parameters, %s, base %s\n", o->in, shown, lc.layout.total_tensors,
                   lc.lora.rank, lc.lora.alpha, lc.targets, (long long)lc.layout.total_numel,
                   out == FT_ST_BF16 ? "bf16" : "fp32", base[0] ? base : "(none)");
        }
    }
    if (have_lora)
        ft_lora_ckpt_free(&lc);
    if (opened) {
        ft_error cerr;
        ft_h5_close(&h, &cerr);
    }
    return rc ? -1 : 0;
}
