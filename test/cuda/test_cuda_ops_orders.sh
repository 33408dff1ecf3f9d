#!/bin/sh
# test_cuda_ops and test_cuda_ops_bf16 (every op of the CUDA backend against the CPU
# backend, fp32 and bf16 storage) and test_attention_tc (the tensor-core attention) under the CPU execution harness's other
# thread orders: their plain runs use the default (forward); reverse, random and
# warp-serial expose other missing barriers (test/cudaemu/cudaemu_kernel.cc). On a GPU the
# order is the hardware's: SKIP.
. "$(dirname "$0")/../train/lib.sh"
"$FTMPI" --version 2>/dev/null | grep -q "CPU execution harness" || skip "not an emulation build"
# FT_CUDA_ORDERS narrows the list (CI's sanitizer stage, where the orders matter less
# than the memory checks and every run costs 3x)
for order in ${FT_CUDA_ORDERS:-reverse random warp-serial}; do
    for prog in test_cuda_ops test_cuda_ops_bf16 test_attention_tc; do
        CUDAEMU_ORDER=$order CUDAEMU_SEED=3 "$B/test/cuda/$prog" > $prog-$order.log 2>&1 ||
            { tail -n 30 $prog-$order.log; fail "$prog in thread order $order"; }
        echo "$prog, thread order $order: $(tail -n 1 $prog-$order.log)"
    done
done
