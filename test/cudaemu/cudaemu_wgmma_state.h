/* The per-block state of the harness's wgmma (cudaemu_wgmma.cc, cudaemu_wgmma_warpgroup.cc):
 * each warp's pending wgmmas, commit count and fence state, each warpgroup's log of the
 * instructions its warps execute. Internal to the harness. */
#ifndef FT_CUDAEMU_WGMMA_STATE_H
#define FT_CUDAEMU_WGMMA_STATE_H

#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <vector>

namespace cudaemu_wg {

enum ev_kind { EV_FENCE, EV_MMA, EV_COMMIT, EV_WAIT };
inline const char *const ev_name[] = {"wgmma.fence", "wgmma.mma_async", "wgmma.commit_group",
                               "wgmma.wait_group"};

/* One lane's operands of a warpgroup instruction; also an entry of a warpgroup's log. */
struct wg_args {
    int kind;
    int tid;
    float *d;
    int n;
    const uint32_t *a; /* A from registers, or NULL */
    uint64_t desc_a, desc_b;
    int scale_d, trans_b, wait;
    const char *file;
    int line;
};

/* One warp's part of a wgmma.mma_async, pending until a wait completes its group. */
struct wg_op {
    wg_args op;              /* lane 0's operands */
    bool a_from_regs;
    long group;              /* the commit that closes it */
    float *d[32];            /* each lane's accumulators */
    std::vector<uint16_t> a; /* A's 16 rows x 16 of this warp as read at issue */
    std::vector<uint16_t> b; /* B as n x 16 (b[n * 16 + k]) as read at issue */
    std::vector<float> out;  /* 16 x n results (row-major), landing at the wait */
    std::vector<float> held; /* 16 x n: what the accumulators must hold at the wait */
};

struct wg_warp {
    std::vector<wg_op> ops; /* issue order */
    long committed = 0;
    bool fenced = false;
    long events = 0; /* warpgroup instructions executed */
};

struct wg_group {
    std::deque<wg_args> log; /* entries base .. base + size - 1; trimmed when all 4 passed */
    std::deque<int> by;      /* the warp that executed each first */
    long base = 0;
};

struct wg_block {
    int warps;
    std::vector<wg_warp> w;
    std::vector<wg_group> g;
};

/* The running block's state, created at its first warpgroup instruction; at the block's
 * end every warp of a warpgroup must have executed the same number of warpgroup
 * instructions and none may hold a pending wgmma. */
wg_block *block_state();
/* The warp's instruction joins its warpgroup's sequence: it must equal the one the first
 * warp to get there executed at that position. */
void record(wg_block *b, int warp, const wg_args &e);
/* Fails unless the running thread's warpgroup is four complete warps of the block. */
void check_warpgroup(const char *what, const char *file, int line);
void describe(const wg_args &e, char *buf, size_t n);
bool same_instruction(const wg_args &x, const wg_args &y);

} // namespace cudaemu_wg

#endif
