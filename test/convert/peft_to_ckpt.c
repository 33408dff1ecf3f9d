/* Test helper: a PEFT adapter directory -> a LoRA checkpoint (doc/formats.md, "LoRA
 * checkpoint"), until the trainer writes them; and the reader -> writer round trip.
 *
 *   peft_to_ckpt PEFT_DIR BASE.h5 OUT.h5 [--bf16] [--no-hash] [--base-hash HEX]
 *       reads PEFT_DIR for the base's shape (io/peft_adapter.h) and writes OUT.h5:
 *       /config of BASE.h5, /model = the adapter tensors (fp32, or bf16), /lora with
 *       rank, alpha, dropout, targets, base_weights = BASE.h5 and base_hash = the base's
 *       identity (or HEX; none with --no-hash)
 *   peft_to_ckpt --roundtrip PEFT_DIR BASE.h5 OUT_DIR
 *       reads PEFT_DIR and writes it again (fp32) into OUT_DIR
 *
 * Errors: one line "peft_to_ckpt: error: ..." and exit 1 (usage: 2). */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/peft_adapter.h"
#include "io/weights.h"
#include "io/weights_identity.h"

static int write_i32_attr(hid_t loc, const char *name, int v, ft_error *err)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, H5T_NATIVE_INT, &v) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(s);
    return rc ? ft_fail(err, "cannot write attribute %s", name) : 0;
}

static int write_lora_group(const ft_h5file *f, const ft_peft_adapter *a, const char *base,
                            const char *hash, ft_error *err)
{
    char targets[256] = "";
    for (int s = 0; s < FT_LORA_N_SITES; s++)
        if (ft_lora_has_site(&a->lora, (ft_lora_site)s))
            snprintf(targets + strlen(targets), sizeof targets - strlen(targets), "%s%s",
                     targets[0] ? "," : "", ft_lora_site_hf_name(&a->layout.config, s));
    hid_t g = H5Gcreate2(f->id, "/lora", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return ft_fail(err, "%s: cannot create /lora", f->path);
    int rc = write_i32_attr(g, "rank", a->lora.rank, err) ||
             ft_h5_attr_write_f64(f, g, "alpha", a->lora.alpha, err) ||
             ft_h5_attr_write_f64(f, g, "dropout", a->lora.dropout, err) ||
             ft_h5_attr_write_str(f, g, "targets", targets, err) ||
             ft_h5_attr_write_str(f, g, "base_weights", base, err) ||
             (hash && ft_h5_attr_write_str(f, g, "base_hash", hash, err));
    H5Gclose(g);
    return rc ? -1 : 0;
}

static int to_checkpoint(const ft_peft_adapter *a, const char *base, const char *out, bool bf16,
                         const char *hash, ft_error *err)
{
    ft_h5file f;
    if (ft_h5_create(&f, out, MPI_COMM_SELF, err))
        return -1;
    int rc = ft_h5_write_kind(&f, "checkpoint", err) ||
             ft_weights_write_config(&f, &a->layout.config, err) ||
             ft_weights_create_tensors(&f, "/model", &a->layout, bf16 ? FT_FILE_BF16 : FT_FILE_F32,
                                       err);
    for (int u = 0; u < a->layout.n_units && !rc; u++) {
        const ft_unit_layout *ul = &a->layout.units[u];
        float *buf = malloc(ul->numel * sizeof *buf);
        rc = !buf || ft_peft_adapter_read_range(a, ul, 0, ul->numel, buf, err) ||
             ft_weights_write_range(&f, "/model", ul, 0, ul->numel, buf, err);
        free(buf);
    }
    rc = rc || write_lora_group(&f, a, base, hash, err);
    ft_error cerr;
    if (ft_h5_close(&f, &cerr) && !rc)
        rc = ft_fail(err, "%s", cerr.msg);
    return rc ? -1 : 0;
}

static int from_reader(void *ctx, const ft_tensor_info *t, float *dst, ft_error *err)
{
    return ft_peft_adapter_read_tensor(ctx, t, dst, err);
}

static int run(int argc, char **argv, ft_error *err)
{
    bool roundtrip = false, bf16 = false, no_hash = false;
    const char *pos[3] = { 0 }, *hash_arg = NULL;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--roundtrip") == 0)
            roundtrip = true;
        else if (strcmp(argv[i], "--bf16") == 0)
            bf16 = true;
        else if (strcmp(argv[i], "--no-hash") == 0)
            no_hash = true;
        else if (strcmp(argv[i], "--base-hash") == 0 && i + 1 < argc)
            hash_arg = argv[++i];
        else if (n < 3)
            pos[n++] = argv[i];
        else
            n = 4;
    }
    if (n != 3) {
        fprintf(stderr, "usage: peft_to_ckpt [--roundtrip] [--bf16] [--no-hash] "
                "[--base-hash HEX] PEFT_DIR BASE.h5 OUT\n");
        return 2;
    }
    ft_h5file bf;
    ft_model_config c;
    ft_model_layout bl = { 0 };
    char ident[FT_WEIGHTS_IDENTITY_LEN] = "";
    if (ft_h5_open(&bf, pos[1], MPI_COMM_SELF, err))
        return 1;
    int rc = ft_weights_read_config(&bf, &c, err) || ft_model_layout_build(&bl, &c, err) ||
             (!no_hash && !hash_arg && ft_weights_identity(&bf, "/model", &bl, ident, err));
    ft_error cerr;
    ft_h5_close(&bf, &cerr);
    ft_model_layout_free(&bl);
    if (rc)
        return 1;
    ft_peft_adapter a;
    if (ft_peft_adapter_open(&a, pos[0], &c, err))
        return 1;
    if (roundtrip && mkdir(pos[2], 0755) != 0 && errno != EEXIST)
        rc = ft_fail(err, "%s: cannot create: %s", pos[2], strerror(errno));
    else if (roundtrip)
        rc = ft_peft_adapter_write(pos[2], &a.layout, &a.lora, a.base_model, FT_ST_F32,
                                   from_reader, &a, err);
    else
        rc = to_checkpoint(&a, pos[1], pos[2], bf16, no_hash ? NULL : hash_arg ? hash_arg : ident,
                           err);
    ft_peft_adapter_close(&a);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    ft_error err = { { 0 }, 0 };
    int rc = run(argc, argv, &err);
    if (rc == 1)
        fprintf(stderr, "peft_to_ckpt: error: %s\n", err.msg);
    MPI_Finalize();
    return rc;
}
