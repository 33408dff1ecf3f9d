#include "train/finite_guard.h"

#include <math.h>
#include <stdio.h>

#include "io/peft_adapter.h"
#include "train/ckpt_dir.h"
#include "util/path_join.h"

/* "model.layers.3", "the adapters of model.layers.3", "the embedding", "the head": where
 * a unit's tensors are. */
static void unit_name(const ft_model_layout *l, int u, char *buf, size_t len)
{
    const ft_unit_layout *ul = &l->units[u];
    if (ul->kind == FT_UNIT_BLOCK)
        snprintf(buf, len, "model.layers.%d", ul->layer);
    else if (ul->kind == FT_UNIT_ADAPTER) /* LoRA: one unit per layer */
        snprintf(buf, len, "the adapters of model.layers.%d", ul->layer);
    else
        snprintf(buf, len, "%s (%s)", ul->kind == FT_UNIT_EMBED ? "the embedding" : "the head",
                 ul->n_tensors > 0 ? ul->tensors[0].name : "no tensors");
}

static const char *what_name(int what)
{
    return what == (FT_ENGINE_NONFINITE_PARAMS | FT_ENGINE_NONFINITE_OPTIMIZER)
               ? "the parameters and the optimizer state hold"
           : what == FT_ENGINE_NONFINITE_PARAMS ? "the parameters hold"
                                                : "the optimizer state holds";
}

/* The engine's finite check: -1 on error, 0 when every value is finite, 1 with the
 * first NaN/Inf named in first[160]: by its tensor (its HF name, which says the layer)
 * and, where the engine locates it (a trainable engine), the element ("model.layers.3.
 * mlp.up_proj.weight, element 1234"), else by the unit. */
static int find_nonfinite(ft_engine *e, const ft_model_layout *l, ft_engine_finite *f,
                          char *first, ft_error *err)
{
    if (ft_engine_check_finite(e, f, err))
        return -1;
    if (f->unit < 0)
        return 0;
    const ft_unit_layout *ul = &l->units[f->unit];
    if (f->tensor < 0 || f->tensor >= ul->n_tensors)
        unit_name(l, f->unit, first, 160);
    else if (f->element >= 0)
        snprintf(first, 160, "%s, element %lld", ul->tensors[f->tensor].name, f->element);
    else
        snprintf(first, 160, "%s", ul->tensors[f->tensor].name);
    return 1;
}

int ft_guard_before_write(ft_engine *e, const ft_model_layout *l, const char *what,
                          ft_error *err)
{
    ft_engine_finite f;
    char unit[160];
    const int found = find_nonfinite(e, l, &f, unit, err);
    if (found <= 0)
        return found;
    ft_fail(err, "%s: %s NaN or Inf (first in %s): not written, and `latest` and earlier files "
                 "are left as they were; the updates diverged: lower optimizer.lr or enable "
                 "grad_clip, then resume from the last checkpoint",
            what, what_name(f.what), unit);
    err->flags |= FT_ERR_SHARED;
    return -1;
}

/* The answer to NaN or Inf found on loading `file`: "<file>: <holder> NaN or Inf (first in
 * <first>)", a warning when allow_nonfinite (0), else the error with `advice` (-1). */
static int nonfinite_verdict(bool allow, FILE *out, ft_error *err, const char *file,
                             const char *holder, const char *first, const char *advice)
{
    if (allow) {
        if (out)
            fprintf(out, "ftmpi: warning: %s: %s NaN or Inf (first in %s); loaded because "
                         "allow_nonfinite = true\n", file, holder, first);
        return 0;
    }
    ft_fail(err, "%s: %s NaN or Inf (first in %s): %s, or set allow_nonfinite = true to load it "
                 "anyway (to inspect it)", file, holder, first, advice);
    err->flags |= FT_ERR_SHARED;
    return -1;
}

int ft_guard_after_load(ft_engine *e, const ft_model_layout *l, const char *path, bool allow,
                        FILE *out, long *last_ckpt_step, ft_error *err)
{
    ft_engine_finite f;
    char unit[160];
    const int found = find_nonfinite(e, l, &f, unit, err);
    if (found <= 0)
        return found;
    if (allow)
        *last_ckpt_step = -1;
    return nonfinite_verdict(allow, out, err, path, what_name(f.what), unit,
                             "training from it cannot work; resume from an earlier checkpoint");
}

int ft_guard_base_after_load(ft_engine *base, const ft_model_layout *l, const char *path,
                             bool allow, FILE *out, ft_error *err)
{
    ft_engine_finite f;
    char tensor[160];
    const int found = find_nonfinite(base, l, &f, tensor, err);
    if (found <= 0)
        return found;
    return nonfinite_verdict(allow, out, err, path, "the frozen base model's parameters hold",
                             tensor, "LoRA training on it cannot work; use a clean weights file "
                                     "(re-import the model with ftmpi-convert import)");
}

/* Where the first NaN/Inf the engine found in adapters seeded from a PEFT directory is in
 * that directory's file: "<PEFT key>, element <index in the file's tensor>", into first;
 * false when the engine did not locate it. The layouts' shapes are PEFT's ([rank, in],
 * [out, rank]); only GPT-NeoX's fused B orders its rows differently in the file
 * (io/peft_adapter.h), so its row is mapped back. */
static bool adapter_nonfinite_where(const ft_model_layout *l, const ft_model_config *base,
                                    const ft_engine_finite *f, char *first, size_t len)
{
    if (f->tensor < 0 || f->tensor >= l->units[f->unit].n_tensors || f->element < 0)
        return false;
    const ft_tensor_info *t = &l->units[f->unit].tensors[f->tensor];
    char key[512];
    if (ft_peft_key(base, t->name, key, sizeof key))
        return false;
    long long element = f->element;
    if (ft_peft_is_fused_b(t->name)) {
        const long long cols = t->shape[1], row = element / cols;
        for (long long hf = 0; hf < t->shape[0]; hf++)
            if (ft_peft_neox_row(base, hf) == row) {
                element = hf * cols + element % cols;
                break;
            }
    }
    snprintf(first, len, "%s, element %lld", key, element);
    return true;
}

int ft_guard_adapter_after_load(ft_engine *e, const ft_model_layout *l, const char *dir,
                                const ft_model_config *base, bool allow, FILE *out,
                                ft_error *err)
{
    ft_engine_finite f;
    char unit[160], where[640], file[4200];
    const int found = find_nonfinite(e, l, &f, unit, err);
    if (found <= 0)
        return found;
    if (!adapter_nonfinite_where(l, base, &f, where, sizeof where))
        snprintf(where, sizeof where, "%s", unit);
    ft_path_join(file, sizeof file, dir, FT_PEFT_WEIGHTS_NAME);
    return nonfinite_verdict(allow, out, err, file, "the adapters hold", where,
                             "LoRA training from them cannot work; use a clean adapter "
                             "directory (ftmpi-convert export --adapter writes one from a LoRA "
                             "checkpoint)");
}

bool ft_collapse_step(ft_collapse *c, double loss, double grad_norm, long vocab, long limit)
{
    /* uniform logits give exactly ln V; 1e-4 relative allows for the fp32 softmax */
    const double flat = log((double)vocab);
    const bool collapsed = grad_norm == 0.0 && vocab > 1 && fabs(loss - flat) <= 1e-4 * flat;
    c->run = collapsed ? c->run + 1 : 0;
    return limit > 0 && c->run == limit;
}

int ft_guard_nan_stop(ft_error *err, long step, double loss, double grad_norm, int skipped,
                      int max_skips, const char *checkpoint_dir, long last_ckpt_step)
{
    char ck[1200], path[1100];
    if (last_ckpt_step >= 0 && checkpoint_dir) {
        ft_ckpt_step_path(path, sizeof path, checkpoint_dir, last_ckpt_step);
        snprintf(ck, sizeof ck, "the last checkpoint, %s, holds only finite values (each is "
                 "checked when written or loaded)", path);
    }
    else
        snprintf(ck, sizeof ck, "no checkpoint was written or resumed from in this run");
    ft_fail(err, "step %ld: loss %g, grad norm %g is not finite (%d skipped steps, "
                 "max_nan_skips %d); lower optimizer.lr, enable grad_clip or check the data; %s",
            step, loss, grad_norm, skipped, max_skips, ck);
    err->flags |= FT_ERR_SHARED; /* global values: every rank stops here alike */
    return -1;
}

int ft_guard_collapsed(FILE *out, long step, long steps, double loss, int *exit_code)
{
    if (out) {
        fprintf(out, "ftmpi: step %ld: the run has collapsed: loss %.4f = ln(vocab_size) "
                     "(uniform predictions) with gradient norm 0 for %ld steps; it learns "
                     "nothing more: stopping with exit %d without checkpointing this step "
                     "(lower optimizer.lr and resume from the last checkpoint; "
                     "collapse_steps = 0 never stops)\n", step, loss, steps, FT_EXIT_COLLAPSED);
        fflush(out);
    }
    *exit_code = FT_EXIT_COLLAPSED;
    return 0;
}
