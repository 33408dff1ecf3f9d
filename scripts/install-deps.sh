#!/bin/sh
# Installs the build and test dependencies on Debian 12 / Ubuntu (needs root or sudo).
# Skips apt entirely when everything is already present. groff-base: test/docs/test_man.sh
# renders the man pages with it (the check is skipped without it; minimal images lack it).
set -eu
pkgs="build-essential autoconf automake pkg-config libopenmpi-dev openmpi-bin \
libhdf5-openmpi-dev hdf5-tools libconfig-dev libopenblas-dev libjansson-dev libpcre2-dev \
libcmocka-dev gnuplot-nox libopenblas0-openmp xz-utils groff-base"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: not a Debian system; install the equivalents of:$missing" >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install-deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
