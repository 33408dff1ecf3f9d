#!/bin/sh
# Non-finite values never travel through files, and the messages say what is true:
# - a run whose update diverges (optimizer.lr = 1e39) writes no checkpoint holding NaN/Inf
#   and moves no `latest` to one: one line (once, no MPI_ABORT banner) names the file and
#   the first tensor and element, exit 1;
# - a checkpoint or weights file holding NaN or Inf (one element, content hash kept valid
#   by test/ckpt/poison_tensor) is refused on load with one line naming the file, the
#   tensor, the element and allow_nonfinite, on 1 rank and on 2 at ZeRO 3 (with and
#   without the optimizer offloaded; the element is then rank 1's), on device = "cpu" and,
#   in a build with the CUDA backend, on "cuda"; allow_nonfinite = true loads it with a
#   warning, and the error of the NaN steps that follow no longer claims that a checkpoint
#   is clean;
# - an Inf planted in one element of AdamW's v survives the steps that follow (the update
#   of that element is 0, the loss stays finite), so the next checkpoint is refused before
#   writing, naming that tensor and element (1 rank; 2 ranks at ZeRO 3, rank 1's element);
# - a LoRA run's frozen base (model.weights) holding NaN or Inf is refused the same way,
#   naming the file and the tensor, and so are adapters seeded from a PEFT directory
#   (model.adapter; written by ftmpi-convert export --adapter, one value set to NaN in
#   adapter_model.safetensors), naming that file, the tensor's PEFT key and the element;
# - a NaN stop after a clean checkpoint names that checkpoint;
# - checkpoint_dir typed with a trailing slash ("ck/", as shell completion adds it) gives
#   one slash in every message naming a checkpoint file (ftmpi and ftmpi-generate);
# - a collapsed run (loss ln V, gradient norm 0: final norm and lm_head zeroed) stops with
#   exit 88 and one line after collapse_steps steps.
. "$(dirname "$0")/../train/lib.sh"
have_mpirun || skip "mpirun not found"
POISON="$B/test/ckpt/poison_tensor"
"$GENDATA" --rows 64 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=4 micro_batch_size=2 optimizer.warmup_steps=1"
one_line() { # LOG PATTERN WHAT: exactly one line matches, and no MPI_ABORT banner
    [ "$(grep -c "$2" "$1")" -eq 1 ] || { cat "$1"; fail "$3: not one line matching '$2'"; }
    ! grep -q "MPI_ABORT" "$1" || { cat "$1"; fail "$3: MPI_ABORT banner"; }
}

# A: divergence: nothing written, latest untouched (ZeRO 0, and 3 with the optimizer offloaded)
for zero in "zero_stage=0" "zero_stage=3 offload_optimizer=true"; do
    rm -rf ck
    # shellcheck disable=SC2086
    run_ranks 2 s.cfg $common $zero max_steps=3 optimizer.lr=1e39 checkpoint_dir=ck/ save_every=1 > a.log 2>&1
    rc=$?
    [ $rc -eq 1 ] || { cat a.log; fail "diverged run ($zero): exit $rc, not 1"; }
    one_line a.log "^ftmpi: checkpoint at step 1: ck/step-000001.h5: the parameters .*hold NaN or Inf (first in model\.[a-z_.0-9]*weight, element [0-9]*): not written" "diverged run ($zero)"
    [ ! -e ck/step-000001.h5 ] && [ ! -e ck/step-000001.h5.tmp ] && [ ! -e ck/latest ] ||
        { ls -l ck; fail "$zero: a non-finite checkpoint or latest was written"; }
    echo "ok: $zero: a diverged update is not checkpointed: $(grep -o 'first in [^)]*)' a.log)..."
done

# B: a checkpoint holding NaN (parameters) or Inf (optimizer state) is refused on load,
# naming the tensor and the element. The small model's block unit is q 4096, k 2048,
# v 2048, o 4096, gate, up, down 10240 each, two norms 64: 43136 elements, 21568 a rank
# on 2 ranks; up_proj starts at 22528 and down_proj at 32768, so the elements poisoned
# below are rank 1's at ZeRO 1-3.
run_ranks 1 s.cfg $common max_steps=2 checkpoint_dir=good > g.log 2>&1 || { cat g.log; fail "good run"; }
# the (ranks, settings) the refusals below run with; on device = "cuda" too where the
# build has the CUDA backend (the CPU execution harness, or a GPU per rank)
cases="1:zero_stage=0 2:zero_stage=3 2:zero_stage=3,offload_optimizer=true"
if cuda_cases; then
    . "$S/test/cuda/devices.sh"
    enough_devices 1 "device = cuda, 1 rank" && cases="$cases 1:zero_stage=0,device=cuda"
    enough_devices 2 "device = cuda, 2 ranks" && cases="$cases 2:zero_stage=3,device=cuda"
fi
refused() { # DIR PATTERN WHAT: for each case (RANKS:SETTING,SETTING...), exit 1 and exactly one line matching PATTERN
    for c in $cases; do
        # shellcheck disable=SC2046
        run_ranks "${c%%:*}" s.cfg $common max_steps=3 checkpoint_dir="$1" resume=auto \
            $(echo "${c#*:}" | tr , ' ') > r.log 2>&1
        rc=$?
        [ $rc -eq 1 ] || { cat r.log; fail "$3 ($c): exit $rc, not 1"; }
        one_line r.log "$2" "$3 ($c)"
    done
    echo "ok: $3 refused ($cases): $(grep -o 'step-000002.h5: .*' r.log | cut -c1-110)..."
}
cp -r good p
"$POISON" p/step-000002.h5 /model/model.layers.1.mlp.up_proj.weight 77 nan || fail "poison"
refused p "^ftmpi: p/step-000002.h5: the parameters hold NaN or Inf (first in model.layers.1.mlp.up_proj.weight, element 77): training from it cannot work; resume from an earlier checkpoint, or set allow_nonfinite = true to load it anyway (to inspect it)$" "a NaN parameter"
cp -r good o
"$POISON" o/step-000002.h5 /optim/v/model.norm.weight 3 inf || fail "poison optimizer state"
refused o "^ftmpi: o/step-000002.h5: the optimizer state holds NaN or Inf (first in model.norm.weight, element 3): " "an Inf moment"
# the lowest element wins, over buffers and ranks: m's element 5 of down_proj (rank 1's)
# under a NaN parameter later in the same tensor and an Inf moment of a later unit
cp -r good q
"$POISON" q/step-000002.h5 /model/model.layers.1.mlp.down_proj.weight 9000 nan &&
    "$POISON" q/step-000002.h5 /optim/m/model.layers.1.mlp.down_proj.weight 5 inf &&
    "$POISON" q/step-000002.h5 /optim/v/model.norm.weight 3 inf || fail "poison q"
refused q "^ftmpi: q/step-000002.h5: the parameters and the optimizer state hold NaN or Inf (first in model.layers.1.mlp.down_proj.weight, element 5): " "NaN and Inf in several places"

# C: allow_nonfinite loads it; the NaN stop that follows claims no clean checkpoint
run_ranks 1 s.cfg $common max_steps=4 checkpoint_dir=p resume=auto allow_nonfinite=true > c.log 2>&1 &&
    { cat c.log; fail "training from NaN parameters succeeded"; }
grep -q "warning: p/step-000002.h5: the parameters hold NaN or Inf .*allow_nonfinite = true" c.log ||
    { cat c.log; fail "allow_nonfinite: no warning"; }
grep -q "is not finite .*no checkpoint was written or resumed from in this run" c.log ||
    { cat c.log; fail "allow_nonfinite: the NaN stop's message"; }
! grep -q "has no NaNs\|holds only finite" c.log || { cat c.log; fail "a false claim of a clean checkpoint"; }
echo "ok: allow_nonfinite loads it with a warning; the stop claims no clean checkpoint"

# C2: an Inf in one element of v (down_proj's element 100: rank 1's on 2 ranks at ZeRO 3)
# is loaded with allow_nonfinite and stays Inf (v = b2 v + (1 - b2) g^2), while that
# element's update m / (sqrt(v) + eps) is 0 and the loss stays finite: the next
# checkpoint is refused before it is written, naming the tensor and the element
for c in "1:zero_stage=0" "2:zero_stage=3" "2:zero_stage=3,offload_optimizer=true"; do
    rm -rf v && cp -r good v
    "$POISON" v/step-000002.h5 /optim/v/model.layers.1.mlp.down_proj.weight 100 inf || fail "poison v"
    # shellcheck disable=SC2046
    run_ranks "${c%%:*}" s.cfg $common max_steps=4 checkpoint_dir=v resume=auto save_every=1 \
        allow_nonfinite=true $(echo "${c#*:}" | tr , ' ') > cw.log 2>&1
    rc=$?
    [ $rc -eq 1 ] || { cat cw.log; fail "an Inf moment carried to a checkpoint ($c): exit $rc, not 1"; }
    one_line cw.log "^ftmpi: warning: v/step-000002.h5: the optimizer state holds NaN or Inf (first in model.layers.1.mlp.down_proj.weight, element 100); loaded because allow_nonfinite = true$" "the Inf moment's load ($c)"
    one_line cw.log "^ftmpi: checkpoint at step 3: v/step-000003.h5: the optimizer state holds NaN or Inf (first in model.layers.1.mlp.down_proj.weight, element 100): not written, and \`latest\` and earlier files are left as they were; " "the Inf moment's checkpoint ($c)"
    [ ! -e v/step-000003.h5 ] && [ "$(cat v/latest)" = "step-000002.h5" ] ||
        { ls -l v; fail "$c: the checkpoint holding Inf was written or latest moved"; }
done
echo "ok: an Inf moment is refused before writing, naming the tensor and element: $(grep -o 'step-000003.h5: .*' cw.log | cut -c1-110)..."

# D: a weights file holding NaN, as model.weights
run_ranks 1 s.cfg $common max_steps=2 final_weights=w.h5 > w.log 2>&1 || { cat w.log; fail "final_weights"; }
cp w.h5 wl.h5 && cp w.h5 wc.h5
"$POISON" w.h5 /model/model.embed_tokens.weight 5 nan || fail "poison weights"
sed '/^model = {/,/};$/d' s.cfg > ws.cfg
echo 'model = { weights = "w.h5"; };' >> ws.cfg
run_ranks 2 ws.cfg $common max_steps=2 > d.log 2>&1
rc=$?
[ $rc -eq 1 ] || { cat d.log; fail "NaN weights file: exit $rc, not 1"; }
one_line d.log "w.h5: the parameters hold NaN or Inf (first in model.embed_tokens.weight, element 5)" "NaN weights file"
echo "ok: a weights file holding NaN is refused as model.weights"

# D2: the same as a LoRA run's frozen base (which no finite check saw: it trained on NaN),
# on 2 ranks at stages 0 and 3, fp32 and the bf16 recipe (the base keeps bf16 bits): one
# line naming the file and the tensor, exit 1; allow_nonfinite loads it with a warning
"$POISON" wl.h5 /model/model.layers.1.mlp.up_proj.weight 77 inf || fail "poison the base"
sed '/^model = {/,/};$/d' s.cfg > wl.cfg
printf '%s\n' 'model = { weights = "wl.h5"; };' 'lora = { rank = 4; alpha = 8.0; };' >> wl.cfg
base_msg="wl.h5: the frozen base model's parameters hold NaN or Inf (first in model.layers.1.mlp.up_proj.weight)"
for v in "zero_stage=0" "zero_stage=3" "zero_stage=3 precision=bf16"; do
    # shellcheck disable=SC2086
    run_ranks 2 wl.cfg $common $v max_steps=2 > dl.log 2>&1
    rc=$?
    [ $rc -eq 1 ] || { cat dl.log; fail "NaN LoRA base ($v): exit $rc, not 1"; }
    one_line dl.log "^ftmpi: $base_msg: LoRA training on it cannot work; use a clean weights file (re-import the model with ftmpi-convert import), or set allow_nonfinite = true to load it anyway (to inspect it)$" "NaN LoRA base ($v)"
done
run_ranks 1 wl.cfg $common max_steps=1 allow_nonfinite=true > dw.log 2>&1
grep -q "^ftmpi: warning: $base_msg; loaded because allow_nonfinite = true$" dw.log ||
    { cat dw.log; fail "NaN LoRA base with allow_nonfinite: no warning"; }
run_ranks 1 wl.cfg $common max_steps=2 model.weights=wc.h5 checkpoint_dir=lck > dg.log 2>&1 ||
    { cat dg.log; fail "a clean LoRA base"; }
grep -q "NaN or Inf" dg.log && { cat dg.log; fail "a clean LoRA base reported non-finite"; }
echo "ok: a LoRA base holding Inf is refused, naming the tensor"
# D3: a PEFT adapter directory (model.adapter) with a NaN in one lora_B tensor, on 1 rank
# and on 2 at stage 3: one line naming the directory's safetensors file and the key
"$B/ftmpi-convert" export -q --adapter lck/step-000002.h5 ad > x.log 2>&1 || { cat x.log; fail "export --adapter"; }
cp -r ad adn
# st_poison FILE KEY ELEMENT: sets element ELEMENT of tensor KEY (F32 or BF16) to NaN, in
# place. A safetensors file is an 8-byte little-endian header length, the JSON header
# (KEY: dtype, shape, data_offsets [begin, end) from the end of the header), the data.
st_poison() {
    hlen=$(od -An -tu8 -N8 "$1" | tr -d ' ')
    set -- "$1" "$2" "$3" $(dd if="$1" bs=1 skip=8 count="$hlen" 2>/dev/null |
        sed -n "s/.*\"$2\":{\"dtype\":\"\([A-Z0-9]*\)\",\"shape\":\[[0-9,]*\],\"data_offsets\":\[\([0-9]*\),.*/\1 \2/p")
    [ $# -eq 5 ] || fail "st_poison: no tensor $2 in $1"
    case $4 in
    F32) printf '\000\000\300\177' | dd of="$1" bs=1 seek=$((8 + hlen + $5 + 4 * $3)) conv=notrunc 2>/dev/null ;;
    BF16) printf '\300\177' | dd of="$1" bs=1 seek=$((8 + hlen + $5 + 2 * $3)) conv=notrunc 2>/dev/null ;;
    *) fail "st_poison: dtype $4" ;;
    esac
}
st_poison adn/adapter_model.safetensors base_model.model.model.layers.1.mlp.up_proj.lora_B.weight 3
cmp -s ad/adapter_model.safetensors adn/adapter_model.safetensors && fail "st_poison changed nothing"
run_ranks 1 wl.cfg $common max_steps=2 model.weights=wc.h5 model.adapter=ad > dc.log 2>&1 ||
    { cat dc.log; fail "a clean adapter directory"; }
grep -q "NaN or Inf" dc.log && { cat dc.log; fail "a clean adapter directory reported non-finite"; }
adapter_msg="adn/adapter_model.safetensors: the adapters hold NaN or Inf (first in base_model.model.model.layers.1.mlp.up_proj.lora_B.weight, element 3)"
for v in "1 zero_stage=0" "2 zero_stage=3"; do
    # shellcheck disable=SC2086
    run_ranks "${v%% *}" wl.cfg $common ${v#* } max_steps=2 model.weights=wc.h5 model.adapter=adn/ > dn.log 2>&1
    rc=$?
    [ $rc -eq 1 ] || { cat dn.log; fail "NaN adapter directory ($v): exit $rc, not 1"; }
    one_line dn.log "^ftmpi: $adapter_msg: LoRA training from them cannot work; use a clean adapter directory (ftmpi-convert export --adapter writes one from a LoRA checkpoint), or set allow_nonfinite = true to load it anyway (to inspect it)$" "NaN adapter directory ($v)"
done
run_ranks 1 wl.cfg $common max_steps=1 model.weights=wc.h5 model.adapter=adn allow_nonfinite=true > dw.log 2>&1
grep -q "^ftmpi: warning: $adapter_msg; loaded because allow_nonfinite = true$" dw.log ||
    { cat dw.log; fail "NaN adapter directory with allow_nonfinite: no warning"; }
echo "ok: a PEFT adapter directory holding NaN is refused, naming its file and the tensor"
# GPT-NeoX's fused query_key_value B orders its rows head by head in the file (q, k, v of
# head 0, ...) and q, k, v in ftmpi: the file's element 66 (row 16 = head 0's first k row,
# column 2 of rank 4) is ftmpi's element 258 (row 4 heads x 16 + 0), and the line names
# the file's
neox="model.family=gpt_neox model.num_key_value_heads=4 model.rotary_dim=4"
# shellcheck disable=SC2086
run_ranks 1 s.cfg $common $neox max_steps=1 final_weights=wn.h5 > n.log 2>&1 || { cat n.log; fail "neox base"; }
sed 's/wl\.h5/wn.h5/' wl.cfg > wn.cfg
run_ranks 1 wn.cfg $common max_steps=2 checkpoint_dir=nck > n.log 2>&1 || { cat n.log; fail "neox LoRA run"; }
"$B/ftmpi-convert" export -q --adapter nck/step-000002.h5 nad > x.log 2>&1 || { cat x.log; fail "neox export --adapter"; }
st_poison nad/adapter_model.safetensors base_model.model.gpt_neox.layers.1.attention.query_key_value.lora_B.weight 66
run_ranks 2 wn.cfg $common max_steps=2 zero_stage=3 model.adapter=nad > n.log 2>&1
rc=$?
[ $rc -eq 1 ] || { cat n.log; fail "NaN neox adapter directory: exit $rc, not 1"; }
one_line n.log "^ftmpi: nad/adapter_model.safetensors: the adapters hold NaN or Inf (first in base_model.model.gpt_neox.layers.1.attention.query_key_value.lora_B.weight, element 66): " "NaN neox adapter directory"
echo "ok: a fused B's element is named in the file's row order"
# the adapters of a LoRA checkpoint: named as adapters, not as the head
"$POISON" lck/step-000002.h5 /model/model.layers.1.mlp.up_proj.lora_B.weight 3 nan || fail "poison an adapter"
run_ranks 1 wl.cfg $common max_steps=3 model.weights=wc.h5 checkpoint_dir=lck resume=auto > da.log 2>&1
rc=$?
[ $rc -eq 1 ] || { cat da.log; fail "NaN adapter checkpoint: exit $rc, not 1"; }
one_line da.log "lck/step-000002.h5: the parameters hold NaN or Inf (first in model.layers.1.mlp.up_proj.lora_B.weight, element 3): training from it cannot work" "NaN adapter checkpoint"
echo "ok: a LoRA checkpoint holding NaN is refused, naming the adapter tensor and element"

# E: a NaN stop after a clean checkpoint names it (checkpoint_dir typed as "ck/")
rm -rf ck
FTMPI_FAULT=nan:3 run_ranks 2 s.cfg $common max_steps=4 checkpoint_dir=ck/ save_every=2 > e.log 2>&1 &&
    fail "the NaN step did not stop the run"
one_line e.log "step 3: .*is not finite .*the last checkpoint, ck/step-000002.h5, holds only finite values" "NaN stop"
one_line e.log "^ftmpi: checkpoint ck/step-000002.h5 written in " "checkpoint line"
echo "ok: the NaN stop names the last (clean) checkpoint"

# F: collapse: the head zeroed with its moments gives loss ln V and gradient 0 forever
cp -r good z
for x in model/model.norm.weight model/lm_head.weight optim/m/model.norm.weight \
    optim/m/lm_head.weight optim/v/model.norm.weight optim/v/lm_head.weight; do
    "$POISON" z/step-000002.h5 "/$x" all zero || fail "zero $x"
done
run_ranks 2 s.cfg $common max_steps=20 checkpoint_dir=z resume=auto collapse_steps=3 save_every=1 > f.log 2>&1
rc=$?
[ $rc -eq 88 ] || { cat f.log; fail "collapsed run: exit $rc, not 88"; }
one_line f.log "step 5: the run has collapsed: loss 5.5568 = ln(vocab_size)" "collapse"
[ ! -e z/step-000005.h5 ] || fail "the collapsed step was checkpointed"
echo "ok: a collapsed run stops with 88 after collapse_steps steps"

# G: ftmpi-generate refuses the NaN checkpoint with one line (it once printed nothing, exit 0)
GEN="$B/ftmpi-generate"
"$GEN" p --ids 1,2 --max-new-tokens 2 > g.out 2> g.err
rc=$?
[ $rc -eq 1 ] || { cat g.err; fail "generate on a NaN checkpoint: exit $rc, not 1"; }
[ "$(wc -l < g.err)" -eq 1 ] && grep -q "step-000002.h5: /model/model.layers.1.mlp.up_proj.weight holds NaN or Inf.*--allow-nonfinite" g.err ||
    { cat g.err; fail "generate on a NaN checkpoint: unexpected message"; }
"$GEN" p --ids 1,2 --max-new-tokens 2 --allow-nonfinite > /dev/null 2>&1 ||
    fail "generate --allow-nonfinite refused the checkpoint"
# the directory typed as "p/": the file is named with one slash
"$GEN" p/ --ids 1,2 --max-new-tokens 2 > g.out 2> g.err
rc=$?
[ $rc -eq 1 ] || { cat g.err; fail "generate on p/: exit $rc, not 1"; }
[ "$(wc -l < g.err)" -eq 1 ] && grep -q "^ftmpi-generate: p/step-000002.h5: /model/model.layers.1.mlp.up_proj.weight holds NaN or Inf: " g.err ||
    { cat g.err; fail "generate on p/: unexpected message"; }
echo "ok: ftmpi-generate refuses a NaN checkpoint in one line: $(cut -c1-100 g.err)..."
