#!/bin/sh
# tensorboard_dir: rank 0 writes one event file, events.out.tfevents.<time>.<host>, whose
# records have valid TFRecord framing and CRCs and whose scalars are the logged values
# (checked by tfevents_check.py, which needs nothing installed); TensorBoard's own
# reader loads the same scalars when the tensorboard package is installed.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
CHECK="$S/test/train/tfevents_check.py"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
"$GENDATA" --rows 16 --seq-len 32 --digits 2 --seed 5 eval.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
n=1; have_mpirun && n=2
# peak_tflops: the CPU has no datasheet peak, and without one there is no MFU to write
run_ranks $n s.cfg max_steps=6 data.eval=eval.h5 eval_every=3 tensorboard_dir=tb/run1 peak_tflops=1 \
    > r.log 2>&1 || { cat r.log; fail "run"; }
set -- tb/run1/events.out.tfevents.*
[ $# -eq 1 ] && [ -f "$1" ] || { ls -la tb/run1; fail "expected one event file (rank 0 only)"; }
case "$(basename "$1")" in
events.out.tfevents.[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9].?*) ;;
*) fail "event file name $1 is not events.out.tfevents.<time>.<host>" ;;
esac
EV=$1
python3 "$CHECK" "$EV" > scalars.txt || fail "event file framing or encoding"
# every step's loss and the evaluations' losses, as the log prints them
awk '$2 == "train/loss" { printf "%.4f\n", $3 }' scalars.txt > tb_loss
losses r.log > log_loss
cmp -s tb_loss log_loss || { paste tb_loss log_loss; fail "train/loss differs from the log"; }
awk '$2 == "eval/loss" { printf "%d %.4f\n", $1, $3 }' scalars.txt > tb_eval
sed -n 's/^eval *\([0-9]*\) | loss \([0-9.]*\) .*/\1 \2/p' r.log > log_eval
[ -s log_eval ] && cmp -s tb_eval log_eval || { paste tb_eval log_eval; fail "eval/loss differs"; }
for tag in train/lr train/grad_norm perf/tokens_per_s perf/mfu perf/peak_mem_mib; do
    [ "$(awk -v t=$tag '$2 == t' scalars.txt | wc -l)" -ge 1 ] || fail "no $tag scalar"
done
echo "event file: $(wc -l < scalars.txt) scalars, framing and CRCs valid, losses as logged"
# the check can fail: one flipped byte in a record's data breaks its CRC
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[60] ^= 1; open("bad", "wb").write(b)' "$EV"
python3 "$CHECK" bad > /dev/null 2>&1 && fail "a corrupted event file passed the check"
# TensorBoard's reader (reference only)
python3 -c 'import tensorboard' 2>/dev/null || skip "tensorboard not installed (format checked)"
python3 - "$EV" <<'PY' || fail "TensorBoard cannot read the event file"
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1])
acc.Reload()
tags = acc.Tags()["scalars"]
for t in ("train/loss", "eval/loss", "train/lr", "train/grad_norm", "perf/tokens_per_s", "perf/mfu"):
    assert t in tags, (t, tags)
assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3, 4, 5, 6]
assert [e.step for e in acc.Scalars("eval/loss")] == [3, 6]
print("TensorBoard reads", len(tags), "scalar tags")
PY
