#!/bin/sh
# ftmpi-convert's outputs (issue 23):
#  3. import's OUT naming one of the model's files is refused, the file untouched;
#  6. import and export onto a full file system: one line saying so, exit 1, no segfault,
#     nothing left behind (a tmpfs; needs root, else that part is skipped).
. "$(dirname "$0")/lib.sh"
copy_model tiny_fp32 m
before=$(cksum < m/model-00001-of-00003.safetensors)
expect_fail 1 "OUT m/model-00001-of-00003.safetensors: is the same file as input" \
    "$CONVERT" import -q m m/model-00001-of-00003.safetensors
[ "$(cksum < m/model-00001-of-00003.safetensors)" = "$before" ] || fail "the shard changed"

mkdir small
mount -t tmpfs -o size=64k tmpfs small 2>/dev/null || skip "cannot mount a tmpfs (needs root)"
trap 'umount "$SCRATCH/small"; rm -rf "$SCRATCH"' EXIT
timeout 60 "$CONVERT" import -q m small/w.h5 > o.txt 2> e.txt; rc=$?
[ $rc -eq 1 ] || { cat e.txt; fail "import onto a full disk: exit $rc, expected 1"; }
[ "$(grep -c . e.txt)" -eq 1 ] || { cat e.txt; fail "import onto a full disk: not one line"; }
grep -q "small/w.h5.tmp: cannot allocate .* MB: No space left on device" e.txt || { cat e.txt; fail "import: the line does not say the disk is full"; }
[ -z "$(ls small)" ] || { ls -la small; fail "import: files left behind"; }
echo "import onto a full disk: $(cat e.txt)"

"$CONVERT" import -q m w.h5 || fail "import"
timeout 60 "$CONVERT" export -q w.h5 small/e > o.txt 2> e.txt; rc=$?
[ $rc -eq 1 ] || { cat e.txt; fail "export onto a full disk: exit $rc, expected 1"; }
[ "$(grep -c . e.txt)" -eq 1 ] || { cat e.txt; fail "export onto a full disk: not one line"; }
grep -q "No space left on device" e.txt || { cat e.txt; fail "export: the line does not say the disk is full"; }
ls small/e 2>/dev/null | grep -q '\.tmp$' && { ls -la small/e; fail "export: .tmp left behind"; }
echo "export onto a full disk: $(cat e.txt)"
