# Locates LibTorch inside the `torch` Python package (torch.utils.cmake_prefix_path) and
# defines the imported targets seastar::torch (C++ API) and seastar::torch_python.
# TorchConfig.cmake is deliberately not used: for CUDA builds of torch it insists on
# finding a matching CUDA toolkit, which would break CPU-only machines.
# torch's folder is taken through realpath: the venv reached through the checkout's .venv link
# and by its own path then give the same compile commands, and share compiler-cache entries.
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c
    "import torch,os;print(os.path.dirname(os.path.realpath(torch.__file__)));print(int(torch._C._GLIBCXX_USE_CXX11_ABI));print(torch.__version__);print(torch.utils.cmake_prefix_path)"
  OUTPUT_VARIABLE _torch_info OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _torch_rc)
if(NOT _torch_rc EQUAL 0)
  if(SKBUILD)
    # pip's default build isolation builds in a fresh environment without the user's torch
    string(CONCAT _hint " (pip builds in an isolated environment unless told otherwise: install "
           "torch, scikit-build-core and pybind11 first, then run `pip install --no-build-isolation .`)")
  endif()
  message(FATAL_ERROR "Seastar needs the torch Python package: `${Python3_EXECUTABLE} -c 'import torch'` failed${_hint}")
endif()
string(REPLACE "\n" ";" _torch_info "${_torch_info}")
list(GET _torch_info 0 SEASTAR_TORCH_DIR)
list(GET _torch_info 1 SEASTAR_TORCH_CXX11_ABI)
list(GET _torch_info 2 SEASTAR_TORCH_VERSION)
message(STATUS "Seastar: LibTorch ${SEASTAR_TORCH_VERSION} from ${SEASTAR_TORCH_DIR}")

set(_tlib ${SEASTAR_TORCH_DIR}/lib)
# In the build tree these are the paths of the torch found above; an installed Seastar
# (cmake/SeastarInstall.cmake) gets seastar::libtorch instead, which its seastarConfig.cmake
# creates from the LibTorch the consuming project points it at (Torch_DIR, CMAKE_PREFIX_PATH).
add_library(seastar_torch_libs INTERFACE)
target_include_directories(seastar_torch_libs SYSTEM INTERFACE
  $<BUILD_INTERFACE:${SEASTAR_TORCH_DIR}/include>
  $<BUILD_INTERFACE:${SEASTAR_TORCH_DIR}/include/torch/csrc/api/include>)
target_compile_definitions(seastar_torch_libs INTERFACE _GLIBCXX_USE_CXX11_ABI=${SEASTAR_TORCH_CXX11_ABI})
target_link_libraries(seastar_torch_libs INTERFACE
  $<BUILD_INTERFACE:${_tlib}/libtorch.so> $<BUILD_INTERFACE:${_tlib}/libtorch_cpu.so>
  $<BUILD_INTERFACE:${_tlib}/libc10.so> $<INSTALL_INTERFACE:seastar::libtorch>)
set_target_properties(seastar_torch_libs PROPERTIES EXPORT_NAME torch)
add_library(seastar::torch ALIAS seastar_torch_libs)

add_library(seastar_torch_python_libs INTERFACE)
target_link_libraries(seastar_torch_python_libs INTERFACE seastar_torch_libs ${_tlib}/libtorch_python.so)
add_library(seastar::torch_python ALIAS seastar_torch_python_libs)
set(SEASTAR_TORCH_LIB_DIR ${_tlib})

# A translation unit that includes torch's headers spends most of its compile parsing them
# (tens of seconds each on a small machine), the same headers for every file of a target. The
# libraries include only the torch headers they use: <torch/torch.h> (the whole C++ front end:
# nn, optim, data, serialization) takes about twice as long to parse as <torch/types.h>, and
# tests/python/test_repository_layout.py keeps it out of them. The
# targets with several such files compile them as one unity file, which parses them once; the
# files keep their own anonymous namespaces' names apart (each name is unique in its target).
function(seastar_torch_unity_build target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
endfunction()
