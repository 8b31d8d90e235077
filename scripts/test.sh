#!/usr/bin/env bash
# Every test: set up (install what is missing, build), then the C++ tests (ctest), the
# Python tests (pytest), including the PyG compatibility tests, and the C++ core tests again
# under AddressSanitizer and UndefinedBehaviorSanitizer (scripts/sanitize.sh's CI budget, a
# build of its own in build-sanitize/; SEASTAR_SKIP_SANITIZE=1 skips it). Extra arguments go to
# pytest (e.g. -k gat).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# tests/compat compares seastar.nn with PyTorch Geometric (pure Python, pinned there; kept out of
# requirements.txt, whose hash keys the shared venv); without network the folder is skipped
if ! "$SEASTAR_PY" -c 'import torch_geometric' 2>/dev/null; then
  echo "== installing PyTorch Geometric for tests/compat"
  "$SEASTAR_PY" -m pip install -q -r "$ROOT/tests/compat/requirements.txt" \
    || echo "(could not install it: tests/compat will be skipped)"
fi
# METIS for seastar.distributed.partition_graph(method="metis") comes from pymetis, also kept out
# of requirements.txt (method="random" needs nothing; the METIS tests skip without it)
if ! "$SEASTAR_PY" -c 'import pymetis' 2>/dev/null; then
  echo "== installing pymetis for the METIS partitioner"
  "$SEASTAR_PY" -m pip install -q -r "$ROOT/tests/distributed-requirements.txt" \
    || echo "(could not install it: the METIS tests will be skipped)"
fi
echo "== C++ tests (ctest)"
(cd "$SEASTAR_BUILD_DIR" && ctest --output-on-failure -j "$(nproc)")
echo "== Python tests (pytest)"
cd "$ROOT"
"$SEASTAR_PY" -m pytest -q tests/python tests/compat "$@"
if [[ -z ${SEASTAR_SKIP_SANITIZE:-} ]]; then
  echo "== C++ core tests under -fsanitize=address,undefined (scripts/sanitize.sh, SANITIZE_SCOPE=core)"
  SANITIZE_SCOPE=core bash "$ROOT/scripts/sanitize.sh"
fi
