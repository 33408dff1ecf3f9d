#!/usr/bin/env python3
"""Check a PEFT LoRA golden against PEFT itself, on a Hugging Face copy of its base.

    ftmpi-convert export test/data/hf/peft_neox.h5 /tmp/neox --dtype fp32
    python3 test/reference/peft_check.py test/data/hf/peft_neox.h5 /tmp/neox
    python3 test/reference/peft_check.py GOLDEN.h5 HF_BASE_DIR --adapter ADAPTER_DIR [--after]
    python3 test/reference/peft_check.py GOLDEN.h5 HF_BASE_DIR --write-adapter OUT_DIR

For developers (not run by CI; needs torch, transformers, peft). Loads the HF base
(e.g. written by ftmpi-convert export from the golden's /model), puts rank/alpha/
targets from /lora on it with PEFT, and

  * without --adapter: loads /adapter through each dataset's peft_key (undoing the
    NeoX qkv row permutation), so ftmpi's names, its NeoX permutation and
    ftmpi-convert's export of the base are checked against PEFT in one go;
  * with --adapter DIR: loads a PEFT adapter directory (e.g. from ftmpi-convert
    export --adapter) with PeftModel.from_pretrained and first compares its tensors
    with the golden's /adapter (or /expected/adamw/after with --after);
  * --write-adapter OUT_DIR: saves the golden's initial adapter as a PEFT directory
    (adapter_config.json + adapter_model.safetensors), e.g. to seed an import test.

then runs the golden's batch (each document separately, as the generator does) and
compares the logits with /expected/logits (without --after) to 1e-5 of their largest
magnitude. Exit status 0: all good.
"""

import argparse
import os
import sys

import h5py
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_hf_reference as ref  # noqa: E402
import gen_peft_reference as gen  # noqa: E402

TOL = 1e-5


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def golden_adapters(f, group):
    """{PEFT key: tensor in PEFT's row order} from /adapter or /expected/adamw/after."""
    out = {}
    for name, d in f[group].items():
        t = torch.from_numpy(d[()])
        if name.endswith("qkv_proj.lora_B.weight"):  # ftmpi [3, heads, hd] -> NeoX
            nh = f["config"].attrs["num_attention_heads"]
            t = t.reshape(3, nh, -1, t.shape[1]).transpose(0, 1).reshape(t.shape)
        out[s(d.attrs["peft_key"])] = t.contiguous()
    return out


def peft_tensors(pm):
    return {n.replace(".default.", "."): p for n, p in pm.named_parameters() if ".lora_" in n}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("golden")
    ap.add_argument("hf_base")
    ap.add_argument("--adapter", help="a PEFT adapter directory to check instead of /adapter")
    ap.add_argument("--after", action="store_true",
                    help="compare --adapter's tensors with /expected/adamw/after")
    ap.add_argument("--write-adapter", metavar="OUT_DIR")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    f = h5py.File(a.golden, "r")
    base = AutoModelForCausalLM.from_pretrained(a.hf_base, dtype=torch.float32,
                                                attn_implementation="eager").eval()
    want = golden_adapters(f, "expected/adamw/after" if a.after else "adapter")
    fail = 0
    if a.adapter:
        pm = PeftModel.from_pretrained(base, a.adapter).eval()
        have = peft_tensors(pm)
        if set(have) != set(want):
            print("FAIL adapter keys differ: only in %s: %s; only in the golden: %s" % (
                a.adapter, sorted(set(have) - set(want)), sorted(set(want) - set(have))))
            return 1
        for k in sorted(want):
            d = float((have[k].detach() - want[k]).abs().max() / want[k].abs().max())
            if d > TOL:
                print("FAIL %s differs by %.2e of its max" % (k, d))
                fail += 1
    else:
        lg = f["lora"].attrs
        cfg = LoraConfig(r=int(lg["rank"]), lora_alpha=float(lg["alpha"]),
                         lora_dropout=float(lg["dropout"]),
                         target_modules=s(lg["targets"]).split(","), bias="none",
                         task_type="CAUSAL_LM")
        pm = get_peft_model(base, cfg).eval()
        have = peft_tensors(pm)
        assert set(have) == set(want), sorted(set(have) ^ set(want))
        with torch.no_grad():
            for k, p in have.items():
                p.copy_(want[k])
        if a.write_adapter:
            pm.save_pretrained(a.write_adapter)
            print("wrote %s" % a.write_adapter)

    if not a.after:
        tokens = torch.from_numpy(f["batch/tokens"][()].astype("int64"))
        segment = torch.from_numpy(f["batch/segment"][()])
        with torch.no_grad():
            logits = ref.forward_docs(pm, tokens, segment)
        exp = torch.from_numpy(f["expected/logits"][()])
        d = float((logits - exp).abs().max() / exp.abs().max())
        print("%s logits: %.2e of max |logit|" % ("ok  " if d <= TOL else "FAIL", d))
        fail += d > TOL
        mask = torch.from_numpy(f["batch/loss_mask"][()])
        loss, _ = ref.loss_from_logits(logits, tokens, mask)
        dl = abs(loss.item() - float(f["expected/loss"][()])) / float(f["expected/loss"][()])
        print("%s loss: %.2e relative" % ("ok  " if dl <= TOL else "FAIL", dl))
        fail += dl > TOL
    return 1 if fail else 0


if __name__ == "__main__":
    gen.warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
    sys.exit(main())
