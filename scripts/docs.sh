#!/usr/bin/env bash
# Builds the documentation site into docs/_build/html (DOCS_OUT overrides): sets up and builds
# Seastar if needed (scripts/setup.sh: autodoc imports the package, the op table comes from the
# extension), installs docs/requirements.txt when Sphinx is missing, then runs Sphinx with
# warnings as errors and nitpicky references, so a renamed function breaks the build rather than
# a page. The figures are drawn from the committed benchmark results during the build.
set -euo pipefail
SEASTAR_BUILD_TARGETS=${SEASTAR_BUILD_TARGETS-_C}
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if ! "$SEASTAR_PY" -c 'import sphinx, myst_parser, furo, matplotlib' 2>/dev/null; then
  echo "== installing the docs' requirements (docs/requirements.txt)"
  "$SEASTAR_PY" -m pip install -q -r "$ROOT/docs/requirements.txt"
fi
out=${DOCS_OUT:-$ROOT/docs/_build/html}
"$SEASTAR_PY" -m sphinx -b html -W --keep-going -n -q -d "$out/.doctrees" "$ROOT/docs" "$out"
echo "docs: $out/index.html"
