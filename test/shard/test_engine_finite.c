/* ft_engine_check_finite of a trainable engine (src/shard/engine_finite.c) locates the
 * first NaN/Inf: the lowest unit, then the lowest element of that unit in the master or
 * either moment on any rank, as (tensor, element), the same on every rank. Run on the
 * ranks it is started with (test_engine_finite.sh: 1, 2, 3; with 3 every unit is padded)
 * and on the backend named by argv[1] ("cpu", or "cuda": the CUDA backend with the NCCL
 * communicator, on a GPU or the CPU execution harness), for ZeRO stages 0-3 x fp32 and
 * the bf16 recipe (a separate fp32 master) x the optimizer on the device or offloaded.
 *
 * The planted values, in block 1 (up_proj starts at 60 % of its elements, down_proj at
 * 80 %: at stages 1-3 the elements planted there are rank 1's on 2 ranks, rank 2's on 3):
 *   A  parameters: down_proj's last element NaN, the head's first -Inf (a later unit)
 *      -> down_proj, its last element; PARAMS
 *   B  v only: up_proj's element 700 +Inf -> up_proj, 700; OPTIMIZER
 *   C  A's parameters, plus up_proj's element 800 NaN, and m's up_proj element 700 +Inf
 *      -> up_proj, 700 (the lowest over the buffers); PARAMS | OPTIMIZER
 * and clean values report unit, tensor and element -1. */
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
#include "../common/test_env.h"
#include "engine_rig.h"

/* test_tiny_config's block units: q 1024, k 512, v 512, o 1024, gate, up, down 1536
 * each, two norms 32: 7712 elements; up_proj starts at 4608, down_proj at 6144. */

/* A value planted at (unit kind, layer, block or head tensor slot, element; -1: the
 * tensor's last). A list ends with slot -1. */
typedef struct poison {
    ft_unit_kind kind;
    int layer, slot;
    long long element;
    float value;
} poison;

static const poison no_poison[] = { { FT_UNIT_EMBED, 0, -1, 0, 0.0f } };
static const poison params_a[] = {
    { FT_UNIT_BLOCK, 1, FT_BLK_DOWN, -1, NAN },
    { FT_UNIT_HEAD, -1, FT_HEAD_NORM, 0, -INFINITY },
    { FT_UNIT_EMBED, 0, -1, 0, 0.0f },
};
static const poison moment_b[] = {
    { FT_UNIT_BLOCK, 1, FT_BLK_UP, 700, INFINITY },
    { FT_UNIT_EMBED, 0, -1, 0, 0.0f },
};
static const poison params_c[] = {
    { FT_UNIT_BLOCK, 1, FT_BLK_DOWN, -1, NAN },
    { FT_UNIT_BLOCK, 1, FT_BLK_UP, 800, NAN },
    { FT_UNIT_HEAD, -1, FT_HEAD_NORM, 0, -INFINITY },
    { FT_UNIT_EMBED, 0, -1, 0, 0.0f },
};

static int poisoned_fill(void *ctx, const ft_unit_layout *u, size_t begin, size_t end,
                         float *dst, ft_error *err)
{
    const poison *p = ctx;
    (void)err;
    for (size_t i = begin; i < end; i++)
        dst[i - begin] = 0.01f * (float)(i % 7) - 0.03f;
    for (; p->slot >= 0; p++) {
        if (p->kind != u->kind || (u->kind == FT_UNIT_BLOCK && p->layer != u->layer))
            continue;
        const ft_tensor_info *t = &u->tensors[u->slot[p->slot]];
        const size_t at = t->offset + (p->element < 0 ? t->numel - 1 : (size_t)p->element);
        if (at >= begin && at < end)
            dst[at - begin] = p->value;
    }
    return 0;
}

static ft_engine *make_engine(rig *r, const ft_model_layout *l, int stage, ft_precision p,
                              bool offload)
{
    ft_error err;
    ft_engine_options o = { .zero_stage = stage, .precision = p, .optimizer = FT_OPT_ADAMW,
                            .offload_optimizer = offload };
    ft_engine *e = NULL;
    if (ft_engine_create(&e, l, r->be, r->comm, &o, &err))
        die("ft_engine_create", &err);
    return e;
}

/* moments.h5: group /b holds moment_b's values (the fp32 values of an engine filled with
 * them), read into v (case B) or m (case C) with read_field. */
static void write_moments(rig *r, const ft_model_layout *l)
{
    ft_error err;
    ft_engine *e = make_engine(r, l, 1, ft_precision_resolve(FT_DTYPE_F32, FT_DTYPE_F32,
                                                             FT_DTYPE_F32), false);
    ft_h5file f;
    if (ft_engine_init_from(e, poisoned_fill, (void *)moment_b, &err) ||
        ft_h5_create(&f, "moments.h5", MPI_COMM_WORLD, &err) ||
        ft_weights_create_tensors(&f, "/b", l, FT_FILE_F32, &err) ||
        ft_engine_save(e, &f, "/b", &err) || ft_h5_close(&f, &err))
        die("moments.h5", &err);
    ft_engine_free(e);
}

typedef struct expect {
    int unit, slot;     /* slot -1: no tensor */
    long long element;  /* -1: the tensor's last */
    int what;
} expect;

static void check_case(rig *r, const ft_model_layout *l, int stage, ft_precision p,
                       bool offload, const poison *params, ft_state_field moment,
                       const expect *want, const char *tag)
{
    ft_error err;
    ft_engine *e = make_engine(r, l, stage, p, offload);
    if (ft_engine_init_from(e, poisoned_fill, (void *)params, &err))
        die("ft_engine_init_from", &err);
    if (moment != FT_STATE_PARAMS) {
        ft_h5file f;
        if (ft_h5_open(&f, "moments.h5", MPI_COMM_WORLD, &err) ||
            ft_engine_read_field(e, &f, "/b", moment, NULL, &err) || ft_h5_close(&f, &err))
            die("read_field of moments.h5", &err);
    }
    ft_engine_finite fin;
    if (ft_engine_check_finite(e, &fin, &err))
        die("ft_engine_check_finite", &err);
    int tensor = -1;
    long long element = -1;
    if (want->slot >= 0) {
        const ft_unit_layout *u = &l->units[want->unit];
        tensor = u->slot[want->slot];
        element = want->element < 0 ? (long long)u->tensors[tensor].numel - 1 : want->element;
    }
    check(fin.unit == want->unit && fin.tensor == tensor && fin.element == element &&
              fin.what == want->what,
          "%s: unit %d tensor %d element %lld what %d, want %d %d %lld %d", tag, fin.unit,
          fin.tensor, fin.element, fin.what, want->unit, tensor, element, want->what);
    ft_engine_free(e);
}

static void run(rig *r)
{
    ft_error err;
    ft_model_layout l;
    ft_model_config c = test_tiny_config();
    if (ft_model_layout_build(&l, &c, &err))
        die("ft_model_layout_build", &err);
    write_moments(r, &l);
    const int blk = ft_layout_block_unit(1);
    const expect clean = { -1, -1, -1, 0 };
    const expect a = { blk, FT_BLK_DOWN, -1, FT_ENGINE_NONFINITE_PARAMS };
    const expect b = { blk, FT_BLK_UP, 700, FT_ENGINE_NONFINITE_OPTIMIZER };
    const expect cc = { blk, FT_BLK_UP, 700,
                        FT_ENGINE_NONFINITE_PARAMS | FT_ENGINE_NONFINITE_OPTIMIZER };
    const struct {
        const char *name;
        ft_precision p;
    } policies[] = {
        { "fp32", ft_precision_resolve(FT_DTYPE_F32, FT_DTYPE_F32, FT_DTYPE_F32) },
        { "bf16 recipe", ft_precision_resolve(FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_F32) },
    };
    for (int stage = 0; stage <= 3; stage++)
        for (int pi = 0; pi < 2; pi++)
            for (int offload = 0; offload <= 1; offload++) {
                char tag[160];
                const ft_precision p = policies[pi].p;
                snprintf(tag, sizeof tag, "stage %d, %s%s", stage, policies[pi].name,
                         offload ? ", offload" : "");
                char t[200];
                snprintf(t, sizeof t, "%s, clean", tag);
                check_case(r, &l, stage, p, offload, no_poison, FT_STATE_PARAMS, &clean, t);
                snprintf(t, sizeof t, "%s, A (parameters)", tag);
                check_case(r, &l, stage, p, offload, params_a, FT_STATE_PARAMS, &a, t);
                snprintf(t, sizeof t, "%s, B (v)", tag);
                check_case(r, &l, stage, p, offload, no_poison, FT_STATE_V, &b, t);
                snprintf(t, sizeof t, "%s, C (parameters and m)", tag);
                check_case(r, &l, stage, p, offload, params_c, FT_STATE_M, &cc, t);
            }
    ft_model_layout_free(&l);
}


int main(int argc, char **argv)
{
    rig r;
    if (rig_start(&argc, &argv, &r))
        return 77;
    run(&r);
    return rig_finish(&r);
}
