#!/usr/bin/env bash
# Every test: set up (install what is missing, build), then the C++ tests (ctest) and the
# Python tests (pytest). Extra arguments go to pytest (e.g. -k gat).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
echo "== C++ tests (ctest)"
(cd "$SEASTAR_BUILD_DIR" && ctest --output-on-failure -j "$(nproc)")
echo "== Python tests (pytest)"
cd "$ROOT"
"$SEASTAR_PY" -m pytest -q tests/python "$@"
