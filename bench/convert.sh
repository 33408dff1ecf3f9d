#!/bin/sh
# ftmpi-convert import/export throughput and peak RSS on a multi-GB synthetic
# model, against dd of the same bytes on the same disk in the same run.
#
#   bench/convert.sh [BUILD_DIR] [WORK_DIR] [LAYERS]
#
# BUILD_DIR holds ftmpi-convert and test/convert/gen_synth (default: .), WORK_DIR is
# scratch space (default: a new /tmp dir, removed at the end). LAYERS scales the
# model (default 20: ~2.05 GB of bf16 with hidden 2048, intermediate 5632, vocab
# 32000). Page cache: each step reads files the previous step just wrote, as a
# conversion pipeline would; the dd copy reads the same source file the import
# read, so both see the same cache state. Nothing here is committed.
set -eu
B=$(cd "${1:-.}" && pwd)
KEEP=${2:-}
W=${2:-$(mktemp -d /tmp/ftmpi-convert-bench.XXXXXX)}
L=${3:-20}
mkdir -p "$W"
cleanup() { [ -n "$KEEP" ] || rm -rf "$W"; }
trap cleanup EXIT

"$B/test/convert/gen_synth" "$W/hf" --hidden 2048 --inter 5632 --heads 16 --kv 4 --layers "$L" \
    --vocab 32000 --shard-size 1e9
bytes=$(cat "$W"/hf/*.safetensors | wc -c)
sync

echo "== import (HF bf16 -> ftmpi weights)"
"$B/ftmpi-convert" import --stats "$W/hf" "$W/w.h5" 2>&1 | grep -v '^imported'
echo "== export (ftmpi weights -> HF bf16, 5GB shards)"
"$B/ftmpi-convert" export --stats "$W/w.h5" "$W/out" 2>&1 | grep -v '^exported'
echo "== dd of the same bytes (read shard files, write one file, fsync)"
start=$(date +%s.%N)
cat "$W"/hf/*.safetensors | dd of="$W/dd.bin" bs=64M iflag=fullblock conv=fsync 2>/dev/null
end=$(date +%s.%N)
echo "dd: $(echo "$bytes $start $end" | awk '{ printf "%.1f MB in %.2f s = %.1f MB/s", $1/1e6, $3-$2, $1/1e6/($3-$2) }')"
"$B/test/convert/st_compare" "$W/hf" "$W/out"
