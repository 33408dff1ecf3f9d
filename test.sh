#!/bin/sh
# One command: install dependencies, build, run the whole test suite (make check).
# Ends with one line "N passed, N failed, N skipped". Extra arguments go to configure.
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
scripts/install-deps.sh
scripts/build.sh "$@"
cd build
rc=0
make -j2 check >/dev/null 2>&1 || rc=$?
sh "$top/.ci/summarize.sh" test-suite.log
exit $rc
