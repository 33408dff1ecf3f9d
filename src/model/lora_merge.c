/* W += s B A for one layer's adapters (model/lora_merge.h). */
#include "model/lora_merge.h"

#include <cblas.h>
#include <stdbool.h>

/* The base tensor (ft_block_tensor) a site adapts; QKV spans three (q, k, v). */
static const int site_target[FT_LORA_N_SITES] = {
    [FT_LORA_Q] = FT_BLK_Q,       [FT_LORA_K] = FT_BLK_K,   [FT_LORA_V] = FT_BLK_V,
    [FT_LORA_O] = FT_BLK_O,       [FT_LORA_GATE] = FT_BLK_GATE, [FT_LORA_UP] = FT_BLK_UP,
    [FT_LORA_DOWN] = FT_BLK_DOWN, [FT_LORA_QKV] = FT_BLK_Q,
};

/* W[rows, in] += s B[rows, rank] A[rank, in] (row-major; B is a row block of the site's
 * B, so its leading dimension is rank). */
static void add_scaled_product(float *w, const float *b, const float *a, long long rows,
                               long long in, int rank, float s)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)in, rank, s, b, rank,
                a, (int)in, 1.0f, w, (int)in);
}

/* The base tensor for `slot` of base_u, checked to have `in` columns and to fit B's rows
 * from row0 (all of them when whole). */
static const ft_tensor_info *target_tensor(const ft_unit_layout *base_u, int slot,
                                           const ft_tensor_info *bt, long long row0, bool whole,
                                           long long in, ft_error *err)
{
    const int t = base_u->slot[slot];
    if (t < 0) {
        ft_fail(err, "adapter %s has no base weight to merge into in layer %d (a base of "
                "another family?)", bt->name, base_u->layer);
        return NULL;
    }
    const ft_tensor_info *w = &base_u->tensors[t];
    if (w->ndim != 2 || w->shape[1] != in || row0 + w->shape[0] > bt->shape[0] ||
        (whole && w->shape[0] != bt->shape[0])) {
        ft_fail(err, "adapter %s [%lld, %lld] does not fit base weight %s [%lld, %lld] (a base "
                "of another shape?)", bt->name, bt->shape[0], bt->shape[1], w->name, w->shape[0],
                w->ndim == 2 ? w->shape[1] : 0);
        return NULL;
    }
    return w;
}

int ft_lora_merge_block(const ft_unit_layout *base_u, float *base,
                        const ft_unit_layout *adapter_u, const float *adapter,
                        const ft_lora_config *lora, ft_error *err)
{
    if (base_u->kind != FT_UNIT_BLOCK || adapter_u->kind != FT_UNIT_ADAPTER ||
        base_u->layer != adapter_u->layer)
        return ft_fail(err, "internal: merging adapter unit of layer %d into a unit of layer %d",
                       adapter_u->layer, base_u->layer);
    const float s = ft_lora_scale(lora);
    for (int site = 0; site < FT_LORA_N_SITES; site++) {
        const int ia = adapter_u->slot[FT_LORA_SLOT_A(site)];
        const int ib = adapter_u->slot[FT_LORA_SLOT_B(site)];
        if (ia < 0 || ib < 0)
            continue;
        const ft_tensor_info *at = &adapter_u->tensors[ia], *bt = &adapter_u->tensors[ib];
        const int rank = (int)at->shape[0];
        const long long in = at->shape[1];
        if (bt->shape[1] != rank || rank != lora->rank)
            return ft_fail(err, "adapter %s has rank %lld and %s rank %d; the config says %d",
                           at->name, at->shape[0], bt->name, (int)bt->shape[1], lora->rank);
        const float *a = adapter + at->offset, *b = adapter + bt->offset;
        /* QKV: B's row blocks go to q, k, v in turn; other sites have one target */
        const int targets[3] = { site_target[site], FT_BLK_K, FT_BLK_V };
        const int n_targets = site == FT_LORA_QKV ? 3 : 1;
        long long row0 = 0;
        for (int k = 0; k < n_targets; k++) {
            const ft_tensor_info *w = target_tensor(base_u, targets[k], bt, row0, n_targets == 1, in, err);
            if (!w)
                return -1;
            add_scaled_product(base + w->offset, b + row0 * rank, a, w->shape[0], in, rank, s);
            row0 += w->shape[0];
        }
        if (row0 != bt->shape[0])
            return ft_fail(err, "adapter %s has %lld rows, its base weights %lld (a base of "
                           "another shape?)", bt->name, bt->shape[0], row0);
    }
    return 0;
}
