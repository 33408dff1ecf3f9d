/* The warpgroup side of the harness's wgmma (PTX ISA, "Asynchronous Warpgroup Level Matrix
 * Multiply-Accumulate"): the instructions are .sync.aligned over a warpgroup, four
 * consecutive warps whose first warp's index is a multiple of four, so
 *  - a warp whose warpgroup the block does not fill (a block of other than a multiple of
 *    128 threads) must not execute one;
 *  - the four warps must execute the same sequence of wgmma.fence, wgmma.mma_async (same
 *    shape, descriptors, scale-d, trans-b), wgmma.commit_group and wgmma.wait_group (same
 *    count): each warpgroup logs the sequence as its first warp to reach each position
 *    executed it, and the others are compared with the log (entries all four passed are
 *    dropped);
 *  - at the block's end, the four must have executed the same number (a warp that exited
 *    early or skipped one leaves the others waiting on a GPU), and no warp may hold a
 *    pending wgmma (its results would land in the registers of exited threads, its reads
 *    of shared memory outlive the block). */
#include <stdio.h>
#include <string.h>

#include "cudaemu_device.h"
#include "cudaemu_wgmma_smem.h"
#include "cudaemu_wgmma_state.h"

namespace cudaemu_wg {

namespace {

/* Every warp of each warpgroup executed the same number of warpgroup instructions, and
 * none exited with a wgmma pending. */
void block_end(void *p)
{
    wg_block *b = (wg_block *)p;
    if (!b)
        return;
    const uint3 bi = cudaemu_cur_block.idx;
    for (int w = 0; w < b->warps; w++) {
        const wg_warp &x = b->w[(size_t)w], &first = b->w[(size_t)(w / 4 * 4)];
        if (x.events != first.events)
            cudaemu_fail("block (%u,%u,%u): warp %d executed %ld warpgroup instructions (wgmma.*), "
                         "warp %d of its warpgroup %ld: every warp of a warpgroup must execute "
                         "each one (.sync.aligned); one exited early or skipped some",
                         bi.x, bi.y, bi.z, w, x.events, w / 4 * 4, first.events);
        if (!x.ops.empty()) {
            const wg_op &o = x.ops.front();
            cudaemu_fail("block (%u,%u,%u): warp %d exited with the wgmma.mma_async at %s:%d "
                         "pending%s: a wgmma.wait_group must complete it before its results "
                         "(or its exit) are used",
                         bi.x, bi.y, bi.z, w, o.op.file, o.op.line,
                         o.group >= x.committed ? " (never committed by wgmma.commit_group)"
                                                : "");
        }
    }
    delete b;
}

} // namespace

wg_block *block_state()
{
    void **slot = cudaemu_block_ext(block_end);
    if (!*slot) {
        const dim3 bd = cudaemu_cur_block.dim;
        wg_block *b = new wg_block;
        b->warps = (int)((bd.x * bd.y * bd.z + 31) / 32);
        b->w.resize((size_t)b->warps);
        b->g.resize((size_t)(b->warps + 3) / 4);
        *slot = b;
    }
    return (wg_block *)*slot;
}

void describe(const wg_args &e, char *buf, size_t n)
{
    if (e.kind == EV_MMA && e.a)
        snprintf(buf, n, "wgmma.mma_async m64n%dk16 at %s:%d (A from registers, B descriptor "
                 "0x%016llx, scale-d %d, trans-b %d)",
                 e.n, e.file, e.line, (unsigned long long)e.desc_b, e.scale_d, e.trans_b);
    else if (e.kind == EV_MMA)
        snprintf(buf, n, "wgmma.mma_async m64n%dk16 at %s:%d (A descriptor 0x%016llx, B "
                 "descriptor 0x%016llx, scale-d %d, trans-b %d)",
                 e.n, e.file, e.line, (unsigned long long)e.desc_a, (unsigned long long)e.desc_b,
                 e.scale_d, e.trans_b);
    else if (e.kind == EV_WAIT)
        snprintf(buf, n, "wgmma.wait_group %d at %s:%d", e.wait, e.file, e.line);
    else
        snprintf(buf, n, "%s at %s:%d", ev_name[e.kind], e.file, e.line);
}

bool same_instruction(const wg_args &x, const wg_args &y)
{
    return x.kind == y.kind && x.n == y.n && (x.a != NULL) == (y.a != NULL) &&
           x.desc_a == y.desc_a && x.desc_b == y.desc_b && x.scale_d == y.scale_d &&
           x.trans_b == y.trans_b && x.wait == y.wait && x.line == y.line &&
           strcmp(x.file, y.file) == 0;
}

void record(wg_block *b, int warp, const wg_args &e)
{
    wg_group &G = b->g[(size_t)(warp / 4)];
    wg_warp &W = b->w[(size_t)warp];
    long pos = W.events++;
    if (pos - G.base < (long)G.log.size()) {
        const wg_args &o = G.log[(size_t)(pos - G.base)];
        if (!same_instruction(o, e)) {
            char mine[256], theirs[256];
            describe(e, mine, sizeof mine);
            describe(o, theirs, sizeof theirs);
            cudaemu_fail("warpgroup %d: warp %d executes %s as its warpgroup instruction #%ld, "
                         "warp %d executed %s: the four warps of a warpgroup must execute the "
                         "same wgmma instructions (shape, descriptors, scale-d) in the same order",
                         warp / 4, warp, mine, pos, G.by[(size_t)(pos - G.base)], theirs);
        }
    } else {
        G.log.push_back(e);
        G.by.push_back(warp);
    }
    long lo = W.events;
    for (int r = warp / 4 * 4; r < warp / 4 * 4 + 4; r++)
        lo = b->w[(size_t)r].events < lo ? b->w[(size_t)r].events : lo;
    while (G.base < lo) {
        G.log.pop_front();
        G.by.pop_front();
        G.base++;
    }
}

/* Checked before the collective, so that a short block is named as such rather than as a
 * missing lane. */
void check_warpgroup(const char *what, const char *file, int line)
{
    const dim3 bd = cudaemu_cur_block.dim;
    int threads = (int)(bd.x * bd.y * bd.z), tid = cudaemu_wg_thread_index();
    int first = tid / 128 * 4;
    if ((first + 4) * 32 > threads)
        cudaemu_fail("%s at %s:%d: thread %d is in warpgroup %d (warps %d-%d), which the block of "
                     "%d threads does not fill: a warpgroup is four complete warps (a block "
                     "issuing wgmma has a multiple of 128 threads)",
                     what, file, line, tid, first / 4, first, first + 3, threads);
}

} // namespace cudaemu_wg
