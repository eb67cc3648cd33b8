#!/usr/bin/env bash
# The checks that hold the code's shape, before any test runs (scripts/test.sh's first
# run; .pre-commit-config.yaml runs the same tools): ruff's lint rules and its formatting,
# mypy over the package (its exceptions naming modules that exist: tests/test_mypy_config.py),
# and the import-layer contract (tests/test_layers.py). With the versions scripts/setup.sh
# installs in .venv (ZARRFS_VENV). Every check runs; the exit status is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${ZARRFS_VENV:-.venv}
failed=()
check() {
  echo "--- $*"
  "$@" || failed+=("$*")
}
check "$venv/bin/ruff" check .
check "$venv/bin/ruff" format --check .
check "$venv/bin/mypy"
check "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_layers.py tests/test_mypy_config.py
if [ ${#failed[@]} -gt 0 ]; then
  printf 'check.sh: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
