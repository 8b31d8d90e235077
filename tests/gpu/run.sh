#!/usr/bin/env bash
# The GPU check in one go: build with the CUDA backend, run the CUDA correctness suite and the
# benchmark, write the results to OUT_DIR. Made for the device machine (an H200, no network, a
# python3 with torch+CUDA and pytest, no spdlog/fmt/gtest packages) and sized for its 10-minute
# limit; runs on any Linux machine with a GPU, torch with CUDA and the CUDA toolkit headers.
#
#   tests/gpu/run.sh OUT_DIR
#
# Before: scripts/vendor_headers.sh here, then carry third_party_headers/ along, e.g. with the
# device tool: run(command="tests/gpu/run.sh $OUT", carry=["third_party_headers"], timeout_s=600).
# Writes at most 8 files to OUT_DIR (the device tool returns no more): summary.txt, build.log,
# env.txt, pytest_cuda.log, pytest_codegen.log, registers.json, bench.md, bench.json.
# The build takes the machine's CXX. A compiler that links libstdc++.a into the extension (which
# would crash at its first call) is fixed or refused at configure, with the fix in build.log and
# summary.txt; SEASTAR_CMAKE_ARGS="-DSEASTAR_BUILD_EXAMPLES=OFF -DCMAKE_CXX_COMPILER=/usr/bin/g++"
# picks another compiler.
# Every step runs even when an earlier one failed (one run shows everything); the exit status
# is non-zero when any step failed. The whole run stays within GPU_TOTAL_BUDGET seconds (default
# 570, under the device tool's 600): each step's time limit is the smaller of its own
# (GPU_BUILD_TIMEOUT, GPU_TEST_TIMEOUT, GPU_BENCH_TIMEOUT) and what is left.
set -uo pipefail
OUT=${1:?usage: tests/gpu/run.sh OUT_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"
T0=$(date +%s)
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
status=0
note() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - T0 ))s; }
left() { echo $(( ${GPU_TOTAL_BUDGET:-570} - ($(date +%s) - T0) )); }
limit() {  # limit WANTED [RESERVE]: WANTED, or less to leave RESERVE seconds for what follows
  local l=$(( $(left) - ${2:-0} ))
  (( l > $1 )) && l=$1
  (( l < 10 )) && l=10
  echo $l
}

export SEASTAR_PYTHON=${SEASTAR_PYTHON:-$(command -v python3)}
export SEASTAR_SKIP_APT=${SEASTAR_SKIP_APT:-1}
export SEASTAR_BUILD_DIR=${SEASTAR_BUILD_DIR:-$ROOT/build-gpu}
export SEASTAR_BUILD_JOBS=${SEASTAR_BUILD_JOBS:-$(nproc)}
export SEASTAR_CACHE_DIR=${SEASTAR_CACHE_DIR:-/tmp/seastar-kernel-cache}  # shared by pytest workers
export PYTHONUNBUFFERED=1
PY=$SEASTAR_PYTHON

# --- environment -------------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"; uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || true
  command -v nvcc >/dev/null && nvcc --version | tail -2
  ls -d /usr/local/cuda* 2>&1
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "devices", torch.cuda.device_count())' 2>&1
  "$PY" -m pip list 2>/dev/null | grep -iE '^(torch|pybind11|pytest|pytest-xdist|numpy|torch.geometric|matplotlib|cmake|ninja) ' || true
} > "$OUT/env.txt" 2>&1
note "== env: $(grep -E '^python' "$OUT/env.txt" | head -1)"

# --- build -------------------------------------------------------------------------------
if [[ ! -f third_party_headers/include/spdlog/spdlog.h && -d /usr/include/spdlog && -d /usr/include/fmt ]]; then
  scripts/vendor_headers.sh >> "$OUT/build.log" 2>&1 || true
fi
export SEASTAR_CMAKE_ARGS=${SEASTAR_CMAKE_ARGS:-"-DSEASTAR_BUILD_EXAMPLES=OFF"}
if timeout "$(limit "${GPU_BUILD_TIMEOUT:-330}" 200)" bash -c 'source scripts/setup.sh' >> "$OUT/build.log" 2>&1; then
  note "== build: ok ($(elapsed))"
else
  note "== build: FAILED ($(elapsed)); the end of build.log:"
  tail -25 "$OUT/build.log" | tee -a "$SUMMARY"
  exit 1
fi
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
if ! "$PY" -c 'import seastar, sys; sys.exit(0 if getattr(seastar._C, "cuda_built", False) else 1)' >> "$OUT/build.log" 2>&1; then
  note "== the build has no CUDA backend (no CUDA toolkit headers found?); see build.log"
  grep -i cuda "$ROOT/.cmake-configure.log" 2>/dev/null | tee -a "$SUMMARY"
  status=1
fi

# --- tests -------------------------------------------------------------------------------
xdist=()
"$PY" -c 'import xdist' 2>/dev/null && xdist=(-n "${GPU_TEST_WORKERS:-8}")
run_pytest() {  # name, timeout, pytest args...
  local name=$1 limit=$2; shift 2
  local log=$OUT/pytest_$name.log
  timeout "$limit" "$PY" -m pytest -q -rs --durations=15 -p no:cacheprovider "$@" > "$log" 2>&1
  local rc=$?
  note "== pytest $name: rc=$rc ($(elapsed)): $(grep -E '(passed|failed|error|skipped)' "$log" | tail -1)"
  if [[ $rc != 0 ]]; then
    status=1
    grep -E '^(FAILED|ERROR)' "$log" | head -40 | tee -a "$SUMMARY"
    [[ $rc == 124 ]] && note "   (timed out after ${limit}s)"
  fi
}
# generated CUDA source compiled by NVRTC for sm_80/sm_90 and the device, launch configs
SEASTAR_CUDA_ARCHS="80,90,native" run_pytest codegen "$(limit 120 200)" tests/python/test_cuda_codegen.py "${xdist[@]}"
# the correctness suite on CUDA tensors (fused vs plain torch, gradcheck, streams, devices)
run_pytest cuda "$(limit "${GPU_TEST_TIMEOUT:-240}" 90)" tests/gpu/test_cuda.py "${xdist[@]}"

# register use of the GAT kernels (and every model) on this GPU
timeout "$(limit 60 60)" "$PY" tests/gpu/registers.py "$OUT/registers.json" >> "$OUT/pytest_codegen.log" 2>&1 \
  && note "== registers: $(head -c 600 "$OUT/registers.json" | tr -d '\n' | cut -c1-300)..." \
  || { note "== registers: FAILED"; status=1; }

# --- benchmark ---------------------------------------------------------------------------
BENCH=/tmp/seastar-bench
rm -rf "$BENCH"
timeout "$(limit "${GPU_BENCH_TIMEOUT:-180}" 5)" "$PY" benchmarks/run.py --out "$BENCH" --device cuda --no-install \
    --graphs cora,pl100k,pl1m --widths 64 --layers gcn,gat --repeats 3 --timeout 40 --no-latency --no-roofline \
    > "$BENCH.log" 2>&1
rc=$?
cp "$BENCH/results.json" "$OUT/bench.json" 2>/dev/null
if [[ -f $BENCH/results.md ]]; then cp "$BENCH/results.md" "$OUT/bench.md"; else tail -60 "$BENCH.log" > "$OUT/bench.md"; fi
note "== benchmark: rc=$rc ($(elapsed))"
[[ $rc != 0 ]] && { status=1; tail -15 "$BENCH.log" 2>/dev/null | tee -a "$SUMMARY"; }

note "== total $(elapsed), status $status"
exit $status
