#!/usr/bin/env python3
"""Deliberate defects in the CUDA backend, and what in the harness catches each.

    test/cudaemu/defects.py [--keep] [NAME ...]

Makes a scratch worktree of HEAD, builds it once with --with-cuda-emulation, then for
each defect: applies it (one exact textual change), rebuilds, runs the test that should
catch it, and reports whether that test failed and the first line that says why (for a
test run in every thread order, which orders failed). A defect whose text no longer occurs
exactly once in HEAD stops the run before the build: re-target it. One that does not
compile is reported as such, never as caught. Exit status 0 when every defect was caught.
The table it prints has the columns of the one in doc/cuda-emulation.md ("Evidence that
it catches bugs"), which summarises its last column. Developer tool: all 63 take about 17
minutes on two cores (a rebuild and a test per defect), so CI does not run it.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ORDERS = ("forward", "reverse", "random", "warp-serial")


def all_orders(test):
    """Runs test in every thread order of the harness (not stopping at the first that
    fails, so the table can say which orders expose the defect); fails if any does."""
    return (f"rc=0; for o in {' '.join(ORDERS)}; do CUDAEMU_ORDER=$o ./test/cuda/{test} || "
            "{ rc=1; echo \"defects: order $o: failed\"; }; done; exit $rc")


OPS_ALL_ORDERS = all_orders("test_cuda_ops")
TRAIN = "FT_CUDA_TRAIN_CASES='{}' make check TESTS=test/cuda/test_cuda_train.sh"
ATTN_TC = "./test/cuda/test_attention_tc"
ATTN_TC_ALL_ORDERS = all_orders("test_attention_tc")
ATTN_CUDNN = "./test/cuda/test_attention_cudnn"
NORMAL_FILL = ("make test/cuda/test_cuda_normal_fill >/dev/null 2>&1 && "
               "./test/cuda/test_cuda_normal_fill")
# built after the defect is applied (the tree's build makes only the three above): a
# test that is not there must not count as a defect caught
OPS_BF16 = "make test/cuda/test_cuda_ops_bf16 >/dev/null 2>&1 && ./test/cuda/test_cuda_ops_bf16"
OVERLAP = "make check TESTS=test/cuda/test_cuda_overlap.sh"

# name, file, old text, new text, what the defect is, the command that must fail
DEFECTS = [
    ("barrier-rmsnorm-dw", "cuda/cuda_rmsnorm.cu",
     "    red[threadIdx.y][threadIdx.x] = acc;\n    __syncthreads();\n",
     "    red[threadIdx.y][threadIdx.x] = acc;\n",
     "removed barrier: rmsnorm's dw partial sums read shared memory other warps write",
     OPS_ALL_ORDERS),
    ("barrier-attention-tile", "cuda/cuda_attention.cu",
     "        __syncthreads(); /* the previous tile's Kt/Vs/Pt are no longer read */\n",
     "",
     "removed barrier: attention forward overwrites a K/V tile other warps still read",
     OPS_ALL_ORDERS),
    ("barrier-block-sum", "cuda/cuda_common.cuh",
     "        shared[warp] = v;\n    __syncthreads();\n    T r = lane < nwarps ? shared[lane] : T(0);",
     "        shared[warp] = v;\n    T r = lane < nwarps ? shared[lane] : T(0);",
     "removed barrier: a block sum reads the warps' partial sums before all are written",
     OPS_ALL_ORDERS),
    ("bound-rmsnorm-fwd", "cuda/cuda_rmsnorm.cu",
     "        for (int j = threadIdx.x * FT_VEC; j < dim; j += blockDim.x * FT_VEC) {\n            float v[FT_VEC], g[FT_VEC];",
     "        for (int j = threadIdx.x * FT_VEC; j <= dim; j += blockDim.x * FT_VEC) {\n            float v[FT_VEC], g[FT_VEC];",
     "off-by-one bound: rmsnorm forward's 8-wide path writes a group past its row",
     OPS_ALL_ORDERS),
    ("bound-attention-tiles", "cuda/cuda_attention.cu",
     "            o[r][c] = 0.0f;\n    }\n\n    const int nkt = ft_mask_end_key_tile(q0, qn, BK);",
     "            o[r][c] = 0.0f;\n    }\n\n    const int nkt = ft_mask_end_key_tile(q0, qn, BK) - 1;",
     "off-by-one bound: attention forward skips the last key tile",
     "./test/cuda/test_cuda_ops"),
    ("bound-decode-keys", "cuda/cuda_attention_decode.cu",
     "    const int n_keys = last - first + 1;",
     "    const int n_keys = last - first;",
     "off-by-one bound: decoding attention misses the newest key",
     "make check TESTS=test/cuda/test_cuda_generate.sh"),
    ("shuffle-mask", "cuda/cuda_common.cuh",
     "        v += __shfl_xor_sync(FT_FULL_MASK, v, off);",
     "        v += __shfl_xor_sync(0x0000ffffu, v, off);",
     "warp sum shuffles with a half-warp mask",
     "./test/cuda/test_cuda_ops"),
    ("smem-opt-in", "cuda/cuda_attention.cu",
     "    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,\n"
     "                                         (int)C::smem);",
     "    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,\n"
     "                                         (int)C::smem / 2);",
     "attention forward opts in to half the dynamic shared memory it launches with",
     "./test/cuda/test_cuda_ops"),
    ("missing-wait-collective", "cuda/comm_nccl.c",
     "    cudaError_t e = cudaStreamWaitEvent(im->compute_stream, req->done, 0);",
     "    cudaError_t e = cudaSuccess;",
     "missing event wait: the compute stream uses a collective's result without waiting for it",
     TRAIN.format("2:3")),
    ("missing-wait-compute", "cuda/comm_nccl.c",
     "    int rc = cudaEventRecord(ready, im->compute_stream) != cudaSuccess ||\n"
     "             cudaStreamWaitEvent(im->comm_stream, ready, 0) != cudaSuccess;",
     "    int rc = cudaEventRecord(ready, im->compute_stream) != cudaSuccess;",
     "missing event wait: a collective reads gradients the compute stream may still be writing",
     TRAIN.format("2:2")),
    ("nccl-count", "cuda/comm_nccl.c",
     "    return finish(im, ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, im->nccl,",
     "    return finish(im, ncclReduceScatter(in, out, count + 1, ncclFloat32, ncclSum, im->nccl,",
     "wrong NCCL count: reduce-scatter of one element more per rank than the buffers hold",
     TRAIN.format("2:2")),
    ("cublaslt-ld", "cuda/cuda_matmul.c",
     "    lt_check(cublasLtMatrixLayoutCreate(&p->la, lt_type(p->types.b), b_rows, b_cols, (int64_t)b_rows),",
     "    lt_check(cublasLtMatrixLayoutCreate(&p->la, lt_type(p->types.b), b_rows, b_cols, (int64_t)b_cols),",
     "wrong cuBLASLt leading dimension for the first operand",
     "./test/cuda/test_cuda_ops"),
    ("window-mask", "cuda/cuda_attention_tc.cuh",
     # the rule itself (ft_mask_sees, backend/attention_mask.h) is the CPU reference's
     # too: changed there, both sides would agree. The CUDA side's use of it is mutated.
     "    bool vis = ft_mask_sees(row, col, a.window) && col < a.seq && row < a.seq;",
     "    bool vis = (ft_mask_sees(row, col, a.window) || (a.window > 0 && col == row - a.window)) &&\n"
     "               col < a.seq && row < a.seq;",
     "off-by-one window: tensor-core attention lets a query see one key too far back",
     ATTN_TC),
    ("skip-window-tile", "cuda/cuda_attention_tc.cuh",
     "    return ft_mask_first_key_tile(q0, a.window, bk);",
     "    return (ft_mask_first_key(q0, a.window) + bk - 1) / bk;",
     "tile skipping: the key walk starts past the tile that straddles the window's edge",
     ATTN_TC),
    ("skip-document-tile", "cuda/cuda_attention_tc.cuh",
     "    return r.x <= other.y && other.x <= r.y;",
     "    return r.x < other.y && other.x <= r.y;",
     "tile skipping: a key tile whose last document is the query tile's first is skipped",
     ATTN_TC),
    ("no-document-skip", "cuda/cuda_attention_tc.cuh",
     "    return r.x <= other.y && other.x <= r.y;",
     "    return r.x <= r.y;",
     "no document skipping in the tile walks: every tile below the diagonal staged, each warp "
     "then skips it (results right)",
     ATTN_TC),
    ("no-window-stop-dkdv", "cuda/cuda_attention_tc_bwd.cu",
     "            if (qt >= nqt || tc_before_window(a, q0, k0, kn)) { /* later tiles: further out */",
     "            if (qt >= nqt) { /* later tiles: further out */",
     "no window stop: the dK/dV pass computes query tiles past the window (results right)",
     ATTN_TC),
    # The per-warp classification of a tile pair (tc_pair_class) and its use in the three
    # kernels: a bare tile that needed the mask, a skip too eager, the mask everywhere.
    ("bare-documents", "cuda/cuda_attention_tc.cuh",
     "    const bool bare = qv == qn && kv == kn && ft_mask_tile_all_seen(q0, qn, k0, kn, a.window) &&\n"
     "                      (!a.segment || (qr.x == qr.y && kr.x == kr.y && qr.x == kr.x));",
     "    const bool bare = qv == qn && kv == kn && ft_mask_tile_all_seen(q0, qn, k0, kn, a.window);",
     "warp classification: a tile pair across a document boundary taken as bare (no mask)",
     ATTN_TC),
    ("bare-past-end", "cuda/cuda_attention_tc.cuh",
     "    const bool bare = qv == qn && kv == kn && ft_mask_tile_all_seen",
     "    const bool bare = ft_mask_tile_all_seen",
     "warp classification: a tile pair reaching past the sequence's end taken as bare",
     ATTN_TC),
    ("skip-diagonal-eager", "cuda/cuda_attention_tc.cuh",
     "k0 > q0 + qv - 1 ||",
     "k0 >= q0 + qv - 1 ||",
     "warp classification: off-by-one causal skip, a key tile starting at the warp's last "
     "query skipped",
     ATTN_TC),
    ("mask-everywhere-fwd", "cuda/cuda_attention_tc.cu",
     "        const bool masked = cls == TC_MASKED;\n        TC_COUNT_WARP_TILE(3, masked);",
     "        const bool masked = true;\n        TC_COUNT_WARP_TILE(3, masked);",
     "forward: the mask evaluated on every tile, bare ones too (results right)",
     ATTN_TC),
    ("mask-everywhere-dq", "cuda/cuda_attention_tc_bwd.cu",
     "        const bool masked = cls == TC_MASKED;\n        TC_COUNT_WARP_TILE(7, masked);",
     "        const bool masked = true;\n        TC_COUNT_WARP_TILE(7, masked);",
     "dQ pass: the mask evaluated on every tile, bare ones too (results right)",
     ATTN_TC),
    ("dkdv-block-keys", "cuda/cuda_attention_tc_bwd.cu",
     "tc_pair_class(a, q0, TC_BQ, tc_segment_range(a, b, q0, qn), kw0, 16, kwr);",
     "tc_pair_class(a, q0, TC_BQ, tc_segment_range(a, b, q0, qn), k0, 16, kwr);",
     "dK/dV pass: each warp classifies the block's first 16 keys instead of its own",
     ATTN_TC),
    # The double-buffered walks: the barrier after the wait, and the prefetch's buffer.
    ("barrier-dq-tile", "cuda/cuda_attention_tc_bwd.cu",
     "        __syncthreads(); /* tile kt visible to all; everyone is done with the previous one */\n"
     "        TC_COUNT_TILE(2);",
     "        TC_COUNT_TILE(2);",
     "removed barrier: the dQ pass reads a key tile other threads' copies have not filled",
     ATTN_TC_ALL_ORDERS),
    ("barrier-dkdv-tile", "cuda/cuda_attention_tc_bwd.cu",
     "        __syncthreads(); /* tile visible to all; everyone is done with the previous one */\n"
     "        TC_COUNT_TILE(1);",
     "        TC_COUNT_TILE(1);",
     "removed barrier: the dK/dV pass reads a query tile other threads' copies have not filled",
     ATTN_TC_ALL_ORDERS),
    ("buffer-dq-prefetch", "cuda/cuda_attention_tc_bwd.cu",
     "tc_stage_kv<HDMAX, TC_BK>(Ks + (buf ^ 1) * TC_BK * P, Vs + (buf ^ 1) * TC_BK * P,",
     "tc_stage_kv<HDMAX, TC_BK>(Ks + buf * TC_BK * P, Vs + buf * TC_BK * P,",
     "double buffering: the dQ pass prefetches the next key tile into the one in use",
     ATTN_TC_ALL_ORDERS),
    ("buffer-dkdv-prefetch", "cuda/cuda_attention_tc_bwd.cu",
     "                stage_queries(buf ^ 1, gi, qt);",
     "                stage_queries(buf, gi, qt);",
     "double buffering: the dK/dV pass prefetches the next query tile into the one in use",
     ATTN_TC_ALL_ORDERS),
    ("buffer-fwd-prefetch", "cuda/cuda_attention_tc.cu",
     "tc_stage_kv<HDMAX, BK>(Ks + (buf ^ 1) * BK * P, Vs + (buf ^ 1) * BK * P,",
     "tc_stage_kv<HDMAX, BK>(Ks + (buf ^ 1) * BK * P, Vs + buf * BK * P,",
     "double buffering: the forward prefetches the next V tile into the one in use",
     ATTN_TC_ALL_ORDERS),
    # The one-pass backward (FTMPI_ATTENTION_NONDETERMINISTIC=1): dS^T through shared
    # memory, then dQ by atomics.
    ("one-pass-stale-ds", "cuda/cuda_attention_tc_bwd.cu",
     "                tc_store_ds_t<NQ>(dsT, NULL, kgrp, lane);",
     "                (void)0;",
     "one-pass backward: a warp that skips a pair leaves its old dS^T rows for the dQ product",
     ATTN_TC),
    ("one-pass-no-barrier", "cuda/cuda_attention_tc_bwd.cu",
     "            __syncthreads(); /* dS^T of all the block's keys in dsT */\n",
     "",
     "removed barrier: the one-pass dQ product reads dS^T rows other warps have not written",
     ATTN_TC_ALL_ORDERS),
    ("one-pass-dq-scale", "cuda/cuda_attention_tc_bwd.cu",
     "(dq, dq_acc, a.scale_log2 / TC_LOG2E,",
     "(dq, dq_acc, a.scale_log2,",
     "one-pass backward: dQ scaled by the base-2 scale",
     ATTN_TC),
    # cuDNN engines noted non-deterministic (bitwise resume)
    ("cudnn-nondeterministic", "cuda/cuda_attention_cudnn_graph.c",
     "        if (!nondeterministic_ok && engine_nondeterministic(g, cfg[i])) {",
     "        if (0 && !nondeterministic_ok && engine_nondeterministic(g, cfg[i])) {",
     "the cuDNN path takes an engine cuDNN notes as non-deterministic without being allowed",
     ATTN_CUDNN),
    ("cudnn-count-into-array", "cuda/cuda_attention_cudnn_graph.c",
     "CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));",
     "CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, &count));",
     "cuDNN: the number of engine configurations asked into an array (the library answers 0: "
     "seen on a GPU, every graph refused)",
     ATTN_CUDNN),
    ("sum-squares-no-sync", "cuda/cuda_backend.c",
     "    ft_cuda_check(cudaStreamSynchronize(st->stream), \"sum_squares (synchronize)\");\n",
     "",
     "missing synchronisation: the host reads sum_squares' pinned result before the copy ran",
     "./test/cuda/test_cuda_ops"),
    ("cudnn-stride", "cuda/cuda_attention_cudnn_graph.c",
     "    return (tspec){ { g->b, h, g->s, g->d }, { g->s * h * g->d, g->d, h * g->d, 1 }, type };",
     "    return (tspec){ { g->b, h, g->s, g->d }, { g->s * h * g->d, g->d, g->d, 1 }, type };",
     "cuDNN: the token stride of q/k/v/out given as head_dim instead of heads x head_dim",
     ATTN_CUDNN),
    ("cudnn-missing-uid", "cuda/cuda_attention_cudnn.c",
     "    bind(&p, FT_SDPA_V, v);\n    bind(&p, FT_SDPA_O, out);\n    bind(&p, FT_SDPA_STATS",
     "    bind(&p, FT_SDPA_O, out);\n    bind(&p, FT_SDPA_STATS",
     "cuDNN: the forward's variant pack does not bind V",
     ATTN_CUDNN),
    ("cudnn-ragged-offset", "cuda/cuda_attention_cudnn_docs.c",
     "kv_row = (int64_t)s.n_kv_heads * s.head_dim;",
     "kv_row = (int64_t)s.n_heads * s.head_dim;",
     "cuDNN: the K/V ragged offsets counted in query heads (wrong under GQA)",
     ATTN_CUDNN),
    ("cudnn-workspace", "cuda/cuda_attention_cudnn.c",
     "    size_t ws_b = (size_t)plan->workspace;",
     "    size_t ws_b = (size_t)plan->workspace / 2;",
     "cuDNN: half the workspace the plan asked for",
     ATTN_CUDNN),
    ("cudnn-causal", "cuda/cuda_attention_cudnn_graph.c",
     "    desc_t causal = pointwise(g, CUDNN_POINTWISE_CMP_GE,",
     "    desc_t causal = pointwise(g, CUDNN_POINTWISE_CMP_GT,",
     "cuDNN: the causal mask hides the diagonal (a query does not see itself)",
     ATTN_CUDNN),
    ("cudnn-window", "cuda/cuda_attention_cudnn_graph.c",
     "        desc_t in = pointwise(g, CUDNN_POINTWISE_CMP_GT, CUDNN_DATA_BOOLEAN, far, row2,",
     "        desc_t in = pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, far, row2,",
     "cuDNN: off-by-one window, a query sees one key too far back",
     ATTN_CUDNN),
    ("cudnn-no-padding-mask", "cuda/cuda_attention_cudnn_graph.c",
     "    desc_t s = scaled_scores(g, geo, &t);\n    if (geo->ragged)\n        s = padding_mask(g, &t, s);\n    s = band_mask",
     "    desc_t s = scaled_scores(g, geo, &t);\n    s = band_mask",
     "cuDNN: the forward graph without the padding mask of ragged documents",
     ATTN_CUDNN),
    ("cudnn-stats-scatter", "cuda/cuda_attention_cudnn_stats.cu",
     "            if (i < len)\n                l[i] = st[i];",
     "            if (i <= len)\n                l[i] = st[i];",
     "cuDNN: the statistics scatter writes one row past each document into the next",
     ATTN_CUDNN),
    ("normal-fill-bound", "cuda/cuda_normal.cu",
     "i < n; i += stride) {\n        const double y",
     "i <= n; i += stride) {\n        const double y",
     "off-by-one bound: the initial values' kernel writes one value past its range",
     NORMAL_FILL),
    ("normal-fill-slice-offset", "cuda/cuda_normal_fill.c",
     "ft_rng_normal_f32(seed, stream, first + a + host_idx[k], std)",
     "ft_rng_normal_f32(seed, stream, first + host_idx[k], std)",
     "initial values: a later slice's unsure values replaced by the first slice's",
     NORMAL_FILL),
    ("vec-bf16-pair-order", "cuda/cuda_storage.cuh",
     "        v[2 * k] = ft_f32_from_bf16((uint16_t)w[k]);\n        v[2 * k + 1] = ft_f32_from_bf16((uint16_t)(w[k] >> 16));",
     "        v[2 * k + 1] = ft_f32_from_bf16((uint16_t)w[k]);\n        v[2 * k] = ft_f32_from_bf16((uint16_t)(w[k] >> 16));",
     "8-wide bf16 load: the two values of each 32-bit word swapped",
     OPS_BF16),
    ("vec-alignment-unchecked", "cuda/cuda_swiglu.cu",
     "    int vec = ft_aligned16(out, gate, up);",
     "    int vec = 1;",
     "SwiGLU forward takes the 8-wide path on buffers that are not 16-byte aligned",
     OPS_BF16),
    ("ce-bf16-as-fp32", "cuda/cuda_cross_entropy.cu",
     "        FT_WITH_STORAGE(dt, T,\n                        cross_entropy_run<float, T>",
     "        FT_WITH_STORAGE(FT_DTYPE_F32, T,\n                        cross_entropy_run<float, T>",
     "cross-entropy: bf16 dlogits of fp32 logits written as fp32 (twice the bytes, past the "
     "buffer)",
     OPS_ALL_ORDERS),
    ("matmul-add-c-is-d", "cuda/cuda_matmul.c",
     "    matmul_run(be, t, d, c, a, b, m, n, k, trans_a, trans_b, 1.0f, 1.0f);",
     "    matmul_run(be, t, d, d, a, b, m, n, k, trans_a, trans_b, 1.0f, 1.0f);",
     "matmul_add accumulates onto d's old contents instead of the residual c",
     OPS_BF16),
    ("upload-ring-no-wait", "cuda/cuda_upload_stage.c",
     "        if (s->pending && (e = cudaEventSynchronize(s->done)) != cudaSuccess)",
     "        if (0 && s->pending && (e = cudaEventSynchronize(s->done)) != cudaSuccess)",
     "small uploads reuse their pinned ring from the start without waiting for its copies",
     "./test/cuda/test_cuda_ops"),
    ("norm-base-ignored", "cuda/cuda_rmsnorm.cu",
     "    const T *br = base ? base + r * dim : NULL;\n    T *dxr = dx + r * dim;",
     "    const T *br = base ? dx + r * dim : NULL;\n    T *dxr = dx + r * dim;",
     "RMSNorm backward adds onto dx's old contents instead of dx_base",
     OPS_BF16),
    ("rmsnorm-fused-short-block", "cuda/cuda_rmsnorm.cu",
     "    const int r1 = min(r0 + NORM_FUSED_ROWS, rows);\n    if (r0 < r1)",
     "    const int r1 = min(r0 + NORM_FUSED_ROWS - 1, rows);\n    if (r0 < r1)",
     "the fused RMSNorm backward's blocks skip their last row (its dx and dw)",
     "./test/cuda/test_cuda_ops"),
    ("norm-fused-stale-row", "cuda/cuda_norm_rows.cuh",
     "            d[g][e] = dn[g][e];\n",
     "",
     "the fused norm backward (RMSNorm and LayerNorm) keeps the previous row's dy after "
     "prefetching the next",
     "./test/cuda/test_cuda_ops"),
    ("matmul-pair-b-shared", "cuda/cuda_matmul.c",
     "            .align_c = min_align(c0, c1), .batch = 2, .stride_a = sa, .stride_b = sb,",
     "            .align_c = min_align(c0, c1), .batch = 2, .stride_a = sa, .stride_b = 0,",
     "matmul_pair's batch reads the first product's b for the second too",
     OPS_BF16),
    ("bf16x2-operands-swapped", "cuda/cuda_attention_tc.cuh",
     "    return ft_cvt_rn_bf16x2(hi, lo);",
     "    return ft_cvt_rn_bf16x2(lo, hi);",
     "the tensor-core attention packs each probability pair with its halves swapped "
     "(cvt.rn.bf16x2's first source is the upper half)",
     ATTN_TC),
    ("ds-pack-stale", "cuda/cuda_attention_tc_bwd.cu",
     "\n            dsk[n][1] = tc_pack_bf16(ds[n][2], ds[n][3]);\n        }",
     "\n            dsk[n][1] = tc_pack_bf16(ds[n][0], ds[n][1]);\n        }",
     "the dQ pass packs row g's dS for row g + 8 too",
     ATTN_TC),
    ("swiglu-out-skipped", "cuda/cuda_swiglu.cu",
     "        if (out) {\n#pragma unroll",
     "        if (0 && out) {\n#pragma unroll",
     "the SwiGLU backward's 8-wide path leaves the forward's output (out) unwritten",
     OPS_BF16),
    ("overlap-acquire-no-wait", "src/shard/engine_source.c",
     "        ft_engine_await_update(e, unit); /* its update may still run on the side lane */",
     "",
     "acquire hands out a unit whose update may still run on the side lane (the next "
     "step's forward reads weights AdamW is writing)",
     OVERLAP),
    ("overlap-reset-not-deferred", "src/shard/engine_step.c",
     "        else if (!ft_engine_defer_reset(e, u)) /* its update may still read it */",
     "        else if (1)",
     "zero_grads resets a gradient on the main lane while its update may still read it on "
     "the side lane",
     OVERLAP),
    ("lookup-ahead-no-wait", "src/shard/engine_lookup.c",
     "    e->be->ops->lane_await(e->be, table_mark(e));\n",
     "",
     "the lookup reads the next step's embedding rows without waiting for the side lane "
     "to make them",
     OVERLAP),
    ("lookup-ahead-decay", "cuda/cuda_optim.cu",
     "            float pn = adamw_value(c, i < c.decay_n ? c.decay : 1.0f, param[i], grad[i],\n"
     "                                   zero ?",
     "            float pn = adamw_value(c, 1.0f, param[i], grad[i],\n"
     "                                   zero ?",
     "the embedding rows made ahead of the update skip its weight decay: the lookup reads "
     "other bits than the update writes",
     OVERLAP),
    ("early-norm-not-final", "src/shard/engine_overlap.c",
     "    if (!e->early_norm || !e->final_micro || eu->sum_started || !eu->grad_full)",
     "    if (!e->early_norm || eu->sum_started || !eu->grad_full)",
     "the gradient norm's sum of a unit starts at its first micro-batch's grad_done, before "
     "the window's other micro-batches add to the gradient",
     OVERLAP),
    ("early-reduce-not-final", "src/shard/engine_reduce.c",
     "    if (!e->early_reduce || !e->final_micro || eu->reduce_req || !eu->grad_full)",
     "    if (!e->early_reduce || eu->reduce_req || !eu->grad_full)",
     "a unit's gradient all-reduce starts at its first micro-batch's grad_done, while the "
     "window's other micro-batches still add to the gradient NCCL is reading",
     "make check TESTS=test/shard/test_reduce_overlap.sh"),
    ("gather-acquire-no-wait", "src/shard/engine_overlap.c",
     "    engine_unit *eu = &e->units[unit];\n    await_gather(e, eu);\n    if (!eu->update_pending)",
     "    engine_unit *eu = &e->units[unit];\n    if (!eu->update_pending)",
     "acquire hands out a unit (stages 1-2) whose deferred parameter all-gather may still be "
     "landing: the next forward reads weights NCCL is writing",
     "make check TESTS=test/shard/test_gather_overlap.sh"),
]


def run(cmd, cwd, timeout=900):
    p = subprocess.run(cmd, cwd=cwd, shell=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def why(log):
    """The first line that says what caught the defect (from where it starts: a test's
    stdout and stderr may share a line), and the thread orders that failed, if counted."""
    failed = re.findall(r"^defects: order (\S+): failed", log, re.M)
    orders = "" if not failed else (" (all four orders)" if len(failed) == len(ORDERS) else
                                    " (orders: " + ", ".join(failed) + ")")
    for pat in (r"cudaemu: .*", r"ftmpi: CUDA backend: (?!note:).*", r"^FAIL[: ].*", r".*FAIL.*"):
        for line in log.splitlines():
            m = re.search(pat, line)
            if m:
                return m.group(0).strip()[:160] + orders
    return "(failed; see log)" + orders


def main():
    keep = "--keep" in sys.argv
    names = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = subprocess.check_output(["git", "rev-parse", "--show-toplevel"]).decode().strip()
    # every selected defect must still apply to HEAD before the long build starts
    for name, path, old, _, _, _ in DEFECTS:
        if names and name not in names:
            continue
        n = subprocess.check_output(["git", "-C", top, "show", "HEAD:" + path]).decode().count(old)
        if n != 1:
            sys.exit(f"defects: {name}: the text to change occurs {n} times in {path} "
                     "(HEAD), not once: re-target it at the current code")
    work = tempfile.mkdtemp(prefix="ftmpi-defects.")
    tree = os.path.join(work, "tree")
    subprocess.check_call(["git", "-C", top, "worktree", "add", "-q", "--detach", tree, "HEAD"])
    build = os.path.join(tree, "build-emu")
    rows = []
    try:
        rc, log = run("autoreconf -fi >/dev/null 2>&1 && mkdir -p build-emu && cd build-emu && "
                      "../configure -q --enable-native --with-cuda-emulation && make -j2 >/dev/null "
                      "&& make -j2 test/cuda/test_cuda_ops test/cuda/test_attention_tc test/cuda/test_attention_cudnn >/dev/null", tree, 1800)
        if rc:
            print(log[-3000:])
            sys.exit("defects: the unmodified tree does not build")
        for name, path, old, new, what, cmd in DEFECTS:
            if names and name not in names:
                continue
            f = os.path.join(tree, path)
            text = open(f).read()
            if text.count(old) != 1:
                sys.exit(f"defects: {name}: the text to change is not in {path} exactly once")
            open(f, "w").write(text.replace(old, new))
            # A defect that does not compile (-Werror included) is caught by no test: it
            # is reported apart, never counted as caught.
            rc, log = run("make -j2 2>&1 >/dev/null && make -j2 test/cuda/test_cuda_ops "
                          "test/cuda/test_attention_tc test/cuda/test_attention_cudnn 2>&1 >/dev/null",
                          build)
            if rc:
                open(f, "w").write(text)
                print(log[-2000:])
                rows.append((name, what, "-", False, "DOES NOT BUILD"))
                print(f"BROKEN: {name}: the tree with this defect does not build", flush=True)
                continue
            rc, log = run(cmd, build)
            if "make check" in cmd:
                for m in re.findall(r"TESTS=(\S+)\.sh", cmd):
                    tl = os.path.join(build, m + ".log")
                    if os.path.exists(tl):  # the test's own words before make's summary
                        log = open(tl).read() + log
            caught = rc != 0
            test = (os.path.basename(cmd.split(" TESTS=")[-1]) if "TESTS=" in cmd else
                    "test_cuda_ops, 4 orders" if cmd == OPS_ALL_ORDERS else
                    "test_cuda_normal_fill" if cmd == NORMAL_FILL else
                    "test_attention_tc, 4 orders" if cmd == ATTN_TC_ALL_ORDERS else
                    cmd.split("/")[-1])
            rows.append((name, what, test, caught, why(log) if caught else "NOT CAUGHT"))
            print(f"{'caught' if caught else 'MISSED'}: {name}: {rows[-1][4]}", flush=True)
            open(f, "w").write(text)
    finally:
        if not keep:
            subprocess.call(["git", "-C", top, "worktree", "remove", "--force", tree])
            shutil.rmtree(work, ignore_errors=True)
    print()
    # the columns of the table in doc/cuda-emulation.md, whose last column summarises the line
    print("| defect | test | what caught it |")
    print("|---|---|---|")
    for name, what, test, caught, line in rows:
        print(f"| `{name}`: {what} | {test} | {line.replace('|', '/')} |")
    sys.exit(0 if all(r[3] for r in rows) else 1)


if __name__ == "__main__":
    main()
