#!/usr/bin/env bash
# The GPU check in one go: build with the CUDA backend, then run every check that needs a GPU,
# each as a step of its own, and write what they found to OUT_DIR. Made for the device machine
# (an H200, no network, a python3 with torch+CUDA, PyG and pytest-xdist, no spdlog/fmt/gtest
# packages) and sized so that two runs fit in its 15 minutes; runs on any Linux machine with a
# GPU, torch with CUDA and the CUDA toolkit headers.
#
#   tests/gpu/run.sh OUT_DIR
#
# Before: scripts/vendor_headers.sh here, then carry third_party_headers/ along, e.g. with the
# device tool: run(command="tests/gpu/run.sh $OUT", carry=["third_party_headers"], timeout_s=480).
#
# The steps (every one runs, whatever happened to the others; a step that crashes or hangs is
# cut off by its time limit and reported, and the next one starts):
#   build    the machine's compiler (CXX) first; if that build fails, /usr/bin/g++ in a build
#            folder of its own. The compiler that worked is recorded in summary.txt. (A compiler
#            that links libstdc++.a into the extension is fixed or refused at configure:
#            cmake/SeastarLibstdcxx.cmake.)
#   cuda     the CUDA tests: tests/python/test_cuda_codegen.py (NVRTC for sm_80/sm_90 and the
#            device) and tests/gpu/ (fused kernels on CUDA tensors against plain torch,
#            gradcheck, streams, devices, mini-batches on the GPU)
#   compat   the whole seastar.nn suite against PyG's layers, on CUDA tensors
#            (tests/compat with SEASTAR_COMPAT_DEVICE=cuda)
#   train    Cora (GAT and GCN) and a mini-batch run on the GPU (examples/)
#   registers  NVRTC's register and spill report of every zoo kernel for this GPU
#   bench    the GPU benchmark against PyG (benchmarks/bench_gpu.py; GPU_BENCH_CMD replaces it)
#   sweep    seastar's epoch under several launch settings: hub degree, threads per item, threads
#            per block (benchmarks/sweep_launch.py), into bench.*
# Writes at most 8 files to OUT_DIR (the device tool returns no more): summary.txt (every step's
# status and every failure), build.log (environment and build), pytest_cuda.log,
# pytest_compat.log, train.log, registers.json, bench.json, bench.md.
# The whole run stays within GPU_TOTAL_BUDGET seconds (default 420): each step's limit is the
# smaller of its own and what is left after reserving time for the steps after it. The exit
# status is non-zero when any step failed.
set -uo pipefail
OUT=${1:?usage: tests/gpu/run.sh OUT_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"
T0=$(date +%s)
SUMMARY=$OUT/summary.txt
BUILD_LOG=$OUT/build.log
: > "$SUMMARY"
: > "$BUILD_LOG"
status=0
note() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - T0 ))s; }
left() { echo $(( ${GPU_TOTAL_BUDGET:-420} - ($(date +%s) - T0) )); }
limit() {  # limit WANTED [RESERVE]: WANTED, or less to leave RESERVE seconds for what follows
  local l=$(( $(left) - ${2:-0} ))
  (( l > $1 )) && l=$1
  (( l < 10 )) && l=10
  echo $l
}

export SEASTAR_PYTHON=${SEASTAR_PYTHON:-$(command -v python3)}
export SEASTAR_SKIP_APT=${SEASTAR_SKIP_APT:-1}
export SEASTAR_BUILD_JOBS=${SEASTAR_BUILD_JOBS:-$(nproc)}
export SEASTAR_CACHE_DIR=${SEASTAR_CACHE_DIR:-$(mktemp -d /tmp/seastar-kernel-cache.XXXXXX)}  # shared by pytest workers
export PYTHONUNBUFFERED=1
PY=$SEASTAR_PYTHON

# --- environment -------------------------------------------------------------------------
{
  echo "== environment"
  echo "date: $(date -u +%FT%TZ)"; uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || true
  command -v nvcc >/dev/null && nvcc --version | tail -2
  command -v cmake >/dev/null && cmake --version | head -1
  echo "CXX=${CXX:-} ($(command -v "${CXX:-c++}" 2>/dev/null))"
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "devices", torch.cuda.device_count())' 2>&1
  "$PY" -m pip list 2>/dev/null | grep -iE '^(torch|pybind11|pytest|pytest-xdist|numpy|torch.geometric|matplotlib|cmake|ninja) ' || true
} >> "$BUILD_LOG" 2>&1
note "== env: $(grep -E '^python' "$BUILD_LOG" | head -1)"

# --- build -------------------------------------------------------------------------------
if [[ ! -f third_party_headers/include/spdlog/spdlog.h && -d /usr/include/spdlog && -d /usr/include/fmt ]]; then
  scripts/vendor_headers.sh >> "$BUILD_LOG" 2>&1 || true
fi
BASE_CMAKE_ARGS=${SEASTAR_CMAKE_ARGS:-"-DSEASTAR_BUILD_EXAMPLES=OFF"}
build() {  # build DIR [CMAKE ARGS...]: 0 when the extension built and imports with CUDA
  local dir=$1; shift
  echo "== build in $dir ${*:-(the default compiler)}" >> "$BUILD_LOG"
  SEASTAR_BUILD_DIR=$dir SEASTAR_CMAKE_ARGS="$BASE_CMAKE_ARGS $*" \
    timeout "$(limit "${GPU_BUILD_TIMEOUT:-240}" 150)" bash -c 'source scripts/setup.sh' >> "$BUILD_LOG" 2>&1 || return 1
  grep -E 'Seastar: .*libstdc\+\+|CMAKE_CXX_COMPILER' "$ROOT/.cmake-configure.log" >> "$BUILD_LOG" 2>/dev/null
  PYTHONPATH=$ROOT/python "$PY" -m seastar --check >> "$BUILD_LOG" 2>&1
}
compiler_of() { grep -E '^CMAKE_CXX_COMPILER:' "$1/CMakeCache.txt" 2>/dev/null | cut -d= -f2; }
BUILD_DIR=$ROOT/build-gpu
if build "$BUILD_DIR"; then
  note "== build: ok with the machine's compiler $(compiler_of "$BUILD_DIR") ($(elapsed))"
elif [[ -x /usr/bin/g++ ]] && BUILD_DIR=$ROOT/build-gpu-gxx && build "$BUILD_DIR" -DCMAKE_CXX_COMPILER=/usr/bin/g++; then
  status=1
  note "== build: FAILED with the machine's compiler ($(compiler_of "$ROOT/build-gpu")); ok with /usr/bin/g++ ($(elapsed)); see build.log"
else
  note "== build: FAILED ($(elapsed)); the end of build.log:"
  tail -30 "$BUILD_LOG" | tee -a "$SUMMARY"
  note "== total $(elapsed), status 1"
  exit 1
fi
export SEASTAR_BUILD_DIR=$BUILD_DIR
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
note "   $(grep -E 'Seastar: .*libstdc\+\+' "$BUILD_LOG" | tail -1 | cut -c1-200)"
if ! "$PY" -c 'import seastar, sys; sys.exit(0 if getattr(seastar._C, "cuda_built", False) else 1)' >> "$BUILD_LOG" 2>&1; then
  note "== the build has no CUDA backend (no CUDA toolkit headers found?); see build.log"
  status=1
fi

# --- the steps ---------------------------------------------------------------------------
xdist=()
"$PY" -c 'import xdist' 2>/dev/null && xdist=(-n "${GPU_TEST_WORKERS:-8}")
run_pytest() {  # name, time limit, pytest args...
  local name=$1 lim=$2; shift 2
  local log=$OUT/pytest_$name.log
  timeout "$lim" "$PY" -m pytest -q -rs --durations=10 -p no:cacheprovider "$@" > "$log" 2>&1
  local rc=$?
  note "== pytest $name: rc=$rc ($(elapsed)): $(grep -E '(passed|failed|error|skipped)' "$log" | tail -1)"
  if [[ $rc != 0 ]]; then
    status=1
    grep -E '^(FAILED|ERROR)' "$log" | head -40 | tee -a "$SUMMARY"
    [[ $rc == 124 ]] && note "   (timed out after ${lim}s)"
  fi
}
run_step() {  # name, time limit, log file, command...: appends to the log, notes the outcome
  local name=$1 lim=$2 log=$3; shift 3
  echo "== $name: $*" >> "$log"
  timeout "$lim" "$@" >> "$log" 2>&1
  local rc=$?
  if [[ $rc == 0 ]]; then
    note "== $name: ok ($(elapsed)): $(grep -E "${RESULT_PATTERN:-test accuracy|accuracy|epoch}" "$log" | tail -1 | cut -c1-160)"
  else
    status=1
    note "== $name: FAILED rc=$rc ($(elapsed))$([[ $rc == 124 ]] && echo ", timed out after ${lim}s")"
    tail -12 "$log" | tee -a "$SUMMARY"
  fi
}

# generated CUDA compiled by NVRTC for sm_80/sm_90 and the device, and everything in tests/gpu/
SEASTAR_CUDA_ARCHS="80,90,native" run_pytest cuda "$(limit "${GPU_TEST_TIMEOUT:-150}" 200)" \
  tests/python/test_cuda_codegen.py tests/gpu "${xdist[@]}"
# seastar.nn against PyG's layers, every layer and option, on CUDA tensors
SEASTAR_COMPAT_DEVICE=cuda run_pytest compat "$(limit "${GPU_COMPAT_TIMEOUT:-90}" 150)" tests/compat "${xdist[@]}"

TRAIN_LOG=$OUT/train.log
: > "$TRAIN_LOG"
run_step "train gat (cora)" "$(limit 40 130)" "$TRAIN_LOG" "$PY" examples/train.py --model gat --dataset cora --device cuda --quiet
run_step "train gcn (cora)" "$(limit 30 120)" "$TRAIN_LOG" "$PY" examples/train.py --model gcn --dataset cora --device cuda --quiet
# SAGE with --hidden at least the 100 features reads the pinned host table in place
GPU_MINIBATCH_CMD=${GPU_MINIBATCH_CMD:-"$PY examples/train_minibatch.py --model sage --dataset synthetic --num-nodes 50000 --fanouts 10,5 --hidden 128 --batch-size 1024 --epochs 2 --device cuda --x-in-place --no-progress"}
# shellcheck disable=SC2086  # the command is words
run_step "train mini-batch" "$(limit 60 100)" "$TRAIN_LOG" $GPU_MINIBATCH_CMD

# register use of every zoo kernel on this GPU
timeout "$(limit 60 90)" "$PY" tests/gpu/registers.py "$OUT/registers.json" >> "$OUT/pytest_cuda.log" 2>&1 \
  && note "== registers: $(head -c 600 "$OUT/registers.json" | tr -d '\n' | cut -c1-200)..." \
  || { note "== registers: FAILED"; status=1; }

# --- benchmark ---------------------------------------------------------------------------
BENCH=$(mktemp -d /tmp/seastar-bench.XXXXXX)
# benchmarks/bench_gpu.py spends its budget in priority order (F=64 on the 1M and 4M graphs
# first) and lists what it skipped; GPU_BENCH_BUDGET=360 GPU_TOTAL_BUDGET=600 gives it the
# whole grid's 6 minutes in a run of its own
BENCH_BUDGET=$(limit "${GPU_BENCH_BUDGET:-150}" 100)
GPU_BENCH_CMD=${GPU_BENCH_CMD:-"$PY benchmarks/bench_gpu.py --out $BENCH --device cuda --budget $BENCH_BUDGET"}
# shellcheck disable=SC2086  # the command is words
timeout "$(limit $((BENCH_BUDGET + 60)) 5)" $GPU_BENCH_CMD > "$BENCH.log" 2>&1
rc=$?
[[ -f $BENCH/bench.json ]] && cp "$BENCH/bench.json" "$OUT/bench.json"
if [[ -f $BENCH/bench.md ]]; then cp "$BENCH/bench.md" "$OUT/bench.md"; else tail -60 "$BENCH.log" > "$OUT/bench.md"; fi
note "== benchmark: rc=$rc ($(elapsed))"
[[ $rc != 0 ]] && { status=1; tail -15 "$BENCH.log" 2>/dev/null | tee -a "$SUMMARY"; }

# --- the CUDA launch settings, swept (folded into bench.json and bench.md) ----------------------
# GPU_SWEEP_SETTINGS picks them (sweep_launch.py --settings). The default, one round in this
# run's 100 s, tries what the model marks (benchmarks/results/gpu_model/launch_settings.md): no
# hub path, hub blocks of 1,024 threads (no spills, the most even split), 8- and 16-byte vector
# accesses (vector=2 at one warp per item; 16 threads per item, alone and with vectors of 4);
# GPU_SWEEP_BUDGET=300 with GPU_TOTAL_BUDGET=600 gives it two rounds
SWEEP_BUDGET=$(limit "${GPU_SWEEP_BUDGET:-100}" 5)
SWEEP_SETTINGS=${GPU_SWEEP_SETTINGS:-"hub=0,hub_block=1024,vector=2,group=16,group=16+vector=4"}
if ((SWEEP_BUDGET >= 40)); then
  timeout $((SWEEP_BUDGET + 60)) "$PY" benchmarks/sweep_launch.py --out "$BENCH" --device cuda --settings "$SWEEP_SETTINGS" \
    --layers gcn,gat --budget "$SWEEP_BUDGET" --merge-into "$OUT/bench.json" > "$BENCH.sweep.log" 2>&1
  rc=$?
  [[ -f $BENCH/launch_sweep.md ]] && { echo; cat "$BENCH/launch_sweep.md"; } >> "$OUT/bench.md"
  note "== launch sweep: rc=$rc ($(elapsed))"
  [[ $rc != 0 ]] && { status=1; tail -15 "$BENCH.sweep.log" 2>/dev/null | tee -a "$SUMMARY"; }
else
  note "== launch sweep: skipped, ${SWEEP_BUDGET} s left"
fi

note "== total $(elapsed), status $status"
exit $status
