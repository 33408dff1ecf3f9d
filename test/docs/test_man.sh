#!/bin/sh
# The man pages cannot drift from the programs: doc/man/ holds pages generated from the
# programs' --help and ftmpi --help-config by scripts/make-man.sh (committed, so that a
# build needs no generator run); this regenerates them from the built programs and fails,
# naming the page and the command, where a committed page differs, where a page is not
# installed (Makefile.am), and where a page renders with warnings (groff or man, when one
# of them is installed). Then the check itself is checked: a hand-edited copy is caught.
. "$(dirname "$0")/../train/lib.sh"
regen="make update-man (in the build directory), or: scripts/make-man.sh BUILDDIR doc/man"
sh "$S/scripts/make-man.sh" "$B" gen || fail "scripts/make-man.sh failed"

# DIR: each page in doc/man equals its regeneration in DIR, and no page is missing there
same_pages() {
    bad=0
    for p in "$1"/*; do
        name=$(basename "$p")
        if [ ! -f "$S/doc/man/$name" ]; then
            echo "doc/man/$name: missing (the programs have this page): $regen"; bad=1
        elif ! cmp -s "$p" "$S/doc/man/$name"; then
            diff "$S/doc/man/$name" "$p" | head -20
            echo "doc/man/$name differs from what the programs print now: $regen"; bad=1
        fi
    done
    for p in "$S"/doc/man/*; do
        [ -f "$1/$(basename "$p")" ] ||
            { echo "doc/man/$(basename "$p"): no program prints this page: remove it"; bad=1; }
    done
    return $bad
}
same_pages gen || fail "the man pages drifted from --help (above)"
n=$(ls gen | wc -l)
[ "$n" -ge 7 ] || fail "only $n pages generated"
echo "$n pages match their programs' help: $(ls gen | tr '\n' ' ')"

# every page is installed (and so shipped): make install, make dist
for p in gen/*; do
    grep -q "doc/man/$(basename "$p")" "$S/Makefile.am" ||
        fail "doc/man/$(basename "$p") is not in dist_man_MANS in Makefile.am"
done

# each page renders without a warning; an unknown macro, a stray escape or a line that
# roff takes for a request would show here
if command -v groff >/dev/null 2>&1; then
    for p in gen/*; do
        w=$(groff -man -ww -z "$p" 2>&1) || fail "$(basename "$p"): groff failed: $w"
        [ -z "$w" ] || { echo "$w"; fail "$(basename "$p"): groff warnings (above)"; }
    done
    echo "groff -man -ww: no warnings"
fi
if command -v man >/dev/null 2>&1; then
    for p in gen/*; do
        w=$(LC_ALL=C MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null) || fail "$(basename "$p"): man -l failed: $w"
        [ -z "$w" ] || { echo "$w"; fail "$(basename "$p"): man --warnings (above)"; }
    done
    # and says what the help says (the escapes did not eat the options)
    LC_ALL=C MANWIDTH=80 man -l gen/ftmpi.1 2>/dev/null | grep -q -- "--help-config" ||
        fail "ftmpi.1 rendered without --help-config"
    echo "man --warnings: no warnings"
fi
command -v groff >/dev/null 2>&1 || command -v man >/dev/null 2>&1 ||
    echo "rendering not checked: neither groff nor man is installed"

# the check fails on what it is meant to catch: a page edited by hand, a page missing
mkdir copy
cp gen/* copy/
printf '.\\" edited by hand\n' >> copy/ftmpi.1
S_REAL=$S; S=$PWD/fake; mkdir -p fake/doc/man; cp copy/* fake/doc/man/
same_pages gen > c.log 2>&1 && { cat c.log; fail "a hand-edited page: not caught"; }
grep -q "doc/man/ftmpi.1 differs" c.log || { cat c.log; fail "a hand-edited page: not named"; }
rm fake/doc/man/ftmpi-prep.1
same_pages gen > c.log 2>&1 && { cat c.log; fail "a missing page: not caught"; }
grep -q "doc/man/ftmpi-prep.1: missing" c.log || { cat c.log; fail "a missing page: not named"; }
S=$S_REAL
echo "caught a hand-edited page and a missing one"
echo "PASS"
