# Part of an installed Seastar, included by seastarConfig.cmake: locates the LibTorch to link
# and defines seastar::libtorch (and, for a CUDA build, seastar::libtorch_cuda), which the
# exported seastar::torch target links. On failure it defines neither and sets
# seastar_NOT_FOUND_MESSAGE.
#
# It runs neither Python nor TorchConfig.cmake: for torch's CUDA wheels TorchConfig.cmake wants
# a CUDA toolkit even where nothing is compiled for CUDA, and Seastar needs only torch's headers
# and a few of its libraries. A project may still call find_package(Torch) itself; it sets
# Torch_DIR, which is then used here too, so both name the same LibTorch.
#
# Where to look, first match wins:
#   1. Torch_DIR: the folder of TorchConfig.cmake, as for find_package(Torch)
#   2. CMAKE_PREFIX_PATH (the variable, then the environment variable): an entry P with
#      P/Torch/TorchConfig.cmake (P = python -c 'import torch; print(torch.utils.cmake_prefix_path)')
#      or P/share/cmake/Torch/TorchConfig.cmake (P = an unpacked LibTorch archive)
#   3. the torch this Seastar was built against, where it still is
# The LibTorch found must have the version Seastar was built against (a C++ library only links
# with the torch whose headers it was compiled with): TorchConfigVersion.cmake is compared.

set(_seastar_torch_config_dir "")
set(_seastar_torch_from "")
if(Torch_DIR)
  if(NOT EXISTS "${Torch_DIR}/TorchConfig.cmake")
    string(CONCAT seastar_NOT_FOUND_MESSAGE
      "Torch_DIR=${Torch_DIR} holds no TorchConfig.cmake: set it to <torch>/share/cmake/Torch, "
      "or unset it and put torch.utils.cmake_prefix_path on CMAKE_PREFIX_PATH")
    return()
  endif()
  set(_seastar_torch_config_dir "${Torch_DIR}")
  set(_seastar_torch_from "Torch_DIR")
else()
  set(_seastar_prefixes ${CMAKE_PREFIX_PATH})
  if(DEFINED ENV{CMAKE_PREFIX_PATH})
    string(REPLACE ":" ";" _seastar_env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
    list(APPEND _seastar_prefixes ${_seastar_env_prefixes})
  endif()
  foreach(_p ${_seastar_prefixes})
    foreach(_d "${_p}/Torch" "${_p}/share/cmake/Torch")
      if(EXISTS "${_d}/TorchConfig.cmake")
        set(_seastar_torch_config_dir "${_d}")
        set(_seastar_torch_from "CMAKE_PREFIX_PATH")
        break()
      endif()
    endforeach()
    if(_seastar_torch_config_dir)
      break()
    endif()
  endforeach()
endif()

if(_seastar_torch_config_dir)
  get_filename_component(SEASTAR_TORCH_DIR "${_seastar_torch_config_dir}/../../.." ABSOLUTE)
elseif(EXISTS "${_seastar_built_torch_dir}/lib/libtorch.so")
  set(SEASTAR_TORCH_DIR "${_seastar_built_torch_dir}")
  set(_seastar_torch_from "the torch seastar was built against")
else()
  string(CONCAT seastar_NOT_FOUND_MESSAGE
    "LibTorch not found: seastar ${SEASTAR_VERSION} needs LibTorch ${SEASTAR_TORCH_VERSION} "
    "(it was built against ${_seastar_built_torch_dir}, which is gone). Set Torch_DIR to "
    "<torch>/share/cmake/Torch, or put the output of "
    "`python -c 'import torch; print(torch.utils.cmake_prefix_path)'` on CMAKE_PREFIX_PATH.")
  return()
endif()

foreach(_f lib/libtorch.so lib/libtorch_cpu.so lib/libc10.so include/torch/csrc/api/include/torch/torch.h)
  if(NOT EXISTS "${SEASTAR_TORCH_DIR}/${_f}")
    set(seastar_NOT_FOUND_MESSAGE
      "LibTorch at ${SEASTAR_TORCH_DIR} (from ${_seastar_torch_from}) has no ${_f}")
    return()
  endif()
endforeach()

# the version: TorchConfigVersion.cmake holds the release ("2.11.0"); torch.__version__ may
# carry a local suffix ("2.11.0+cu130"), whose CUDA part is checked through libtorch_cuda below
string(REGEX REPLACE "\\+.*$" "" _seastar_torch_release "${SEASTAR_TORCH_VERSION}")
set(_seastar_found_version "")
if(EXISTS "${SEASTAR_TORCH_DIR}/share/cmake/Torch/TorchConfigVersion.cmake")
  file(STRINGS "${SEASTAR_TORCH_DIR}/share/cmake/Torch/TorchConfigVersion.cmake" _seastar_line
    REGEX "set\\(PACKAGE_VERSION \"[^\"]*\"\\)")
  string(REGEX REPLACE ".*PACKAGE_VERSION \"([^\"]*)\".*" "\\1" _seastar_found_version "${_seastar_line}")
endif()
if(_seastar_found_version AND NOT _seastar_found_version VERSION_EQUAL _seastar_torch_release)
  string(CONCAT seastar_NOT_FOUND_MESSAGE
    "seastar ${SEASTAR_VERSION} was built against LibTorch ${SEASTAR_TORCH_VERSION}, but the "
    "LibTorch found (from ${_seastar_torch_from}, ${SEASTAR_TORCH_DIR}) is ${_seastar_found_version}: "
    "a C++ library links only with the torch it was compiled against. Point Torch_DIR or "
    "CMAKE_PREFIX_PATH at torch ${SEASTAR_TORCH_VERSION}, or rebuild and reinstall seastar "
    "against this torch.")
  return()
endif()

set(_seastar_torch_libs "${SEASTAR_TORCH_DIR}/lib/libtorch.so" "${SEASTAR_TORCH_DIR}/lib/libtorch_cpu.so"
  "${SEASTAR_TORCH_DIR}/lib/libc10.so")
set(_seastar_torch_cuda_libs "")
if(SEASTAR_WITH_CUDA)
  # the CUDA launch glue calls torch's CUDA stream API and, through c10's inline helpers, the
  # CUDA runtime that torch loads (from its NVIDIA packages, or a toolkit)
  if(NOT EXISTS "${SEASTAR_TORCH_DIR}/lib/libtorch_cuda.so")
    string(CONCAT seastar_NOT_FOUND_MESSAGE
      "seastar ${SEASTAR_VERSION} was built with CUDA against LibTorch ${SEASTAR_TORCH_VERSION}, "
      "but the LibTorch at ${SEASTAR_TORCH_DIR} (from ${_seastar_torch_from}) has no CUDA "
      "(lib/libtorch_cuda.so): use the CUDA build of torch it was built against, or rebuild "
      "seastar against this one.")
    return()
  endif()
  list(APPEND _seastar_torch_cuda_libs "${SEASTAR_TORCH_DIR}/lib/libtorch_cuda.so"
    "${SEASTAR_TORCH_DIR}/lib/libc10_cuda.so")
  if(_seastar_cudart_from_torch AND EXISTS "${SEASTAR_TORCH_DIR}/${_seastar_cudart_from_torch}")
    get_filename_component(_seastar_cudart "${SEASTAR_TORCH_DIR}/${_seastar_cudart_from_torch}" ABSOLUTE)
    list(APPEND _seastar_torch_cuda_libs "${_seastar_cudart}")
  elseif(_seastar_cudart_built AND EXISTS "${_seastar_cudart_built}")
    list(APPEND _seastar_torch_cuda_libs "${_seastar_cudart_built}")
  endif()
endif()

if(NOT TARGET seastar::libtorch)
  add_library(seastar::libtorch INTERFACE IMPORTED)
  set_target_properties(seastar::libtorch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${SEASTAR_TORCH_DIR}/include;${SEASTAR_TORCH_DIR}/include/torch/csrc/api/include"
    INTERFACE_LINK_LIBRARIES "${_seastar_torch_libs}")
endif()
if(SEASTAR_WITH_CUDA AND NOT TARGET seastar::libtorch_cuda)
  add_library(seastar::libtorch_cuda INTERFACE IMPORTED)
  set_target_properties(seastar::libtorch_cuda PROPERTIES
    INTERFACE_LINK_LIBRARIES "${_seastar_torch_cuda_libs}")
endif()
if(NOT seastar_FIND_QUIETLY)
  message(STATUS "seastar ${SEASTAR_VERSION}: LibTorch ${SEASTAR_TORCH_VERSION} at ${SEASTAR_TORCH_DIR} "
                 "(from ${_seastar_torch_from})")
endif()
