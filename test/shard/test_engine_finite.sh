#!/bin/sh
# test_engine_finite (where a trainable engine finds its first NaN/Inf) on 1, 2 and 3 ranks,
# CPU and CUDA (test/shard/engine_ranks.sh).
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/shard/engine_ranks.sh"
run_engine_test test_engine_finite
