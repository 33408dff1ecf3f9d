/* The fp32 flash attention's forward and the segment-range pre-pass both directions use
 * (the algorithm, tiling and masking: cuda_attention.cuh). */
#include "cuda_attention.cuh"

/* Segment range of each granule of ATT_GRAN tokens (valid tokens only). */
__global__ void attn_seg_range_kernel(int2 *range, const int32_t *segment, int batch, int seq,
                                      int ngran)
{
    size_t total = (size_t)batch * ngran;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        int b = (int)(idx / ngran), g = (int)(idx % ngran);
        int t0 = g * ATT_GRAN, t1 = min(t0 + ATT_GRAN, seq);
        int lo = INT_MAX, hi = INT_MIN;
        for (int t = t0; t < t1; t++) {
            int s = segment[(size_t)b * seq + t];
            lo = min(lo, s);
            hi = max(hi, s);
        }
        range[idx] = make_int2(lo, hi);
    }
}

cudaError_t attn_seg_ranges(const AttnArgs &a, int2 *range, cudaStream_t st)
{
    size_t total = (size_t)a.batch * a.ngran;
    FT_LAUNCH(attn_seg_range_kernel, ft_cuda_grid_for(total, 256), 256, 0, st)(range, a.segment,
                                                                        a.batch, a.seq, a.ngran);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- forward */

template <int HDMAX, int BQ, int BK>
struct AttnFwdCfg {
    static constexpr int RQ = BQ / 16, CK = BK / 16, CD = HDMAX / 16;
    static constexpr size_t floats =
        (size_t)HDMAX * (BQ + 1) + (size_t)HDMAX * (BK + 1) + (size_t)BK * HDMAX +
        (size_t)BK * (BQ + 1);
    static constexpr size_t smem = floats * sizeof(float) + BK * sizeof(int);
};

template <int HDMAX, int BQ, int BK>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_fwd_kernel(float *__restrict__ out, float *__restrict__ lse, const float *__restrict__ q,
                    const float *__restrict__ k, const float *__restrict__ v, AttnArgs a)
{
    typedef AttnFwdCfg<HDMAX, BQ, BK> C;
    constexpr int RQ = C::RQ, CK = C::CK, CD = C::CD;
    FT_DYNAMIC_SMEM(float, smem);
    float *Qt = smem;                     /* [HDMAX][BQ+1], q * scale * log2e */
    float *Kt = Qt + HDMAX * (BQ + 1);    /* [HDMAX][BK+1] */
    float *Vs = Kt + HDMAX * (BK + 1);    /* [BK][HDMAX] */
    float *Pt = Vs + BK * HDMAX;          /* [BK][BQ+1] probabilities, transposed */
    int *segk = (int *)(Pt + BK * (BQ + 1)); /* [BK] */

    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int nqt = (a.seq + BQ - 1) / BQ;
    const int qt = nqt - 1 - (int)blockIdx.x; /* the longest rows first */
    const int h = blockIdx.y, b = blockIdx.z, hk = h / a.group;
    const int hd = a.hd, q0 = qt * BQ, qn = min(BQ, a.seq - q0);
    const float *qb = q + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
    const float *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;
    const float *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;

    attn_load_t<HDMAX, BQ>(Qt, qb, a.q_stride, q0, qn, hd, a.scale_log2);
    int segq[RQ];
#pragma unroll
    for (int r = 0; r < RQ; r++)
        segq[r] = attn_seg(a, b, q0 + ty * RQ + r);
    int2 qr = a.segment ? attn_tile_range(a, b, q0, qn) : make_int2(0, 0);

    float m[RQ], l[RQ], o[RQ][CD];
#pragma unroll
    for (int r = 0; r < RQ; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int c = 0; c < CD; c++)
            o[r][c] = 0.0f;
    }

    const int nkt = ft_mask_end_key_tile(q0, qn, BK);
    for (int kt = 0; kt < nkt; kt++) {
        const int k0 = kt * BK, kn = min(BK, a.seq - k0);
        const int kind = attn_classify(a, b, q0, k0, kn, BK, qr);
        if (kind == 0)
            continue; /* uniform over the block */
        __syncthreads(); /* the previous tile's Kt/Vs/Pt are no longer read */
        attn_load_t<HDMAX, BK>(Kt, kb, a.kv_stride, k0, kn, hd, 1.0f);
        attn_load_rows<HDMAX, BK>(Vs, vb, a.kv_stride, k0, kn, hd);
        if (threadIdx.x < BK)
            segk[threadIdx.x] = attn_seg(a, b, k0 + threadIdx.x);
        __syncthreads();

        /* S = Q K^T for this thread's RQ x CK scores. */
        float s[RQ][CK];
#pragma unroll
        for (int r = 0; r < RQ; r++)
#pragma unroll
            for (int c = 0; c < CK; c++)
                s[r][c] = 0.0f;
#pragma unroll 4
        for (int d = 0; d < hd; d++) {
            float qv[RQ], kv[CK];
#pragma unroll
            for (int r = 0; r < RQ; r++)
                qv[r] = Qt[d * (BQ + 1) + ty * RQ + r];
#pragma unroll
            for (int c = 0; c < CK; c++)
                kv[c] = Kt[d * (BK + 1) + tx + 16 * c];
#pragma unroll
            for (int r = 0; r < RQ; r++)
#pragma unroll
                for (int c = 0; c < CK; c++)
                    s[r][c] = fmaf(qv[r], kv[c], s[r][c]);
        }
        if (kind == 1) {
#pragma unroll
            for (int r = 0; r < RQ; r++)
#pragma unroll
                for (int c = 0; c < CK; c++) {
                    int i = q0 + ty * RQ + r, jl = tx + 16 * c, j = k0 + jl;
                    bool vis = ft_mask_sees(i, j, a.window) && jl < kn &&
                               (!a.segment || segk[jl] == segq[r]);
                    if (!vis)
                        s[r][c] = -INFINITY;
                }
        }

        /* Online softmax: new running max, rescale, probabilities. */
#pragma unroll
        for (int r = 0; r < RQ; r++) {
            float mx = s[r][0];
#pragma unroll
            for (int c = 1; c < CK; c++)
                mx = fmaxf(mx, s[r][c]);
            mx = attn_max16(mx);
            float m_new = fmaxf(m[r], mx);
            /* A row that has seen nothing yet keeps m = -inf: use 0 as the
             * reference so that exp2(-inf - ref) = 0 instead of NaN. */
            float ref = m_new == -INFINITY ? 0.0f : m_new;
            float alpha = exp2f(m[r] - ref);
            m[r] = m_new;
            float ls = 0.0f;
#pragma unroll
            for (int c = 0; c < CK; c++) {
                float p = exp2f(s[r][c] - ref);
                s[r][c] = p;
                ls += p;
            }
            l[r] = l[r] * alpha + ls; /* per-thread partial; reduced at the end */
#pragma unroll
            for (int c = 0; c < CD; c++)
                o[r][c] *= alpha;
        }
#pragma unroll
        for (int r = 0; r < RQ; r++)
#pragma unroll
            for (int c = 0; c < CK; c++)
                Pt[(tx + 16 * c) * (BQ + 1) + ty * RQ + r] = s[r][c];
        __syncthreads();

        /* O += P V. */
#pragma unroll 4
        for (int j = 0; j < kn; j++) {
            float pv[RQ], vv[CD];
#pragma unroll
            for (int r = 0; r < RQ; r++)
                pv[r] = Pt[j * (BQ + 1) + ty * RQ + r];
#pragma unroll
            for (int c = 0; c < CD; c++)
                vv[c] = Vs[j * HDMAX + tx + 16 * c];
#pragma unroll
            for (int r = 0; r < RQ; r++)
#pragma unroll
                for (int c = 0; c < CD; c++)
                    o[r][c] = fmaf(pv[r], vv[c], o[r][c]);
        }
    }

#pragma unroll
    for (int r = 0; r < RQ; r++) {
        float lt = attn_sum16(l[r]);
        int i = q0 + ty * RQ + r;
        if (i < a.seq) {
            float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
            float *orow = out + ((size_t)b * a.seq + i) * a.q_stride + (size_t)h * hd;
#pragma unroll
            for (int c = 0; c < CD; c++) {
                int d = tx + 16 * c;
                if (d < hd)
                    orow[d] = o[r][c] * inv;
            }
            if (tx == 0)
                lse[((size_t)b * a.n_heads + h) * a.seq + i] =
                    lt > 0.0f ? (m[r] + log2f(lt)) * ATT_LN2 : -INFINITY;
        }
    }
}

/* ---------------------------------------------------------------- launcher */

template <int HDMAX, int BQ, int BK>
static cudaError_t attn_fwd_run(float *out, float *lse, const float *q, const float *k,
                                const float *v, const AttnArgs &a, cudaStream_t st)
{
    typedef AttnFwdCfg<HDMAX, BQ, BK> C;
    void (*kern)(float *, float *, const float *, const float *, const float *, AttnArgs) =
        attn_fwd_kernel<HDMAX, BQ, BK>;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)C::smem);
    if (e != cudaSuccess)
        return e;
    dim3 grid((unsigned)((a.seq + BQ - 1) / BQ), (unsigned)a.n_heads, (unsigned)a.batch);
    FT_LAUNCH(kern, grid, ATT_THREADS, C::smem, st)(out, lse, q, k, v, a);
    return cudaGetLastError();
}

extern "C" size_t ft_cuda_attention_fwd_scratch_bytes(ft_attn_shape s)
{
    return attn_seg_bytes(s);
}

extern "C" cudaError_t ft_cuda_launch_attention_fwd(float *out, float *lse, const float *q,
                                                    const float *k, const float *v,
                                                    const int32_t *segment, ft_attn_shape s,
                                                    void *scratch, cudaStream_t st)
{
    if (!attn_shape_ok(s))
        return cudaErrorInvalidValue;
    if (s.batch == 0 || s.seq_len == 0)
        return cudaSuccess;
    AttnArgs a = attn_args(s, segment, scratch);
    if (segment) {
        cudaError_t e = attn_seg_ranges(a, (int2 *)scratch, st);
        if (e != cudaSuccess)
            return e;
    }
    /* Shared memory: 66 KB, 75 KB, 70 KB. */
    if (s.head_dim <= 64)
        return attn_fwd_run<64, 64, 64>(out, lse, q, k, v, a, st);
    if (s.head_dim <= 128)
        return attn_fwd_run<128, 64, 32>(out, lse, q, k, v, a, st);
    return attn_fwd_run<256, 32, 16>(out, lse, q, k, v, a, st);
}
