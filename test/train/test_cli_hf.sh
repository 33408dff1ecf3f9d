#!/bin/sh
# The command-line path from a weights file: `ftmpi --eval-only` with model.weights =
# an HF golden file (every family) and its batch as the dataset prints HF's loss (rel 1e-5).
. "$(dirname "$0")/lib.sh"
for case in hf_basic hf_llama3rope hf_tied hf_qwen2 hf_qwen2_tied hf_qwen3 hf_mistral hf_neox \
            hf_neox_seq hf_gptj; do
    golden="$S/test/data/hf/$case.h5"
    "$B/test/train/hf_batch_to_dataset" "$golden" batch.h5 || fail "$case: converting the batch"
    cat > w.cfg <<CFG
max_steps = 1; micro_batch_size = 2; global_batch_size = 2;
model = { weights = "$golden"; };
data = { train = "batch.h5"; };
optimizer = { lr = 1e-3; };
CFG
    run_ranks 1 --eval-only w.cfg > e.log 2>&1 || { cat e.log; fail "$case: eval-only"; }
    got=$(sed -n 's/.*| loss \([0-9.]*\) .*/\1/p' e.log)
    want=$(h5dump -m '%.12g' -d /expected/loss "$golden" | sed -n 's/.*(0): \([0-9.eE+-]*\).*/\1/p')
    awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-5 * b) }' ||
        fail "$case: loss $got, HF $want"
    echo "$case: ftmpi $got, HF $want"
done
