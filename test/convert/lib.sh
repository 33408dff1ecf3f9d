# Shared helpers for the ftmpi-convert shell tests (sourced). The harness exports
# FT_BUILDDIR and FT_SRCDIR; each test runs in a private scratch directory.
set -u
B="${FT_BUILDDIR:-$(pwd)}"
S="${FT_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
CONVERT="$B/ftmpi-convert"
STCMP="$B/test/convert/st_compare"
GENSYNTH="$B/test/convert/gen_synth"
DATA="$S/test/data/convert"
# the real tokenizers, laid out in the build tree by make check (test/data/Makefile.inc)
REAL_TOK="$B/test/data/tokenizers"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/ftmpi-convert-test.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
cd "$SCRATCH" || exit 99

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# expect_fail CODE PATTERN CMD...: CMD exits with CODE and prints exactly one line
# on stderr, containing PATTERN (a fixed string); usage errors may add a
# "Try 'ftmpi-convert ... --help'." hint line.
expect_fail() {
    code=$1; pattern=$2; shift 2
    "$@" > out.txt 2> err.txt
    rc=$?
    [ "$rc" -eq "$code" ] || { cat err.txt >&2; fail "'$*' exited $rc, expected $code"; }
    [ "$(grep -cv "^Try 'ftmpi-convert" err.txt)" -eq 1 ] || { cat err.txt >&2; fail "'$*': expected one error line"; }
    grep -qF -- "$pattern" err.txt || { cat err.txt >&2; fail "'$*': error lacks '$pattern'"; }
    echo "ok ($code): $(cat err.txt)"
}

# copy_model NAME DEST: a writable copy of a committed HF directory
copy_model() { rm -rf "$2"; cp -r "$DATA/$1" "$2" && chmod -R u+w "$2"; }

# peak_rss_kib LOG: the peak RSS that --stats printed, in KiB
peak_rss_kib() { sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$1" | awk '{ printf "%d\n", $1 * 1024 }'; }
