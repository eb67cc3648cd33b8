#!/usr/bin/env bash
# The Debian 13 run of scripts/test.sh (as root): Python 3.13 and the newest releases pip
# finds. A debootstrap tree of Debian 13 (minbase, from the machine's own apt mirror) is
# kept in /var/cache/zarrfs-test/trixie (ZARRFS_TEST_CACHE) and made again when incomplete;
# in a private mount namespace the repository is bound at its own path and /proc, /sys,
# /dev (FUSE included) at theirs, scripts/setup.sh installs the apt packages and a virtualenv
# in /opt/zarrfs-venv inside the tree (not the repository's .venv), and pytest runs with
# the arguments given. Delete the cache to take releases newer than its virtualenv.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
cache=${ZARRFS_TEST_CACHE:-/var/cache/zarrfs-test}
tree=$cache/trixie
mark=.zarrfs-tree-complete
bash scripts/apt-install.sh debootstrap util-linux
mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9  # one run at a time in the tree (apt and pip inside it)

# the URI of the machine's Debian archive: the apt source whose suites hold its own release
mirror() {
  local codename
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  local files=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ ! -f "$f" ] || files+=("$f")
  done
  [ ${#files[@]} -gt 0 ] || return 0
  awk -v c="$codename" '
      FNR == 1 { uri = "" }
      /^deb / { sub(/\[[^]]*\] */, ""); if ($3 == c) { print $2; exit } }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == c && uri != "") { print uri; exit } }
      /^$/ { uri = "" }' "${files[@]}"
}

remove_tree() {  # never through a mount left below it
  if findmnt -rn -o TARGET | grep -q "^$1/"; then
    echo "debian13: $1 has mounts below it; unmount them first" >&2
    exit 1
  fi
  rm -rf --one-file-system "$1"
}

if [ ! -e "$tree/$mark" ] || ! chroot "$tree" /bin/true 2>/dev/null; then
  [ ! -e "$tree" ] || remove_tree "$tree"
  [ ! -e "$tree.new" ] || remove_tree "$tree.new"
  url=$(mirror)
  [ -n "$url" ] || { echo "debian13: no Debian mirror in /etc/apt/sources.list*" >&2; exit 1; }
  log=$(mktemp)
  if ! debootstrap --variant=minbase trixie "$tree.new" "$url" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; echo "debian13: debootstrap failed" >&2; exit 1
  fi
  rm -f "$log"
  touch "$tree.new/$mark"
  mv "$tree.new" "$tree"
fi
# what reaches the network from here reaches it from the tree
mkdir -p "$tree/usr/local/share/ca-certificates" "$tree/etc/ssl/certs"
cp -a /usr/local/share/ca-certificates/. "$tree/usr/local/share/ca-certificates/"
cp /etc/ssl/certs/ca-certificates.crt "$tree/etc/ssl/certs/ca-certificates.crt"
cp --remove-destination /etc/resolv.conf "$tree/etc/resolv.conf"

# the mounts live in a mount namespace of their own, so they end with it whatever happens;
# the trap unmounts them (and any FUSE mount a failed test left) as soon as the run ends
unshare --mount --propagation private bash -s -- "$tree" "$repo" "$@" <<'INNER'
set -euo pipefail
tree=$1 repo=$2
shift 2
cleanup() {
  findmnt -rn -o TARGET | grep "^$tree/" | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}
trap cleanup EXIT
# FUSE mounts made outside before this namespace are copies here: while a copy is held, their
# daemons cannot end when unmounted outside; let them go (the host keeps its own)
findmnt -rn -o TARGET,FSTYPE | awk '$2 ~ /^fuse(\.|blk$|$)/ {print $1}' | sort -r | while read -r m; do
  umount -l "$(printf '%b' "$m")" 2>/dev/null || true
done
for d in proc sys dev; do mount --rbind "/$d" "$tree/$d"; done
mkdir -p "$tree$repo"
mount --bind "$repo" "$tree$repo"
in_tree() {
  chroot "$tree" /usr/bin/env -u VIRTUAL_ENV -u PYTHONPATH -u PYTHONHOME HOME=/root LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    ZARRFS_VENV=/opt/zarrfs-venv ZARRFS_CRASH_KILLS="${ZARRFS_CRASH_KILLS:-200}" REPO="$repo" bash -c 'cd "$REPO" && "$@"' _ "$@"
}
# a set-up that fails (an interrupted apt, say) leaves the tree to be made again next time
in_tree bash scripts/setup.sh || { rm -f "$tree/.zarrfs-tree-complete"; exit 1; }
# what docs/install.md tells a user: its apt line, pipx install of the clone, a mount
in_tree bash scripts/pipx-check.sh
in_tree /opt/zarrfs-venv/bin/python -c 'import sys, importlib.metadata as m
print("python", sys.version.split()[0], *(f"{p} {m.version(p)}" for p in ("zarr", "numcodecs", "icechunk", "numpy")), sep=", ")'
set +e
# the crash test's 200 kills run in the host's run; this one kills 40 times (CI's time)
ZARRFS_CRASH_KILLS=${ZARRFS_CRASH_KILLS:-40} in_tree /opt/zarrfs-venv/bin/python -m pytest -q "$@"
INNER
