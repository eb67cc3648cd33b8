#!/usr/bin/env bash
# Installs everything zarrfs and its tests need on a fresh Debian machine (run as root):
# FUSE 3, GDAL's command-line tools (the legacy-view tests use them), strace (the fsync
# test), systemd's analyzer (the unit test) from apt; a virtualenv in .venv; the package
# with its test extras. A second run installs nothing and prints nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for p in fuse3 libfuse3-dev pkg-config gdal-bin netcdf-bin libnetcdf-dev nco attr rsync strace systemd; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
# reinstall only when what it installs from changed
stamp=.venv/.zarrfs-installed
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONWARNINGS=ignore
  .venv/bin/pip install -q --upgrade pip 2>&1 | grep -v -e '^WARNING: Location' -e '^$' || true
  .venv/bin/pip install -q -e '.[test]' 2>&1 | grep -v -e '^WARNING: Location' -e '^$' || true
  .venv/bin/python -c 'import zarrfs, pyfuse3, zarr' || { echo "setup: the install failed" >&2; exit 1; }
  echo "$wanted" > "$stamp"
fi
# bytecode for the package itself, as a regular install has it: the daemon's imports are
# most of the time a mount takes, and this environment may forbid writing it at import
.venv/bin/python -m compileall -q zarrfs >/dev/null
