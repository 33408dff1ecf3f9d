#!/bin/sh
# test_attention_tc's shared-layout cases (TEST_ATTENTION_TC_ONLY=shared) on the CPU
# execution harness's H100 (CUDAEMU_DEVICE=h100: 227 KiB of shared memory a block where
# the default A100 has 163), so that the kernel whose block only an H100 takes runs: the
# dK/dV pass's shared layout at head_dim 128 (FTMPI_TC_BWD_LAYOUT=shared,
# cuda/cuda_attention_tc_bwd_shared.cuh), which on the A100 falls back to the 128-key
# block. In the default thread order and a random one (a missing barrier between its
# phases shows there). On a GPU the device is what it is: SKIP.
. "$(dirname "$0")/../train/lib.sh"
"$FTMPI" --version 2>/dev/null | grep -q "CPU execution harness" || skip "not an emulation build"
for order in forward random; do
    TEST_ATTENTION_TC_ONLY=shared CUDAEMU_DEVICE=h100 CUDAEMU_ORDER=$order CUDAEMU_SEED=5 \
        "$B/test/cuda/test_attention_tc" \
        > tc-h100-$order.log 2>&1 ||
        { tail -n 30 tc-h100-$order.log; fail "test_attention_tc on the H100 model, order $order"; }
    grep -q "shared layout's" tc-h100-$order.log ||
        fail "no case ran the shared layout at head_dim 128 (tc-h100-$order.log)"
    echo "test_attention_tc, H100 model, thread order $order: $(tail -n 1 tc-h100-$order.log)"
done
