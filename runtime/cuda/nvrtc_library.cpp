/** \file Finding and loading libnvrtc; see nvrtc_library.h. */
#include "runtime/cuda/nvrtc_library.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/util/errors.h"
#include "core/util/log.h"

namespace fs = std::filesystem;

namespace seastar::runtime {
namespace {

/// Directories of the shared objects loaded in this process whose file name starts with `prefix`.
std::vector<std::string> loaded_library_dirs(const std::string& prefix) {
  struct Ctx {
    std::string prefix;
    std::vector<std::string> dirs;
  } ctx{prefix, {}};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        auto* c = static_cast<Ctx*>(data);
        if (!info->dlpi_name || !*info->dlpi_name) return 0;
        fs::path p(info->dlpi_name);
        if (p.filename().string().rfind(c->prefix, 0) == 0) c->dirs.push_back(p.parent_path().string());
        return 0;
      },
      &ctx);
  return ctx.dirs;
}

std::vector<std::string> nvrtc_candidates() {
  std::vector<std::string> c;
  if (const char* p = std::getenv("SEASTAR_NVRTC"); p && *p) return {p};  // only the one asked for
  for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) c.push_back(name);
  std::vector<std::string> roots;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* r = std::getenv(env); r && *r) roots.push_back(r);
  roots.push_back("/usr/local/cuda");
  for (const auto& r : roots)
    for (const char* f : {"/lib64/libnvrtc.so", "/lib64/libnvrtc.so.13", "/lib64/libnvrtc.so.12", "/lib/libnvrtc.so"})
      c.push_back(r + f);
  // torch's CUDA wheels depend on NVIDIA's pip packages: site-packages/nvidia/cu13/lib (CUDA 13)
  // or site-packages/nvidia/cuda_nvrtc/lib (CUDA 12), beside site-packages/torch/lib
  for (const std::string& dir : loaded_library_dirs("libc10")) {
    fs::path site = fs::path(dir).parent_path().parent_path();
    c.push_back((site / "nvidia/cu13/lib/libnvrtc.so.13").string());
    c.push_back((site / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12").string());
  }
  return c;
}

NvrtcLibrary& nvrtc_or_throw(bool throw_on_error, std::string* why) {
  static std::mutex mutex;
  static NvrtcLibrary lib;
  static std::string error;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried) {
    tried = true;
    std::string attempts;
    for (const std::string& cand : nvrtc_candidates()) {
      if (cand.find('/') != std::string::npos && !fs::exists(cand)) {
        attempts += "\n  " + cand + ": no such file";
        continue;
      }
      void* h = dlopen(cand.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        attempts += "\n  " + cand + ": " + dlerror();
        continue;
      }
      lib.handle = h;
      lib.path = cand;
      break;
    }
    if (!lib.handle) {
      error = "NVRTC (libnvrtc) could not be loaded, so CUDA kernels cannot be compiled. Install the CUDA "
              "toolkit or torch's nvidia-cuda-nvrtc package, or set SEASTAR_NVRTC to libnvrtc.so's path. Tried:" +
              attempts;
    } else {
      bool ok = true;
      auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib.handle, name));
        if (!fn) {
          ok = false;
          error += std::string(" ") + name;
        }
      };
      sym(lib.GetErrorString, "nvrtcGetErrorString");
      sym(lib.Version, "nvrtcVersion");
      sym(lib.GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
      sym(lib.GetSupportedArchs, "nvrtcGetSupportedArchs");
      sym(lib.CreateProgram, "nvrtcCreateProgram");
      sym(lib.DestroyProgram, "nvrtcDestroyProgram");
      sym(lib.CompileProgram, "nvrtcCompileProgram");
      sym(lib.GetPTXSize, "nvrtcGetPTXSize");
      sym(lib.GetPTX, "nvrtcGetPTX");
      sym(lib.GetCUBINSize, "nvrtcGetCUBINSize");
      sym(lib.GetCUBIN, "nvrtcGetCUBIN");
      sym(lib.GetProgramLogSize, "nvrtcGetProgramLogSize");
      sym(lib.GetProgramLog, "nvrtcGetProgramLog");
      if (!ok) {
        error = lib.path + " lacks" + error + " (NVRTC 11.2 or newer is needed)";
        dlclose(lib.handle);
        lib.handle = nullptr;
      } else {
        int major = 0, minor = 0;
        lib.Version(&major, &minor);
        lib.version = std::to_string(major) + "." + std::to_string(minor);
        int n = 0;
        lib.GetNumSupportedArchs(&n);
        lib.archs.resize(n);
        if (n > 0) lib.GetSupportedArchs(lib.archs.data());
        std::sort(lib.archs.begin(), lib.archs.end());
        log::debug("loaded NVRTC " + lib.version + " from " + lib.path);
      }
    }
  }
  if (!lib.handle) {
    if (why) *why = error;
    if (throw_on_error) SEASTAR_THROW(CompileError, error);
  }
  return lib;
}

}  // namespace

NvrtcLibrary& nvrtc_library() { return nvrtc_or_throw(true, nullptr); }

void nvrtc_check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) SEASTAR_THROW(CompileError, what, " failed: ", nvrtc_library().GetErrorString(r));
}

bool nvrtc_available(std::string* why) { return nvrtc_or_throw(false, why).handle != nullptr; }

std::string nvrtc_version() { return nvrtc_library().version; }

std::vector<int> nvrtc_supported_archs() { return nvrtc_library().archs; }

}  // namespace seastar::runtime
