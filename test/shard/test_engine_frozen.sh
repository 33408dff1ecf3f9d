#!/bin/sh
# test_engine_frozen (the frozen engine against the trainable one) on 1, 2 and 3 ranks,
# CPU and CUDA (test/shard/engine_ranks.sh).
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/shard/engine_ranks.sh"
run_engine_test test_engine_frozen
