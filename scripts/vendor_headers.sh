#!/usr/bin/env bash
# Copies the spdlog and fmt headers of this machine (Debian's libspdlog-dev / libfmt-dev, in
# /usr/include) into third_party_headers/include, which the build uses header-only when
# find_package(spdlog) fails: a GPU machine without network or Debian packages builds with them.
# third_party_headers/ is git-ignored; a device run carries it (carry: ["third_party_headers"]).
# Usage: scripts/vendor_headers.sh [SOURCE_INCLUDE_DIR]   (default /usr/include)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=${1:-/usr/include}
DEST=$ROOT/third_party_headers/include
for lib in spdlog fmt; do
  if [[ ! -f $SRC/$lib/$([[ $lib == spdlog ]] && echo spdlog.h || echo format.h) ]]; then
    echo "vendor_headers: $SRC/$lib not found (apt-get install libspdlog-dev libfmt-dev)" >&2
    exit 1
  fi
done
rm -rf "$DEST"
mkdir -p "$DEST"
cp -r "$SRC/spdlog" "$SRC/fmt" "$DEST/"
# Debian's spdlog is configured for its shared library and an external fmt; header-only use is
# selected by the build (SPDLOG_HEADER_ONLY, SPDLOG_FMT_EXTERNAL, FMT_HEADER_ONLY), so the
# tweakme.h defaults must not force a compiled library.
if grep -q '^#define SPDLOG_COMPILED_LIB' "$DEST/spdlog/tweakme.h" 2>/dev/null; then
  sed -i 's|^#define SPDLOG_COMPILED_LIB|// #define SPDLOG_COMPILED_LIB|' "$DEST/spdlog/tweakme.h"
fi
echo "vendor_headers: $(du -sh "$DEST" | cut -f1) of headers in $DEST"
