#!/usr/bin/env bash
# Installs everything zarrfs and its tests need on a fresh Debian 12 or 13 (run as root):
# Python's venv and headers and a C compiler (pyfuse3 is built from source), FUSE 3,
# GDAL's and netCDF's command-line tools (the legacy-view tests), attr, rsync, vim (the
# everyday-programs tests), procps (pgrep), strace
# (the fsync test), systemd's analyzer (the unit test) and autotools and perl's prove (the
# pjdfstest subset, built from tests/suites) from apt; a virtualenv; the package with its
# test extras, in the newest releases this Python can have (Icechunk 2 on Python 3.12 and
# later). A second run installs nothing and prints nothing.
#   ZARRFS_VENV      where the virtualenv goes (default .venv in the repository)
#   ZARRFS_PINNED=1  the tested lower ends instead (scripts/constraints.txt): the test run
#                    on this machine takes them, in a virtualenv of its own
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ZARRFS_VENV:-.venv}
bash scripts/apt-install.sh python3 python3-venv python3-dev gcc libc6-dev pkg-config ca-certificates \
  fuse3 libfuse3-dev gdal-bin netcdf-bin libnetcdf-dev nco attr rsync vim-tiny procps strace systemd \
  autoconf automake libtool make perl
# a virtualenv that cannot run its python or pip (an interrupted set-up, another Python)
# is made again
if ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
# the newest releases: upgraded, dependencies too, whenever the install is made again
if [ "${ZARRFS_PINNED:-}" = 1 ]; then pins=(-c scripts/constraints.txt); else pins=(--upgrade --upgrade-strategy eager); fi
# reinstall only when what it installs from changed (the editable install names this path)
stamp=$venv/.zarrfs-installed
wanted=$(cat pyproject.toml scripts/constraints.txt <(echo "$PWD ${pins[*]}") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONWARNINGS=ignore
  quiet() { "$@" 2>&1 | { grep -v -e '^WARNING: Location' -e '^$' || true; }; }
  quiet "$venv/bin/pip" install -q --upgrade pip
  quiet "$venv/bin/pip" install -q "${pins[@]}" -e '.[test]'
  "$venv/bin/python" -c 'import zarrfs, pyfuse3, zarr' || { echo "setup: the install failed" >&2; exit 1; }
  echo "$wanted" > "$stamp"
fi
# bytecode for the package itself, as a regular install has it: the daemon's imports are
# most of the time a mount takes, and this environment may forbid writing it at import
"$venv/bin/python" -m compileall -q zarrfs >/dev/null
