/* mma.sync, ldmatrix and cp.async on the CPU execution harness, written from the PTX
 * ISA's definitions (the fragment tables of "mma.m16n8k16" and "ldmatrix", the group
 * semantics of "cp.async.wait_group"), not from the kernels that use them; the layouts
 * are restated in cuda/cuda_mma.cuh. test_emu_mma.cu checks them against plain matmuls
 * and against each other.
 *
 * mma and ldmatrix are warp collectives (cudaemu_warp_collective): all 32 lanes must
 * arrive at the same instruction; the last one computes every lane's result.
 *
 * Numerics of mma: the products of two bf16 are exact in fp32; the harness adds the 16
 * products and C in fp64 and rounds once. Tensor cores add in an unspecified order and
 * precision of at least fp32, so the hardware can differ in the last bits: kernels are
 * tested against fp32 references with tolerances, never bitwise.
 *
 * cp.async copies are held per thread and land when a wait releases their group: a thread
 * that reads shared memory before waiting (or another thread before the barrier that
 * follows the wait) sees the old contents. Copies still pending when the thread exits
 * never land. A landed copy is a generic-proxy write: wgmma sees it only after the
 * thread's fence.proxy.async (cudaemu_wgmma_smem.cc keeps the account).
 *
 * cvt.rn.bf16x2.f32 d, a, b: a rounded to nearest even into d's upper half, b into its
 * lower half (the PTX ISA's "cvt"); a NaN stays a quiet NaN (the payload the hardware
 * gives it is not modelled: no result of a product shows it). */
#include <stdlib.h>
#include <string.h>

#include "cudaemu_device.h"
#include "cudaemu_warp_matrix.h"
#include "cudaemu_wgmma_smem.h"
#include "util/bf16.h"

namespace {

float bf16_lo(uint32_t r) { return __uint_as_float(r << 16); }
float bf16_hi(uint32_t r) { return __uint_as_float(r & 0xffff0000u); }

/* ---------------------------------------------------------------- mma.m16n8k16 */

struct mma_lane {
    const uint32_t *a;
    const uint32_t *b;
    const float *c;
    float *d;
};

void mma_complete(void *const lane_data[32])
{
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const mma_lane *m = (const mma_lane *)lane_data[l];
        int g = l >> 2, t = l & 3;
        /* A: a0,a1 row g; a2,a3 row g+8; a4,a5 row g, col +8; a6,a7 row g+8, col +8 */
        for (int reg = 0; reg < 4; reg++) {
            int row = g + ((reg & 1) ? 8 : 0), col = 2 * t + ((reg & 2) ? 8 : 0);
            A[row][col] = bf16_lo(m->a[reg]);
            A[row][col + 1] = bf16_hi(m->a[reg]);
        }
        /* B (k x n): b0,b1 rows 2t, 2t+1; b2,b3 rows 2t+8, 2t+9; column g */
        for (int reg = 0; reg < 2; reg++) {
            int k = 2 * t + 8 * reg;
            B[k][g] = bf16_lo(m->b[reg]);
            B[k + 1][g] = bf16_hi(m->b[reg]);
        }
        /* C: c0,c1 row g; c2,c3 row g+8; columns 2t, 2t+1 */
        for (int i = 0; i < 4; i++)
            C[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)] = m->c[i];
    }
    float D[16][8];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            double s = C[i][j];
            for (int k = 0; k < 16; k++)
                s += (double)A[i][k] * (double)B[k][j];
            D[i][j] = (float)s;
        }
    for (int l = 0; l < 32; l++) {
        mma_lane *m = (mma_lane *)lane_data[l];
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; i++)
            m->d[i] = D[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)];
    }
}

/* ---------------------------------------------------------------- ldmatrix */

struct ldmatrix_lane {
    const void *addr;
    uint32_t *r;
    int count;
    bool trans;
    const char *file;
    int line;
};

void ldmatrix_complete(void *const lane_data[32])
{
    const ldmatrix_lane *l0 = (const ldmatrix_lane *)lane_data[0];
    int count = l0->count;
    uint16_t M[4][8][8];
    for (int l = 0; l < 32; l++) {
        const ldmatrix_lane *x = (const ldmatrix_lane *)lane_data[l];
        if (x->count != count || x->trans != l0->trans)
            cudaemu_fail("ldmatrix at %s:%d: lane %d loads %d matrices%s, lane 0 %d%s (the "
                         "lanes must execute the same instruction)",
                         x->file, x->line, l, x->count, x->trans ? " transposed" : "", count,
                         l0->trans ? " transposed" : "");
    }
    for (int i = 0; i < count; i++)
        for (int j = 0; j < 8; j++) {
            const ldmatrix_lane *x = (const ldmatrix_lane *)lane_data[8 * i + j];
            uintptr_t a = (uintptr_t)x->addr;
            if (a % 16)
                cudaemu_fail("ldmatrix at %s:%d: lane %d's row address %p is not 16-byte "
                             "aligned",
                             x->file, x->line, 8 * i + j, x->addr);
            if (cudaemu_find_alloc(x->addr, NULL, NULL) == 0)
                cudaemu_fail("ldmatrix at %s:%d: lane %d's row address %p is global memory "
                             "(ldmatrix reads shared memory)",
                             x->file, x->line, 8 * i + j, x->addr);
            memcpy(M[i][j], x->addr, 16);
        }
    for (int l = 0; l < 32; l++) {
        ldmatrix_lane *x = (ldmatrix_lane *)lane_data[l];
        int row = l >> 2, col = 2 * (l & 3);
        for (int i = 0; i < count; i++) {
            uint16_t lo, hi;
            if (!x->trans) {
                lo = M[i][row][col];
                hi = M[i][row][col + 1];
            } else {
                lo = M[i][col][row];
                hi = M[i][col + 1][row];
            }
            x->r[i] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
    }
}

/* ---------------------------------------------------------------- cp.async */

struct async_copy {
    char *dst;
    const char *src;
    int bytes, src_bytes;
    long group; /* the commit that closes it: copies with group < committed are committed */
};

struct async_state {
    async_copy *v;
    int n, cap;
    long committed;
};

void async_drop(void *p)
{
    async_state *s = (async_state *)p;
    free(s->v);
    free(s);
}

async_state *async_of_thread()
{
    void **slot = cudaemu_thread_ext(async_drop);
    if (!*slot) {
        *slot = calloc(1, sizeof(async_state));
        if (!*slot)
            cudaemu_fail("out of host memory for cp.async state");
    }
    return (async_state *)*slot;
}

} // namespace

void cudaemu_mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                               const float c[4], const char *file, int line)
{
    mma_lane m = {a, b, c, d};
    cudaemu_warp_collective("mma.sync.m16n8k16", 0xffffffffu, &m, mma_complete, file, line);
}

void cudaemu_ldmatrix(uint32_t *r, int count, bool trans, const void *smem_row, const char *file,
                      int line)
{
    ldmatrix_lane x = {smem_row, r, count, trans, file, line};
    cudaemu_warp_collective("ldmatrix.m8n8", 0xffffffffu, &x, ldmatrix_complete, file, line);
}

void cudaemu_cp_async(void *smem_dst, const void *gmem_src, int bytes, int src_bytes,
                      const char *file, int line)
{
    if (bytes != 4 && bytes != 8 && bytes != 16)
        cudaemu_fail("cp.async at %s:%d: %d bytes (4, 8 or 16)", file, line, bytes);
    if (src_bytes < 0 || src_bytes > bytes)
        cudaemu_fail("cp.async at %s:%d: src-size %d outside 0..%d", file, line, src_bytes, bytes);
    if ((uintptr_t)smem_dst % (uintptr_t)bytes || (uintptr_t)gmem_src % (uintptr_t)bytes)
        cudaemu_fail("cp.async at %s:%d: %p <- %p not aligned to the %d-byte copy", file, line,
                     smem_dst, gmem_src, bytes);
    if (cudaemu_find_alloc(smem_dst, NULL, NULL) == 0)
        cudaemu_fail("cp.async at %s:%d: destination %p is global memory (it must be shared)",
                     file, line, smem_dst);
    if (src_bytes > 0)
        cudaemu_check_device_range(gmem_src, (size_t)src_bytes, "cp.async", "source");
    async_state *s = async_of_thread();
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        async_copy *v = (async_copy *)realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            cudaemu_fail("out of host memory for cp.async state");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = async_copy{(char *)smem_dst, (const char *)gmem_src, bytes, src_bytes,
                              s->committed};
}

void cudaemu_cp_async_commit(void)
{
    async_of_thread()->committed++;
}

void cudaemu_cp_async_wait(int newest_in_flight, const char *file, int line)
{
    if (newest_in_flight < 0)
        cudaemu_fail("cp.async.wait_group at %s:%d: %d groups", file, line, newest_in_flight);
    async_state *s = async_of_thread();
    long done_below = s->committed - newest_in_flight;
    int kept = 0;
    for (int i = 0; i < s->n; i++) {
        async_copy *c = &s->v[i];
        if (c->group < done_below) {
            memcpy(c->dst, c->src, (size_t)c->src_bytes);
            memset(c->dst + c->src_bytes, 0, (size_t)(c->bytes - c->src_bytes));
            cudaemu_async_proxy_landed(c->dst, (size_t)c->bytes); /* for fence.proxy.async */
        } else {
            s->v[kept++] = *c;
        }
    }
    s->n = kept;
}

/* round to nearest even as the harness's other bf16 stand-ins (cuBLASLt's, NCCL's) do */
uint32_t cudaemu_cvt_rn_bf16x2_f32(float a, float b)
{
    return ((uint32_t)ft_f32_to_bf16(a) << 16) | ft_f32_to_bf16(b);
}
