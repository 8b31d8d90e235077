/** \file
 * libnvrtc, dlopen'ed at first use (nothing CUDA is linked), so a machine without the CUDA
 * toolkit imports Seastar fine and gets a clear error only when it compiles CUDA. Search order:
 * $SEASTAR_NVRTC (a path: then only that one), the loader's path (libnvrtc.so.13, .12,
 * libnvrtc.so), $CUDA_HOME and /usr/local/cuda, then the nvidia/cu13 (or cuda_nvrtc) package
 * beside a loaded torch. Only built with SEASTAR_WITH_CUDA; no torch headers.
 */
#pragma once

#include <nvrtc.h>

#include <string>
#include <vector>

namespace seastar::runtime {

/// The NVRTC entry points Seastar uses, resolved from a dlopen'ed libnvrtc.
struct NvrtcLibrary {
  void* handle = nullptr;
  std::string path;
  decltype(&::nvrtcGetErrorString) GetErrorString = nullptr;
  decltype(&::nvrtcVersion) Version = nullptr;
  decltype(&::nvrtcGetNumSupportedArchs) GetNumSupportedArchs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) GetSupportedArchs = nullptr;
  decltype(&::nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&::nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) GetPTX = nullptr;
  decltype(&::nvrtcGetCUBINSize) GetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) GetCUBIN = nullptr;
  decltype(&::nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) GetProgramLog = nullptr;
  std::string version;
  std::vector<int> archs;
};


/// The loaded library; throws CompileError saying what was tried when it cannot be loaded.
NvrtcLibrary& nvrtc_library();
/// Throws CompileError "<what> failed: <NVRTC's message>" unless `r` is NVRTC_SUCCESS.
void nvrtc_check(nvrtcResult r, const char* what);

/// True when libnvrtc can be loaded; otherwise `why` says what was tried.
bool nvrtc_available(std::string* why = nullptr);
/// "13.0": the loaded NVRTC's version. Throws CompileError when NVRTC cannot be loaded.
std::string nvrtc_version();
/// Compute capabilities NVRTC can emit cubins for (e.g. 75, 80, ..., 120).
std::vector<int> nvrtc_supported_archs();

}  // namespace seastar::runtime
