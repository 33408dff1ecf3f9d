#!/bin/sh
# eval_prompts on device = "cuda" with precision = "bf16": the samples decode in bf16 on
# the CUDA backend from the engine's bf16 working parameters, and at the last step equal
# ftmpi-generate --device cuda --params model on the run's final checkpoint (its /model
# holds the same bf16 bits), on 1 rank and on 2 ranks at ZeRO stage 3 (each rank gathers
# the units the decoder reads, its bits made from its master shard).
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
GEN="$B/ftmpi-generate"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
"$GENDATA" --rows 16 --seq-len 32 --digits 2 --seed 5 eval.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
require_cuda_device s.cfg
check() { # N ARGS...
    n=$1; shift
    rm -rf m.jsonl ck
    run_ranks "$n" s.cfg device=cuda precision=bf16 max_steps=30 log_every=30 data.eval=eval.h5 \
        eval_every=30 'eval_prompts=["12+34=", "7+8="]' eval_tokenizer=bytes eval_max_new_tokens=6 \
        metrics_file=m.jsonl checkpoint_dir=ck "$@" > r.log 2>&1 || { cat r.log; fail "run $n ranks $*"; }
    for p in "12+34=" "7+8="; do
        "$GEN" --byte-tokens --max-new-tokens 6 --device cuda --params model ck "$p" > want.txt 2>&1 ||
            { cat want.txt; fail "ftmpi-generate"; }
        python3 - "$p" <<'PY' || fail "$n ranks $*: the bf16 sample of $p is not ftmpi-generate's on cuda"
import json, sys
recs = [json.loads(l) for l in open("m.jsonl")]
got = [r for r in recs if r["kind"] == "sample" and r["step"] == 30 and r["prompt"] == sys.argv[1]]
want = open("want.txt", encoding="utf-8", errors="replace").read()
assert len(got) == 1, got
print(repr(got[0]["completion"]), "=", repr(want))
assert got[0]["completion"].rstrip("\n") == want.rstrip("\n")
PY
    done
}
check 1
if have_mpirun && enough_devices 2 "2 ranks at ZeRO-3"; then check 2 zero_stage=3; fi
echo "bf16 samples on cuda = ftmpi-generate --device cuda --params model"
