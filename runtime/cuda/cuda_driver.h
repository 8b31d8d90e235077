/** \file
 * The CUDA driver API, dlopen'ed at first use (libcuda.so.1 comes with the NVIDIA driver, not
 * with the toolkit; the toolkit's stubs/libcuda.so is found last and reported as "no driver").
 * Nothing here runs at import time, so Seastar imports on machines without a GPU. The runtime
 * (runtime/cuda/cuda_runtime.cpp) loads NVRTC's cubins with it and launches them on torch's stream.
 * Only built with SEASTAR_WITH_CUDA; no torch headers.
 */
#pragma once

#include <cuda.h>

#include <string>

namespace seastar::runtime {

struct CudaDriver {
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuModuleLoadDataEx) ModuleLoadDataEx = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuFuncGetAttribute) FuncGetAttribute = nullptr;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor) OccupancyMaxActiveBlocksPerMultiprocessor = nullptr;
  std::string path;
  int version = 0;  ///< e.g. 13000
};

/// The loaded and initialised driver; throws NotImplementedError (no driver / no GPU) clearly.
CudaDriver& cuda_driver();

/// Throws Error naming `what` and the driver's message when `r` is not CUDA_SUCCESS.
void cuda_check(CUresult r, const char* what);

}  // namespace seastar::runtime
