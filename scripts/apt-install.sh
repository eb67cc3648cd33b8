#!/usr/bin/env bash
# Installs those of the named Debian packages that are missing (as root), quietly: nothing
# is printed unless apt fails, and then its whole output. Waits for another apt or dpkg
# to let go of the lock instead of failing.
set -euo pipefail
need=()
for p in "$@"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || need+=("$p")
done
[ ${#need[@]} -gt 0 ] || exit 0
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
apt=(apt-get -q -y -o DPkg::Lock::Timeout=900 -o Dpkg::Use-Pty=0)
if ! { "${apt[@]}" update && "${apt[@]}" install --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "apt-install: could not install ${need[*]}" >&2
  exit 1
fi
