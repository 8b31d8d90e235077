/** \file
 * NVRTC: generated CUDA source -> a cubin for one GPU architecture (or PTX, which the driver
 * compiles at load time, when this NVRTC does not know the architecture), cached on disk like
 * the host-compiler JIT (kernels/compiler.h): key = hash of the source, the device headers,
 * NVRTC's version, the options and the target; self-verifying entries written to a temporary
 * name and renamed, a damaged one rebuilt once with a warning (kernels/kernel_cache.h).
 * Register use and spills of every kernel are read from ptxas's verbose report
 * (--ptxas-options=-v, part of NVRTC's log, kept in the entry) and logged.
 *
 * libnvrtc is dlopen'ed at first use (nothing CUDA is linked), so a machine without the CUDA
 * toolkit imports Seastar fine and gets a clear error only when it compiles CUDA. Search order:
 * $SEASTAR_NVRTC (a path: then only that one), the loader's path (libnvrtc.so.13, .12, libnvrtc.so), $CUDA_HOME and
 * /usr/local/cuda, then the nvidia/cu13 (or cuda_nvrtc) package beside a loaded torch.
 * Only built with SEASTAR_WITH_CUDA; no torch headers.
 */
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace seastar::kernels {

/// What ptxas reported for one kernel (-1: not reported, e.g. for PTX).
struct CudaKernelResources {
  std::string name;
  int registers = -1;
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

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

/// True when libnvrtc can be loaded; otherwise `why` says what was tried.
bool nvrtc_available(std::string* why = nullptr);
/// "13.0": the loaded NVRTC's version. Throws CompileError when NVRTC cannot be loaded.
std::string nvrtc_version();
/// Compute capabilities NVRTC can emit cubins for (e.g. 75, 80, ..., 120).
std::vector<int> nvrtc_supported_archs();
/// "sm_90", "90", "9.0", "compute_90" -> 90; throws ValueError otherwise.
int parse_arch(const std::string& arch);

/// Compiles (or finds in the caches) `source` for compute capability `arch` (e.g. 80, 90).
/// Throws CompileError with NVRTC's log and the path of the source on failure.
CudaBinary compile_cuda(const std::string& source, const std::string& name, int arch);

/// The device helpers (kernels/device/*.cuh) as (include name, text), as NVRTC receives them.
std::vector<std::pair<std::string, std::string>> device_headers();

/// Parses ptxas's verbose report out of an NVRTC log.
std::vector<CudaKernelResources> parse_ptxas_report(const std::string& log);

}  // namespace seastar::kernels
