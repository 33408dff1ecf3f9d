#!/bin/sh
# The docs cannot drift from the tools: every option and configuration key that README.md
# and doc/*.md name is checked against what the built tools print (--help, --help-config,
# each subcommand's --help), and no doc refers to an issue number or a path outside the
# repository (check_docs.py says what exactly). Then the check itself is checked: a made-up
# key, option, issue number or outside path added to a copy of the docs must be caught.
. "$(dirname "$0")/../train/lib.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
mkdir help
"$FTMPI" --help-config > help/config.txt || fail "ftmpi --help-config"
# the tools: the installed programs of this build and scripts/ftmpi-*
for t in "$B"/ftmpi "$B"/ftmpi-* "$S"/scripts/ftmpi-*; do
    [ -x "$t" ] && [ -f "$t" ] || continue
    name=$(basename "$t")
    "$t" --help > "help/$name.txt" 2>&1
    # subcommands the help shows as "TOOL WORD ...": their own help too
    for sub in $(sed -n "s/^ *$name \([a-z][a-z-]*\) .*/\1/p" "help/$name.txt" | sort -u); do
        "$t" "$sub" --help >> "help/$name.txt" 2>&1
    done
done
for t in ftmpi ftmpi-prep ftmpi-convert ftmpi-generate ftmpi-gendata ftmpi-plot; do
    [ -s "help/$t.txt" ] || fail "no help text from $t"
done
python3 "$S/test/docs/check_docs.py" "$S" help || fail "the docs drifted from the tools (above)"

# the check fails on what it is meant to catch
mkdir -p copy/doc && cp "$S/README.md" copy/ && cp "$S"/doc/*.md copy/doc/
caught() { # WHAT PATTERN TEXT: TEXT appended to a copy of README.md is reported
    what=$1 pat=$2
    cp "$S/README.md" copy/README.md
    printf '%s\n' "$3" >> copy/README.md
    python3 "$S/test/docs/check_docs.py" copy help > c.log 2>&1 && { cat c.log; fail "$what: not caught"; }
    grep -q -- "$pat" c.log || { cat c.log; fail "$what: not reported as '$pat'"; }
    echo "caught $what: $(grep -v '^check_docs:' c.log | head -1)"
}
caught "a made-up override" "'optimizer.warmup'" '```sh
mpirun -np 2 ftmpi run.cfg optimizer.warmup=3
```'
caught "a made-up key in inline code" "'optimizer.made_up_key'" 'Set `optimizer.made_up_key = 3`.'
caught "a made-up key in a config snippet" "'model.made_up_key'" '```
max_steps = 10;
model = {
  made_up_key = 1;
};
```'
caught "a made-up option" "ftmpi-prep has no option --made-up-flag" '`ftmpi-prep --made-up-flag -o x.h5 in.jsonl`'
caught "an issue number" "issue number" 'See issue #22.'
caught "a path outside the repository" "outside the repository" 'See /work/shared/docs/x.md.'
echo "PASS"
