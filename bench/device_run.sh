#!/usr/bin/env bash
# The many-core figures of docs/benchmarks.md in one run, with their baselines in the same
# run (zarr-python, tensorstore, numpy assembling, the pyfuse3 ceiling bench/minimal_fs.py).
# On a many-core machine, once scripts/setup.sh has made the virtualenv, from the
# checkout's root:
#
#     bash bench/device_run.sh                   # about 8 minutes
#
# Each benchmark's output goes to $OUT (or /tmp/zarrfs-device-out) as a .txt file, with the
# machine's description in machine.txt. `bash bench/device_run.sh small` runs the same
# steps on small arrays (a check that everything runs, on any machine; no figures to quote).
set -uo pipefail
out=${OUT:-/tmp/zarrfs-device-out}
mkdir -p "$out"
work=${ZARRFS_BENCH_DIR:-/tmp/zarrfs-device-bench}
mkdir -p "$work"
py=${PYTHON:-python3}
# prepare.sh can leave pyfuse3's source out quietly (its download failed): rerun it then
$py -c "import pyfuse3, zarrfs, numcodecs, zarr, tensorstore" || {
  echo "missing a module: is .device/ complete (.device/deb/pyfuse3-*.tar.gz) and on-device.sh sourced?"; exit 1; }
if [ "${1:-}" = small ]; then
  kernel_free=(--size-mib 64 --rounds 1)
  read=(--size-mib 64 --rounds 2)
  write=(--size-mib 64 --runs 1)
else
  kernel_free=(--size-mib 1024 --rounds 3)
  read=(--size-mib 1024 --rounds 6)
  write=(--size-mib 1024 --runs 3)
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cores: $(nproc)"
  echo "memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "python: $($py --version 2>&1)"
  $py -c "import numpy, numcodecs, zarr; print('numpy', numpy.__version__, 'numcodecs', numcodecs.__version__, 'zarr', zarr.__version__)" 2>&1
  $py -c "import tensorstore; print('tensorstore', tensorstore.__version__)" 2>&1
  grep -m1 'model name' /proc/cpuinfo
} > "$out/machine.txt"
cat "$out/machine.txt"

step() {  # name, seconds at most, command...
  local name=$1 limit=$2
  shift 2
  echo "== $name ($(date -u +%T))"
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  echo "rc $rc" >> "$out/$name.txt"
  tail -n 40 "$out/$name.txt"
}

step kernel_free 180 $py bench/kernel_free.py --dir "$work/kf" "${kernel_free[@]}"
step read 240 $py bench/read.py --dir "$work/read" "${read[@]}"
step write 150 $py bench/write.py --dir "$work/write" "${write[@]}"
echo "== done ($(date -u +%T)); results in $out"
