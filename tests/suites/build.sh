#!/usr/bin/env bash
# Build pjdfstest and fsx from tests/suites into DIR (default /tmp/suites); the sources
# here are not changed (autoreconf and make run in a copy).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-/tmp/suites}"
mkdir -p "$out"
need=()
for p in autoconf automake libtool gcc make; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${need[@]}" >/dev/null
fi
if [ ! -x "$out/pjdfstest/pjdfstest" ]; then
  rm -rf "$out/pjdfstest" && cp -r "$here/pjdfstest" "$out/pjdfstest"
  (cd "$out/pjdfstest" && autoreconf -ifs >/dev/null 2>&1 && ./configure -q >/dev/null && make -s pjdfstest >/dev/null)
fi
if [ ! -x "$out/fsx" ]; then
  gcc -O2 -D_GNU_SOURCE -I"$here/fsx" -include getopt.h -o "$out/fsx" "$here/fsx/fsx.c" -lm 2>/dev/null || \
    gcc -O2 -D_GNU_SOURCE -I"$here/fsx" -include getopt.h -o "$out/fsx" "$here/fsx/fsx.c"
fi
echo "$out/pjdfstest/pjdfstest"
echo "$out/fsx"
