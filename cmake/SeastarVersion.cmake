# The version has one source: project(seastar VERSION ...) in the top-level CMakeLists.txt.
# pyproject.toml reads it from there (scikit-build-core's regex provider); this file hands it to
# C++ (include/seastar/version.h) and to Python (seastar/_version.py), together with the torch
# the build compiles against, which the Python package checks at import (a C++ extension only
# loads into the torch it was compiled for).
#
# Defines SEASTAR_PYTHON_PACKAGE_OUT: where the build writes the extension and _version.py.
# A development build writes them into the checkout's python/seastar (the package is used from
# there through PYTHONPATH); a wheel build (scikit-build-core sets SKBUILD) keeps them in the
# build tree, so building a wheel never touches the checkout's files. So does a sanitizer build
# (scripts/sanitize.sh runs Python tests against its extension from there).
if(SKBUILD OR SEASTAR_SANITIZE)
  set(SEASTAR_PYTHON_PACKAGE_OUT ${PROJECT_BINARY_DIR}/python/seastar)
else()
  set(SEASTAR_PYTHON_PACKAGE_OUT ${PROJECT_SOURCE_DIR}/python/seastar)
endif()

set(SEASTAR_VERSION ${PROJECT_VERSION})
if(SEASTAR_WITH_CUDA)
  set(SEASTAR_CUDA_BUILT_PY True)
else()
  set(SEASTAR_CUDA_BUILT_PY False)
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/templates/version.h.in
  ${PROJECT_BINARY_DIR}/include/seastar/version.h @ONLY)
# configure_file rewrites only on change, so an unchanged version rebuilds nothing
configure_file(${CMAKE_CURRENT_LIST_DIR}/templates/_version.py.in
  ${SEASTAR_PYTHON_PACKAGE_OUT}/_version.py @ONLY)
