/* Which attention kernels a call takes, by storage type and shape (host C).
 *
 *   fp32                          the fp32 flash attention (cuda_attention*.cu) and decode
 *   bf16, cuDNN takes it          cuDNN's fused attention (cuda_attention_cudnn.c): builds
 *                                 with cuDNN >= 9, head_dim a multiple of 8, 16 to 128,
 *                                 documents as contiguous runs of ids (head_dim then a
 *                                 multiple of 16), and an engine for
 *                                 the graph; FTMPI_CUDNN_ATTENTION=off|force switches
 *   bf16, tensor-core shape       the mma.sync kernels (cuda_attention_tc*.cu): q, k, v,
 *                                 out, dout read and out, dq, dk, dv written as bf16, each
 *                                 rounded once from the fp32 accumulators; documents and
 *                                 the sliding window (Mistral) are masked there, tiles
 *                                 wholly outside either skipped
 *   bf16, any other shape         the fp32 kernels on widened copies, outputs rounded
 *                                 once (head_dim not a multiple of 8 or over 256, and
 *                                 decode)
 *
 * Scratch is the backend's one stream-ordered buffer (ft_cuda_scratch), carved here into
 * the regions a call needs, each 256-byte aligned. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_attention_cudnn.h"
#include "cuda_state.h"

void ft_cuda_check_attention_shape(ft_attn_shape s, const char *op)
{
    if (s.batch < 0 || s.seq_len < 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 ||
        s.n_heads % s.n_kv_heads != 0 || s.head_dim <= 0 || s.head_dim > 256 ||
        s.batch > 65535 || s.n_heads > 65535) {
        fprintf(stderr,
                "ftmpi: CUDA backend: %s: unsupported shape batch=%d seq_len=%d n_heads=%d "
                "n_kv_heads=%d head_dim=%d (need n_heads a multiple of n_kv_heads, "
                "1 <= head_dim <= 256, batch and n_heads <= 65535)\n",
                op, s.batch, s.seq_len, s.n_heads, s.n_kv_heads, s.head_dim);
        abort();
    }
}

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

/* Carves consecutive regions of the given byte sizes out of one scratch allocation. */
static void carve(ft_backend *be, int n, const size_t *bytes, void **out)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += align256(bytes[i]);
    char *base = ft_cuda_scratch(be, total);
    for (int i = 0; i < n; i++) {
        out[i] = base;
        base += align256(bytes[i]);
    }
}

static void widen(ft_backend *be, float *dst, const void *src, size_t n)
{
    ft_cuda_check(ft_cuda_launch_bf16_to_f32(dst, src, n, ft_cuda_stream(be)), "attention (widen)");
}

static void narrow(ft_backend *be, void *dst, const float *src, size_t n)
{
    ft_cuda_check(ft_cuda_launch_f32_to_bf16(dst, src, n, ft_cuda_stream(be)), "attention (round)");
}

static size_t q_elems(ft_attn_shape s)
{
    return (size_t)s.batch * s.seq_len * s.n_heads * s.head_dim;
}

static size_t kv_elems(ft_attn_shape s)
{
    return (size_t)s.batch * s.seq_len * s.n_kv_heads * s.head_dim;
}

void ft_cuda_attention_fwd(ft_backend *be, ft_dtype dt, void *out, float *lse, const void *q,
                           const void *k, const void *v, const int32_t *segment, ft_attn_shape s)
{
    ft_cuda_check_attention_shape(s, "attention_fwd");
    cudaStream_t st = ft_cuda_stream(be);
    const size_t nq = q_elems(s), nkv = kv_elems(s);
    if (dt == FT_DTYPE_F32) {
        void *scratch = ft_cuda_scratch(be, ft_cuda_attention_fwd_scratch_bytes(s));
        ft_cuda_check(ft_cuda_launch_attention_fwd(out, lse, q, k, v, segment, s, scratch, st),
                      "attention_fwd");
        return;
    }
    if (ft_cudnn_attention_fwd(be, out, lse, q, k, v, segment, s) == FT_CUDNN_DONE)
        return;
    if (ft_cuda_attention_tc_supported(s)) {
        void *scratch = ft_cuda_scratch(be, ft_cuda_attention_fwd_bf16_scratch_bytes(s));
        ft_cuda_check(ft_cuda_launch_attention_fwd_bf16(FT_DTYPE_BF16, out, lse, q, k, v, segment,
                                                        s, scratch, st),
                      "attention_fwd (tensor cores)");
        return;
    }
    void *r[5];
    carve(be, 5, (size_t[]){ nq * 4, nkv * 4, nkv * 4, nq * 4, ft_cuda_attention_fwd_scratch_bytes(s) }, r);
    widen(be, r[0], q, nq);
    widen(be, r[1], k, nkv);
    widen(be, r[2], v, nkv);
    ft_cuda_check(ft_cuda_launch_attention_fwd(r[3], lse, r[0], r[1], r[2], segment, s, r[4], st),
                  "attention_fwd (widened)");
    narrow(be, out, r[3], nq);
}

void ft_cuda_attention_bwd(ft_backend *be, ft_dtype dt, void *dq, void *dk, void *dv,
                           const void *dout, const void *out, const float *lse, const void *q,
                           const void *k, const void *v, const int32_t *segment, ft_attn_shape s)
{
    ft_cuda_check_attention_shape(s, "attention_bwd");
    cudaStream_t st = ft_cuda_stream(be);
    const size_t nq = q_elems(s), nkv = kv_elems(s);
    if (dt == FT_DTYPE_F32) {
        void *scratch = ft_cuda_scratch(be, ft_cuda_attention_bwd_scratch_bytes(s));
        ft_cuda_check(ft_cuda_launch_attention_bwd(dq, dk, dv, dout, out, lse, q, k, v, segment,
                                                   s, scratch, st),
                      "attention_bwd");
        return;
    }
    if (ft_cudnn_attention_bwd(be, dq, dk, dv, dout, out, lse, q, k, v, segment, s) ==
        FT_CUDNN_DONE)
        return;
    if (ft_cuda_attention_tc_supported(s)) {
        void *scratch = ft_cuda_scratch(be, ft_cuda_attention_bwd_bf16_scratch_bytes(s));
        ft_cuda_check(ft_cuda_launch_attention_bwd_bf16(FT_DTYPE_BF16, dq, dk, dv, dout, out, lse,
                                                        q, k, v, segment, s, scratch, st),
                      "attention_bwd (tensor cores)");
        return;
    }
    void *r[9];
    carve(be, 9, (size_t[]){ nq * 4, nq * 4, nq * 4, nkv * 4, nkv * 4, nq * 4, nkv * 4, nkv * 4,
                             ft_cuda_attention_bwd_scratch_bytes(s) }, r);
    widen(be, r[0], dout, nq);
    widen(be, r[1], out, nq);
    widen(be, r[2], q, nq);
    widen(be, r[3], k, nkv);
    widen(be, r[4], v, nkv);
    ft_cuda_check(ft_cuda_launch_attention_bwd(r[5], r[6], r[7], r[0], r[1], lse, r[2], r[3], r[4],
                                               segment, s, r[8], st),
                  "attention_bwd (widened)");
    narrow(be, dq, r[5], nq);
    narrow(be, dk, r[6], nkv);
    narrow(be, dv, r[7], nkv);
}

void ft_cuda_attention_decode(ft_backend *be, ft_dtype dt, void *out, const void *q,
                              const void *k_cache, const void *v_cache, int past, int n_new,
                              int n_heads, int n_kv_heads, int head_dim, int window)
{
    ft_attn_shape s = { .batch = 1, .seq_len = past + n_new, .n_heads = n_heads,
                        .n_kv_heads = n_kv_heads, .head_dim = head_dim, .window = window };
    ft_cuda_check_attention_shape(s, "attention_decode");
    if (past < 0 || n_new < 0 || n_new > 65535) {
        fprintf(stderr, "ftmpi: CUDA backend: attention_decode: unsupported past=%d n_new=%d\n",
                past, n_new);
        abort();
    }
    if (n_new == 0)
        return;
    cudaStream_t st = ft_cuda_stream(be);
    const size_t decode_scratch = ft_cuda_attention_decode_scratch_bytes(past, n_new, n_heads);
    if (dt == FT_DTYPE_F32) {
        void *scratch = ft_cuda_scratch(be, decode_scratch);
        ft_cuda_check(ft_cuda_launch_attention_decode(out, q, k_cache, v_cache, past, n_new,
                                                      n_heads, n_kv_heads, head_dim, window,
                                                      scratch, st),
                      "attention_decode");
        return;
    }
    const size_t nq = (size_t)n_new * n_heads * head_dim;
    const size_t nkv = (size_t)(past + n_new) * n_kv_heads * head_dim;
    void *r[5];
    carve(be, 5, (size_t[]){ nq * 4, nkv * 4, nkv * 4, nq * 4, decode_scratch }, r);
    widen(be, r[0], q, nq);
    widen(be, r[1], k_cache, nkv);
    widen(be, r[2], v_cache, nkv);
    ft_cuda_check(ft_cuda_launch_attention_decode(r[3], r[0], r[1], r[2], past, n_new, n_heads,
                                                  n_kv_heads, head_dim, window, r[4], st),
                  "attention_decode (widened)");
    narrow(be, out, r[3], nq);
}
