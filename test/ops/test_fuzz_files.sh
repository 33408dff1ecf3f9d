#!/bin/sh
# Every tool's inputs and outputs, one at a time, replaced by something hostile: a symlink
# to a file outside the scratch directory, a FIFO, a directory, /dev/zero (a symlink to
# it) and a 64 GB sparse file; also the outputs' temporary names (OUT.tmp) and standard
# input. Each case must end within 90 s (no FIFO blocks, nothing is read without bound;
# a case takes under a second alone, and the bound leaves room for a loaded CI machine)
# with exit status 1 or 2 and one line on standard error; an output at its final name
# may instead succeed (the rename replaces the link or FIFO itself, never its target).
# Nothing outside the scratch directory may change. (issue 23)
. "$(dirname "$0")/../train/lib.sh"
PREP="$B/ftmpi-prep"
CONVERT="$B/ftmpi-convert"
GEN="$B/ftmpi-generate"
TOKTOOL="$B/ftmpi-tok"
TOK="$S/test/tokenizer/synthetic_bytelevel.json"
OUTSIDE=$(mktemp -d "${TMPDIR:-/tmp}/ftmpi-outside.XXXXXX")
trap 'rm -rf "$SCRATCH" "$OUTSIDE"' EXIT
echo "precious" > "$OUTSIDE/victim"
outside_state() { (cd "$OUTSIDE" && find . -printf "%p %s %T@ %m\\n" && cksum victim); }
before=$(outside_state)

KINDS="symlink fifo dir zero huge"
# make_kind KIND PATH: PATH becomes the hostile thing
make_kind() {
    rm -rf "$2"
    case $1 in
    symlink) ln -s "$OUTSIDE/victim" "$2" ;;
    fifo) mkfifo "$2" ;;
    dir) mkdir "$2" ;;
    zero) ln -s /dev/zero "$2" ;;
    huge) truncate -s 64G "$2" ;;
    esac
}
cases=0
# probe WHAT MAYPASS CMD...: runs CMD (stdin from in.txt when present, else /dev/null);
# MAYPASS=1 allows exit 0
probe() {
    what=$1 maypass=$2; shift 2
    input=/dev/null; [ -e in.txt ] && input=in.txt
    timeout 90 "$@" < "$input" > p.out 2> p.err; rc=$? # a hang, not a slow sanitizer run
    cases=$((cases + 1))
    [ $rc -eq 124 ] && fail "$what: still running after 90 s"
    if [ $rc -eq 0 ] && [ "$maypass" = 1 ]; then
        :
    elif [ $rc -eq 1 ] || [ $rc -eq 2 ]; then
        [ "$(grep -c . p.err)" -eq 1 ] || { cat p.err; fail "$what: $(grep -c . p.err) lines on stderr, expected 1"; }
    else
        cat p.err; fail "$what: exit $rc"
    fi
    [ "$(outside_state)" = "$before" ] || fail "$what: a file outside the scratch directory changed"
}

# ---- fixtures
"$GENDATA" --rows 16 --seq-len 32 --digits 2 train.h5 > /dev/null || fail "gendata"
write_small_cfg s.cfg
common="global_batch_size=2 micro_batch_size=2 max_steps=1 optimizer.warmup_steps=1"
"$B/test/generate/write_weights" w263.h5 263 > /dev/null || fail "write_weights"
echo '{"prompt": "hi"}' > prompts.jsonl
echo '{"instruction": "Say hi", "input": "", "output": "hi"}' > a.jsonl
printf 'Q: {instruction}\nA: ' > tpl.txt
"$CONVERT" import -q "$S/test/data/convert/tiny_fp32" tiny.h5 || fail "import"
mkdir ckseed
"$FTMPI" s.cfg $common save_every=1 checkpoint_dir=ckseed > /dev/null 2>&1 || fail "checkpoint"

for k in $KINDS; do
    # a regular file of ours at a temporary name is a killed run's leftover: replaced
    leftover=0; [ $k = huge ] && leftover=1
    # ---- ftmpi: inputs
    make_kind $k x
    probe "ftmpi config=$k" 0 "$FTMPI" x
    probe "ftmpi data.train=$k" 0 "$FTMPI" s.cfg $common data.train=x
    probe "ftmpi data.eval=$k" 0 "$FTMPI" s.cfg $common data.eval=x eval_every=1
    sed 's/^  vocab_size.*//; s/^  num_attention_heads.*//; s/^  rope_theta.*//; s/^model = {/model = { weights = "x";/' s.cfg > w.cfg
    probe "ftmpi model.weights=$k" 0 "$FTMPI" w.cfg $common
    rm -rf ck; cp -r ckseed ck; make_kind $k ck/latest
    probe "ftmpi checkpoint_dir/latest=$k" 0 "$FTMPI" s.cfg $common checkpoint_dir=ck resume=auto
    # ---- ftmpi: outputs
    make_kind $k out.h5
    probe "ftmpi final_weights=$k" 1 "$FTMPI" s.cfg $common final_weights=out.h5
    rm -rf out.h5; make_kind $k out.h5.tmp
    probe "ftmpi final_weights.tmp=$k" $leftover "$FTMPI" s.cfg $common final_weights=out.h5
    rm -rf out.h5.tmp ck; mkdir ck; make_kind $k ck/step-000001.h5.tmp
    probe "ftmpi checkpoint tmp=$k" $leftover "$FTMPI" s.cfg $common save_every=1 checkpoint_dir=ck
    rm -rf ck; mkdir ck; make_kind $k ck/latest.tmp
    probe "ftmpi latest.tmp=$k" $leftover "$FTMPI" s.cfg $common save_every=1 checkpoint_dir=ck
    rm -rf ck; mkdir ck; make_kind $k ck/.ftmpi-write-test
    probe "ftmpi checkpoint_dir write probe=$k" $leftover "$FTMPI" s.cfg $common save_every=1 checkpoint_dir=ck
    rm -rf ck; mkdir ck; make_kind $k ck/.ftmpi-lock
    probe "ftmpi checkpoint_dir lock file=$k" $leftover "$FTMPI" s.cfg $common save_every=1 checkpoint_dir=ck
    make_kind $k m.jsonl
    probe "ftmpi metrics_file=$k" 1 "$FTMPI" s.cfg $common metrics_file=m.jsonl
    rm -rf m.jsonl ck

    # ---- ftmpi-prep
    make_kind $k x
    probe "prep -t $k" 0 "$PREP" -t x -o p.h5 --seq-len 64 a.jsonl
    probe "prep input $k" 0 "$PREP" -t "$TOK" -o p.h5 --seq-len 64 x
    probe "prep --prompt-template $k" 0 "$PREP" -t "$TOK" -o p.h5 --seq-len 64 --prompt-template x a.jsonl
    make_kind $k p.h5
    probe "prep -o $k" 1 "$PREP" -t "$TOK" -o p.h5 --seq-len 64 a.jsonl
    rm -rf p.h5; make_kind $k p.h5.tmp
    probe "prep -o .tmp $k" $leftover "$PREP" -t "$TOK" -o p.h5 --seq-len 64 a.jsonl
    rm -rf p.h5 p.h5.tmp

    # ---- ftmpi-convert import and export
    rm -rf m; cp -r "$S/test/data/convert/tiny_fp32" m; chmod -R u+w m
    make_kind $k m/config.json
    probe "convert import config.json=$k" 0 "$CONVERT" import -q m c.h5
    rm -rf m; cp -r "$S/test/data/convert/tiny_fp32" m; chmod -R u+w m
    make_kind $k m/model-00002-of-00003.safetensors
    probe "convert import shard=$k" 0 "$CONVERT" import -q m c.h5
    rm -rf m; cp -r "$S/test/data/convert/tiny_fp32" m; chmod -R u+w m
    make_kind $k m/model.safetensors.index.json
    probe "convert import index=$k" 0 "$CONVERT" import -q m c.h5
    make_kind $k c.h5
    probe "convert import OUT=$k" 1 "$CONVERT" import -q "$S/test/data/convert/tiny_fp32" c.h5
    rm -rf c.h5; make_kind $k c.h5.tmp
    probe "convert import OUT.tmp=$k" $leftover "$CONVERT" import -q "$S/test/data/convert/tiny_fp32" c.h5
    rm -rf c.h5 c.h5.tmp
    make_kind $k x
    probe "convert export IN=$k" 0 "$CONVERT" export -q x e
    # (a symlink to a regular file is a tokenizer file to copy: it may succeed)
    probe "convert export --tokenizer $k" 1 "$CONVERT" export -q --force --tokenizer x tiny.h5 e
    rm -rf e; mkdir e; make_kind $k e/model.safetensors.tmp
    probe "convert export model.safetensors.tmp=$k" $leftover "$CONVERT" export -q --force tiny.h5 e
    rm -rf e; mkdir e; make_kind $k e/config.json.tmp
    probe "convert export config.json.tmp=$k" $leftover "$CONVERT" export -q --force tiny.h5 e
    rm -rf e

    # ---- ftmpi-generate and ftmpi-tok
    make_kind $k x
    probe "generate MODEL=$k" 0 "$GEN" --tokenizer "$TOK" x hi --max-new-tokens 2
    probe "generate --tokenizer $k" 0 "$GEN" --tokenizer x w263.h5 hi --max-new-tokens 2
    probe "generate --prompts $k" 0 "$GEN" --tokenizer "$TOK" w263.h5 --prompts x --out g.jsonl --max-new-tokens 2
    make_kind $k g.jsonl
    probe "generate --out $k" 1 "$GEN" --tokenizer "$TOK" w263.h5 --prompts prompts.jsonl --out g.jsonl --max-new-tokens 2
    rm -rf g.jsonl; make_kind $k g.jsonl.tmp
    probe "generate --out .tmp $k" $leftover "$GEN" --tokenizer "$TOK" w263.h5 --prompts prompts.jsonl --out g.jsonl --max-new-tokens 2
    rm -rf g.jsonl g.jsonl.tmp
    probe "ftmpi-tok TOKENIZER=$k" 0 "$TOKTOOL" info x
    rm -rf x
done

# standard input: /dev/zero and a 64 GB sparse file
for k in zero huge; do
    make_kind $k in.txt
    probe "generate prompt on stdin=$k" 0 "$GEN" --tokenizer "$TOK" w263.h5 --max-new-tokens 2
    probe "generate --prompts - =$k" 0 "$GEN" --tokenizer "$TOK" w263.h5 --prompts - --out g.jsonl --max-new-tokens 2
    probe "ftmpi-tok encode stdin=$k" 0 "$TOKTOOL" encode "$TOK"
    rm -f in.txt
done
echo "$cases hostile cases: each ended within 90 s with one line (or replaced an output), nothing outside changed"
