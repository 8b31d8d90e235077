#!/usr/bin/env bash
# Every test: set up (install what is missing, build), then the C++ tests (ctest), the
# Python tests (pytest), including the PyG compatibility tests and the docs site's build
# (tests/python/test_docs.py), and the C++ core tests again
# under AddressSanitizer and UndefinedBehaviorSanitizer (scripts/sanitize.sh's CI budget, a
# build of its own in build-sanitize/; SEASTAR_SKIP_SANITIZE=1 skips it). Extra arguments go to
# pytest (e.g. -k gat).
# pytest runs in two passes: every test not marked `serial` on one worker per core
# (pytest-xdist, SEASTAR_TEST_WORKERS overrides the count, 1 runs in one process), whole files
# to a worker, then the `serial` ones alone. It closes with the phases' times, the 20 slowest
# tests and the 5 slowest test files (scripts/test_report.py; SEASTAR_TEST_REPORT=FILE also
# writes it all as JSON).
set -euo pipefail
started=$SECONDS
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
report_dir=$(mktemp -d "${TMPDIR:-/tmp}/seastar-test-report.XXXXXX")
trap 'rm -rf "$report_dir"' EXIT
phase() { printf '%s\t%s\n' "$1" "$2" >> "$report_dir/phases.tsv"; }
phase "set-up and build" $((SECONDS - started))
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
# pytest-xdist runs the Python tests on every core (tests/requirements.txt; kept out of
# requirements.txt like PyG); without it they run in one process
if ! "$SEASTAR_PY" -c 'import xdist' 2>/dev/null; then
  echo "== installing pytest-xdist for the parallel test pass"
  "$SEASTAR_PY" -m pip install -q -r "$ROOT/tests/requirements.txt" \
    || echo "(could not install it: the Python tests run in one process)"
fi
# the docs site's build (tests/python/test_docs.py builds it, as scripts/docs.sh does) needs Sphinx,
# MyST, furo and matplotlib (docs/requirements.txt; kept out of requirements.txt like PyG)
if ! "$SEASTAR_PY" -c 'import sphinx, myst_parser, furo, matplotlib' 2>/dev/null; then
  echo "== installing the docs' requirements (docs/requirements.txt)"
  "$SEASTAR_PY" -m pip install -q -r "$ROOT/docs/requirements.txt" \
    || echo "(could not install them: the docs tests will be skipped)"
fi
t=$SECONDS
echo "== C++ tests (ctest)"
(cd "$SEASTAR_BUILD_DIR" && ctest --output-on-failure -j "$(nproc)")
phase "ctest" $((SECONDS - t))
cd "$ROOT"
export SEASTAR_TEST_REPORT_DIR=$report_dir
# pytest's exit status 5 is "no test selected" (a -k that matches only one pass): not a failure
pass_ok() { [[ $1 == 0 || $1 == 5 ]]; }
workers=${SEASTAR_TEST_WORKERS:-$(nproc)}
parallel=()
if ((workers > 1)) && "$SEASTAR_PY" -c 'import xdist' 2>/dev/null; then
  # whole files to a worker, in the order tests/conftest.py gives them (slowest first)
  parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
fi
# each worker's torch (and the processes its tests start) gets its share of the cores: with every
# worker on every core, torch's ops split their work across threads that share cores with the
# other workers' and each op waits for its slowest thread (two test files side by side ran about
# 3x slower); an OMP_NUM_THREADS of the caller's own is kept
threads=$(( $(nproc) / workers )); ((threads >= 1)) || threads=1
t=$SECONDS
echo "== Python tests (pytest -m 'not serial'${parallel:+, $workers workers of ${OMP_NUM_THREADS:-$threads} threads})"
rc=0; OMP_NUM_THREADS=${OMP_NUM_THREADS:-$threads} "$SEASTAR_PY" -m pytest -q "${parallel[@]}" -m "not serial" \
  tests/python tests/compat "$@" || rc=$?
phase "pytest, ${workers} workers" $((SECONDS - t))
pass_ok $rc || exit $rc
t=$SECONDS
echo "== Python tests that need the machine to themselves (pytest -m serial)"
rc=0; "$SEASTAR_PY" -m pytest -q -m serial tests/python tests/compat "$@" || rc=$?
phase "pytest, serial" $((SECONDS - t))
pass_ok $rc || exit $rc
unset SEASTAR_TEST_REPORT_DIR
if [[ -z ${SEASTAR_SKIP_SANITIZE:-} ]]; then
  t=$SECONDS
  echo "== C++ core tests under -fsanitize=address,undefined (scripts/sanitize.sh, SANITIZE_SCOPE=core)"
  SANITIZE_SCOPE=core bash "$ROOT/scripts/sanitize.sh"
  phase "sanitizer build and ctest" $((SECONDS - t))
fi
phase "all" $((SECONDS - started))
"$SEASTAR_PY" "$ROOT/scripts/test_report.py" "$report_dir" ${SEASTAR_TEST_REPORT:+--json "$SEASTAR_TEST_REPORT"}
