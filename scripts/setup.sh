#!/usr/bin/env bash
# Installs everything zarrfs and its tests need on a fresh Debian machine (run as root):
# FUSE 3 and GDAL's command-line tools (the legacy-view tests use them) from apt, a
# virtualenv in .venv, the package with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for p in fuse3 libfuse3-dev pkg-config gdal-bin attr rsync strace; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[test]'
