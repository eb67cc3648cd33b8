#!/usr/bin/env bash
# What docs/install.md tells a user of Debian 12 or 13 to do, done as it says (as root):
# its apt line, then `pipx install './zarrfs[s3,icechunk]'` of a copy of this clone's
# sources, the dependencies from the package index as a user gets them, into a PIPX_HOME
# of its own; then `zarrfs demo`, `zarrfs mount`, the demo's array read back through the
# mount (data.npy, against zarr-python reading the store) and `zarrfs umount`. Exits
# non-zero if any step fails. scripts/test.sh runs it on this machine (Debian 12) and
# scripts/debian13.sh in its Debian 13 tree.
set -euo pipefail
cd "$(dirname "$0")/.."
# the page's apt line, read from it
packages=$(sed -n 's/^    sudo apt install //p' docs/install.md)
[ -n "$packages" ] || { echo "pipx-check: no apt line in docs/install.md" >&2; exit 1; }
# shellcheck disable=SC2086  # (a list of package names)
bash scripts/apt-install.sh $packages
work=$(mktemp -d)
cleanup() {
  if findmnt -rn "$work/z" >/dev/null 2>&1; then fusermount3 -u -z "$work/z" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/zarrfs" "$work/z"
cp -r pyproject.toml README.md zarrfs "$work/zarrfs/"
export PIPX_HOME=$work/pipx PIPX_BIN_DIR=$work/bin ZARRFS_LOG_DIR=$work
(cd "$work" && pipx install './zarrfs[s3,icechunk]' >"$work/pipx.log" 2>&1 || { cat "$work/pipx.log" >&2; exit 1; })
zarrfs=$work/bin/zarrfs
"$zarrfs" --version
"$zarrfs" demo "$work/survey.zarr" >/dev/null
"$zarrfs" mount "$work/survey.zarr" "$work/z"
"$PIPX_HOME/venvs/zarrfs/bin/python" - "$work" <<'PY'
import sys
import numpy as np
import zarr
work = sys.argv[1]
read = np.load(f"{work}/z/climate/temp/data.npy")
np.testing.assert_array_equal(read, zarr.open_array(f"{work}/survey.zarr/climate/temp", mode="r")[...])
print(f"pipx-check: climate/temp {read.shape} {read.dtype} read back through the mount")
PY
"$zarrfs" umount "$work/z"
echo "pipx-check: ok"
