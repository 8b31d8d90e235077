#!/usr/bin/env bash
# Installs what is missing (Debian packages, the Python venv), then configures and builds.
# Idempotent: each step checks a stamp or the state it would create, so a second run only
# rebuilds what changed. Sourced by main.sh and test.sh; exports SEASTAR_PY and PYTHONPATH.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/seastar
log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages -------------------------------------------------------------------
# A GPU machine without network sets SEASTAR_SKIP_APT=1 and carries headers instead.
if [[ ${SEASTAR_SKIP_APT:-0} != 1 ]] && command -v dpkg >/dev/null; then
  missing=()
  for p in cmake ninja-build g++ ccache libspdlog-dev libgtest-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    SUDO=; [[ $(id -u) != 0 ]] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

# --- Python environment ----------------------------------------------------------------
# SEASTAR_PYTHON names an interpreter that already has torch (e.g. a GPU machine's torch
# with CUDA); otherwise a venv keyed by requirements.txt lives in the user cache and the
# project's .venv links to it, so fresh clones (CI) reuse it instead of reinstalling torch.
if [[ -n ${SEASTAR_PYTHON:-} ]]; then
  SEASTAR_PY=$SEASTAR_PYTHON
  "$SEASTAR_PY" -c 'import torch, numpy, pybind11, pytest' \
    || { log "SEASTAR_PYTHON=$SEASTAR_PY lacks torch/numpy/pybind11/pytest"; exit 1; }
else
  req_hash=$(sha1sum "$ROOT/requirements.txt" | cut -c1-12)
  venv=${SEASTAR_VENV:-$CACHE/venv-$req_hash}
  if [[ ! -f $venv/.seastar-complete ]]; then
    log "creating Python venv at $venv (torch is large: a few minutes the first time)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q -r "$ROOT/requirements.txt"
    touch "$venv/.seastar-complete"
  fi
  # build tools for the wheel (pyproject.toml), on top of the venv: stamped separately, so a
  # change to them does not recreate the venv; without them only the packaging tests skip
  build_hash=$(sha1sum "$ROOT/requirements-build.txt" | cut -c1-12)
  if [[ ! -f $venv/.seastar-build-$build_hash ]]; then
    log "installing the wheel build tools (requirements-build.txt) into $venv"
    if "$venv/bin/pip" install -q -r "$ROOT/requirements-build.txt"; then
      touch "$venv/.seastar-build-$build_hash"
    else
      log "could not install requirements-build.txt: the packaging tests will be skipped"
    fi
  fi
  if [[ ! -e $ROOT/.venv || $(readlink -f "$ROOT/.venv") != $(readlink -f "$venv") ]]; then
    if [[ -L $ROOT/.venv || ! -e $ROOT/.venv ]]; then ln -sfn "$venv" "$ROOT/.venv"; fi
  fi
  SEASTAR_PY=$venv/bin/python
fi
export SEASTAR_PY
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}

# --- Configure and build ---------------------------------------------------------------
BUILD=${SEASTAR_BUILD_DIR:-$ROOT/build}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# paths below ROOT enter ccache's keys relative to the build directory, so build/ and the
# wheel's build-wheel/ (tests/python/test_packaging.py) share cached objects
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
# (re)configure when there is no complete configuration for this interpreter; a failed
# configure leaves no build files, so the next run configures again
if [[ ! -f $BUILD/build.ninja && ! -f $BUILD/Makefile ]] || [[ ! -f $BUILD/CMakeCache.txt ]] ||
   ! grep -q "Python3_EXECUTABLE:.*=$SEASTAR_PY\$" "$BUILD/CMakeCache.txt"; then
  log "configuring $BUILD"
  rm -rf "$BUILD"
  if ! cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DPython3_EXECUTABLE="$SEASTAR_PY" ${SEASTAR_CMAKE_ARGS:-} > "$ROOT/.cmake-configure.log" 2>&1; then
    cat "$ROOT/.cmake-configure.log" >&2
    rm -rf "$BUILD"
    exit 1
  fi
fi
jobs=${SEASTAR_BUILD_JOBS:-$(nproc)}
# SEASTAR_BUILD_TARGETS: only these targets (main.sh needs only the Python extension, _C; the
# test command builds everything)
targets=(); [[ -n ${SEASTAR_BUILD_TARGETS:-} ]] && targets=(--target $SEASTAR_BUILD_TARGETS)
cmake --build "$BUILD" -j "$jobs" "${targets[@]}" | { grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || true; }
test "${PIPESTATUS[0]}" = 0
export SEASTAR_BUILD_DIR=$BUILD
