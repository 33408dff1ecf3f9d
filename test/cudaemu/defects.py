#!/usr/bin/env python3
"""Deliberate defects in the CUDA backend, and what in the harness catches each.

    test/cudaemu/defects.py [--keep] [NAME ...]

Makes a scratch worktree of HEAD, builds it once with --with-cuda-emulation, then for
each defect: applies it (one exact textual change), rebuilds, runs the test that should
catch it, and reports whether that test failed and the first line that says why. Exit
status 0 when every defect was caught. The table it prints is the one in
doc/cuda-emulation.md ("Deliberate defects"). Developer tool: it takes several minutes
(a rebuild and a test per defect), so CI does not run it.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

OPS_ALL_ORDERS = "for o in forward reverse random warp-serial; do CUDAEMU_ORDER=$o ./test/cuda/test_cuda_ops || exit 1; done"
TRAIN = "FT_CUDA_TRAIN_CASES='{}' make check TESTS=test/cuda/test_cuda_train.sh"
ATTN_TC = "./test/cuda/test_attention_tc"
ATTN_CUDNN = "./test/cuda/test_attention_cudnn"

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
     "    for (int j = threadIdx.x; j < dim; j += blockDim.x)\n        yr[j] = xr[j] * rs * w[j];",
     "    for (int j = threadIdx.x; j <= dim; j += blockDim.x)\n        yr[j] = xr[j] * rs * w[j];",
     "off-by-one bound: rmsnorm forward writes one element past its row",
     OPS_ALL_ORDERS),
    ("bound-attention-tiles", "cuda/cuda_attention.cu",
     "            o[r][c] = 0.0f;\n    }\n\n    const int nkt = (q0 + qn - 1) / BK + 1;",
     "            o[r][c] = 0.0f;\n    }\n\n    const int nkt = (q0 + qn - 1) / BK;",
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
     "    lt_check(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_32F, b_rows, b_cols, (int64_t)b_rows),",
     "    lt_check(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_32F, b_rows, b_cols, (int64_t)b_cols),",
     "wrong cuBLASLt leading dimension for the first operand",
     "./test/cuda/test_cuda_ops"),
    ("window-mask", "cuda/cuda_attention_tc.cuh",
     "(a.window == 0 || col > row - a.window)",
     "(a.window == 0 || col >= row - a.window)",
     "off-by-one window: tensor-core attention lets a query see one key too far back",
     ATTN_TC),
    ("skip-window-tile", "cuda/cuda_attention_tc.cuh",
     "max(0, q0 - a.window + 1) / bk : 0;",
     "max(0, q0 - a.window + bk) / bk : 0;",
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
     "no document skipping: every tile below the diagonal computed and masked (results right)",
     ATTN_TC),
    ("no-window-stop-dkdv", "cuda/cuda_attention_tc_bwd.cu",
     "            if (tc_before_window(a, q0, k0, kn))\n"
     "                break; /* later query tiles are further past the window */\n",
     "",
     "no window stop: the dK/dV pass computes query tiles past the window (results right)",
     ATTN_TC),
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
]


def run(cmd, cwd, timeout=900):
    p = subprocess.run(cmd, cwd=cwd, shell=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def why(log):
    """The first line that says what caught the defect."""
    for pat in (r"^cudaemu: .*", r".*ftmpi: CUDA backend: .*", r"^FAIL[: ].*", r".*FAIL.*"):
        for line in log.splitlines():
            if re.match(pat, line):
                return line.strip()[:160]
    return "(failed; see log)"


def main():
    keep = "--keep" in sys.argv
    names = [a for a in sys.argv[1:] if not a.startswith("--")]
    top = subprocess.check_output(["git", "rev-parse", "--show-toplevel"]).decode().strip()
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
            rc, log = run("make -j2 >/dev/null 2>&1 && make -j2 test/cuda/test_cuda_ops "
                          "test/cuda/test_attention_tc test/cuda/test_attention_cudnn >/dev/null 2>&1 && " + cmd, build)
            if "make check" in cmd:
                for m in re.findall(r"TESTS=(\S+)\.sh", cmd):
                    tl = os.path.join(build, m + ".log")
                    if os.path.exists(tl):
                        log += open(tl).read()
            caught = rc != 0
            rows.append((name, what, cmd.split(" TESTS=")[-1] if "TESTS=" in cmd else
                         ("test_cuda_ops, 4 orders" if cmd == OPS_ALL_ORDERS else
                          cmd.split("/")[-1]),
                         caught, why(log) if caught else "NOT CAUGHT"))
            print(f"{'caught' if caught else 'MISSED'}: {name}: {rows[-1][4]}", flush=True)
            open(f, "w").write(text)
    finally:
        if not keep:
            subprocess.call(["git", "-C", top, "worktree", "remove", "--force", tree])
            shutil.rmtree(work, ignore_errors=True)
    print()
    print("| defect | what | test | caught by |")
    print("|---|---|---|---|")
    for name, what, test, caught, line in rows:
        print(f"| `{name}` | {what} | {test} | {line.replace('|', '/')} |")
    sys.exit(0 if all(r[3] for r in rows) else 1)


if __name__ == "__main__":
    main()
