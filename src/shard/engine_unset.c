/* Gradients whose 2-D weights are left unset at a reset.
 *
 * A unit's gradient is reset once per step (stages 0-1: ft_engine_zero_grads) or once
 * per micro-batch (stages 2-3: a transient slot opens). Zeroing it all and letting every
 * weight-gradient GEMM add to it (beta 1) costs, per element of the 2-D weights, a write
 * of the zero and a read of it by the GEMM: for a 1.2 B model 10 GB a step, more than
 * the GEMMs' own output. So a reset zeroes only the unit's tail (norms and biases, which
 * their reductions add to, and the padding) and marks the 2-D part (the leading
 * decay_numel elements: layout.c puts the 2-D tensors first) as unset. Then:
 *   - grads_first() hands the unset part to a writer that overwrites it (the model's
 *     GEMMs with beta 0, the first of a micro-batch that the source answers "first");
 *   - grads() zeroes it first, so any other consumer (LoRA adapters, tests) sees the
 *     zeroed accumulator it always did;
 *   - a unit nobody asked for is zeroed before its gradient is reduced or measured.
 * FTMPI_GRADS_ZERO_ALL=1 zeroes everything at the reset as before (for timing the
 * difference); the test hook FTMPI_GRADS_POISON_UNSET=1 fills the unset part with NaN
 * instead of leaving the previous values there, so that a write that adds to it, or an
 * element nobody writes, shows. */
#include <stdlib.h>
#include <string.h>

#include "shard/engine_internal.h"

int ft_engine_unset_mode_from_env(void)
{
    const char *all = getenv("FTMPI_GRADS_ZERO_ALL");
    if (all && !strcmp(all, "1"))
        return FT_UNSET_NEVER;
    const char *poison = getenv("FTMPI_GRADS_POISON_UNSET");
    return poison && !strcmp(poison, "1") ? FT_UNSET_POISON : FT_UNSET_LEAVE;
}

/* bytes of NaN (all bits set: a quiet NaN in fp32 and in bf16) at dev */
static void poison(ft_engine *e, char *dev, size_t bytes)
{
    const size_t piece = (size_t)1 << 20;
    unsigned char *ones = malloc(piece);
    if (!ones) { /* a test hook: zeroing instead only weakens the test */
        e->be->ops->zero(e->be, dev, bytes);
        return;
    }
    memset(ones, 0xff, piece);
    for (size_t off = 0; off < bytes; off += piece)
        e->be->ops->upload(e->be, dev + off, ones, bytes - off < piece ? bytes - off : piece);
    free(ones);
}

void ft_engine_reset_grad(ft_engine *e, int unit, void *full, size_t esize, int *unset)
{
    const engine_unit *eu = &e->units[unit];
    const size_t head = e->layout.units[unit].decay_numel;
    if (e->unset_mode == FT_UNSET_NEVER || head == 0) {
        e->be->ops->zero(e->be, full, eu->padded * esize);
        *unset = 0;
        return;
    }
    e->be->ops->zero(e->be, (char *)full + head * esize, (eu->padded - head) * esize);
    if (e->unset_mode == FT_UNSET_POISON)
        poison(e, full, head * esize);
    *unset = 1;
}

void ft_engine_settle_grad(ft_engine *e, int unit, void *full, size_t esize, int *unset)
{
    if (!*unset)
        return;
    e->be->ops->zero(e->be, full, e->layout.units[unit].decay_numel * esize);
    *unset = 0;
}

void ft_engine_settle_all_grads(ft_engine *e)
{
    for (int u = 0; u < e->layout.n_units; u++)
        if (e->units[u].grad_full)
            ft_engine_settle_grad(e, u, e->units[u].grad_full, sizeof(float),
                                  &e->units[u].grad_unset);
}
