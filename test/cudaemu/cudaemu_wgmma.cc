/* Hopper's warpgroup MMA (wgmma.mma_async.m64nNk16.f32.bf16.bf16, wgmma.fence,
 * wgmma.commit_group, wgmma.wait_group) on the CPU execution harness, written from the
 * PTX ISA's definitions ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate"), not
 * from the kernels that use them; the layouts are restated in cuda/cuda_wgmma.cuh and the
 * shared-memory operands are decoded by cudaemu_wgmma_smem.cc.
 *
 * A warpgroup is four consecutive warps, the first one's index a multiple of four. Warp r
 * of it (r = warp % 4) owns rows 16r .. 16r+15 of A and D, so each warp's part of a
 * wgmma is independent of the others': every instruction here is a warp collective
 * (cudaemu_warp_collective: all 32 lanes, same instruction and operands), and the state
 * is per warp. The four warps must execute the same sequence of warpgroup instructions:
 * cudaemu_wgmma_warpgroup.cc checks that, and at the block's end that no warp left early
 * or holds a pending wgmma.
 *
 * Asynchrony, as the ISA states it: a wgmma.mma_async reads its operands at some point
 * before the wgmma.wait_group that completes its group, and only then are its results
 * in the accumulator registers. The harness computes at issue and lands the results at
 * that wait (until then the registers hold their old values), and checks at the wait that
 * nothing the instruction reads changed in between:
 *  - the accumulators: each lane's d must hold what it held at issue (or the landed result
 *    of an earlier wgmma on the same d: chaining k steps into one accumulator before a
 *    single wait is the intended use, each step's input being the previous step's result);
 *  - the shared-memory operands: re-read at the wait, bit for bit what was read at issue.
 * Also: a wgmma.fence between the last wait (or the start) and the next wgmma.mma_async
 * (the ISA requires it before the first wgmma and between register accesses and a
 * wgmma reading those registers); wait_group N completes all but the N newest committed
 * groups (uncommitted wgmmas stay pending).
 *
 * Numerics as mma.sync's in cudaemu_warp_matrix.cc: the bf16 products are exact; the
 * harness adds the accumulator (when scale-d is non-zero, else 0) and the 16 products in
 * fp64 in k order and rounds once to fp32. */
#include <stdio.h>
#include <string.h>

#include <vector>

#include "cudaemu_device.h"
#include "cudaemu_wgmma.h"
#include "cudaemu_wgmma_smem.h"
#include "cudaemu_wgmma_state.h"

using namespace cudaemu_wg;

namespace {

/* Lane l's register `reg` of an m64nN accumulator is D[row][col] of its warp's 16 rows. */
void lane_element(int l, int reg, int *row, int *col)
{
    int g = l >> 2, t = l & 3, h = reg & 3;
    *row = g + (h >= 2 ? 8 : 0);
    *col = 8 * (reg >> 2) + 2 * t + (h & 1);
}

bool same_bits(float x, float y) { return memcmp(&x, &y, sizeof x) == 0; }


void mma_issue(wg_block *b, int warp, void *const lane_data[32]);
void wait_complete_groups(wg_block *b, int warp, const wg_args &e);

/* The last lane to arrive: checks the 32 lanes agree, then executes for the warp. */
void complete(void *const lane_data[32])
{
    const wg_args &e = *(const wg_args *)lane_data[0];
    for (int l = 1; l < 32; l++) {
        const wg_args &x = *(const wg_args *)lane_data[l];
        if (!same_instruction(x, e)) {
            char mine[256], theirs[256];
            describe(x, mine, sizeof mine);
            describe(e, theirs, sizeof theirs);
            cudaemu_fail("warp %d: lane %d executes %s, lane 0 %s (the lanes of a warp must "
                         "execute the same warpgroup instruction with the same operands: "
                         ".sync.aligned)",
                         e.tid / 32, l, mine, theirs);
        }
    }
    wg_block *b = block_state();
    int warp = e.tid / 32;
    record(b, warp, e);
    wg_warp &W = b->w[(size_t)warp];
    switch (e.kind) {
    case EV_FENCE:
        W.fenced = true;
        break;
    case EV_COMMIT:
        W.committed++;
        break;
    case EV_WAIT:
        wait_complete_groups(b, warp, e);
        W.fenced = false;
        break;
    default:
        mma_issue(b, warp, lane_data);
    }
}

void arrive(wg_args *x, const char *name)
{
    check_warpgroup(name, x->file, x->line);
    x->tid = cudaemu_wg_thread_index();
    cudaemu_warp_collective(name, 0xffffffffu, x, complete, x->file, x->line);
}

/* ---------------------------------------------------------------- mma_async */

void mma_issue(wg_block *b, int warp, void *const lane_data[32])
{
    const wg_args &e = *(const wg_args *)lane_data[0];
    wg_warp &W = b->w[(size_t)warp];
    int n = e.n, r = warp % 4;
    if (n < 8 || n > 256 || n % 8)
        cudaemu_fail("wgmma.mma_async at %s:%d: m64n%dk16 (N is a multiple of 8 in 8..256)",
                     e.file, e.line, n);
    if (e.trans_b != 0 && e.trans_b != 1)
        cudaemu_fail("wgmma.mma_async at %s:%d: imm-trans-b %d (0 or 1)", e.file, e.line,
                     e.trans_b);
    if (!W.fenced)
        cudaemu_fail("wgmma.mma_async at %s:%d: warp %d issues it with no wgmma.fence since its "
                     "last wgmma.wait_group (or its start): the ISA requires wgmma.fence before "
                     "the first wgmma.mma_async and between other accesses of its accumulator or "
                     "A registers and the wgmma.mma_async that uses them",
                     e.file, e.line, warp);
    W.ops.emplace_back();
    wg_op &o = W.ops.back();
    o.op = e;
    o.a_from_regs = e.a != NULL;
    o.group = W.committed;
    o.a.resize(256);
    o.b.resize((size_t)n * 16);
    o.out.resize((size_t)n * 16);
    o.held.resize((size_t)n * 16);
    if (e.a) {
        /* a[0]: row g, k 2t..2t+1; a[1]: row g+8; a[2], a[3]: k + 8; lower k in bits 0-15 */
        for (int l = 0; l < 32; l++) {
            const uint32_t *a = ((const wg_args *)lane_data[l])->a;
            int g = l >> 2, t = l & 3;
            for (int reg = 0; reg < 4; reg++) {
                int row = g + ((reg & 1) ? 8 : 0), k = 2 * t + ((reg & 2) ? 8 : 0);
                o.a[(size_t)(row * 16 + k)] = (uint16_t)(a[reg] & 0xffffu);
                o.a[(size_t)(row * 16 + k + 1)] = (uint16_t)(a[reg] >> 16);
            }
        }
    } else {
        cudaemu_wg_read_operand(cudaemu_wg_operand{e.desc_a, false, "A"}, 16 * r, 16, o.a.data(),
                                true, e.file, e.line);
    }
    cudaemu_wg_read_operand(cudaemu_wg_operand{e.desc_b, e.trans_b != 0, "B"}, 0, n, o.b.data(),
                            true, e.file, e.line);
    /* each lane's accumulator input: the pending result of the latest earlier wgmma on the
     * same registers (a chain), else what they hold now */
    std::vector<float> in((size_t)n * 16);
    for (int l = 0; l < 32; l++) {
        float *d = ((const wg_args *)lane_data[l])->d;
        o.d[l] = d;
        const wg_op *pred = NULL;
        for (size_t i = 0; i + 1 < W.ops.size(); i++) {
            const wg_op &p = W.ops[i];
            float *pd = p.d[l];
            if (pd == d && p.op.n == n)
                pred = &p;
            else if (pd < d + n / 2 && d < pd + p.op.n / 2)
                cudaemu_fail("wgmma.mma_async at %s:%d: lane %d's accumulators (%d registers) "
                             "partly overlap those of the pending wgmma.mma_async at %s:%d (%d "
                             "registers): a chain accumulates into the same registers",
                             e.file, e.line, l, n / 2, p.op.file, p.op.line, p.op.n / 2);
        }
        for (int reg = 0; reg < n / 2; reg++) {
            int row, col;
            lane_element(l, reg, &row, &col);
            size_t i = (size_t)(row * n + col);
            o.held[i] = d[reg];
            in[i] = pred ? pred->out[i] : d[reg];
        }
    }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < n; j++) {
            double s = e.scale_d ? (double)in[(size_t)(i * n + j)] : 0.0;
            for (int k = 0; k < 16; k++)
                s += (double)__uint_as_float((uint32_t)o.a[(size_t)(i * 16 + k)] << 16) *
                     (double)__uint_as_float((uint32_t)o.b[(size_t)(j * 16 + k)] << 16);
            o.out[(size_t)(i * n + j)] = (float)s;
        }
}

/* ---------------------------------------------------------------- wait_group */

/* The operand still holds, bit for bit, what the wgmma read at issue. */
void check_unchanged(const wg_op &o, const cudaemu_wg_operand &op, int mn0, int rows,
                     const std::vector<uint16_t> &then, const wg_args &wait)
{
    std::vector<uint16_t> now((size_t)rows * 16);
    cudaemu_wg_read_operand(op, mn0, rows, now.data(), false, o.op.file, o.op.line);
    for (int i = 0; i < rows * 16; i++)
        if (now[(size_t)i] != then[(size_t)i])
            cudaemu_fail("wgmma.wait_group at %s:%d completes the wgmma.mma_async at %s:%d, whose "
                         "operand %s changed in shared memory since its issue (element (%d, k %d) "
                         "at shared-window address 0x%x: 0x%04x then, 0x%04x now): the ISA "
                         "requires shared memory a wgmma reads to stay unchanged until the "
                         "wgmma.wait_group that completes it",
                         wait.file, wait.line, o.op.file, o.op.line, op.name, mn0 + i / 16, i % 16,
                         cudaemu_wg_element_address(op, mn0 + i / 16, i % 16), then[(size_t)i],
                         now[(size_t)i]);
}

void wait_complete_groups(wg_block *b, int warp, const wg_args &e)
{
    wg_warp &W = b->w[(size_t)warp];
    if (e.wait < 0 || e.wait > 7)
        cudaemu_fail("wgmma.wait_group at %s:%d: %d pending groups (0..7)", e.file, e.line, e.wait);
    long done_below = W.committed - e.wait;
    size_t landed = 0;
    for (; landed < W.ops.size() && W.ops[landed].group < done_below; landed++) {
        wg_op &o = W.ops[landed];
        int n = o.op.n;
        for (int l = 0; l < 32; l++)
            for (int reg = 0; reg < n / 2; reg++) {
                int row, col;
                lane_element(l, reg, &row, &col);
                float then = o.held[(size_t)(row * n + col)], now = o.d[l][reg];
                if (!same_bits(then, now))
                    cudaemu_fail("wgmma.wait_group at %s:%d completes the wgmma.mma_async at "
                                 "%s:%d, whose accumulator (warp %d lane %d, register %d) was "
                                 "written before this wait (%a at issue, %a now): the ISA forbids "
                                 "accessing the accumulators of a pending wgmma.mma_async",
                                 e.file, e.line, o.op.file, o.op.line, warp, l, reg, (double)then,
                                 (double)now);
            }
        if (!o.a_from_regs)
            check_unchanged(o, cudaemu_wg_operand{o.op.desc_a, false, "A"}, 16 * (warp % 4), 16,
                            o.a, e);
        check_unchanged(o, cudaemu_wg_operand{o.op.desc_b, o.op.trans_b != 0, "B"}, 0, n, o.b, e);
        for (int l = 0; l < 32; l++)
            for (int reg = 0; reg < n / 2; reg++) {
                int row, col;
                lane_element(l, reg, &row, &col);
                size_t i = (size_t)(row * n + col);
                o.d[l][reg] = o.out[i];
                /* a later pending wgmma on the same registers now expects this result */
                for (size_t j = landed + 1; j < W.ops.size(); j++)
                    if (W.ops[j].d[l] == o.d[l])
                        W.ops[j].held[i] = o.out[i];
            }
    }
    W.ops.erase(W.ops.begin(), W.ops.begin() + (long)landed);
}

} // namespace

void cudaemu_wgmma_fence(const char *file, int line)
{
    wg_args x = {EV_FENCE, 0, NULL, 0, NULL, 0, 0, 0, 0, 0, file, line};
    arrive(&x, "wgmma.fence");
}

void cudaemu_wgmma_commit(const char *file, int line)
{
    wg_args x = {EV_COMMIT, 0, NULL, 0, NULL, 0, 0, 0, 0, 0, file, line};
    arrive(&x, "wgmma.commit_group");
}

void cudaemu_wgmma_wait(int pending, const char *file, int line)
{
    wg_args x = {EV_WAIT, 0, NULL, 0, NULL, 0, 0, 0, 0, pending, file, line};
    arrive(&x, "wgmma.wait_group");
}

void cudaemu_wgmma_bf16(float *d, int n, const uint32_t *a_regs, uint64_t desc_a, uint64_t desc_b,
                        int scale_d, int trans_b, const char *file, int line)
{
    wg_args x = {EV_MMA, 0,      d,       n,      a_regs, a_regs ? 0 : desc_a,
                 desc_b, scale_d != 0, trans_b, 0, file, line};
    arrive(&x, "wgmma.mma_async");
}
