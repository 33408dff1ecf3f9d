/* ftmpi-convert merge: a LoRA checkpoint + its base weights -> a Hugging Face model
 * directory with the adapters merged in (W += alpha/r B A, model/lora_merge.h).
 *
 * ft_lora_merge_to_weights (io/lora_ckpt.h) checks the base against the checkpoint and
 * writes the merged model unit by unit into a temporary weights file inside OUT_DIR (a
 * block and its adapters in memory at a time), which export turns into the HF
 * directory (names, sharding, config.json, tokenizer) before it is removed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/lora_ckpt.h"
#include "tools/ftmpi_convert.h"
#include "util/path_join.h"

#define MERGE_TMP_NAME ".ftmpi-merge.h5"

static int run_merge(const cv_export_opts *o, uint64_t *moved, ft_error *err)
{
    char tmp[4200];
    ft_path_join(tmp, sizeof tmp, o->out_dir, MERGE_TMP_NAME);
    if (cv_prepare_dir(o, err))
        return -1;
    unlink(tmp); /* a killed merge's leftover */
    const ft_lora_merge_options mo = {
        .base = o->base,
        .group = "/model",
        .dtype = strcmp(o->dtype, "bf16") == 0   ? FT_FILE_BF16
                 : strcmp(o->dtype, "fp32") == 0 ? FT_FILE_F32 : -1,
        .buffer_bytes = o->common.buffer_bytes,
    };
    ft_lora_merge_result r;
    int rc = ft_lora_merge_to_weights(o->in, tmp, &mo, &r, err);
    if (!rc) {
        cv_export_opts e = *o;
        e.in = tmp;
        e.dtype = "auto"; /* the merged file is already in the output dtype */
        e.common.quiet = true;
        rc = cv_export_run(&e, moved, err);
    }
    unlink(tmp);
    char shown[4200];
    ft_path_join(shown, sizeof shown, o->out_dir, "");
    if (!rc && !o->common.quiet)
        printf("merged %s (rank %d, alpha %g, targets %s) into %s -> %s: %lld parameters, %s\n",
               o->in, r.rank, r.alpha, r.targets, r.base, shown, r.parameters,
               r.dtype == FT_FILE_BF16 ? "bf16" : "fp32");
    return rc ? -1 : 0;
}

int cv_merge_main(int argc, char **argv)
{
    cv_export_opts o; /* --base lands in o.base, which only an adapter export reads */
    int prc = cv_parse_export_opts(argc, argv, "merge", cv_usage_merge, false,
                                   "LORA_CHECKPOINT and OUT_DIR", &o);
    if (prc)
        return prc < 0 ? CV_EXIT_OK : prc;
    return cv_run_export(&o, "merge", run_merge);
}
