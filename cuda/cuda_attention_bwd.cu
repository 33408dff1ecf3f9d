/* The fp32 flash attention's backward: D = rowsum(dO * O), then the dK/dV pass and the dQ
 * pass, each owning its outputs (the algorithm, tiling and masking: cuda_attention.cuh). */
#include "cuda_attention.cuh"

/* The backward's two inner products for this thread's R rows x C columns of a
 * tile pair: s = A^T B and dp = A2^T B2 over hd features, where A, A2 are staged
 * [hd][RA+1] (rows ty*R + r) and B, B2 [hd][RB+1] (columns tx + 16c). The dQ pass
 * reads (Q, K, dO, V), the dK/dV pass the transposes (K, Q, V, dO): one loop. */
template <int R, int C, int RA, int RB>
__device__ __forceinline__ void attn_two_products(float (&s)[R][C], float (&dp)[R][C],
                                                  const float *A, const float *B,
                                                  const float *A2, const float *B2, int hd,
                                                  int ty, int tx)
{
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < C; c++)
            s[r][c] = dp[r][c] = 0.0f;
#pragma unroll 2
    for (int d = 0; d < hd; d++) {
        float av[R], a2v[R], bv[C], b2v[C];
#pragma unroll
        for (int r = 0; r < R; r++) {
            av[r] = A[d * (RA + 1) + ty * R + r];
            a2v[r] = A2[d * (RA + 1) + ty * R + r];
        }
#pragma unroll
        for (int c = 0; c < C; c++) {
            bv[c] = B[d * (RB + 1) + tx + 16 * c];
            b2v[c] = B2[d * (RB + 1) + tx + 16 * c];
        }
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < C; c++) {
                s[r][c] = fmaf(av[r], bv[c], s[r][c]);
                dp[r][c] = fmaf(a2v[r], b2v[c], dp[r][c]);
            }
    }
}

/* ---------------------------------------------------------------- backward */

/* D[b][h][i] = sum_d dO[b,i,h,d] * O[b,i,h,d]: one warp per (b, i, h). */
__global__ void attn_bwd_dot_kernel(float *__restrict__ Dv, const float *__restrict__ dout,
                                    const float *__restrict__ out, AttnArgs a)
{
    size_t rows = (size_t)a.batch * a.seq * a.n_heads;
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / FT_WARP;
    size_t nwarps = (size_t)gridDim.x * blockDim.x / FT_WARP;
    int lane = threadIdx.x % FT_WARP;
    for (size_t r = warp; r < rows; r += nwarps) {
        /* r = (b*seq + i)*n_heads + h: the order of the q/out layout. */
        size_t token = r / a.n_heads;
        int h = (int)(r % a.n_heads);
        const float *d0 = dout + token * a.q_stride + (size_t)h * a.hd;
        const float *o0 = out + token * a.q_stride + (size_t)h * a.hd;
        float acc = 0.0f;
        for (int d = lane; d < a.hd; d += FT_WARP)
            acc = fmaf(d0[d], o0[d], acc);
        acc = ft_warp_sum(acc);
        if (lane == 0) {
            int b = (int)(token / a.seq), i = (int)(token % a.seq);
            Dv[((size_t)b * a.n_heads + h) * a.seq + i] = acc;
        }
    }
}

/* lse in base 2, with -inf (a row that saw nothing) mapped to +inf so that
 * p = exp2(s - lse2) = 0 there. */
__device__ __forceinline__ float attn_lse2(float lse_nat)
{
    return lse_nat == -INFINITY ? INFINITY : lse_nat * ATT_LOG2E;
}

template <int HDMAX, int BQ, int BK>
struct AttnDqCfg {
    static constexpr int RQ = BQ / 16, CK = BK / 16, CD = HDMAX / 16;
    static constexpr size_t floats = 2 * (size_t)HDMAX * (BQ + 1) + 2 * (size_t)HDMAX * (BK + 1) +
                                     (size_t)BK * (BQ + 1);
    static constexpr size_t smem = floats * sizeof(float) + BK * sizeof(int);
};

/* dQ_i = scale * sum_j dS_ij k_j; one block per (query tile, head, batch row). */
template <int HDMAX, int BQ, int BK>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_bwd_dq_kernel(float *__restrict__ dq, const float *__restrict__ dout,
                       const float *__restrict__ lse, const float *__restrict__ Dv,
                       const float *__restrict__ q, const float *__restrict__ k,
                       const float *__restrict__ v, AttnArgs a)
{
    typedef AttnDqCfg<HDMAX, BQ, BK> C;
    constexpr int RQ = C::RQ, CK = C::CK, CD = C::CD;
    FT_DYNAMIC_SMEM(float, smem);
    float *Qt = smem;                      /* [HDMAX][BQ+1] raw q */
    float *dOt = Qt + HDMAX * (BQ + 1);    /* [HDMAX][BQ+1] */
    float *Kt = dOt + HDMAX * (BQ + 1);    /* [HDMAX][BK+1] */
    float *Vt = Kt + HDMAX * (BK + 1);     /* [HDMAX][BK+1] */
    float *dSt = Vt + HDMAX * (BK + 1);    /* [BK][BQ+1] */
    int *segk = (int *)(dSt + BK * (BQ + 1));

    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int nqt = (a.seq + BQ - 1) / BQ;
    const int qt = nqt - 1 - (int)blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z, hk = h / a.group;
    const int hd = a.hd, q0 = qt * BQ, qn = min(BQ, a.seq - q0);
    const float *qb = q + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
    const float *dob = dout + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
    const float *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;
    const float *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;
    const size_t row_stat = ((size_t)b * a.n_heads + h) * a.seq;

    attn_load_t<HDMAX, BQ>(Qt, qb, a.q_stride, q0, qn, hd, 1.0f);
    attn_load_t<HDMAX, BQ>(dOt, dob, a.q_stride, q0, qn, hd, 1.0f);
    int segq[RQ];
    float lse2[RQ], Dr[RQ], acc[RQ][CD];
#pragma unroll
    for (int r = 0; r < RQ; r++) {
        int i = q0 + ty * RQ + r;
        segq[r] = attn_seg(a, b, i);
        lse2[r] = i < a.seq ? attn_lse2(lse[row_stat + i]) : INFINITY;
        Dr[r] = i < a.seq ? Dv[row_stat + i] : 0.0f;
#pragma unroll
        for (int c = 0; c < CD; c++)
            acc[r][c] = 0.0f;
    }
    int2 qr = a.segment ? attn_tile_range(a, b, q0, qn) : make_int2(0, 0);

    const int nkt = ft_mask_end_key_tile(q0, qn, BK);
    for (int kt = 0; kt < nkt; kt++) {
        const int k0 = kt * BK, kn = min(BK, a.seq - k0);
        const int kind = attn_classify(a, b, q0, k0, kn, BK, qr);
        if (kind == 0)
            continue;
        __syncthreads();
        attn_load_t<HDMAX, BK>(Kt, kb, a.kv_stride, k0, kn, hd, 1.0f);
        attn_load_t<HDMAX, BK>(Vt, vb, a.kv_stride, k0, kn, hd, 1.0f);
        if (threadIdx.x < BK)
            segk[threadIdx.x] = attn_seg(a, b, k0 + threadIdx.x);
        __syncthreads();

        float s[RQ][CK], dp[RQ][CK];
        attn_two_products<RQ, CK, BQ, BK>(s, dp, Qt, Kt, dOt, Vt, hd, ty, tx);
#pragma unroll
        for (int r = 0; r < RQ; r++)
#pragma unroll
            for (int c = 0; c < CK; c++) {
                int i = q0 + ty * RQ + r, jl = tx + 16 * c, j = k0 + jl;
                bool vis = kind == 2 || (ft_mask_sees(i, j, a.window) && jl < kn &&
                                         (!a.segment || segk[jl] == segq[r]));
                float p = vis ? exp2f(s[r][c] * a.scale_log2 - lse2[r]) : 0.0f;
                dSt[jl * (BQ + 1) + ty * RQ + r] = p * (dp[r][c] - Dr[r]);
            }
        __syncthreads();

#pragma unroll 4
        for (int j = 0; j < kn; j++) {
            float sv[RQ], kv[CD];
#pragma unroll
            for (int r = 0; r < RQ; r++)
                sv[r] = dSt[j * (BQ + 1) + ty * RQ + r];
#pragma unroll
            for (int c = 0; c < CD; c++)
                kv[c] = Kt[(tx + 16 * c) * (BK + 1) + j];
#pragma unroll
            for (int r = 0; r < RQ; r++)
#pragma unroll
                for (int c = 0; c < CD; c++)
                    acc[r][c] = fmaf(sv[r], kv[c], acc[r][c]);
        }
    }

#pragma unroll
    for (int r = 0; r < RQ; r++) {
        int i = q0 + ty * RQ + r;
        if (i >= a.seq)
            continue;
        float *row = dq + ((size_t)b * a.seq + i) * a.q_stride + (size_t)h * hd;
#pragma unroll
        for (int c = 0; c < CD; c++) {
            int d = tx + 16 * c;
            if (d < hd)
                row[d] = acc[r][c] * a.scale;
        }
    }
}

template <int HDMAX, int BK, int BQ>
struct AttnDkvCfg {
    static constexpr int RK = BK / 16, CQ = BQ / 16, CD = HDMAX / 16;
    static constexpr size_t floats = 2 * (size_t)HDMAX * (BK + 1) + 2 * (size_t)HDMAX * (BQ + 1) +
                                     2 * (size_t)BQ * (BK + 1) + 2 * (size_t)BQ;
    static constexpr size_t smem = floats * sizeof(float) + BQ * sizeof(int);
};

/* dV_j = sum_i p_ij dO_i, dK_j = scale * sum_i dS_ij q_i; one block per
 * (key tile, kv head, batch row), summing over the query heads of the group and
 * all query tiles at or after the key tile (causality) in a fixed order. */
template <int HDMAX, int BK, int BQ>
__global__ void __launch_bounds__(ATT_THREADS)
    attn_bwd_dkv_kernel(float *__restrict__ dk, float *__restrict__ dv,
                        const float *__restrict__ dout, const float *__restrict__ lse,
                        const float *__restrict__ Dv, const float *__restrict__ q,
                        const float *__restrict__ k, const float *__restrict__ v, AttnArgs a)
{
    typedef AttnDkvCfg<HDMAX, BK, BQ> C;
    constexpr int RK = C::RK, CQ = C::CQ, CD = C::CD;
    FT_DYNAMIC_SMEM(float, smem);
    float *Kt = smem;                      /* [HDMAX][BK+1] */
    float *Vt = Kt + HDMAX * (BK + 1);     /* [HDMAX][BK+1] */
    float *Qt = Vt + HDMAX * (BK + 1);     /* [HDMAX][BQ+1] raw q */
    float *dOt = Qt + HDMAX * (BQ + 1);    /* [HDMAX][BQ+1] */
    float *Ps = dOt + HDMAX * (BQ + 1);    /* [BQ][BK+1] */
    float *dSs = Ps + BQ * (BK + 1);       /* [BQ][BK+1] */
    float *lse2s = dSs + BQ * (BK + 1);    /* [BQ] */
    float *Ds = lse2s + BQ;                /* [BQ] */
    int *segq = (int *)(Ds + BQ);          /* [BQ] */

    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int kt = blockIdx.x; /* early key tiles have the most queries: first */
    const int hk = blockIdx.y, b = blockIdx.z;
    const int hd = a.hd, k0 = kt * BK, kn = min(BK, a.seq - k0);
    const int nqt = (a.seq + BQ - 1) / BQ;
    const float *kb = k + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;
    const float *vb = v + (size_t)b * a.seq * a.kv_stride + (size_t)hk * hd;

    attn_load_t<HDMAX, BK>(Kt, kb, a.kv_stride, k0, kn, hd, 1.0f);
    attn_load_t<HDMAX, BK>(Vt, vb, a.kv_stride, k0, kn, hd, 1.0f);
    int segk[RK];
    float accK[RK][CD], accV[RK][CD];
#pragma unroll
    for (int r = 0; r < RK; r++) {
        segk[r] = attn_seg(a, b, k0 + ty * RK + r);
#pragma unroll
        for (int c = 0; c < CD; c++)
            accK[r][c] = accV[r][c] = 0.0f;
    }
    int2 kr = a.segment ? attn_tile_range(a, b, k0, kn) : make_int2(0, 0);

    for (int g = 0; g < a.group; g++) {
        const int h = hk * a.group + g;
        const float *qb = q + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
        const float *dob = dout + (size_t)b * a.seq * a.q_stride + (size_t)h * hd;
        const size_t row_stat = ((size_t)b * a.n_heads + h) * a.seq;
        for (int qt = k0 / BQ; qt < nqt; qt++) {
            const int q0 = qt * BQ, qn = min(BQ, a.seq - q0);
            int2 qr = a.segment ? attn_tile_range(a, b, q0, qn) : make_int2(0, 0);
            /* attn_classify with the roles of the ranges as in the forward. */
            if (ft_mask_tile_before_window(q0, k0, kn, a.window))
                break; /* later query tiles are further past the window */
            bool full = (k0 + kn - 1 <= q0) && kn == BK && qn == BQ && a.window == 0;
            if (a.segment) {
                if (kr.y < qr.x || kr.x > qr.y)
                    continue;
                full = full && kr.x == kr.y && qr.x == qr.y && kr.x == qr.x;
            }
            __syncthreads(); /* previous Qt/dOt/Ps/dSs no longer read */
            attn_load_t<HDMAX, BQ>(Qt, qb, a.q_stride, q0, qn, hd, 1.0f);
            attn_load_t<HDMAX, BQ>(dOt, dob, a.q_stride, q0, qn, hd, 1.0f);
            if (threadIdx.x < BQ) {
                int i = q0 + threadIdx.x;
                lse2s[threadIdx.x] = i < a.seq ? attn_lse2(lse[row_stat + i]) : INFINITY;
                Ds[threadIdx.x] = i < a.seq ? Dv[row_stat + i] : 0.0f;
                segq[threadIdx.x] = attn_seg(a, b, i);
            }
            __syncthreads();

            /* S^T = K Q^T and dP^T = V dO^T for this thread's RK keys x CQ queries. */
            float s[RK][CQ], dp[RK][CQ];
            attn_two_products<RK, CQ, BK, BQ>(s, dp, Kt, Qt, Vt, dOt, hd, ty, tx);
#pragma unroll
            for (int r = 0; r < RK; r++)
#pragma unroll
                for (int c = 0; c < CQ; c++) {
                    int jl = ty * RK + r, j = k0 + jl, il = tx + 16 * c, i = q0 + il;
                    bool vis = full || (ft_mask_sees(i, j, a.window) && il < qn && jl < kn &&
                                        (!a.segment || segq[il] == segk[r]));
                    float p = vis ? exp2f(s[r][c] * a.scale_log2 - lse2s[il]) : 0.0f;
                    Ps[il * (BK + 1) + jl] = p;
                    dSs[il * (BK + 1) + jl] = p * (dp[r][c] - Ds[il]);
                }
            __syncthreads();

#pragma unroll 2
            for (int i = 0; i < qn; i++) {
                float pv[RK], sv[RK], ov[CD], qv[CD];
#pragma unroll
                for (int r = 0; r < RK; r++) {
                    pv[r] = Ps[i * (BK + 1) + ty * RK + r];
                    sv[r] = dSs[i * (BK + 1) + ty * RK + r];
                }
#pragma unroll
                for (int c = 0; c < CD; c++) {
                    ov[c] = dOt[(tx + 16 * c) * (BQ + 1) + i];
                    qv[c] = Qt[(tx + 16 * c) * (BQ + 1) + i];
                }
#pragma unroll
                for (int r = 0; r < RK; r++)
#pragma unroll
                    for (int c = 0; c < CD; c++) {
                        accV[r][c] = fmaf(pv[r], ov[c], accV[r][c]);
                        accK[r][c] = fmaf(sv[r], qv[c], accK[r][c]);
                    }
            }
        }
    }

#pragma unroll
    for (int r = 0; r < RK; r++) {
        int j = k0 + ty * RK + r;
        if (j >= a.seq)
            continue;
        float *krow = dk + ((size_t)b * a.seq + j) * a.kv_stride + (size_t)hk * hd;
        float *vrow = dv + ((size_t)b * a.seq + j) * a.kv_stride + (size_t)hk * hd;
#pragma unroll
        for (int c = 0; c < CD; c++) {
            int d = tx + 16 * c;
            if (d < hd) {
                krow[d] = accK[r][c] * a.scale;
                vrow[d] = accV[r][c];
            }
        }
    }
}

/* ---------------------------------------------------------------- launcher */

template <int HDMAX, int BQ, int BK, int BK2, int BQ2>
static cudaError_t attn_bwd_run(float *dq, float *dk, float *dv, const float *dout,
                                const float *lse, const float *Dv, const float *q, const float *k,
                                const float *v, const AttnArgs &a, cudaStream_t st)
{
    typedef AttnDqCfg<HDMAX, BQ, BK> Cq;
    typedef AttnDkvCfg<HDMAX, BK2, BQ2> Ckv;
    void (*kq)(float *, const float *, const float *, const float *, const float *,
               const float *, const float *, AttnArgs) = attn_bwd_dq_kernel<HDMAX, BQ, BK>;
    void (*kkv)(float *, float *, const float *, const float *, const float *, const float *,
                const float *, const float *, AttnArgs) = attn_bwd_dkv_kernel<HDMAX, BK2, BQ2>;
    cudaError_t e = cudaFuncSetAttribute(kq, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)Cq::smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(kkv, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)Ckv::smem);
    if (e != cudaSuccess)
        return e;
    dim3 gkv((unsigned)((a.seq + BK2 - 1) / BK2), (unsigned)a.n_kv, (unsigned)a.batch);
    FT_LAUNCH(kkv, gkv, ATT_THREADS, Ckv::smem, st)(dk, dv, dout, lse, Dv, q, k, v, a);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    dim3 gq((unsigned)((a.seq + BQ - 1) / BQ), (unsigned)a.n_heads, (unsigned)a.batch);
    FT_LAUNCH(kq, gq, ATT_THREADS, Cq::smem, st)(dq, dout, lse, Dv, q, k, v, a);
    return cudaGetLastError();
}

extern "C" size_t ft_cuda_attention_bwd_scratch_bytes(ft_attn_shape s)
{
    size_t dbytes = (size_t)s.batch * s.n_heads * s.seq_len * sizeof(float);
    return attn_seg_bytes(s) + (dbytes + 255) / 256 * 256;
}

extern "C" cudaError_t ft_cuda_launch_attention_bwd(float *dq, float *dk, float *dv,
                                                    const float *dout, const float *out,
                                                    const float *lse, const float *q,
                                                    const float *k, const float *v,
                                                    const int32_t *segment, ft_attn_shape s,
                                                    void *scratch, cudaStream_t st)
{
    if (!attn_shape_ok(s))
        return cudaErrorInvalidValue;
    if (s.batch == 0 || s.seq_len == 0)
        return cudaSuccess;
    AttnArgs a = attn_args(s, segment, scratch);
    float *Dv = (float *)((char *)scratch + attn_seg_bytes(s));
    cudaError_t e;
    if (segment) {
        e = attn_seg_ranges(a, (int2 *)scratch, st);
        if (e != cudaSuccess)
            return e;
    }
    size_t rows = (size_t)s.batch * s.seq_len * s.n_heads;
    FT_LAUNCH(attn_bwd_dot_kernel, ft_cuda_grid_for(rows * FT_WARP, 256), 256, 0, st)
    (Dv, dout, out, a);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    /* Shared memory (dQ, dK/dV): 83/100 KB, 109/117 KB, 105/107 KB. */
    if (s.head_dim <= 64)
        return attn_bwd_run<64, 64, 64, 64, 64>(dq, dk, dv, dout, lse, Dv, q, k, v, a, st);
    if (s.head_dim <= 128)
        return attn_bwd_run<128, 64, 32, 64, 32>(dq, dk, dv, dout, lse, Dv, q, k, v, a, st);
    return attn_bwd_run<256, 32, 16, 32, 16>(dq, dk, dv, dout, lse, Dv, q, k, v, a, st);
}
