/* ftmpi-convert merge: a LoRA checkpoint + its base weights -> a Hugging Face model
 * directory with the adapters merged in (W += alpha/r B A, model/lora_merge.h).
 *
 * ft_lora_merge_to_weights (io/lora_ckpt.h) checks the base against the checkpoint and
 * writes the merged model unit by unit into a temporary weights file inside OUT_DIR (a
 * block and its adapters in memory at a time), which export turns into the HF
 * directory (names, sharding, config.json, tokenizer) before it is removed.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/lora_ckpt.h"
#include "tools/ftmpi_convert.h"

#define MERGE_TMP_NAME ".ftmpi-merge.h5"

static int run_merge(cv_export_opts *o, const char *base, uint64_t *moved, ft_error *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/" MERGE_TMP_NAME, o->out_dir);
    if (cv_prepare_dir(o, err))
        return -1;
    unlink(tmp); /* a killed merge's leftover */
    const ft_lora_merge_options mo = {
        .base = base,
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
    if (!rc && !o->common.quiet)
        printf("merged %s (rank %d, alpha %g, targets %s) into %s -> %s/: %lld parameters, %s\n",
               o->in, r.rank, r.alpha, r.targets, r.base, o->out_dir, r.parameters,
               r.dtype == FT_FILE_BF16 ? "bf16" : "fp32");
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
