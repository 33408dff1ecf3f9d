/* Template of the elementwise attention tile kernels, included by
 * cpu_attention_tile.c once per instruction set (no include guard on purpose).
 * The includer defines ATTN_FN(name) (the suffixed name) and ATTN_TARGET (the
 * function attribute selecting the instruction set, or nothing). The loops are
 * plain C with `omp simd`; the compiler vectorises them for that target,
 * ft_cpu_expf included. See cpu_attention_tile.h for what each kernel computes. */

#define TILE_ FT_ATTN_TILE

static ATTN_TARGET void ATTN_FN(online_softmax_t)(float *restrict st, int kn, float *restrict m,
                                                  float *restrict l, float *restrict acc, int hd)
{
    float m_new[TILE_], m_safe[TILE_], alpha[TILE_], sum[TILE_];
#pragma omp simd
    for (int i = 0; i < TILE_; i++)
        m_new[i] = m[i];
    for (int j = 0; j < kn; j++) {
        const float *row = st + j * TILE_;
#pragma omp simd
        for (int i = 0; i < TILE_; i++)
            m_new[i] = row[i] > m_new[i] ? row[i] : m_new[i];
    }
#pragma omp simd
    for (int i = 0; i < TILE_; i++) {
        /* Nothing visible yet: subtract 0 instead of -inf so that exp sees
         * -inf - 0 = -inf (-> 0), not -inf - -inf = NaN. */
        m_safe[i] = m_new[i] == -INFINITY ? 0.0f : m_new[i];
        alpha[i] = ft_cpu_expf(m[i] - m_safe[i]); /* 0 when m_i = -inf */
        sum[i] = 0.0f;
    }
    for (int j = 0; j < kn; j++) {
        float *row = st + j * TILE_;
#pragma omp simd
        for (int i = 0; i < TILE_; i++) {
            float p = ft_cpu_expf(row[i] - m_safe[i]);
            row[i] = p;
            sum[i] += p;
        }
    }
    for (int i = 0; i < TILE_; i++) {
        l[i] = l[i] * alpha[i] + sum[i];
        m[i] = m_new[i];
        if (alpha[i] != 1.0f) {
            float *ai = acc + (size_t)i * hd;
            float a = alpha[i];
#pragma omp simd
            for (int d = 0; d < hd; d++)
                ai[d] *= a;
        }
    }
}

static ATTN_TARGET void ATTN_FN(probs_rows)(float *restrict s, int rows, int cols,
                                            const float *restrict lse_eff)
{
    for (int i = 0; i < rows; i++) {
        float *si = s + i * TILE_;
        float li = lse_eff[i];
#pragma omp simd
        for (int j = 0; j < cols; j++)
            si[j] = ft_cpu_expf(si[j] - li);
    }
}

static ATTN_TARGET void ATTN_FN(probs_cols)(float *restrict s, int rows,
                                            const float *restrict lse_eff)
{
    for (int j = 0; j < rows; j++) {
        float *sj = s + j * TILE_;
#pragma omp simd
        for (int i = 0; i < TILE_; i++)
            sj[i] = ft_cpu_expf(sj[i] - lse_eff[i]);
    }
}

static ATTN_TARGET void ATTN_FN(dscores_rows)(float *restrict dp, const float *restrict p, int rows,
                                              int cols, const float *restrict D)
{
    for (int i = 0; i < rows; i++) {
        float di = D[i];
#pragma omp simd
        for (int j = 0; j < cols; j++)
            dp[i * TILE_ + j] = p[i * TILE_ + j] * (dp[i * TILE_ + j] - di);
    }
}

static ATTN_TARGET void ATTN_FN(dscores_cols)(float *restrict dp, const float *restrict p, int rows,
                                              const float *restrict D)
{
    for (int j = 0; j < rows; j++) {
#pragma omp simd
        for (int i = 0; i < TILE_; i++)
            dp[j * TILE_ + i] = p[j * TILE_ + i] * (dp[j * TILE_ + i] - D[i]);
    }
}

/* Rows of c beyond the last multiple of 4 (the register-blocked kernels take 4
 * rows at a time): one row at a time, vectorised along the row. */
static ATTN_TARGET void ATTN_FN(gemm_acc_rows)(float *restrict c, int ldc, const float *restrict a,
                                               size_t a_row, size_t a_col,
                                               const float *restrict b, size_t ldb, int i0, int m,
                                               int n, int k)
{
    for (int i = i0; i < m; i++) {
        float *ci = c + (size_t)i * ldc;
        for (int p = 0; p < k; p++) {
            float av = a[(size_t)i * a_row + (size_t)p * a_col];
            const float *bp = b + (size_t)p * ldb;
#pragma omp simd
            for (int j = 0; j < n; j++)
                ci[j] += av * bp[j];
        }
    }
}

#undef TILE_
