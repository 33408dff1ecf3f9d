#!/bin/sh
# transformers loads ftmpi-convert's exports and computes the reference logits:
# each committed tiny HF model (tiny_bf16, tiny_fp32, tiny_qwen2, tiny_qwen3,
# tiny_mistral, tiny_neox, tiny_gptj) is imported to HDF5 and exported again (sharded and single-file);
# AutoModelForCausalLM.from_pretrained (the config's architecture) on the
# export (float32) must give the golden logits that gen_export_golden.py made from
# the source directory, and safetensors' safe_open must read format=pt and the
# expected tensor names and dtypes (check_export_golden.py). A model trained a few
# steps by ftmpi is exported too, and transformers must make ftmpi-generate's greedy
# choices. Needs torch, transformers and safetensors (reference tools from pip,
# never a run-time dependency of ftmpi): SKIPs without them.
. "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
"$PY" -c "import torch, transformers, safetensors" > py.txt 2>&1 ||
    skip "python3 cannot import torch, transformers and safetensors ($(tail -n 1 py.txt))"
# small thread counts: the models are tiny, and make check runs tests in parallel
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1

set --   # the checks for check_export_golden.py, run in one Python process
for m in tiny_bf16 tiny_fp32 tiny_qwen2 tiny_qwen3 tiny_mistral tiny_neox tiny_gptj; do
    case $m in tiny_bf16|tiny_qwen2|tiny_mistral|tiny_neox) dt=bf16 ;; *) dt=fp32 ;; esac
    golden="$DATA/$m.logits.json"
    [ -f "$golden" ] || fail "$golden missing"
    "$CONVERT" import -q "$DATA/$m" $m.h5 > log.txt 2>&1 || { cat log.txt; fail "import $m"; }
    "$CONVERT" export -q $m.h5 ${m}_one > log.txt 2>&1 || { cat log.txt; fail "export $m"; }
    [ -f ${m}_one/model.safetensors ] || fail "$m: no single model.safetensors"
    "$CONVERT" export -q $m.h5 ${m}_sh --max-shard-size 60KB > log.txt 2>&1 ||
        { cat log.txt; fail "export sharded $m"; }
    [ -f ${m}_sh/model.safetensors.index.json ] || fail "$m: no index for a sharded export"
    set -- "$@" --golden ${m}_one "$golden" $dt --golden ${m}_sh "$golden" $dt
    # the families whose HF names ftmpi maps (NeoX's q/k/v split on import): ftmpi's own
    # forward on the imported file must make transformers' greedy choices on the (fp32)
    # export, which equals the source (test_roundtrip.sh); an import mapping that export
    # undid symmetrically would pass the checks above, not this one
    case $m in tiny_neox|tiny_gptj)
        "$B/ftmpi-generate" $m.h5 --ids 1,17,42,5,77,23 --max-new-tokens 12 --ignore-eos \
            > gen.txt 2> log.txt || { cat log.txt; fail "ftmpi-generate on the imported $m"; }
        "$CONVERT" export -q --dtype fp32 $m.h5 ${m}_f32 > log.txt 2>&1 ||
            { cat log.txt; fail "export --dtype fp32 $m"; }
        set -- "$@" --greedy ${m}_f32 1,17,42,5,77,23 "$(cat gen.txt)" ;;
    esac
done

# Models trained by ftmpi (fp32 master weights, untied; Llama with GQA, GPT-NeoX and
# GPT-J), exported: checked
# teacher-forced, so that one near-tie cannot derail the rest. Needs the trainer;
# skipped, with a note, if it cannot run.
if [ -x "$B/ftmpi" ] && [ -x "$B/ftmpi-gendata" ] && [ -x "$B/ftmpi-generate" ]; then
    cat > tr.cfg <<CFG
device = "cpu"; max_steps = 20; seed = 3; micro_batch_size = 4; global_batch_size = 4;
model = { vocab_size = 259; hidden_size = 32; intermediate_size = 64; num_hidden_layers = 2;
  num_attention_heads = 4; num_key_value_heads = 2; max_position_embeddings = 64; };
data = { train = "train.h5"; };
optimizer = { type = "adamw"; lr = 3e-3; };
CFG
    prompt=256,49,50,43,51,53,61   # BOS "12+35="
    # Llama (GQA), and the GPT families: NeoX's fused q/k/v, biases and partial
    # rotary, GPT-J's interleaved rotary and lm_head bias
    ok=yes
    "$B/ftmpi-gendata" --rows 64 --seq-len 32 train.h5 > train.log 2>&1 || ok=no
    for fam in llama \
               "gpt_neox model.num_key_value_heads=4 model.rotary_dim=4 model.parallel_residual=true model.attention_bias=true" \
               "gptj model.num_key_value_heads=4 model.rotary_dim=4 model.gelu_tanh=true"; do
        [ $ok = yes ] || break
        name=${fam%% *} extra=${fam#llama}
        extra=${extra#"$name"}
        if "$B/ftmpi" tr.cfg model.family=$name $extra final_weights=tr_$name.h5 >> train.log 2>&1 &&
           "$B/ftmpi-generate" tr_$name.h5 --ids $prompt --max-new-tokens 24 --ignore-eos \
               > gen_$name.txt 2>> train.log; then
            echo "trained $name: ftmpi-generate $prompt -> $(cat gen_$name.txt)"
            "$CONVERT" export -q tr_$name.h5 trained_$name > log.txt 2>&1 ||
                { cat log.txt; fail "export of the trained $name model"; }
            set -- "$@" --greedy trained_$name $prompt "$(cat gen_$name.txt)"
        else
            ok=no
        fi
    done
    if [ $ok = no ]; then
        echo "note: could not train/generate with ftmpi; trained-model export not tested"
        tail -n 3 train.log
    fi
fi

"$PY" "$S/test/convert/check_export_golden.py" "$@" > check.txt 2>&1
rc=$?
cat check.txt
[ $rc -eq 0 ] || fail "transformers/safetensors disagree with the export (exit $rc)"
echo "PASS"
