#!/bin/sh
# Configures and builds ftmpi out of tree, in build/ (or $FTMPI_BUILD_DIR). Extra
# arguments go to configure.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
dir=${FTMPI_BUILD_DIR:-build}
mkdir -p "$dir"
cd "$dir"
# built where it runs: -march=native (configure --enable-native) is safe and ~12 % faster
[ -f Makefile ] || ../configure -q --enable-native "$@"
make -j"$(nproc)" >/dev/null
echo "build: ftmpi built in $top/$dir"
