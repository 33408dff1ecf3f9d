#!/bin/sh
# Invalid inputs: each fails with exit 1 and one line naming the file and the
# tensor or field; usage errors exit 2; nothing is left behind.
. "$(dirname "$0")/lib.sh"

# edit_config NAME DEST SED_EXPR: a copy of model NAME with config.json edited
edit_config() {
    copy_model "$1" "$2"
    sed -e "$3" "$DATA/$1/config.json" > "$2/config.json"
}

edit_config tiny_fp32 three_layers 's/"num_hidden_layers": 2/"num_hidden_layers": 3/'
expect_fail 1 "tensor 'model.layers.2.self_attn.q_proj.weight' [64,64] is missing" \
    "$CONVERT" import three_layers out.h5
[ ! -e out.h5 ] && [ ! -e out.h5.tmp ] || fail "a failed import left a file"

edit_config tiny_fp32 narrow 's/"intermediate_size": 128/"intermediate_size": 120/'
expect_fail 1 "tensor 'model.layers.0.mlp.gate_proj.weight' has shape [128,64], config.json implies [120,64]" \
    "$CONVERT" import narrow out.h5

edit_config tiny_fp32 no_hidden '/"hidden_size"/d'
expect_fail 1 'no_hidden/config.json: field "hidden_size" is missing' "$CONVERT" import no_hidden out.h5

edit_config tiny_fp32 falcon 's/"model_type": "llama"/"model_type": "falcon"/'
expect_fail 1 'falcon/config.json: model_type is "falcon", not a family ftmpi has' \
    "$CONVERT" import falcon out.h5

# the family's class must be listed: a Mistral model_type with Llama's architectures
edit_config tiny_fp32 mistral 's/"model_type": "llama"/"model_type": "mistral"/'
expect_fail 1 'does not list MistralForCausalLM' "$CONVERT" import mistral out.h5

# Qwen's sliding-window layers are not supported
edit_config tiny_qwen2 qwen_window 's/"use_sliding_window": false/"use_sliding_window": true/'
expect_fail 1 '"use_sliding_window" is true; ftmpi trains this family with full attention' \
    "$CONVERT" import qwen_window out.h5
edit_config tiny_qwen3 qwen3_layers 's/"full_attention"/"sliding_attention"/'
expect_fail 1 'layer_types[0] is not "full_attention"' "$CONVERT" import qwen3_layers out.h5

# Qwen3 without head_dim means Qwen3Config's 128, not hidden / heads (here 24 was used)
edit_config tiny_qwen3 qwen3_nohd '/"head_dim"/d'
expect_fail 1 "config.json implies [512,64]" "$CONVERT" import qwen3_nohd out.h5

# a Qwen3 directory whose config.json is Qwen2's: the q/k norms are unexpected
edit_config tiny_qwen3 as_qwen2 's/"model_type": "qwen3"/"model_type": "qwen2"/; s/Qwen3ForCausalLM/Qwen2ForCausalLM/'
expect_fail 1 "is not part of a Qwen2ForCausalLM model with this config.json" \
    "$CONVERT" import as_qwen2 out.h5

edit_config tiny_fp32 arch 's/"LlamaForCausalLM"/"LlamaForSequenceClassification"/'
expect_fail 1 "does not list LlamaForCausalLM" "$CONVERT" import arch out.h5

edit_config tiny_fp32 yarn 's/"rope_type": "default"/"rope_type": "yarn"/'
expect_fail 1 '"rope_parameters.rope_type" is "yarn"' "$CONVERT" import yarn out.h5

edit_config tiny_fp32 bias 's/"attention_bias": false/"attention_bias": true/'
expect_fail 1 '"attention_bias" is true' "$CONVERT" import bias out.h5

# GPT-NeoX and GPT-J: fields of their own
edit_config tiny_neox neox_act 's/"hidden_act": "gelu"/"hidden_act": "relu"/'
expect_fail 1 '"hidden_act" is "relu"; ftmpi'"'"'s GELU MLP has "gelu" (exact)' "$CONVERT" import neox_act out.h5
edit_config tiny_neox neox_odd 's/"partial_rotary_factor": 0.25/"partial_rotary_factor": 0.2/'
expect_fail 1 "rotary_dim: 3 must be even" "$CONVERT" import neox_odd out.h5
edit_config tiny_gptj gptj_rot 's/"rotary_dim": 8/"rotary_dim": null/'
expect_fail 1 '"rotary_dim" is null' "$CONVERT" import gptj_rot out.h5
# a NeoX checkpoint without attention biases whose config.json says it has them
edit_config tiny_neox neox_nobias 's/"attention_bias": true/"attention_bias": false/'
expect_fail 1 "bias' is not part of a GPTNeoXForCausalLM model with this config.json (4 unexpected tensors" \
    "$CONVERT" import neox_nobias out.h5

# tied config but lm_head.weight present: unexpected unless --allow-extra
edit_config tiny_fp32 tied 's/"tie_word_embeddings": false/"tie_word_embeddings": true/'
expect_fail 1 "tensor 'lm_head.weight' is not part of a LlamaForCausalLM model with this config.json (tie_word_embeddings is true)" \
    "$CONVERT" import tied out.h5
"$CONVERT" import -q --allow-extra tied tied.h5 2> warn.txt || fail "--allow-extra"
grep -q "skipping 1 tensor" warn.txt || fail "no warning for the skipped tensor"
"$CONVERT" inspect tied.h5 | grep -q lm_head && fail "lm_head imported despite tying"

# untied config on a tied model: lm_head.weight is missing
edit_config tiny_bf16 untied 's/"tie_word_embeddings": true/"tie_word_embeddings": false/'
expect_fail 1 "tensor 'lm_head.weight' [96,64] is missing" "$CONVERT" import untied out.h5

# a truncated shard
copy_model tiny_bf16 trunc
head -c 60000 "$DATA/tiny_bf16/model-00002-of-00003.safetensors" > trunc/model-00002-of-00003.safetensors
expect_fail 1 "trunc/model-00002-of-00003.safetensors: the tensors cover" "$CONVERT" import trunc out.h5
grep -q "truncated file" err.txt || fail "truncation not named"

# a missing shard and an index naming a tensor its shard lacks
copy_model tiny_bf16 noshard
rm noshard/model-00003-of-00003.safetensors
expect_fail 1 "noshard/model-00003-of-00003.safetensors: cannot open" "$CONVERT" import noshard out.h5
copy_model tiny_bf16 badindex
sed 's/"model.norm.weight": "model-0000[0-9]/"model.norm.weight": "model-00001/' \
    "$DATA/tiny_bf16/model.safetensors.index.json" > badindex/model.safetensors.index.json
if ! cmp -s badindex/model.safetensors.index.json "$DATA/tiny_bf16/model.safetensors.index.json"; then
    # the directory typed with a trailing slash: the index is named with one slash
    expect_fail 1 "badindex/model.safetensors.index.json: lists tensor 'model.norm.weight' in model-00001-of-00003.safetensors, which does not contain it" \
        "$CONVERT" import badindex/ out.h5
fi

# no weights at all
mkdir -p empty && cp "$DATA/tiny_bf16/config.json" empty/
expect_fail 1 "empty: no model.safetensors or model.safetensors.index.json" "$CONVERT" import empty out.h5
expect_fail 1 "nowhere: not a directory" "$CONVERT" import nowhere out.h5

# export and inspect of things that are not ftmpi files
expect_fail 1 "cannot open as HDF5" "$CONVERT" export "$DATA/tiny_fp32/config.json" x_out
expect_fail 1 "not a safetensors file" "$CONVERT" inspect "$DATA/tiny_fp32/config.json"
expect_fail 1 "no such file" "$CONVERT" inspect missing.h5

# a flipped byte inside a tensor is caught by inspect --verify
"$CONVERT" import -q "$DATA/tiny_fp32" f.h5 || fail "import"
# locate the first 16 bytes of the embedding (the data section starts at 8 + N)
shard="$DATA/tiny_fp32/model-00001-of-00003.safetensors"
n=$(od -An -tu8 -N8 "$shard" | tr -d ' ')
pat=$(od -An -tx1 -j $((8 + n)) -N16 "$shard" | tr -d '\n' | sed 's/ /\\x/g')
off=$(LC_ALL=C grep -obUaP "$pat" f.h5 | head -1 | cut -d: -f1)
if [ -n "$off" ]; then
    printf '\377' | dd of=f.h5 bs=1 seek=$((off + 5)) conv=notrunc 2>/dev/null
    "$CONVERT" inspect --verify f.h5 > v.txt 2> err.txt && fail "verify missed a flipped byte"
    grep -q "embed_tokens.weight.*MISMATCH" v.txt || fail "mismatch not reported per tensor"
    grep -q "do not match their content hash" err.txt || fail "no verify error line"
    echo "ok: inspect --verify: $(cat err.txt)"
else
    echo "note: embedding bytes not found in f.h5; verify-mismatch check skipped"
fi

# usage errors: exit 2
expect_fail 2 "missing subcommand" "$CONVERT"
expect_fail 2 "unknown subcommand 'frobnicate'" "$CONVERT" frobnicate
expect_fail 2 "--dtype 'fp16'" "$CONVERT" import --dtype fp16 a b
expect_fail 2 "expected HF_DIR and OUT.h5" "$CONVERT" import a
expect_fail 2 "--max-shard-size 'lots'" "$CONVERT" export --max-shard-size lots a b
"$CONVERT" --help | grep -q "EXIT STATUS" || fail "--help"
"$CONVERT" import --help | grep -q "allow-extra" || fail "import --help"
echo "PASS"
