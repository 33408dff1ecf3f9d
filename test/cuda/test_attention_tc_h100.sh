#!/bin/sh
# test_attention_tc's cases for what only an H100 takes, on the CPU execution harness's
# H100 model (CUDAEMU_DEVICE=h100: compute capability 9.0 and 227 KiB of shared memory a
# block where the default A100 has 8.0 and 163):
#  - TEST_ATTENTION_TC_ONLY=shared: the dK/dV pass's shared layout at head_dim 128
#    (FTMPI_TC_BWD_LAYOUT=shared, cuda/cuda_attention_tc_bwd_shared.cuh), which on the A100
#    falls back to the 128-key block;
#  - TEST_ATTENTION_TC_ONLY=wgmma: the forward and backward on Hopper's warpgroup MMA
#    (FTMPI_TC_FWD_WGMMA=1, FTMPI_TC_BWD_WGMMA=1: cuda/cuda_attention_wgmma*.cu), which need
#    compute capability 9.0.
# In the default thread order and a random one (a missing barrier shows there;
# FT_CUDA_ORDERS names others). Then
# test_cuda_ops_bf16 with both wgmma switches and cuDNN off: the backend's bf16 attention
# (bf16 outputs, the training recipe's) on the wgmma kernels, which must run there. On a
# GPU the device is what it is: SKIP.
. "$(dirname "$0")/../train/lib.sh"
"$FTMPI" --version 2>/dev/null | grep -q "CPU execution harness" || skip "not an emulation build"
for only in shared wgmma; do
    case $only in
        shared) proof="shared layout's" ;;
        wgmma) proof="wgmma forward in [1-9][0-9]* cases, backward in [1-9]" ;;
    esac
    # FT_CUDA_ORDERS narrows the orders (CI's sanitizer stage: one)
    for order in ${FT_CUDA_ORDERS:-forward random}; do
        log=tc-h100-$only-$order.log
        TEST_ATTENTION_TC_ONLY=$only CUDAEMU_DEVICE=h100 CUDAEMU_ORDER=$order CUDAEMU_SEED=5 \
            "$B/test/cuda/test_attention_tc" > "$log" 2>&1 ||
            { tail -n 30 "$log"; fail "test_attention_tc ($only) on the H100 model, order $order"; }
        grep -q "$proof" "$log" || fail "no case ran the $only kernels ($log)"
        echo "test_attention_tc ($only), H100 model, thread order $order: $(tail -n 1 "$log")"
    done
done
FTMPI_CUDNN_ATTENTION=off FTMPI_TC_FWD_WGMMA=1 FTMPI_TC_BWD_WGMMA=1 CUDAEMU_DEVICE=h100 \
    CUDAEMU_REPORT=ops "$B/test/cuda/test_cuda_ops_bf16" > ops-bf16-wgmma.log 2>&1 ||
    { tail -n 30 ops-bf16-wgmma.log; fail "test_cuda_ops_bf16 on the wgmma kernels"; }
for f in cuda_attention_wgmma.cu cuda_attention_wgmma_bwd.cu; do
    grep -q "kernel .*$f" ops-bf16-wgmma.log || fail "test_cuda_ops_bf16 ran no kernel of $f"
done
echo "test_cuda_ops_bf16 on the wgmma kernels: $(grep -E '^[0-9]+ checks' ops-bf16-wgmma.log)"
