#!/usr/bin/env bash
# Builds the Containerfile with buildah where the registry's python:3.13-slim cannot be
# fetched (as root): the base image is made from the Debian 13 tree scripts/debian13.sh
# keeps (Python 3.13 at /usr/bin, `python` linked to it; its test virtualenv left out)
# and tagged as that name, then the image is built (apt and pip reach the network) and
# `zarrfs --version` and a mount of the demo run in a container of it. Not part of
# scripts/test.sh (a build takes minutes); exits non-zero if a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${ZARRFS_TEST_CACHE:-/var/cache/zarrfs-test}/trixie
[ -x "$tree/usr/bin/python3" ] || { echo "container-check: no Debian 13 tree at $tree (run scripts/debian13.sh)" >&2; exit 1; }
bash scripts/apt-install.sh buildah
base=docker.io/library/python:3.13-slim
if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  tar -C "$tree" --one-file-system --exclude=./opt --exclude=./tmp --exclude=./root/.cache \
    --exclude=./var/cache/apt/archives --exclude=./var/lib/apt/lists --exclude=./proc --exclude=./sys \
    --exclude=./dev --exclude=./.zarrfs-tree-complete -cf - . | tar -C "$mnt" -xf -
  mkdir -p "$mnt/opt" "$mnt/proc" "$mnt/sys" "$mnt/dev" "$mnt/var/lib/apt/lists/partial"
  mkdir -m 1777 "$mnt/tmp"
  ln -sf python3 "$mnt/usr/bin/python"
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  buildah commit --rm -q "$ctr" "$base" >/dev/null
fi
context=$(mktemp -d)
ctr=
cleanup() { [ -z "$ctr" ] || buildah rm "$ctr" >/dev/null; rm -rf "$context"; }
trap cleanup EXIT
cp -r Containerfile pyproject.toml README.md zarrfs "$context/"
buildah bud -q --pull-never --isolation chroot --network host -t localhost/zarrfs-check -f Containerfile "$context" >/dev/null
ctr=$(buildah from localhost/zarrfs-check)
buildah run --isolation chroot "$ctr" -- zarrfs --version
buildah run --isolation chroot -v /dev/fuse:/dev/fuse --cap-add CAP_SYS_ADMIN "$ctr" -- sh -ec '
  zarrfs demo /tmp/survey.zarr >/dev/null
  mkdir /tmp/z
  ZARRFS_LOG_DIR=/tmp zarrfs mount /tmp/survey.zarr /tmp/z
  python -c "import numpy; print(\"container-check: climate/temp\", numpy.load(\"/tmp/z/climate/temp/data.npy\").shape, \"read through the mount\")"
  zarrfs umount /tmp/z'
echo "container-check: ok"
