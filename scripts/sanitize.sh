#!/usr/bin/env bash
# The C++ tests under sanitizers: configures build-sanitize/ with SEASTAR_SANITIZE
# (default address,undefined), builds only the test executables (the Python extension of the
# normal build is left alone) and runs them with ctest. The kernels the tests compile at run
# time get the same -fsanitize flags through SEASTAR_CXXFLAGS. Extra arguments go to ctest
# (e.g. -R KernelCache). Leak checking is off by default: LibTorch's static allocations at exit
# would drown Seastar's; set ASAN_OPTIONS to choose.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
SAN=${SEASTAR_SANITIZE:-address,undefined}
SBUILD=${SEASTAR_SANITIZE_BUILD_DIR:-$ROOT/build-sanitize}
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [[ ! -f $SBUILD/CMakeCache.txt ]] || ! grep -q "SEASTAR_SANITIZE:STRING=$SAN\$" "$SBUILD/CMakeCache.txt"; then
  echo "[sanitize] configuring $SBUILD with -fsanitize=$SAN" >&2
  rm -rf "$SBUILD" && mkdir -p "$SBUILD"
  cmake -S "$ROOT" -B "$SBUILD" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPython3_EXECUTABLE="$SEASTAR_PY" -DSEASTAR_SANITIZE="$SAN" -DSEASTAR_BUILD_EXAMPLES=OFF \
    ${SEASTAR_CMAKE_ARGS:-} > "$SBUILD/configure.log" 2>&1 || { cat "$SBUILD/configure.log" >&2; rm -rf "$SBUILD"; exit 1; }
fi
cmake --build "$SBUILD" -j "${SEASTAR_BUILD_JOBS:-$(nproc)}" --target test_core test_runtime
export SEASTAR_CXXFLAGS="${SEASTAR_CXXFLAGS:-} -fsanitize=$SAN -fno-sanitize-recover=all -fno-omit-frame-pointer"
export SEASTAR_CACHE_DIR=${SEASTAR_CACHE_DIR:-$SBUILD/kernel-cache}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$SBUILD" && ctest --output-on-failure "$@"
