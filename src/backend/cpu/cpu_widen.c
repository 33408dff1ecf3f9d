/* bf16 storage on the CPU by widening: each op's bf16 tensors are widened into fp32
 * copies, the fp32 kernel runs on them, and the outputs are rounded back (to nearest
 * even) once. That is exactly the recipe's definition of a bf16 op (widen on load,
 * compute in fp32, round once on store), so these results are the reference the
 * native bf16 kernels must reproduce.
 *
 * The copies are host mallocs for the duration of one call (the planner counts only
 * backend allocations, so they are outside the plan); an allocation failure aborts
 * with the op's name, as the vtable has no error path. The fp32 path never comes
 * here: the vtable entries below hand fp32 calls straight to the fp32 kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "util/bf16.h"

static void *checked_malloc(size_t bytes, const char *op)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "ftmpi: CPU backend: %s: out of host memory widening bf16 (%zu bytes)\n",
                op, bytes);
        abort();
    }
    return p;
}

/* A fp32 copy of n elements stored as dt (NULL for a NULL src). */
static float *widen(const void *src, ft_dtype dt, size_t n, const char *op)
{
    if (!src)
        return NULL;
    float *f = checked_malloc(n * sizeof(float), op);
    if (dt == FT_DTYPE_BF16) {
        const uint16_t *h = src;
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            f[i] = ft_bf16_to_f32(h[i]);
    } else {
        memcpy(f, src, n * sizeof(float));
    }
    return f;
}

/* The fp32 dx of a norm's backward: the widened dx_base to add to, or (without one) a
 * buffer the fp32 kernel overwrites, given a NULL base too. */
static float *widen_base(const void *dx_base, ft_dtype dt, size_t n, const char *op)
{
    return dx_base ? widen(dx_base, dt, n, op) : checked_malloc(n * sizeof(float), op);
}

/* dst (stored as dt) = f rounded; frees f. */
static void narrow(void *dst, ft_dtype dt, float *f, size_t n)
{
    if (dt == FT_DTYPE_BF16) {
        uint16_t *h = dst;
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
        for (size_t i = 0; i < n; i++)
            h[i] = ft_f32_to_bf16(f[i]);
    } else {
        memcpy(dst, f, n * sizeof(float));
    }
    free(f);
}

/* A parameter gradient stored as gt: the fp32 buffer itself, or a zeroed fp32
 * scratch whose sum is added (and rounded once) into the bf16 gradient by
 * grad_finish. */
static float *grad_begin(void *g, ft_dtype gt, size_t n, const char *op)
{
    if (gt == FT_DTYPE_F32)
        return g;
    float *f = checked_malloc(n * sizeof(float), op);
    memset(f, 0, n * sizeof(float));
    return f;
}

static void grad_finish(void *g, ft_dtype gt, float *f, size_t n)
{
    if (gt == FT_DTYPE_F32)
        return;
    uint16_t *h = g;
#pragma omp parallel for simd schedule(static) if (n >= FT_CPU_PAR_MIN)
    for (size_t i = 0; i < n; i++)
        h[i] = ft_f32_to_bf16(ft_bf16_to_f32(h[i]) + f[i]);
    free(f);
}

void ft_cpu_widen_matmul(ft_backend *be, ft_gemm_types t, void *c, const void *a, const void *b,
                         int m, int n, int k, bool trans_a, bool trans_b, float alpha, float beta)
{
    if (t.a == FT_DTYPE_F32 && t.b == FT_DTYPE_F32 && t.c == FT_DTYPE_F32) {
        ft_cpu_matmul(be, c, a, b, m, n, k, trans_a, trans_b, alpha, beta);
        return;
    }
    if (m <= 0 || n <= 0)
        return;
    /* bf16 operands on a CPU with AVX512-BF16: the native kernel, no widened copies */
    if (t.a == FT_DTYPE_BF16 && t.b == FT_DTYPE_BF16 &&
        ((const ft_cpu_state *)be->impl)->bf16_gemm &&
        ft_cpu_gemm_bf16(t.c, c, a, b, m, n, k, trans_a, trans_b, alpha, beta) == 0)
        return;
    const size_t mn = (size_t)m * n, mk = (size_t)m * (k > 0 ? k : 0);
    const size_t kn = (size_t)(k > 0 ? k : 0) * n;
    float *fa = widen(a, t.a, mk, "matmul"), *fb = widen(b, t.b, kn, "matmul");
    /* beta == 0 never reads c (BLAS semantics): a zeroed copy, not a widened one */
    float *fc = beta != 0.0f ? widen(c, t.c, mn, "matmul") : checked_malloc(mn * 4, "matmul");
    if (beta == 0.0f)
        memset(fc, 0, mn * sizeof(float));
    ft_cpu_matmul(be, fc, fa, fb, m, n, k, trans_a, trans_b, alpha, beta);
    free(fa);
    free(fb);
    narrow(c, t.c, fc, mn);
}

/* The residual GEMM is the backend's copy (threaded for large buffers) and the
 * accumulating GEMM: the CPU has no launch to save, and CBLAS reads and writes one c. */
void ft_cpu_widen_matmul_add(ft_backend *be, ft_gemm_types t, void *d, const void *c,
                             const void *a, const void *b, int m, int n, int k, bool trans_a,
                             bool trans_b)
{
    if (m <= 0 || n <= 0)
        return;
    if (d != c)
        be->ops->copy(be, d, c, (size_t)m * (size_t)n * ft_dtype_size(t.c));
    ft_cpu_widen_matmul(be, t, d, a, b, m, n, k, trans_a, trans_b, 1.0f, 1.0f);
}

/* Two GEMMs through the vtable's matmul: the CPU has no launch to save, each is bitwise
 * matmul's, and a wrapper of the vtable (the tests' GEMM counters) sees both. */
void ft_cpu_widen_matmul_pair(ft_backend *be, ft_gemm_types t, void *c0, void *c1, const void *a0,
                              const void *a1, const void *b0, const void *b1, int m, int n, int k,
                              bool trans_a, bool trans_b, float alpha, float beta)
{
    be->ops->matmul(be, t, c0, a0, b0, m, n, k, trans_a, trans_b, alpha, beta);
    be->ops->matmul(be, t, c1, a1, b1, m, n, k, trans_a, trans_b, alpha, beta);
}

void ft_cpu_widen_rmsnorm_fwd(ft_backend *be, ft_dtype dt, void *y, float *rstd, const void *x,
                              const void *w, int rows, int dim, float eps)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_rmsnorm_fwd(be, y, rstd, x, w, rows, dim, eps);
        return;
    }
    const size_t n = (size_t)rows * dim;
    float *fx = widen(x, dt, n, "rmsnorm_fwd"), *fw = widen(w, dt, (size_t)dim, "rmsnorm_fwd");
    float *fy = checked_malloc(n * sizeof(float), "rmsnorm_fwd");
    ft_cpu_rmsnorm_fwd(be, fy, rstd, fx, fw, rows, dim, eps);
    free(fx);
    free(fw);
    narrow(y, dt, fy, n);
}

void ft_cpu_widen_rmsnorm_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dx,
                              const void *dx_base, void *dw, const void *dy, const void *x,
                              const void *w, const float *rstd, int rows, int dim)
{
    if (dt == FT_DTYPE_F32 && gt == FT_DTYPE_F32) {
        ft_cpu_rmsnorm_bwd(be, dx, dx_base, dw, dy, x, w, rstd, rows, dim);
        return;
    }
    const size_t n = (size_t)rows * dim;
    float *fdx = widen_base(dx_base, dt, n, "rmsnorm_bwd"), *fdy = widen(dy, dt, n, "rmsnorm_bwd");
    float *fx = widen(x, dt, n, "rmsnorm_bwd"), *fw = widen(w, dt, (size_t)dim, "rmsnorm_bwd");
    float *fdw = grad_begin(dw, gt, (size_t)dim, "rmsnorm_bwd");
    ft_cpu_rmsnorm_bwd(be, fdx, dx_base ? fdx : NULL, fdw, fdy, fx, fw, rstd, rows, dim);
    grad_finish(dw, gt, fdw, (size_t)dim);
    free(fdy);
    free(fx);
    free(fw);
    narrow(dx, dt, fdx, n);
}

void ft_cpu_widen_layernorm_fwd(ft_backend *be, ft_dtype dt, void *y, float *mean, float *rstd,
                                const void *x, const void *w, const void *b, int rows, int dim,
                                float eps)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_layernorm_fwd(be, y, mean, rstd, x, w, b, rows, dim, eps);
        return;
    }
    const char *op = "layernorm_fwd";
    const size_t n = (size_t)rows * dim;
    float *fx = widen(x, dt, n, op), *fw = widen(w, dt, (size_t)dim, op);
    float *fb = widen(b, dt, (size_t)dim, op);
    float *fy = checked_malloc(n * sizeof(float), op);
    ft_cpu_layernorm_fwd(be, fy, mean, rstd, fx, fw, fb, rows, dim, eps);
    free(fx);
    free(fw);
    free(fb);
    narrow(y, dt, fy, n);
}

void ft_cpu_widen_layernorm_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dx,
                                const void *dx_base, void *dw, void *db, const void *dy,
                                const void *x, const void *w, const float *mean,
                                const float *rstd, int rows, int dim)
{
    if (dt == FT_DTYPE_F32 && gt == FT_DTYPE_F32) {
        ft_cpu_layernorm_bwd(be, dx, dx_base, dw, db, dy, x, w, mean, rstd, rows, dim);
        return;
    }
    const char *op = "layernorm_bwd";
    const size_t n = (size_t)rows * dim;
    float *fdx = widen_base(dx_base, dt, n, op), *fdy = widen(dy, dt, n, op);
    float *fx = widen(x, dt, n, op), *fw = widen(w, dt, (size_t)dim, op);
    float *fdw = grad_begin(dw, gt, (size_t)dim, op), *fdb = grad_begin(db, gt, (size_t)dim, op);
    ft_cpu_layernorm_bwd(be, fdx, dx_base ? fdx : NULL, fdw, fdb, fdy, fx, fw, mean, rstd, rows,
                         dim);
    grad_finish(dw, gt, fdw, (size_t)dim);
    grad_finish(db, gt, fdb, (size_t)dim);
    free(fdy);
    free(fx);
    free(fw);
    narrow(dx, dt, fdx, n);
}

void ft_cpu_widen_rope(ft_backend *be, ft_dtype dt, void *x, const float *cos_table,
                       const float *sin_table, const int32_t *pos, int tokens, int n_heads,
                       ft_rope_shape r, bool inverse)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_rope(be, x, cos_table, sin_table, pos, tokens, n_heads, r, inverse);
        return;
    }
    const size_t n = (size_t)tokens * n_heads * r.head_dim;
    float *fx = widen(x, dt, n, "rope");
    ft_cpu_rope(be, fx, cos_table, sin_table, pos, tokens, n_heads, r, inverse);
    narrow(x, dt, fx, n);
}

/* The CPU has no launch to save: q, then k. */
void ft_cpu_widen_rope_qk(ft_backend *be, ft_dtype dt, void *q, int q_heads, void *k,
                          int k_heads, const float *cos_table, const float *sin_table,
                          const int32_t *pos, int tokens, ft_rope_shape r, bool inverse)
{
    ft_cpu_widen_rope(be, dt, q, cos_table, sin_table, pos, tokens, q_heads, r, inverse);
    ft_cpu_widen_rope(be, dt, k, cos_table, sin_table, pos, tokens, k_heads, r, inverse);
}

void ft_cpu_widen_attention_fwd(ft_backend *be, ft_dtype dt, void *out, float *lse,
                                const void *q, const void *k, const void *v,
                                const int32_t *segment, ft_attn_shape s)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_attention_fwd(be, out, lse, q, k, v, segment, s);
        return;
    }
    const size_t tok = (size_t)s.batch * s.seq_len;
    const size_t nq = tok * s.n_heads * s.head_dim, nkv = tok * s.n_kv_heads * s.head_dim;
    float *fq = widen(q, dt, nq, "attention_fwd"), *fk = widen(k, dt, nkv, "attention_fwd");
    float *fv = widen(v, dt, nkv, "attention_fwd");
    float *fo = checked_malloc(nq * sizeof(float), "attention_fwd");
    ft_cpu_attention_fwd(be, fo, lse, fq, fk, fv, segment, s);
    free(fq);
    free(fk);
    free(fv);
    narrow(out, dt, fo, nq);
}

void ft_cpu_widen_attention_bwd(ft_backend *be, ft_dtype dt, void *dq, void *dk, void *dv,
                                const void *dout, const void *out, const float *lse,
                                const void *q, const void *k, const void *v,
                                const int32_t *segment, ft_attn_shape s)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_attention_bwd(be, dq, dk, dv, dout, out, lse, q, k, v, segment, s);
        return;
    }
    const char *op = "attention_bwd";
    const size_t tok = (size_t)s.batch * s.seq_len;
    const size_t nq = tok * s.n_heads * s.head_dim, nkv = tok * s.n_kv_heads * s.head_dim;
    float *fdo = widen(dout, dt, nq, op), *fo = widen(out, dt, nq, op);
    float *fq = widen(q, dt, nq, op), *fk = widen(k, dt, nkv, op), *fv = widen(v, dt, nkv, op);
    float *fdq = checked_malloc(nq * sizeof(float), op);
    float *fdk = checked_malloc(nkv * sizeof(float), op);
    float *fdv = checked_malloc(nkv * sizeof(float), op);
    ft_cpu_attention_bwd(be, fdq, fdk, fdv, fdo, fo, lse, fq, fk, fv, segment, s);
    free(fdo);
    free(fo);
    free(fq);
    free(fk);
    free(fv);
    narrow(dq, dt, fdq, nq);
    narrow(dk, dt, fdk, nkv);
    narrow(dv, dt, fdv, nkv);
}

void ft_cpu_widen_attention_decode(ft_backend *be, ft_dtype dt, void *out, const void *q,
                                   const void *k_cache, const void *v_cache, int past, int n_new,
                                   int n_heads, int n_kv_heads, int head_dim, int window)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_attention_decode(be, out, q, k_cache, v_cache, past, n_new, n_heads,
                                n_kv_heads, head_dim, window);
        return;
    }
    const size_t nq = (size_t)n_new * n_heads * head_dim;
    const size_t nkv = (size_t)(past + n_new) * n_kv_heads * head_dim;
    float *fq = widen(q, dt, nq, "attention_decode");
    float *fk = widen(k_cache, dt, nkv, "attention_decode");
    float *fv = widen(v_cache, dt, nkv, "attention_decode");
    float *fo = checked_malloc(nq * sizeof(float), "attention_decode");
    ft_cpu_attention_decode(be, fo, fq, fk, fv, past, n_new, n_heads, n_kv_heads,
                            head_dim, window);
    free(fq);
    free(fk);
    free(fv);
    narrow(out, dt, fo, nq);
}

/* y stored as yt, b as dt (a bf16 bias may be added to fp32 logits). */
void ft_cpu_widen_bias_add(ft_backend *be, ft_dtype dt, ft_dtype yt, void *y, const void *b,
                           int rows, int dim)
{
    if (dt == FT_DTYPE_F32 && yt == FT_DTYPE_F32) {
        ft_cpu_bias_add(be, y, b, rows, dim);
        return;
    }
    const size_t n = (size_t)rows * dim;
    float *fy = widen(y, yt, n, "bias_add"), *fb = widen(b, dt, (size_t)dim, "bias_add");
    ft_cpu_bias_add(be, fy, fb, rows, dim);
    free(fb);
    narrow(y, yt, fy, n);
}

void ft_cpu_widen_bias_grad(ft_backend *be, ft_dtype dt, ft_dtype gt, void *db, const void *dy,
                            int rows, int dim)
{
    if (dt == FT_DTYPE_F32 && gt == FT_DTYPE_F32) {
        ft_cpu_bias_grad(be, db, dy, rows, dim);
        return;
    }
    float *fdy = widen(dy, dt, (size_t)rows * dim, "bias_grad");
    float *fdb = grad_begin(db, gt, (size_t)dim, "bias_grad");
    ft_cpu_bias_grad(be, fdb, fdy, rows, dim);
    grad_finish(db, gt, fdb, (size_t)dim);
    free(fdy);
}

void ft_cpu_widen_swiglu_fwd(ft_backend *be, ft_dtype dt, void *out, const void *gate,
                             const void *up, size_t n)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_swiglu_fwd(be, out, gate, up, n);
        return;
    }
    float *fg = widen(gate, dt, n, "swiglu_fwd"), *fu = widen(up, dt, n, "swiglu_fwd");
    float *fo = checked_malloc(n * sizeof(float), "swiglu_fwd");
    ft_cpu_swiglu_fwd(be, fo, fg, fu, n);
    free(fg);
    free(fu);
    narrow(out, dt, fo, n);
}

void ft_cpu_widen_swiglu_bwd(ft_backend *be, ft_dtype dt, void *dgate, void *dup,
                             const void *dout, const void *gate, const void *up, size_t n,
                             void *out)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_swiglu_bwd(be, dgate, dup, dout, gate, up, n, out);
        return;
    }
    float *fd = widen(dout, dt, n, "swiglu_bwd"), *fg = widen(gate, dt, n, "swiglu_bwd");
    float *fu = widen(up, dt, n, "swiglu_bwd");
    float *fdg = checked_malloc(n * sizeof(float), "swiglu_bwd");
    float *fdu = checked_malloc(n * sizeof(float), "swiglu_bwd");
    /* the forward's output, rounded once as swiglu_fwd rounds it, over fd (read by then) */
    ft_cpu_swiglu_bwd(be, fdg, fdu, fd, fg, fu, n, out ? fd : NULL);
    free(fg);
    free(fu);
    narrow(dgate, dt, fdg, n);
    narrow(dup, dt, fdu, n);
    if (out)
        narrow(out, dt, fd, n); /* frees fd */
    else
        free(fd);
}

void ft_cpu_widen_gelu_fwd(ft_backend *be, ft_dtype dt, ft_gelu_kind kind, void *out,
                           const void *x, size_t n)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_gelu_fwd(be, kind, out, x, n);
        return;
    }
    float *fx = widen(x, dt, n, "gelu_fwd");
    float *fo = checked_malloc(n * sizeof(float), "gelu_fwd");
    ft_cpu_gelu_fwd(be, kind, fo, fx, n);
    free(fx);
    narrow(out, dt, fo, n);
}

/* dx may be dout's buffer: both are widened before dx is written. */
void ft_cpu_widen_gelu_bwd(ft_backend *be, ft_dtype dt, ft_gelu_kind kind, void *dx,
                           const void *dout, const void *x, size_t n)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_gelu_bwd(be, kind, dx, dout, x, n);
        return;
    }
    float *fd = widen(dout, dt, n, "gelu_bwd"), *fx = widen(x, dt, n, "gelu_bwd");
    ft_cpu_gelu_bwd(be, kind, fd, fd, fx, n);
    free(fx);
    narrow(dx, dt, fd, n);
}

/* A row gather: bf16 rows are copied as bits, nothing to widen. */
void ft_cpu_widen_embedding_fwd(ft_backend *be, ft_dtype dt, void *out, const void *table,
                                const int32_t *ids, int tokens, int dim)
{
    if (dt == FT_DTYPE_F32) {
        ft_cpu_embedding_fwd(be, out, table, ids, tokens, dim);
        return;
    }
    const size_t row = (size_t)dim * sizeof(uint16_t);
#pragma omp parallel for schedule(static) if ((size_t)tokens * dim >= FT_CPU_PAR_MIN)
    for (int t = 0; t < tokens; t++)
        memcpy((char *)out + (size_t)t * row, (const char *)table + (size_t)ids[t] * row, row);
}

/* Rows of dtable summed in fp32 over their tokens (the fp32 kernel's order), then
 * added once into a bf16 gradient. Only the rows that occur are widened. */
void ft_cpu_widen_embedding_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dtable,
                                const void *dout, const int32_t *ids, int tokens, int dim)
{
    if (dt == FT_DTYPE_F32 && gt == FT_DTYPE_F32) {
        ft_cpu_embedding_bwd(be, dtable, dout, ids, tokens, dim);
        return;
    }
    float *fd = widen(dout, dt, (size_t)tokens * dim, "embedding_bwd");
    if (gt == FT_DTYPE_F32) {
        ft_cpu_embedding_bwd(be, dtable, fd, ids, tokens, dim);
        free(fd);
        return;
    }
    /* compact the ids to the distinct rows, sum into a [distinct, dim] fp32 table */
    int32_t *slot = checked_malloc((size_t)tokens * sizeof(int32_t), "embedding_bwd");
    int32_t *uniq = checked_malloc((size_t)tokens * sizeof(int32_t), "embedding_bwd");
    int n_uniq = 0;
    for (int t = 0; t < tokens; t++) {
        int u = 0;
        while (u < n_uniq && uniq[u] != ids[t])
            u++;
        if (u == n_uniq)
            uniq[n_uniq++] = ids[t];
        slot[t] = u;
    }
    float *sum = checked_malloc((size_t)n_uniq * dim * sizeof(float), "embedding_bwd");
    memset(sum, 0, (size_t)n_uniq * dim * sizeof(float));
    ft_cpu_embedding_bwd(be, sum, fd, slot, tokens, dim);
    uint16_t *h = dtable;
    for (int u = 0; u < n_uniq; u++)
        for (int j = 0; j < dim; j++) {
            uint16_t *g = &h[(size_t)uniq[u] * dim + j];
            *g = ft_f32_to_bf16(ft_bf16_to_f32(*g) + sum[(size_t)u * dim + j]);
        }
    free(sum);
    free(uniq);
    free(slot);
    free(fd);
}
