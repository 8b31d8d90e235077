#!/usr/bin/env bash
# The tests under sanitizers: configures build-sanitize/ with SEASTAR_SANITIZE (default
# address,undefined), builds the test executables and the Python extension (into the build
# tree: the checkout's extension is left alone), runs ctest, then a subset of pytest
# (SANITIZE_PYTESTS; SANITIZE_PYTESTS= skips it) against that extension, with the sanitizer
# runtime and libstdc++ preloaded into the uninstrumented interpreter. The kernels the tests
# compile at run time get the same -fsanitize flags through SEASTAR_CXXFLAGS. Extra arguments
# go to ctest (e.g. -R KernelCache). Leak checking is off by default: LibTorch's static
# allocations at exit would drown Seastar's; set ASAN_OPTIONS to choose.
# The build is Debug (assertions on) at -O0 with line tables only (SANITIZE_OPT overrides): the
# sanitizers report file and line, miss nothing an optimiser would hide, and the build takes about
# a quarter of RelWithDebInfo's time with the sanitizers' instrumentation.
# SANITIZE_SCOPE=core is the budget CI runs (scripts/test.sh): only test_core (graph storage,
# IR, passes, emitters, sampler, kernel cache and CUDA image keys, worker pool: no LibTorch to
# build), no pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
SAN=${SEASTAR_SANITIZE:-address,undefined}
SBUILD=${SEASTAR_SANITIZE_BUILD_DIR:-$ROOT/build-sanitize}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
OPT=${SANITIZE_OPT:--O0 -g1}
if [[ ! -f $SBUILD/CMakeCache.txt ]] || ! grep -q "SEASTAR_SANITIZE:STRING=$SAN\$" "$SBUILD/CMakeCache.txt" \
   || ! grep -qx "CMAKE_CXX_FLAGS_DEBUG:STRING=$OPT" "$SBUILD/CMakeCache.txt"; then
  echo "[sanitize] configuring $SBUILD with -fsanitize=$SAN" >&2
  rm -rf "$SBUILD" && mkdir -p "$SBUILD"
  cmake -S "$ROOT" -B "$SBUILD" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$OPT" \
    -DPython3_EXECUTABLE="$SEASTAR_PY" -DSEASTAR_SANITIZE="$SAN" -DSEASTAR_BUILD_EXAMPLES=OFF \
    ${SEASTAR_CMAKE_ARGS:-} > "$SBUILD/configure.log" 2>&1 || { cat "$SBUILD/configure.log" >&2; rm -rf "$SBUILD"; exit 1; }
fi
PYTESTS=${SANITIZE_PYTESTS-tests/python/test_graph_tensors.py tests/python/test_ties.py tests/python/test_sampler.py tests/python/test_kernel_cache.py tests/python/test_nvrtc_cache.py tests/python/test_trace_errors.py tests/python/test_orchestrator.py}
targets=(test_core test_runtime)
labels=()
if [[ ${SANITIZE_SCOPE:-full} == core ]]; then
  targets=(test_core); labels=(-L core); PYTESTS=
fi
[[ -n $PYTESTS ]] && targets+=(_C)
cmake --build "$SBUILD" -j "${SEASTAR_BUILD_JOBS:-$(nproc)}" --target "${targets[@]}"
export SEASTAR_CXXFLAGS="${SEASTAR_CXXFLAGS:-} -fsanitize=$SAN -fno-sanitize-recover=all -fno-omit-frame-pointer"
export SEASTAR_CACHE_DIR=${SEASTAR_CACHE_DIR:-$SBUILD/kernel-cache}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
(cd "$SBUILD" && ctest --output-on-failure "${labels[@]}" "$@")
[[ -z $PYTESTS ]] && exit 0

# the package as the checkout has it, with this build's extension and version file
PKG=$SBUILD/python-package
rm -rf "$PKG" && mkdir -p "$PKG"
cp -r "$ROOT/python/seastar" "$PKG/seastar"
rm -f "$PKG"/seastar/_C*.so
cp "$SBUILD"/python/seastar/_C*.so "$SBUILD/python/seastar/_version.py" "$PKG/seastar/"
preload=()
for lib in $(echo "$SAN" | tr ',' ' '); do
  case $lib in address) preload+=("$(${CXX:-g++} -print-file-name=libasan.so)") ;;
               undefined) preload+=("$(${CXX:-g++} -print-file-name=libubsan.so)") ;;
               thread) preload+=("$(${CXX:-g++} -print-file-name=libtsan.so)") ;; esac
done
preload+=("$(${CXX:-g++} -print-file-name=libstdc++.so)")
# torch's own libraries are not instrumented: their allocations are Python's and LibTorch's, and
# the one-definition check would report torch's duplicated symbols, not ours
export ASAN_OPTIONS="$ASAN_OPTIONS:detect_odr_violation=0"
cd "$ROOT"
echo "[sanitize] pytest under -fsanitize=$SAN: $PYTESTS" >&2
# shellcheck disable=SC2086
LD_PRELOAD="${preload[*]}" PYTHONPATH="$PKG" "$SEASTAR_PY" -m pytest -q -p no:cacheprovider $PYTESTS
