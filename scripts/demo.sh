#!/usr/bin/env bash
# Set up, write the built-in demo hierarchy, mount it, show it as a user would, unmount.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
demo=$(mktemp -d /tmp/zarrfs-demo.XXXXXX)
mnt=$(mktemp -d /tmp/zarrfs-mnt.XXXXXX)
.venv/bin/zarrfs demo "$demo/store.zarr"
ZARRFS_LOG_DIR="$demo" .venv/bin/zarrfs mount "$demo/store.zarr" "$mnt"  # its log goes with the demo
trap '.venv/bin/zarrfs umount "$mnt" || true; rm -rf "$demo"; rmdir "$mnt"' EXIT
# print a command as it can be pasted (arguments that need it in single quotes), then run it
show() {
  local line='$' arg
  for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then line+=" $arg"; else line+=" '${arg//\'/\'\\\'\'}'"; fi
  done
  echo; echo "$line"; "$@"
}
show ls "$mnt" "$mnt/climate" "$mnt/climate/temp"
show cat "$mnt/climate/temp/info"
show ls "$mnt/climate/temp/chunks"
show .venv/bin/python -c "import numpy; a = numpy.load(\"$mnt/climate/temp/data.npy\", mmap_mode=\"r\"); print(a.shape, a.dtype); print(a[0, :3, :4])"
show head -3 "$mnt/tables/labels/data.jsonl"
show ls "$mnt/legacy/elevation"
show sh -c "head -2 $mnt/legacy/readings/data.csv | cut -c1-70"
# write through: the first ten values of temp become 300 K, stored when the file is closed
show .venv/bin/python -c "import numpy; open(\"$mnt/climate/temp/data\", \"r+b\").write(numpy.full(10, 300, \"<f4\").tobytes())"
show .venv/bin/python -c "import numpy; print(numpy.load(\"$mnt/climate/temp/data.npy\", mmap_mode=\"r\")[0, 0, :12])"
show getfattr -d -m - "$mnt/climate/temp"
show cat "$mnt/.zarrfs/stats"
show .venv/bin/zarrfs info "$demo/store.zarr"
