/** \file NVRTC JIT with an on-disk cache; see nvrtc_compiler.h. */
#include "kernels/nvrtc_compiler.h"

#include <dlfcn.h>
#include <link.h>
#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "core/util/file_names.h"
#include "core/util/errors.h"
#include "core/util/log.h"
#include "kernels/kernel_cache.h"
#include "seastar_device_headers.h"  // generated from kernels/device/*.cuh (and the emulator)

namespace fs = std::filesystem;

namespace seastar::kernels {
namespace {

/// The NVRTC entry points Seastar uses, resolved from a dlopen'ed libnvrtc.
struct Nvrtc {
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

Nvrtc& nvrtc_or_throw(bool throw_on_error, std::string* why) {
  static std::mutex mutex;
  static Nvrtc lib;
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

Nvrtc& nvrtc() { return nvrtc_or_throw(true, nullptr); }

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) SEASTAR_THROW(CompileError, what, " failed: ", nvrtc().GetErrorString(r));
}

/// Compiles `source` with NVRTC into b->image and b->log; throws CompileError with NVRTC's log.
void nvrtc_build(Nvrtc& lib, const std::string& source, const std::string& name, const std::vector<std::string>& options,
                 const std::vector<std::pair<std::string, std::string>>& headers, CudaBinary* out) {
  CudaBinary& b = *out;
  const bool cubin = !b.is_ptx;
  cache::write_file(b.source_path, source);
  std::vector<const char*> hdr_text, hdr_name;
  for (const auto& [hn, ht] : headers) {
    hdr_name.push_back(hn.c_str());
    hdr_text.push_back(ht.c_str());
  }
  nvrtcProgram prog = nullptr;
  check(lib.CreateProgram(&prog, source.c_str(), b.source_path.c_str(), static_cast<int>(headers.size()),
                          hdr_text.data(), hdr_name.data()),
        "nvrtcCreateProgram");
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  log::info("compiling " + b.source_path + " with NVRTC " + lib.version + " for " + b.target);
  nvrtcResult r = lib.CompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  size_t log_size = 0;
  lib.GetProgramLogSize(prog, &log_size);
  b.log.assign(log_size, '\0');
  if (log_size) lib.GetProgramLog(prog, b.log.data());
  while (!b.log.empty() && b.log.back() == '\0') b.log.pop_back();
  if (r != NVRTC_SUCCESS) {
    lib.DestroyProgram(&prog);
    std::string opt_line;
    for (const auto& o : options) opt_line += " " + o;
    SEASTAR_THROW(CompileError, "NVRTC ", lib.version, " failed to compile the CUDA kernels of '", name, "' for ",
                  b.target, " (", lib.GetErrorString(r), "; source: ", b.source_path, ")\nnvrtc", opt_line, "\n",
                  b.log);
  }
  size_t size = 0;
  if (cubin) {
    check(lib.GetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    b.image.assign(size, '\0');
    check(lib.GetCUBIN(prog, b.image.data()), "nvrtcGetCUBIN");
  } else {
    check(lib.GetPTXSize(prog, &size), "nvrtcGetPTXSize");
    b.image.assign(size, '\0');
    check(lib.GetPTX(prog, b.image.data()), "nvrtcGetPTX");
  }
  lib.DestroyProgram(&prog);
  b.kernels = parse_ptxas_report(b.log);
}

std::string extra_flags() {
  const char* f = std::getenv("SEASTAR_NVRTC_FLAGS");
  return f ? f : "";
}

void log_resources(const std::string& name, const CudaBinary& b) {
  for (const CudaKernelResources& k : b.kernels) {
    std::ostringstream os;
    os << "nvrtc: " << name << " " << k.name << " (" << b.target << "): " << k.registers << " registers, "
       << k.stack_bytes << " B stack, " << k.spill_store_bytes << " B spill stores, " << k.spill_load_bytes
       << " B spill loads";
    if (k.spill_store_bytes > 0 || k.spill_load_bytes > 0) {
      log::warn(os.str());
    } else {
      log::info(os.str());
    }
  }
}

}  // namespace

bool nvrtc_available(std::string* why) { return nvrtc_or_throw(false, why).handle != nullptr; }

std::string nvrtc_version() { return nvrtc().version; }

std::vector<int> nvrtc_supported_archs() { return nvrtc().archs; }

int parse_arch(const std::string& arch) {
  static const std::regex re(R"(^(?:sm_|compute_)?(\d+)(?:\.(\d))?[af]?$)");
  std::smatch m;
  if (!std::regex_match(arch, m, re))
    SEASTAR_THROW(ValueError, "'", arch, "' is not a GPU architecture (expected e.g. sm_80, sm_90 or 9.0)");
  int major_or_cc = std::stoi(m[1].str());
  return m[2].matched ? major_or_cc * 10 + std::stoi(m[2].str()) : major_or_cc;
}

std::vector<std::pair<std::string, std::string>> device_headers() {
  std::vector<std::pair<std::string, std::string>> h;
  for (int i = 0; i < embedded_device::num_files; ++i) {
    const std::string file = embedded_device::files[i].name;
    if (file.size() > 4 && file.compare(file.size() - 4, 4, ".cuh") == 0)  // not the host emulator
      h.emplace_back(file, embedded_device::files[i].text);
  }
  return h;
}

std::vector<CudaKernelResources> parse_ptxas_report(const std::string& log) {
  // ptxas info    : Compiling entry function 'kernel_0' for 'sm_90'
  // ptxas info    : Function properties for kernel_0
  // ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 18 registers, used 0 barriers, 380 bytes cmem[0]
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex props(R"(Function properties for (\S+))");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex regs(R"(Used (\d+) registers)");
  std::vector<CudaKernelResources> out;
  auto current = [&](const std::string& name) -> CudaKernelResources& {
    for (auto& k : out)
      if (k.name == name) return k;
    out.push_back({name});
    return out.back();
  };
  std::string fn;
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry) || std::regex_search(line, m, props)) {
      fn = m[1].str();
      current(fn);
    } else if (!fn.empty() && std::regex_search(line, m, frame)) {
      auto& k = current(fn);
      k.stack_bytes = std::stoi(m[1].str());
      k.spill_store_bytes = std::stoi(m[2].str());
      k.spill_load_bytes = std::stoi(m[3].str());
    } else if (!fn.empty() && std::regex_search(line, m, regs)) {
      current(fn).registers = std::stoi(m[1].str());
    }
  }
  return out;
}

CudaBinary compile_cuda(const std::string& source, const std::string& name, int arch) {
  Nvrtc& lib = nvrtc();
  // the target: a cubin when NVRTC knows the architecture, else PTX for the newest one below it
  // (the driver compiles PTX for the device when the module is loaded)
  const std::vector<int>& archs = lib.archs;
  bool cubin = std::find(archs.begin(), archs.end(), arch) != archs.end();
  int target = arch;
  if (!cubin) {
    auto below = std::find_if(archs.rbegin(), archs.rend(), [&](int a) { return a <= arch; });
    if (below == archs.rend())
      SEASTAR_THROW(CompileError, "NVRTC ", lib.version, " cannot compile for sm_", arch, ": it supports ",
                    archs.empty() ? std::string("no architecture") : "sm_" + std::to_string(archs.front()) + " to sm_" +
                                                                      std::to_string(archs.back()));
    target = *below;
    log::info("NVRTC " + lib.version + " does not know sm_" + std::to_string(arch) + ": emitting PTX for compute_" +
              std::to_string(target) + ", which the driver compiles when loading it");
  }
  CudaBinary b;
  b.is_ptx = !cubin;
  b.target = (cubin ? "sm_" : "compute_") + std::to_string(target);
  // 177/550: a value computed but unused in one kernel (generated code is shared by passes)
  std::vector<std::string> options = {"--gpu-architecture=" + b.target, "-std=c++17", "-lineinfo",
                                      "--diag-suppress=177,550"};
  if (cubin) options.push_back("--ptxas-options=-v");
  std::istringstream extra(extra_flags());
  for (std::string f; extra >> f;) options.push_back(f);

  const auto headers = device_headers();
  std::string key_text = source + "\nnvrtc " + lib.version + "\n";
  for (const auto& o : options) key_text += o + "\n";
  for (const auto& [hn, ht] : headers) key_text += hn + "\n" + ht + "\n";
  const std::string key = content_hash(key_text);

  static std::mutex mutex;
  static std::map<std::string, CudaBinary> loaded;  // in-process cache by key
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(key); it != loaded.end()) {
    CudaBinary hit = it->second;
    hit.cache_hit = true;
    return hit;
  }

  const std::string base = cache::ensure_dir() + "/" + util::file_stem(name) + "-" + key;
  b.source_path = base + ".cu";
  b.path = base + (cubin ? ".cubin" : ".ptx");
  std::string why;
  cache::Entry entry;
  const cache::Found found = cache::read_entry(b.path, key, &entry, &why);
  if (found == cache::Found::hit) {
    b.cache_hit = true;
    b.image = std::move(entry.object);
    b.log = entry.fields["log"];
    b.kernels = parse_ptxas_report(b.log);
    log::debug("nvrtc: " + name + " (" + b.target + ") from the cache: " + b.path);
  } else {
    if (found == cache::Found::bad) log::warn("kernel cache entry " + b.path + " is unusable (" + why + "): rebuilding it");
    try {
      nvrtc_build(lib, source, name, options, headers, &b);
      // the log rides in the entry's trailer: the register report of a cached cubin
      cache::write_entry(b.path, key, b.image, {{"log", b.log}, {"nvrtc", lib.version}, {"target", b.target}});
    } catch (...) {
      if (found == cache::Found::bad) cache::discard(b.path, key);  // never leave a bad entry behind
      throw;
    }
  }
  log_resources(name, b);
  loaded[key] = b;
  return b;
}

}  // namespace seastar::kernels
