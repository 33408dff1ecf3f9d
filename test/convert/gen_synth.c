/* gen_synth OUT_DIR [options]: writes a synthetic Hugging Face Llama directory
 * (config.json, safetensors shards + index) of pseudo-random finite weights, for the
 * memory test and bench/convert.sh. Streams through a 1 MiB buffer, so models of
 * any size can be generated. Not a model anyone would train: only the format
 * matters.
 *
 *   --hidden H --inter I --layers L --vocab V --heads N --kv K
 *   --dtype bf16|fp32   (default bf16)
 *   --shard-size BYTES  (default 2e9)
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/layout.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* Small finite values: sign, exponent 2^-8..2^-1, random mantissa. */
static void fill(void *buf, size_t n, ft_st_dtype dt)
{
    if (dt == FT_ST_BF16) {
        uint16_t *p = buf;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = next();
            p[i] = (uint16_t)(((r & 1) << 15) | ((119 + (r >> 1) % 8) << 7) | ((r >> 8) & 0x7f));
        }
    } else {
        uint32_t *p = buf;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = next();
            p[i] = (uint32_t)(((r & 1) << 31) | ((119 + (r >> 1) % 8) << 23) |
                              ((r >> 8) & 0x7fffff));
        }
    }
}

int main(int argc, char **argv)
{
    ft_model_config c = { .vocab_size = 1024, .hidden_size = 256, .intermediate_size = 704,
                          .num_hidden_layers = 4, .num_attention_heads = 8,
                          .num_key_value_heads = 4, .max_position_embeddings = 2048,
                          .rms_norm_eps = 1e-5, .rope_theta = 500000.0, .bos_token_id = 1,
                          .eos_token_id = 2 };
    ft_st_dtype dt = FT_ST_BF16;
    double shard_size = 2e9;
    static const struct option longopts[] = {
        { "hidden", 1, 0, 'H' }, { "inter", 1, 0, 'I' }, { "layers", 1, 0, 'L' },
        { "vocab", 1, 0, 'V' }, { "heads", 1, 0, 'N' }, { "kv", 1, 0, 'K' },
        { "dtype", 1, 0, 'd' }, { "shard-size", 1, 0, 's' }, { 0, 0, 0, 0 },
    };
    int o;
    while ((o = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (o) {
        case 'H': c.hidden_size = atoi(optarg); break;
        case 'I': c.intermediate_size = atoi(optarg); break;
        case 'L': c.num_hidden_layers = atoi(optarg); break;
        case 'V': c.vocab_size = atoi(optarg); break;
        case 'N': c.num_attention_heads = atoi(optarg); break;
        case 'K': c.num_key_value_heads = atoi(optarg); break;
        case 'd': dt = strcmp(optarg, "fp32") == 0 ? FT_ST_F32 : FT_ST_BF16; break;
        case 's': shard_size = atof(optarg); break;
        default: return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: gen_synth OUT_DIR [--hidden H ...]\n");
        return 2;
    }
    const char *dir = argv[optind];
    c.head_dim = c.hidden_size / c.num_attention_heads;
    ft_error err;
    ft_model_layout l;
    mkdir(dir, 0755);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (ft_model_layout_build(&l, &c, &err) ||
        ft_hf_config_write(path, &c, dt == FT_ST_BF16 ? "bfloat16" : "float32", &err)) {
        fprintf(stderr, "gen_synth: %s\n", err.msg);
        return 1;
    }
    int n = 0;
    for (int u = 0; u < l.n_units; u++)
        n += l.units[u].n_tensors;
    const ft_tensor_info **ts = calloc((size_t)n, sizeof *ts);
    int *shard = calloc((size_t)n, sizeof *shard);
    int k = 0, n_shards = 1;
    double cur = 0;
    uint64_t total = 0;
    const size_t esz = ft_st_dtype_size(dt);
    for (int u = 0; u < l.n_units; u++)
        for (int t = 0; t < l.units[u].n_tensors; t++) {
            ts[k] = &l.units[u].tensors[t];
            double b = (double)(ts[k]->numel * esz);
            if (cur > 0 && cur + b > shard_size) {
                n_shards++;
                cur = 0;
            }
            cur += b;
            total += ts[k]->numel * esz;
            shard[k++] = n_shards - 1;
        }
    enum { BUF = 1 << 20 };
    void *buf = malloc(BUF);
    const char **names = calloc((size_t)n, sizeof *names), **files = calloc((size_t)n, sizeof *files);
    char (*fnames)[64] = calloc((size_t)n_shards, sizeof *fnames);
    for (int s = 0; s < n_shards; s++) {
        if (n_shards == 1)
            snprintf(fnames[s], sizeof fnames[s], "model.safetensors");
        else
            snprintf(fnames[s], sizeof fnames[s], "model-%05d-of-%05d.safetensors", s + 1,
                     n_shards);
        ft_st_spec *specs = calloc((size_t)n, sizeof *specs);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (shard[i] == s) {
                specs[m] = (ft_st_spec){ .name = ts[i]->name, .dtype = dt, .ndim = ts[i]->ndim };
                specs[m].shape[0] = (uint64_t)ts[i]->shape[0];
                specs[m].shape[1] = (uint64_t)ts[i]->shape[1];
                m++;
                names[i] = ts[i]->name;
                files[i] = fnames[s];
            }
        snprintf(path, sizeof path, "%s/%s", dir, fnames[s]);
        ft_st_writer w;
        static const char *const mk[] = { "format" }, *const mv[] = { "pt" };
        if (ft_st_writer_open(&w, path, specs, m, mk, mv, 1, &err)) {
            fprintf(stderr, "gen_synth: %s\n", err.msg);
            return 1;
        }
        free(specs);
        for (int i = 0; i < n; i++) {
            if (shard[i] != s)
                continue;
            uint64_t left = ts[i]->numel * esz;
            while (left > 0) {
                size_t chunk = left < BUF ? (size_t)left : BUF;
                fill(buf, chunk / esz, dt);
                if (ft_st_writer_append(&w, buf, chunk, &err)) {
                    fprintf(stderr, "gen_synth: %s\n", err.msg);
                    return 1;
                }
                left -= chunk;
            }
        }
        if (ft_st_writer_close(&w, &err)) {
            fprintf(stderr, "gen_synth: %s\n", err.msg);
            return 1;
        }
    }
    if (n_shards > 1) {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        if (ft_st_index_write(path, total, names, files, n, &err)) {
            fprintf(stderr, "gen_synth: %s\n", err.msg);
            return 1;
        }
    }
    printf("gen_synth: %s: %d tensors, %d shard(s), %.1f MB\n", dir, n, n_shards,
           (double)total / 1e6);
    free(buf);
    free(names);
    free(files);
    free(fnames);
    free(ts);
    free(shard);
    ft_model_layout_free(&l);
    return 0;
}
