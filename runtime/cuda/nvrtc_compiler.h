/** \file
 * NVRTC: generated CUDA source -> a cubin for one GPU architecture (or PTX, which the driver
 * compiles at load time, when this NVRTC does not know the architecture), cached on disk like
 * the host-compiler JIT (runtime/jit/compiler.h): key = hash of the source, the device headers,
 * NVRTC's version, the options and the target; self-verifying entries written to a temporary
 * name and renamed, a damaged one rebuilt once with a warning (runtime/jit/kernel_cache.h). The image
 * carries its key in its own code, read back before use (runtime/cuda/cuda_image_key.h).
 * Register use and spills of every kernel are read from ptxas's verbose report
 * (--ptxas-options=-v, part of NVRTC's log, kept in the entry) and logged.
 * libnvrtc is loaded at first use (runtime/cuda/nvrtc_library.h). Only built with SEASTAR_WITH_CUDA;
 * no torch headers.
 */
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/nvrtc_library.h"  // nvrtc_available, nvrtc_version, nvrtc_supported_archs
#include "runtime/cuda/ptxas_report.h"   // CudaKernelResources, parse_ptxas_report

namespace seastar::runtime {

struct CudaBinary {
  std::string image;   ///< cubin bytes, or PTX text (is_ptx)
  bool is_ptx = false;
  std::string target;  ///< "sm_90" (cubin) or "compute_90" (PTX)
  std::string path;    ///< the cached image
  std::string source_path;
  std::string log;     ///< NVRTC's log, with ptxas's report
  bool cache_hit = false;
  std::vector<CudaKernelResources> kernels;
};

/// "sm_90", "90", "9.0", "compute_90" -> 90; throws ValueError otherwise.
int parse_arch(const std::string& arch);

/// Compiles (or finds in the caches) `source` for compute capability `arch` (e.g. 80, 90).
/// Throws CompileError with NVRTC's log and the path of the source on failure.
CudaBinary compile_cuda(const std::string& source, const std::string& name, int arch);

/// The device helpers (kernels/device/*.cuh) as (include name, text), as NVRTC receives them.
std::vector<std::pair<std::string, std::string>> device_headers();

}  // namespace seastar::runtime
