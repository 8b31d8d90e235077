/** \file The dlopen'ed CUDA driver API; see cuda_driver.h. */
#include "runtime/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "core/util/errors.h"
#include "core/util/log.h"

namespace seastar::runtime {
namespace {

// cuda.h maps some names to versioned symbols (#define cuCtxDestroy cuCtxDestroy_v2, ...):
// expanding the name first gives the symbol the driver exports for this header's API version.
#define SEASTAR_STR2(x) #x
#define SEASTAR_STR(x) SEASTAR_STR2(x)

}  // namespace

CudaDriver& cuda_driver() {
  static std::mutex mutex;
  static CudaDriver d;
  static std::string error;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried) {
    tried = true;
    void* h = nullptr;
    std::string attempts;
    std::vector<std::string> cands;
    if (const char* p = std::getenv("SEASTAR_LIBCUDA"); p && *p) cands.push_back(p);
    cands.insert(cands.end(), {"libcuda.so.1", "libcuda.so", "/usr/local/cuda/lib64/stubs/libcuda.so"});
    for (const std::string& c : cands) {
      if (c.find('/') != std::string::npos && !std::filesystem::exists(c)) continue;
      h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) {
        d.path = c;
        break;
      }
      attempts += "\n  " + c + ": " + dlerror();
    }
    if (!h) {
      error = "the CUDA driver (libcuda.so.1) could not be loaded: this machine has no NVIDIA driver. Tried:" + attempts;
    } else {
      std::string missing;
      auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        if (!fn) missing += std::string(" ") + name;
      };
      sym(d.GetErrorString, SEASTAR_STR(cuGetErrorString));
      sym(d.GetErrorName, SEASTAR_STR(cuGetErrorName));
      sym(d.Init, SEASTAR_STR(cuInit));
      sym(d.DriverGetVersion, SEASTAR_STR(cuDriverGetVersion));
      sym(d.DeviceGet, SEASTAR_STR(cuDeviceGet));
      sym(d.DeviceGetAttribute, SEASTAR_STR(cuDeviceGetAttribute));
      sym(d.DevicePrimaryCtxRetain, SEASTAR_STR(cuDevicePrimaryCtxRetain));
      sym(d.CtxGetCurrent, SEASTAR_STR(cuCtxGetCurrent));
      sym(d.CtxSetCurrent, SEASTAR_STR(cuCtxSetCurrent));
      sym(d.ModuleLoadDataEx, SEASTAR_STR(cuModuleLoadDataEx));
      sym(d.ModuleGetFunction, SEASTAR_STR(cuModuleGetFunction));
      sym(d.FuncGetAttribute, SEASTAR_STR(cuFuncGetAttribute));
      sym(d.FuncSetAttribute, SEASTAR_STR(cuFuncSetAttribute));
      sym(d.LaunchKernel, SEASTAR_STR(cuLaunchKernel));
      sym(d.OccupancyMaxActiveBlocksPerMultiprocessor, SEASTAR_STR(cuOccupancyMaxActiveBlocksPerMultiprocessor));
      if (!missing.empty()) {
        error = d.path + " lacks" + missing;
      } else {
        CUresult r = d.Init(0);
        if (r == CUDA_ERROR_STUB_LIBRARY) {
          error = "only the CUDA toolkit's stub " + d.path + " was found: this machine has no NVIDIA driver";
        } else if (r != CUDA_SUCCESS) {
          const char* msg = nullptr;
          d.GetErrorString(r, &msg);
          error = "cuInit failed (" + std::string(msg ? msg : "unknown error") + "): no usable GPU";
        } else {
          d.DriverGetVersion(&d.version);
          log::debug("loaded the CUDA driver " + std::to_string(d.version) + " from " + d.path);
        }
      }
      if (!error.empty()) d.Init = nullptr;
    }
  }
  if (!error.empty()) SEASTAR_THROW(NotImplementedError, error);
  return d;
}

void cuda_check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* msg = nullptr;
  CudaDriver& d = cuda_driver();
  d.GetErrorName(r, &name);
  d.GetErrorString(r, &msg);
  SEASTAR_THROW(Error, what, " failed: ", name ? name : "?", " (", msg ? msg : "unknown error", ")");
}

}  // namespace seastar::runtime
