# The optional CUDA backend. Seastar never links the CUDA runtime or driver at build time:
# NVRTC (libnvrtc) and the driver API (libcuda) are dlopen'ed at first use, so `import seastar`
# works on machines without a GPU, a driver or a toolkit. What the build needs is the toolkit's
# headers (nvrtc.h, cuda.h, cuda_runtime_api.h for torch's CUDA headers) and a torch package
# built with CUDA (libtorch_cuda, libc10_cuda), for the launch glue on torch's current stream.
#
# Defines SEASTAR_WITH_CUDA (CMake variable and, on seastar_cuda_config, a compile definition).
# _seastar_cuda_headers_in(<out> <folders...>): the first folder holding the headers Seastar
# compiles against (nvrtc.h, cuda.h, cuda_runtime_api.h), else "".
function(_seastar_cuda_headers_in out)
  foreach(_inc IN LISTS ARGN)
    if(EXISTS ${_inc}/nvrtc.h AND EXISTS ${_inc}/cuda.h AND EXISTS ${_inc}/cuda_runtime_api.h)
      set(${out} ${_inc} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

option(SEASTAR_ENABLE_CUDA "Build the CUDA backend when a CUDA toolkit is found" ON)
set(SEASTAR_WITH_CUDA OFF)
add_library(seastar_cuda_config INTERFACE)

if(SEASTAR_ENABLE_CUDA)
  find_package(CUDAToolkit QUIET)
  set(_cuda_inc "")   # every folder of the toolkit's headers, a list
  set(_cuda_main "")  # the one of them with cuda.h and nvrtc.h: the toolkit root is its parent
  if(CUDAToolkit_FOUND)
    # a list: CMake 4's FindCUDAToolkit gives the folders nvcc itself searches, which for CUDA 13
    # are include/ and include/cccl
    _seastar_cuda_headers_in(_cuda_main ${CUDAToolkit_INCLUDE_DIRS})
    if(_cuda_main)
      set(_cuda_inc ${CUDAToolkit_INCLUDE_DIRS})
    endif()
  endif()
  if(NOT _cuda_main)
    # find_package(CUDAToolkit) wants nvcc on the PATH (and may find a toolkit without NVRTC);
    # the headers are all Seastar needs. Last resort: the headers of the NVIDIA pip packages
    # that torch's CUDA 13 wheels depend on.
    get_filename_component(_site ${SEASTAR_TORCH_DIR} DIRECTORY)
    _seastar_cuda_headers_in(_cuda_main $ENV{CUDA_HOME}/include $ENV{CUDA_PATH}/include /usr/local/cuda/include
                             ${_site}/nvidia/cu13/include)
    set(_cuda_inc ${_cuda_main})
  endif()
  if(_cuda_main AND NOT EXISTS ${SEASTAR_TORCH_LIB_DIR}/libtorch_cuda.so)
    message(STATUS "Seastar: CUDA toolkit found but torch (${SEASTAR_TORCH_VERSION}) has no CUDA: CPU-only build")
  elseif(_cuda_main)
    set(SEASTAR_WITH_CUDA ON)
    set(SEASTAR_CUDA_INCLUDE_DIRS ${_cuda_inc})
    list(JOIN _cuda_inc ", " _shown)
    message(STATUS "Seastar: CUDA backend on (headers in ${_shown}; NVRTC and the driver are loaded at run time)")
    target_compile_definitions(seastar_cuda_config INTERFACE SEASTAR_WITH_CUDA=1)
    # the toolkit's headers are for Seastar's own CUDA sources: its installed headers need none.
    # Quoted, so that a list stays inside the one generator expression.
    target_include_directories(seastar_cuda_config SYSTEM INTERFACE "$<BUILD_INTERFACE:${_cuda_inc}>")
    # torch's CUDA libraries, for at::cuda::getCurrentCUDAStream (the launch glue only), and the
    # CUDA runtime torch itself loads (c10's inline CUDA helpers call it), so that executables
    # link too (a Python extension would find it in the process)
    get_filename_component(_site ${SEASTAR_TORCH_DIR} DIRECTORY)
    get_filename_component(_cuda_root ${_cuda_main} DIRECTORY)
    find_file(SEASTAR_CUDART NAMES libcudart.so.13 libcudart.so.12 libcudart.so
      HINTS ${_site}/nvidia/cu13/lib ${_site}/nvidia/cuda_runtime/lib ${_cuda_root}/lib64 ${_cuda_root}/lib
      NO_DEFAULT_PATH)
    # as seastar::torch: build-tree paths here, seastar::libtorch_cuda once installed
    add_library(seastar_torch_cuda_libs INTERFACE)
    target_link_libraries(seastar_torch_cuda_libs INTERFACE seastar::torch
      $<BUILD_INTERFACE:${SEASTAR_TORCH_LIB_DIR}/libtorch_cuda.so>
      $<BUILD_INTERFACE:${SEASTAR_TORCH_LIB_DIR}/libc10_cuda.so>
      $<INSTALL_INTERFACE:seastar::libtorch_cuda>)
    if(SEASTAR_CUDART)
      target_link_libraries(seastar_torch_cuda_libs INTERFACE $<BUILD_INTERFACE:${SEASTAR_CUDART}>)
    endif()
    set_target_properties(seastar_torch_cuda_libs PROPERTIES EXPORT_NAME torch_cuda)
    target_compile_definitions(seastar_torch_cuda_libs INTERFACE USE_CUDA=1)
    add_library(seastar::torch_cuda ALIAS seastar_torch_cuda_libs)
  else()
    message(STATUS "CUDA toolkit not found: CPU-only build")
  endif()
else()
  message(STATUS "Seastar: SEASTAR_ENABLE_CUDA=OFF: CPU-only build")
endif()
