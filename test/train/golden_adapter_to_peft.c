/* Test tool: the initial adapters of a LoRA training golden
 * (test/data/hf/lora_bf16_train.h5: /adapter/<ftmpi adapter name> fp32, the lora
 * settings as /adapter's attributes rank, alpha, dropout, targets) as a PEFT adapter
 * directory, so a test seeds a run with model.adapter = DIR, the path users take,
 * without python at test time.
 *
 *   golden_adapter_to_peft GOLDEN.h5 OUT_DIR     (OUT_DIR must exist)
 *
 * Errors: one line "golden_adapter_to_peft: error: ..." and exit 1 (usage: 2). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "io/peft_adapter.h"
#include "io/weights.h"

typedef struct golden_src {
    const ft_h5file *f;
    const ft_model_layout *l;
} golden_src;

/* The fp32 values of adapter tensor t from the golden's /adapter group. */
static int read_adapter(void *ctx, const ft_tensor_info *t, float *dst, ft_error *err)
{
    const golden_src *s = ctx;
    int u, k;
    if (ft_model_layout_find(s->l, t->name, &u, &k))
        return ft_fail(err, "internal: %s is not in the adapter layout", t->name);
    return ft_weights_read_range(s->f, "/adapter", &s->l->units[u], t->offset,
                                 t->offset + t->numel, dst, err);
}

/* /adapter's rank, alpha, dropout and comma-separated targets, resolved for shape c. */
static int read_lora(const ft_h5file *f, const ft_model_config *c, ft_lora_config *lora,
                     ft_error *err)
{
    hid_t g = H5Gopen2(f->id, "/adapter", H5P_DEFAULT);
    if (g < 0)
        return ft_fail(err, "%s: no /adapter group (not a LoRA training golden)", f->path);
    int64_t rank = 0;
    double alpha = 0, dropout = 0;
    char targets[512];
    int rc = ft_h5_attr_read_i64(f, g, "rank", &rank, err) ||
             ft_h5_attr_read_f64(f, g, "alpha", &alpha, err) ||
             ft_h5_attr_read_f64(f, g, "dropout", &dropout, err) ||
             ft_h5_attr_read_str(f, g, "targets", targets, sizeof targets, err);
    H5Gclose(g);
    if (rc)
        return ft_fail_context(err, "%s: /adapter", f->path);
    char *names[FT_LORA_N_SITES + 1] = { 0 };
    int n = 0;
    for (char *save = NULL, *t = strtok_r(targets, ",", &save); t && n < FT_LORA_N_SITES;
         t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    return ft_lora_resolve(c, (int)rank, alpha, dropout, names, lora, err);
}

static int run(const char *golden, const char *out, ft_error *err)
{
    ft_h5file f;
    ft_model_config c;
    ft_lora_config lora;
    ft_model_layout l = { 0 };
    if (ft_h5_open(&f, golden, MPI_COMM_SELF, err))
        return -1;
    golden_src src = { &f, &l };
    int rc = ft_weights_read_config(&f, &c, err) || read_lora(&f, &c, &lora, err) ||
             ft_lora_layout_build(&l, &c, &lora, err) ||
             ft_weights_check_tensors(&f, "/adapter", &l, err) ||
             ft_peft_adapter_write(out, &l, &lora, "", FT_ST_F32, read_adapter, &src, err);
    ft_model_layout_free(&l);
    ft_error cerr;
    if (ft_h5_close(&f, &cerr) && !rc)
        rc = ft_fail(err, "%s", cerr.msg);
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: golden_adapter_to_peft GOLDEN.h5 OUT_DIR\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    ft_error err = { { 0 }, 0 };
    int rc = run(argv[1], argv[2], &err) ? 1 : 0;
    if (rc)
        fprintf(stderr, "golden_adapter_to_peft: error: %s\n", err.msg);
    MPI_Finalize();
    return rc;
}
