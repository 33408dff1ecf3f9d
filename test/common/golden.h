/* Reading the Hugging Face golden files (test/data/hf, test/reference/README.md): the
 * batch, datasets, the AdamW settings and the error measure the tests share. */
#ifndef FT_TEST_GOLDEN_H
#define FT_TEST_GOLDEN_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "config/run_config.h"
#include "io/h5file.h"

/* The golden's /batch: B rows of T + 1 tokens, the loss mask and document ids. */
typedef struct golden_batch {
    int B, T;
    uint32_t *tokens;
    uint8_t *mask;
    int32_t *segment;
    long n_targets; /* ones of the mask over columns 1..T */
} golden_batch;

/* name (a full path in the file) into buf as type; fails the test when absent. */
static inline void golden_read(const ft_h5file *f, const char *name, hid_t type, void *buf)
{
    hid_t d = H5Dopen2(f->id, name, H5P_DEFAULT);
    if (d < 0)
        fail_msg("%s: no dataset %s", f->path, name);
    assert_true(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(d);
}

static inline void golden_batch_read(const ft_h5file *f, golden_batch *b)
{
    hid_t d = H5Dopen2(f->id, "/batch/tokens", H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t s = H5Dget_space(d);
    hsize_t dims[2];
    H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    H5Dclose(d);
    b->B = (int)dims[0];
    b->T = (int)dims[1] - 1;
    const size_t cells = dims[0] * dims[1];
    b->tokens = malloc(cells * sizeof *b->tokens);
    b->mask = malloc(cells);
    b->segment = malloc(cells * sizeof *b->segment);
    golden_read(f, "/batch/tokens", H5T_NATIVE_UINT32, b->tokens);
    golden_read(f, "/batch/loss_mask", H5T_NATIVE_UINT8, b->mask);
    golden_read(f, "/batch/segment", H5T_NATIVE_INT32, b->segment);
    b->n_targets = 0;
    for (int i = 0; i < b->B; i++)
        for (int j = 1; j <= b->T; j++)
            b->n_targets += b->mask[(size_t)i * (b->T + 1) + j] != 0;
}

static inline void golden_batch_free(golden_batch *b)
{
    free(b->tokens);
    free(b->mask);
    free(b->segment);
}

/* /expected/adamw's attributes: lr, betas, eps, weight decay (constant schedule). */
static inline ft_optimizer_config golden_adamw(const ft_h5file *f)
{
    ft_error err;
    ft_optimizer_config oc = { .type = FT_OPT_ADAMW, .schedule = FT_SCHED_CONSTANT };
    hid_t a = H5Gopen2(f->id, "/expected/adamw", H5P_DEFAULT);
    assert_true(a >= 0);
    assert_int_equal(ft_h5_attr_read_f64(f, a, "lr", &oc.lr, &err) ||
                         ft_h5_attr_read_f64(f, a, "beta1", &oc.beta1, &err) ||
                         ft_h5_attr_read_f64(f, a, "beta2", &oc.beta2, &err) ||
                         ft_h5_attr_read_f64(f, a, "eps", &oc.eps, &err) ||
                         ft_h5_attr_read_f64(f, a, "weight_decay", &oc.weight_decay, &err),
                     0);
    H5Gclose(a);
    return oc;
}

/* max |a - b| / max |b| over n values: the goldens' error measure */
static inline double golden_rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)a[i] - b[i]));
        den = fmax(den, fabs((double)b[i]));
    }
    return den > 0 ? num / den : num;
}

#endif
