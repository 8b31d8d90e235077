#!/usr/bin/env bash
# The main job: set up (install what is missing, build), then train GAT on the embedded Cora.
# Extra arguments go to examples/train.py (e.g. --model gcn --epochs 50).
set -euo pipefail
# the Python extension is all the main job runs: the C++ tests and examples wait for the test command
SEASTAR_BUILD_TARGETS=${SEASTAR_BUILD_TARGETS-_C}
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec "$SEASTAR_PY" "$ROOT/examples/train.py" --model gat --dataset cora "$@"
