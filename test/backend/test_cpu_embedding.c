/* Embedding: forward is an exact row copy; backward is a scatter-add that
 * accumulates into the table (repeated ids included) and is bit-identical for
 * any thread count. The gradient is checked against finite differences of
 * L = sum r o out (linear, so |err| <= 1e-6 max|g| + 1e-6), and against an
 * in-order double sum. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "backend_test_util.h"

typedef struct emb_ctx {
    double *table, *r;
    const int32_t *ids;
    int tokens, dim;
} emb_ctx;

static double emb_objective(void *p)
{
    emb_ctx *c = p;
    double s = 0.0;
    for (int t = 0; t < c->tokens; t++)
        for (int j = 0; j < c->dim; j++)
            s += c->r[(size_t)t * c->dim + j] * c->table[(size_t)c->ids[t] * c->dim + j];
    return s;
}

static void test_embedding(void **state)
{
    (void)state;
    ft_backend *be = bt_backend_create();
    bt_rng rng = bt_rng_make(9);
    const int vocab = 50, dim = 150, tokens = 400; /* dim: 2 full column blocks + a partial one */
    size_t tn = (size_t)vocab * dim, on = (size_t)tokens * dim;
    float *table = malloc(tn * 4), *dtable0 = malloc(tn * 4), *r = malloc(on * 4);
    float *out = malloc(on * 4), *g1 = malloc(tn * 4), *g2 = malloc(tn * 4);
    int32_t *ids = malloc(tokens * 4);
    bt_fill_uniform(table, tn, &rng, -1, 1);
    bt_fill_uniform(dtable0, tn, &rng, -1, 1);
    bt_fill_uniform(r, on, &rng, -1, 1);
    for (int t = 0; t < tokens; t++)
        ids[t] = bt_rng_int(&rng, 10) < 3 ? 7 : bt_rng_int(&rng, vocab); /* id 7 repeats a lot */
    float *d_table = bt_upload(be, table, tn), *d_r = bt_upload(be, r, on);
    float *d_out = bt_upload(be, NULL, on), *d_dt = bt_upload(be, dtable0, tn);
    int32_t *d_ids = bt_upload_i32(be, ids, tokens);

    be->ops->embedding_fwd(be, FT_DTYPE_F32, d_out, d_table, d_ids, tokens, dim);
    bt_download(be, out, d_out, on);
    for (int t = 0; t < tokens; t++)
        assert_memory_equal(out + (size_t)t * dim, table + (size_t)ids[t] * dim, dim * 4);

    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    be->ops->embedding_bwd(be, FT_DTYPE_F32, FT_DTYPE_F32, d_dt, d_r, d_ids, tokens, dim);
    bt_download(be, g1, d_dt, tn);
    be->ops->upload(be, d_dt, dtable0, tn * 4);
    omp_set_num_threads(3);
    be->ops->embedding_bwd(be, FT_DTYPE_F32, FT_DTYPE_F32, d_dt, d_r, d_ids, tokens, dim);
    bt_download(be, g2, d_dt, tn);
    omp_set_num_threads(saved);
    assert_memory_equal(g1, g2, tn * 4);

    /* In-order fp32 sum, the order the backend promises: bit-exact. */
    float *want = bt_copy_floats(dtable0, tn);
    for (int t = 0; t < tokens; t++)
        for (int j = 0; j < dim; j++)
            want[(size_t)ids[t] * dim + j] += r[(size_t)t * dim + j];
    assert_memory_equal(g1, want, tn * 4);

    emb_ctx c = {bt_to_double(table, tn), bt_to_double(r, on), ids, tokens, dim};
    double *fd = malloc(tn * 8);
    bt_fd_gradient(fd, c.table, tn, 1e-3, emb_objective, &c);
    for (size_t i = 0; i < tn; i++)
        g1[i] -= dtable0[i];
    assert_true(bt_close("embedding dtable (FD)", g1, fd, tn, 1e-6, 1e-6));

    void *bufs[] = {d_table, d_r, d_out, d_dt, d_ids};
    for (int i = 0; i < 5; i++)
        be->ops->free(be, bufs[i]);
    free(table), free(dtable0), free(r), free(out), free(g1), free(g2), free(ids), free(want);
    free(c.table), free(c.r), free(fd);
    ft_backend_destroy(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
