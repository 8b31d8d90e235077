# Install rules of the Python package (component "python"; pyproject.toml installs only this
# component into a wheel): the sources of python/seastar, the shipped datasets, the extension and
# the generated _version.py. The CUDA device helpers and the CUDA emulator's header are embedded
# in the extension at build time (cmake/EmbedFiles.cmake), and generated CPU kernels include only
# the standard library, so the installed package reads nothing from the checkout.
#
# Installed beside torch in site-packages, the extension finds torch's libraries (and the CUDA
# runtime of torch's NVIDIA packages) through an RPATH relative to itself; `import torch`, which
# seastar/__init__.py does first, has usually loaded them already.
#
# Only wheel builds (SKBUILD) define these rules by default: a plain `cmake --install` is the C++
# library's, and the development extension beside the checkout's sources is not an installable one.
if(SKBUILD)  # scikit-build-core sets it to 2, which option() would read as OFF
  set(_default ON)
else()
  set(_default OFF)
endif()
option(SEASTAR_INSTALL_PYTHON_PACKAGE "Install the Python package (component python)" ${_default})
if(NOT SEASTAR_INSTALL_PYTHON_PACKAGE)
  return()
endif()
set(_pkg_src ${PROJECT_SOURCE_DIR}/python/seastar)

install(DIRECTORY ${_pkg_src}/ DESTINATION seastar COMPONENT python
  FILES_MATCHING
    PATTERN "*.py"
    REGEX "/datasets/data/.+"
    PATTERN "__pycache__" EXCLUDE
    # the development build's outputs in the checkout; the ones of this build are installed below
    PATTERN "_C*.so" EXCLUDE
    PATTERN "_version.py" EXCLUDE)
install(FILES ${SEASTAR_PYTHON_PACKAGE_OUT}/_version.py DESTINATION seastar COMPONENT python)

get_filename_component(_site ${SEASTAR_TORCH_DIR} DIRECTORY)
set(_rpath "$ORIGIN/../torch/lib")
if(SEASTAR_CUDART)
  get_filename_component(_cudart_dir ${SEASTAR_CUDART} DIRECTORY)
  file(RELATIVE_PATH _rel ${_site} ${_cudart_dir})
  if(NOT _rel MATCHES "^\\.\\.")  # torch's NVIDIA packages, e.g. nvidia/cu13/lib
    list(APPEND _rpath "$ORIGIN/../${_rel}")
  endif()
endif()
set_target_properties(_C PROPERTIES INSTALL_RPATH "${_rpath}")
install(TARGETS _C LIBRARY DESTINATION seastar COMPONENT python)
