/* The frozen engine (ft_engine_options.frozen, src/shard/engine_frozen.c) against the
 * trainable one, on the ranks it is started with (test_engine_frozen.sh: 1, 2, 3) and
 * on the backend named by argv[1] ("cpu", or "cuda": the CUDA backend with the NCCL
 * communicator, on a GPU or the CPU execution harness).
 *
 * For ZeRO stages 0-3 x the three precision policies (fp32; the bf16 recipe; fp32 with
 * model.param_dtype bf16) x an untied and a tied model, a frozen and a trainable engine
 * of the same options are filled alike (ft_engine_init_random from one seed; ft_engine_load
 * from an fp32 and from a bf16 weights file whose values are not bf16-exact) and must
 * hand out the same bits through the parameter source (the model's acquire order of a
 * training pass, the tied head holding the embedding) and through
 * ft_engine_download_params. The frozen engine's memory is exactly its working
 * parameters (grads = optimizer = host = 0; params, gather pool and load staging by
 * formula), equal to ft_engine_estimate as created; offload_optimizer changes nothing.
 * The load staging is released when a fill ends (scratch 0, the backend holding that
 * much less) and allocated again by the next fill, which loads the same values. Its fields:
 * PARAMS only; write_field(PARAMS) writes the working values (read back bitwise),
 * read_field(PARAMS) restores them; the training calls fail with a message naming the
 * frozen engine, and its source has no grads/grad_done. check_finite finds nothing in
 * clean values, and in values with NaN and Inf in several units, tensors and ranks' slices
 * names the lowest unit and its lowest such tensor on every rank. */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "io/h5file.h"
#include "io/weights.h"
#include "model/layout.h"
#include "shard/engine.h"
#include "engine_rig.h"

static ft_model_config tiny_config(bool tied)
{
    ft_model_config c = { .vocab_size = 37, .hidden_size = 32, .intermediate_size = 48,
                          .num_hidden_layers = 2, .num_attention_heads = 4,
                          .num_key_value_heads = 2, .head_dim = 8,
                          .max_position_embeddings = 64, .rms_norm_eps = 1e-5,
                          .rope_theta = 30000.0, .bos_token_id = -1, .eos_token_id = -1,
                          .tie_word_embeddings = tied };
    return c;
}

typedef struct policy {
    const char *name;
    ft_precision p;
} policy;

static ft_engine *make_engine(rig *r, const ft_model_layout *l, int stage, ft_precision p,
                              bool frozen, bool offload)
{
    ft_error err;
    ft_engine_options o = { .zero_stage = stage, .precision = p, .optimizer = FT_OPT_ADAMW,
                            .offload_optimizer = offload, .frozen = frozen };
    ft_engine *e = NULL;
    if (ft_engine_create(&e, l, r->be, r->comm, &o, &err))
        die("ft_engine_create", &err);
    return e;
}

/* ---------------------------------------------------------------- weights files */

/* An fp32 and a bf16 weights file of the layout, from a trainable fp32 engine's random
 * init (std 0.2: values with low mantissa bits set, so rounding to bf16 shows). */
static void write_weights(rig *r, const ft_model_layout *l, const char *path, ft_file_dtype dt)
{
    ft_error err;
    ft_engine *e = make_engine(r, l, 1, ft_precision_resolve(FT_DTYPE_F32, FT_DTYPE_F32,
                                                             FT_DTYPE_F32), false, false);
    ft_h5file f;
    if (ft_engine_init_random(e, 11, 0.2, &err) || ft_h5_create(&f, path, MPI_COMM_WORLD, &err) ||
        ft_weights_create_tensors(&f, "/model", l, dt, &err) ||
        ft_engine_save(e, &f, "/model", &err) || ft_h5_close(&f, &err))
        die(path, &err);
    ft_engine_free(e);
}

typedef enum fill { FILL_RANDOM, FILL_F32_FILE, FILL_BF16_FILE, N_FILLS } fill;
static const char *const fill_names[] = { "init_random", "load fp32 file", "load bf16 file" };
static const char *const fill_files[] = { NULL, "w_f32.h5", "w_bf16.h5" };

static void fill_engine(ft_engine *e, fill how)
{
    ft_error err;
    if (how == FILL_RANDOM) {
        if (ft_engine_init_random(e, 7, 0.2, &err))
            die("ft_engine_init_random", &err);
        return;
    }
    ft_h5file f;
    if (ft_h5_open(&f, fill_files[how], MPI_COMM_WORLD, &err) ||
        ft_engine_load(e, &f, "/model", &err) || ft_h5_close(&f, &err))
        die(fill_files[how], &err);
}

/* ---------------------------------------------------------------- comparisons */

/* The acquires of a training pass, as model.c makes them: embedding, blocks, head
 * (holding the embedding too when tied), blocks in reverse, embedding. For each, the
 * unit's bits from a and b (numel x esize bytes) must be equal. */
static int same_through_source(rig *r, const ft_model_layout *l, ft_engine *a, ft_engine *b,
                               size_t esize)
{
    const int L = l->config.num_hidden_layers, head = ft_layout_head_unit(l);
    const bool tied = l->config.tie_word_embeddings;
    int order[64], n = 0;
    order[n++] = 0;
    for (int i = 0; i < L; i++)
        order[n++] = ft_layout_block_unit(i);
    order[n++] = head;
    if (tied)
        order[n++] = 0;
    for (int i = L - 1; i >= 0; i--)
        order[n++] = ft_layout_block_unit(i);
    order[n++] = 0;
    ft_param_source sa = ft_engine_param_source(a), sb = ft_engine_param_source(b);
    sa.plan(sa.ctx, order, n);
    sb.plan(sb.ctx, order, n);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        const int u = order[i];
        if (tied && u == 0 && i > 0 && order[i - 1] == head)
            continue; /* acquired with the head */
        const int with_emb = tied && u == head;
        const void *pa = sa.acquire(sa.ctx, u), *pb = sb.acquire(sb.ctx, u);
        const void *ea = with_emb ? sa.acquire(sa.ctx, 0) : NULL;
        const void *eb = with_emb ? sb.acquire(sb.ctx, 0) : NULL;
        const int units[2] = { u, 0 };
        const void *ptr_a[2] = { pa, ea }, *ptr_b[2] = { pb, eb };
        for (int k = 0; k < (with_emb ? 2 : 1); k++) {
            const size_t bytes = l->units[units[k]].numel * esize;
            if (!ptr_a[k] || !ptr_b[k]) {
                ok = 0;
                continue;
            }
            unsigned char *ha = malloc(bytes), *hb = malloc(bytes);
            r->be->ops->download(r->be, ha, ptr_a[k], bytes);
            r->be->ops->download(r->be, hb, ptr_b[k], bytes);
            ok &= memcmp(ha, hb, bytes) == 0;
            free(ha);
            free(hb);
        }
        if (with_emb) {
            sa.release(sa.ctx, 0);
            sb.release(sb.ctx, 0);
        }
        sa.release(sa.ctx, u);
        sb.release(sb.ctx, u);
    }
    ft_error err;
    if (ft_engine_status(a, &err) || ft_engine_status(b, &err))
        die("parameter source", &err);
    return ok;
}

static int same_downloads(const ft_model_layout *l, ft_engine *a, ft_engine *b)
{
    int ok = 1;
    ft_error err;
    for (int u = 0; u < l->n_units; u++) {
        const size_t n = l->units[u].numel;
        float *ha = malloc(n * sizeof(float)), *hb = malloc(n * sizeof(float));
        if (ft_engine_download_params(a, u, ha, &err) || ft_engine_download_params(b, u, hb, &err))
            die("ft_engine_download_params", &err);
        ok &= memcmp(ha, hb, n * sizeof(float)) == 0;
        free(ha);
        free(hb);
    }
    return ok;
}

/* ---------------------------------------------------------------- memory */

static ft_engine_memory expected_memory(const ft_model_layout *l, ft_engine *e, int stage,
                                        ft_precision p)
{
    const bool bits = p.weights == FT_DTYPE_BF16, rounds = p.params == FT_DTYPE_BF16;
    ft_engine_memory m = { 0 };
    size_t max_padded = 0;
    for (int u = 0; u < l->n_units; u++) {
        const size_t padded = ft_engine_padded_unit(e, u), shard = padded / (size_t)nranks;
        m.params += stage <= 2 ? padded * (bits ? 2 : 4) : shard * (rounds ? 2 : 4);
        if (padded > max_padded)
            max_padded = padded;
    }
    const size_t max_shard = max_padded / (size_t)nranks;
    const size_t slots = l->config.tie_word_embeddings ? 3 : 2;
    if (stage == 3)
        m.gathered = slots * max_padded * ((bits ? 0 : 4) + (rounds ? 2 : 0));
    if (rounds)
        m.scratch = max_shard * 4 + (stage <= 2 && !bits ? max_shard * 2 : 0);
    return m;
}

static int same_memory(ft_engine_memory a, ft_engine_memory b)
{
    return a.params == b.params && a.grads == b.grads && a.optimizer == b.optimizer &&
           a.gathered == b.gathered && a.scratch == b.scratch && a.host == b.host;
}

/* f has been filled once; memory as created is the formula's and the estimate's, and
 * after a fill the load staging (the frozen engine's only scratch) is gone. */
static void check_memory(rig *r, const ft_model_layout *l, ft_engine *f, int stage, ft_precision p,
                         fill how, const char *tag)
{
    ft_error err;
    const ft_engine_memory want = expected_memory(l, f, stage, p);
    ft_engine_memory want_filled = want;
    want_filled.scratch = 0;
    const ft_engine_memory got = ft_engine_memory_usage(f);
    check(got.grads == 0 && got.optimizer == 0 && got.host == 0,
          "%s: grads %zu, optimizer %zu, host %zu bytes (want 0)", tag, got.grads, got.optimizer,
          got.host);
    check(same_memory(got, want_filled),
          "%s: memory after the fill: params %zu gathered %zu scratch %zu, want %zu %zu %zu", tag,
          got.params, got.gathered, got.scratch, want_filled.params, want_filled.gathered,
          want_filled.scratch);
    ft_engine *fresh = make_engine(r, l, stage, p, true, false);
    const ft_engine_memory created = ft_engine_memory_usage(fresh);
    check(same_memory(created, want),
          "%s: memory as created: params %zu gathered %zu scratch %zu, want %zu %zu %zu", tag,
          created.params, created.gathered, created.scratch, want.params, want.gathered,
          want.scratch);
    /* the backend gets the staging back when the fill ends */
    const size_t before = r->be->bytes_in_use;
    fill_engine(fresh, how);
    check(before - r->be->bytes_in_use == want.scratch,
          "%s: the fill released %zu backend bytes, want the staging's %zu", tag,
          before - r->be->bytes_in_use, want.scratch);
    ft_engine_free(fresh);
    ft_engine_options o = { .zero_stage = stage, .precision = p, .optimizer = FT_OPT_ADAMW,
                            .frozen = true };
    ft_engine_memory est;
    if (ft_engine_estimate(l, nranks, &o, &est, &err))
        die("ft_engine_estimate", &err);
    check(same_memory(est, created), "%s: estimate params %zu gathered %zu scratch %zu differs",
          tag, est.params, est.gathered, est.scratch);
    /* offload_optimizer is ignored */
    o.offload_optimizer = true;
    ft_engine_memory est_off;
    if (ft_engine_estimate(l, nranks, &o, &est_off, &err))
        die("ft_engine_estimate", &err);
    ft_engine *off = make_engine(r, l, stage, p, true, true);
    check(same_memory(est_off, created) && same_memory(ft_engine_memory_usage(off), created),
          "%s: offload_optimizer changes a frozen engine's memory", tag);
    ft_engine_free(off);
}

/* ---------------------------------------------------------------- fields and refusals */

static int refused(int rc, const ft_error *err)
{
    return rc != 0 && strstr(err->msg, "frozen") != NULL;
}

static void check_refusals(ft_engine *f, const char *tag)
{
    ft_error err;
    double norm;
    ft_engine_finite fin;
    ft_optimizer_config oc = { .type = FT_OPT_ADAMW, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8 };
    const ft_param_source s = ft_engine_param_source(f);
    check(s.grads == NULL && s.grad_done == NULL, "%s: the source has grads/grad_done", tag);
    check(ft_engine_has_field(f, FT_STATE_PARAMS) && !ft_engine_has_field(f, FT_STATE_MASTER) &&
              !ft_engine_has_field(f, FT_STATE_M) && !ft_engine_has_field(f, FT_STATE_V),
          "%s: has_field is not PARAMS only", tag);
    ft_engine_zero_grads(f); /* a no-op */
    check(refused(ft_engine_reduce_grads(f, &err), &err), "%s: reduce_grads not refused", tag);
    check(refused(ft_engine_grad_norm(f, &norm, &err), &err), "%s: grad_norm not refused", tag);
    check(refused(ft_engine_step(f, &oc, 1e-3, 1.0, &err), &err), "%s: step not refused", tag);
    check(ft_engine_check_finite(f, &fin, &err) == 0 && fin.unit == -1 && fin.tensor == -1 &&
              fin.what == 0,
          "%s: check_finite of clean values: unit %d tensor %d what %d", tag, fin.unit,
          fin.tensor, fin.what);
    check(refused(ft_engine_write_field(f, NULL, "/m", FT_STATE_M, NULL, &err), &err),
          "%s: write_field(M) not refused", tag);
    check(refused(ft_engine_read_field(f, NULL, "/m", FT_STATE_MASTER, NULL, &err), &err),
          "%s: read_field(MASTER) not refused", tag);
}

/* Values with NaN/Inf planted at (kind, layer, tensor, element of the tensor): the last
 * element of block 1's tensor 2 (a later rank's slice when the unit is split), the first
 * of its tensor 3 (rank 0's), and the head's first. The lowest is block 1, tensor 2. */
typedef struct poison {
    ft_unit_kind kind;
    int layer, tensor;
    long long element; /* -1: the tensor's last */
    float value;
} poison;

static int poisoned_fill(void *ctx, const ft_unit_layout *u, size_t begin, size_t end,
                         float *dst, ft_error *err)
{
    const poison *p = ctx;
    (void)err;
    for (size_t i = begin; i < end; i++)
        dst[i - begin] = 0.01f * (float)(i % 7) - 0.03f;
    for (; p->tensor >= 0; p++) {
        if (p->kind != u->kind || (u->kind == FT_UNIT_BLOCK && p->layer != u->layer))
            continue;
        const ft_tensor_info *t = &u->tensors[p->tensor];
        const size_t at = t->offset + (p->element < 0 ? t->numel - 1 : (size_t)p->element);
        if (at >= begin && at < end)
            dst[at - begin] = p->value;
    }
    return 0;
}

static void check_nonfinite(rig *r, const ft_model_layout *l, int stage, ft_precision p,
                            const char *tag)
{
    const poison planted[] = {
        { FT_UNIT_BLOCK, 1, 2, -1, NAN },
        { FT_UNIT_BLOCK, 1, 3, 0, INFINITY },
        { FT_UNIT_HEAD, 0, 0, 0, -INFINITY },
        { FT_UNIT_EMBED, 0, -1, 0, 0.0f }, /* end */
    };
    ft_error err;
    ft_engine *f = make_engine(r, l, stage, p, true, false);
    ft_engine_finite fin;
    if (ft_engine_init_from(f, poisoned_fill, (void *)planted, &err) ||
        ft_engine_check_finite(f, &fin, &err))
        die("poisoned fill", &err);
    check(fin.unit == ft_layout_block_unit(1) && fin.tensor == 2 &&
              fin.what == FT_ENGINE_NONFINITE_PARAMS,
          "%s: check_finite of poisoned values: unit %d tensor %d what %d, want %d 2 %d", tag,
          fin.unit, fin.tensor, fin.what, ft_layout_block_unit(1), FT_ENGINE_NONFINITE_PARAMS);
    /* a clean fill after it clears the finding */
    fill_engine(f, FILL_F32_FILE);
    check(ft_engine_check_finite(f, &fin, &err) == 0 && fin.unit == -1,
          "%s: a clean refill still reports unit %d", tag, fin.unit);
    ft_engine_free(f);
}

/* write_field(PARAMS) into an fp32 file holds exactly the working values, and
 * read_field(PARAMS) of it into a fresh frozen engine restores them. */
static void check_fields(rig *r, const ft_model_layout *l, ft_engine *f, int stage, ft_precision p,
                         size_t esize, const char *tag)
{
    ft_error err;
    ft_h5file h;
    if (ft_h5_create(&h, "fields.h5", MPI_COMM_WORLD, &err) ||
        ft_weights_create_tensors(&h, "/model", l, FT_FILE_F32, &err) ||
        ft_engine_write_field(f, &h, "/model", FT_STATE_PARAMS, NULL, &err) ||
        ft_h5_close(&h, &err))
        die("write_field(PARAMS)", &err);
    if (ft_h5_open(&h, "fields.h5", MPI_COMM_WORLD, &err))
        die("fields.h5", &err);
    int ok = 1;
    for (int u = 0; u < l->n_units; u++) {
        const size_t n = l->units[u].numel;
        float *file = malloc(n * sizeof(float)), *mem = malloc(n * sizeof(float));
        if (ft_weights_read_range(&h, "/model", &l->units[u], 0, n, file, &err) ||
            ft_engine_download_params(f, u, mem, &err))
            die("reading fields.h5 back", &err);
        ok &= memcmp(file, mem, n * sizeof(float)) == 0;
        free(file);
        free(mem);
    }
    check(ok, "%s: write_field(PARAMS) differs from the working values", tag);
    ft_engine *g = make_engine(r, l, stage, p, true, false);
    if (ft_engine_read_field(g, &h, "/model", FT_STATE_PARAMS, NULL, &err) || ft_h5_close(&h, &err))
        die("read_field(PARAMS)", &err);
    check(same_through_source(r, l, f, g, esize), "%s: read_field(PARAMS) does not restore", tag);
    ft_engine_free(g);
}

/* ---------------------------------------------------------------- main */

static void run_model(rig *r, bool tied)
{
    ft_error err;
    ft_model_layout l;
    ft_model_config c = tiny_config(tied);
    if (ft_model_layout_build(&l, &c, &err))
        die("ft_model_layout_build", &err);
    write_weights(r, &l, fill_files[FILL_F32_FILE], FT_FILE_F32);
    write_weights(r, &l, fill_files[FILL_BF16_FILE], FT_FILE_BF16);
    const policy policies[] = {
        { "fp32", ft_precision_resolve(FT_DTYPE_F32, FT_DTYPE_F32, FT_DTYPE_F32) },
        { "bf16 recipe", ft_precision_resolve(FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_F32) },
        { "fp32 with param bf16", ft_precision_resolve(FT_DTYPE_F32, FT_DTYPE_BF16, FT_DTYPE_F32) },
    };
    for (int stage = 0; stage <= 3; stage++)
        for (size_t pi = 0; pi < sizeof policies / sizeof policies[0]; pi++) {
            const ft_precision p = policies[pi].p;
            const size_t esize = p.weights == FT_DTYPE_BF16 ? 2 : 4;
            for (int how = 0; how < N_FILLS; how++) {
                char tag[160];
                snprintf(tag, sizeof tag, "%s model, stage %d, %s, %s", tied ? "tied" : "untied",
                         stage, policies[pi].name, fill_names[how]);
                ft_engine *t = make_engine(r, &l, stage, p, false, false);
                ft_engine *f = make_engine(r, &l, stage, p, true, false);
                fill_engine(t, (fill)how);
                fill_engine(f, (fill)how);
                check(same_through_source(r, &l, t, f, esize), "%s: source differs", tag);
                check(same_downloads(&l, t, f), "%s: download_params differs", tag);
                /* a second fill allocates the released staging again: same values */
                fill_engine(f, (fill)how);
                check(same_through_source(r, &l, t, f, esize), "%s: a refill differs", tag);
                check(ft_engine_memory_usage(f).scratch == 0, "%s: a refill kept its staging",
                      tag);
                if (how == FILL_F32_FILE) {
                    check_memory(r, &l, f, stage, p, (fill)how, tag);
                    check_refusals(f, tag);
                    check_nonfinite(r, &l, stage, p, tag);
                    check_fields(r, &l, f, stage, p, esize, tag);
                }
                ft_engine_free(t);
                ft_engine_free(f);
            }
        }
    ft_model_layout_free(&l);
}


int main(int argc, char **argv)
{
    rig r;
    if (rig_start(&argc, &argv, &r))
        return 77;
    run_model(&r, false);
    run_model(&r, true);
    return rig_finish(&r);
}
