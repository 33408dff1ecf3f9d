#!/bin/sh
# test_cuda_ops (every op of the CUDA backend against the CPU backend) under the CPU
# execution harness's other thread orders: the plain test_cuda_ops run uses the default
# (forward); reverse, random and warp-serial expose other missing barriers
# (test/cudaemu/cudaemu_kernel.cc). On a GPU the order is the hardware's: SKIP.
. "$(dirname "$0")/../train/lib.sh"
"$FTMPI" --version 2>/dev/null | grep -q "CPU execution harness" || skip "not an emulation build"
# FT_CUDA_ORDERS narrows the list (CI's sanitizer stage, where the orders matter less
# than the memory checks and every run costs 3x)
for order in ${FT_CUDA_ORDERS:-reverse random warp-serial}; do
    CUDAEMU_ORDER=$order CUDAEMU_SEED=3 "$B/test/cuda/test_cuda_ops" > ops-$order.log 2>&1 ||
        { tail -n 30 ops-$order.log; fail "test_cuda_ops in thread order $order"; }
    echo "thread order $order: $(tail -n 1 ops-$order.log)"
done
