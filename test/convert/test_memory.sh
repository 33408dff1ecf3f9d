#!/bin/sh
# Bounded memory: importing and exporting a model 10x larger must not need more
# memory (tensors stream through a fixed buffer). Synthetic models of ~32 MB and
# ~320 MB are generated in the scratch directory.
. "$(dirname "$0")/lib.sh"
# AddressSanitizer keeps freed memory in quarantine, so RSS says nothing about our
# buffers in a sanitizer build.
if ldd "$B/ftmpi-convert" 2>/dev/null | grep -q libasan; then
    skip "peak RSS is not meaningful under AddressSanitizer"
fi

gen() { "$GENSYNTH" "$1" --hidden 512 --inter 1408 --heads 8 --kv 4 --layers "$2" --vocab "$3" \
        --shard-size 100e6 > /dev/null || fail "gen_synth $1"; }
gen small 4 4096
gen big 40 40960

for m in small big; do
    "$CONVERT" import -q --stats --buffer-size 4MiB $m $m.h5 2> $m.import.log ||
        { cat $m.import.log; fail "import $m"; }
    "$CONVERT" export -q --stats --buffer-size 4MiB $m.h5 ${m}_out 2> $m.export.log ||
        { cat $m.export.log; fail "export $m"; }
    cat $m.import.log $m.export.log
done
"$STCMP" big big_out || fail "big model round trip differs"

for op in import export; do
    s=$(peak_rss_kib small.$op.log); b=$(peak_rss_kib big.$op.log)
    [ -n "$s" ] && [ -n "$b" ] || fail "no peak RSS in the $op logs"
    echo "$op peak RSS: small $s KiB, big (10x model) $b KiB"
    # allow 16 MiB of slack (allocator, HDF5 metadata cache), far below the 288 MB
    # the model grew by
    [ "$b" -le $((s + 16384)) ] || fail "$op: peak RSS grew from $s to $b KiB with the model size"
done
echo "PASS"
