#!/usr/bin/env bash
# Runs the checks of the code (scripts/check.sh: ruff, mypy, the import-layer contract),
# then the whole test suite twice (as root, on Debian): on this machine with the tested
# lower ends of the ranges zarrfs supports (scripts/constraints.txt, in a virtualenv of
# their own, .venv-pinned, so that the user's .venv keeps the newest releases) and in a
# Debian 13 tree with Python 3.13 and the newest releases (scripts/debian13.sh); each of the two
# first installs zarrfs as docs/install.md says, with pipx, and mounts (scripts/pipx-check.sh). Extra arguments go to pytest in both test runs;
# ZARRFS_TEST_RUNS names the runs to make ("checks", "host", "debian13"; default all three). The exit status is non-zero if a
# run fails (pytest's exit 5, no tests collected, counts as a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
export ZARRFS_PINNED=1 ZARRFS_VENV=.venv-pinned  # the checks' and this machine's run
runs=${ZARRFS_TEST_RUNS:-checks host debian13}
summary=()
failed=0
for run in $runs; do
  case $run in
    checks) title="ruff, mypy and the import-layer contract, with the pinned versions" ;;
    host) title="this machine ($(. /etc/os-release && echo "$PRETTY_NAME")), tested lower ends (scripts/constraints.txt)" ;;
    debian13) title="Debian 13 tree, Python 3.13, newest releases" ;;
    *) echo "test.sh: unknown run '$run' in ZARRFS_TEST_RUNS (checks, host, debian13)" >&2; exit 2 ;;
  esac
  echo "===== zarrfs tests: $run: $title ====="
  start=$SECONDS
  log=$(mktemp)
  set +e
  if [ "$run" = checks ]; then
    ( bash scripts/setup.sh && bash scripts/check.sh ) 2>&1 | tee "$log"
  elif [ "$run" = host ]; then
    ( bash scripts/setup.sh && bash scripts/pipx-check.sh &&
      .venv-pinned/bin/python -c 'import sys, importlib.metadata as m
print("python", sys.version.split()[0], *(f"{p} {m.version(p)}" for p in ("zarr", "numcodecs", "icechunk", "numpy")), sep=", ")' &&
      .venv-pinned/bin/python -m pytest -q "$@" ) 2>&1 | tee "$log"
  else
    env -u ZARRFS_PINNED -u ZARRFS_VENV bash scripts/debian13.sh "$@" 2>&1 | tee "$log"
  fi
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -ne 5 ] || echo "pytest collected no tests"
  result=$(grep -E '^=* *[0-9]+ (passed|failed|error|skipped|deselected)|no tests ran' "$log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
  rm -f "$log"
  elapsed=$((SECONDS - start))
  if [ "$rc" -eq 0 ]; then status=ok; else status="FAILED (exit $rc)"; failed=1; fi
  summary+=("$run: $status in $((elapsed / 60))m$((elapsed % 60))s${result:+: $result}")
done
echo "===== zarrfs tests: summary ====="
printf '%s\n' "${summary[@]}"
exit "$failed"
