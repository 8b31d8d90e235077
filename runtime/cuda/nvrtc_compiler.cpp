/** \file NVRTC JIT with an on-disk cache; see nvrtc_compiler.h (loading the library:
 * nvrtc_library.cpp; ptxas's report: ptxas_report.cpp). */
#include "runtime/cuda/nvrtc_compiler.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "core/util/file_names.h"
#include "core/util/errors.h"
#include "core/util/log.h"
#include "runtime/cuda/cuda_image_key.h"
#include "runtime/jit/kernel_cache.h"
#include "runtime/cuda/nvrtc_library.h"
#include "seastar_device_headers.h"  // generated from kernels/device/*.cuh (and the emulator)

namespace seastar::runtime {
namespace {

/// Compiles `source` with NVRTC into b->image and b->log; throws CompileError with NVRTC's log.
void nvrtc_build(NvrtcLibrary& lib, const std::string& source, const std::string& name, const std::vector<std::string>& options,
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
  nvrtc_check(lib.CreateProgram(&prog, source.c_str(), b.source_path.c_str(), static_cast<int>(headers.size()),
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
    nvrtc_check(lib.GetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
    b.image.assign(size, '\0');
    nvrtc_check(lib.GetCUBIN(prog, b.image.data()), "nvrtcGetCUBIN");
  } else {
    nvrtc_check(lib.GetPTXSize(prog, &size), "nvrtcGetPTXSize");
    b.image.assign(size, '\0');
    nvrtc_check(lib.GetPTX(prog, b.image.data()), "nvrtcGetPTX");
  }
  lib.DestroyProgram(&prog);
  b.kernels = parse_ptxas_report(b.log);
}

std::string extra_flags() {
  const char* f = std::getenv("SEASTAR_NVRTC_FLAGS");
  return f ? f : "";
}

}  // namespace

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

namespace {

/// The target for `arch`: a cubin when NVRTC knows the architecture, else PTX for the newest one
/// below it (the driver compiles PTX for the device when the module is loaded).
void choose_target(const NvrtcLibrary& lib, int arch, CudaBinary* b) {
  const std::vector<int>& archs = lib.archs;
  const bool cubin = std::find(archs.begin(), archs.end(), arch) != archs.end();
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
  b->is_ptx = !cubin;
  b->target = (cubin ? "sm_" : "compute_") + std::to_string(target);
}

/// The disk cache's entry at b->path for `key` into `b`: hit, missing, or bad with `why`. The
/// owner and mode (cache_trust.h) vouch for who wrote the file, the trailer for its integrity,
/// the image's own key (cuda_image_key.h) for where its code came from; all three are checked
/// on the bytes read through one descriptor, and those bytes are what the driver gets.
cache::Found read_cached(const std::string& key, CudaBinary* b, std::string* why) {
  cache::Entry entry;
  const cache::Found found = cache::read_entry(b->path, key, &entry, why);
  if (found != cache::Found::hit) return found;
  const std::string carried = image_key(entry.object, b->is_ptx);
  if (carried != key) {
    *why = carried.empty() ? std::string("its code carries no ") + cache::kKeySymbol
                           : "its code was built for key " + carried;
    return cache::Found::bad;
  }
  std::vector<CudaKernelResources> kernels = parse_ptxas_report(entry.fields["log"]);
  if (!b->is_ptx && kernels.empty()) {
    // every generated module has a kernel, and ptxas -v reported each when the cubin was built:
    // an entry without that report would hand callers an empty kernel list, so build it anew
    *why = "it holds no register report of its kernels";
    return cache::Found::bad;
  }
  b->image = std::move(entry.object);
  b->log = entry.fields["log"];
  b->kernels = std::move(kernels);
  return found;
}

}  // namespace

CudaBinary compile_cuda(const std::string& source, const std::string& name, int arch) {
  NvrtcLibrary& lib = nvrtc_library();
  CudaBinary b;
  choose_target(lib, arch, &b);
  // 177/550: a value computed but unused in one kernel (generated code is shared by passes)
  std::vector<std::string> options = {"--gpu-architecture=" + b.target, "-std=c++17", "-lineinfo",
                                      "--diag-suppress=177,550"};
  if (!b.is_ptx) options.push_back("--ptxas-options=-v");
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
  b.path = base + (b.is_ptx ? ".ptx" : ".cubin");
  std::string why;
  const cache::Found found = read_cached(key, &b, &why);
  if (found == cache::Found::hit) {
    b.cache_hit = true;
    log::debug("nvrtc: " + name + " (" + b.target + ") from the cache: " + b.path);
  } else {
    if (found == cache::Found::bad) log::warn("kernel cache entry " + b.path + " is unusable (" + why + "): rebuilding it");
    try {
      nvrtc_build(lib, source + image_key_definition(key), name, options, headers, &b);
      if (image_key(b.image, b.is_ptx) != key)
        SEASTAR_THROW(CompileError, "NVRTC ", lib.version, "'s image of '", name, "' (", b.target,
                      ") does not carry its key in ", cache::kKeySymbol, ": it would never be found in the cache");
      // the log rides in the entry's trailer: the register report of a cached cubin
      cache::write_entry(b.path, key, b.image, {{"log", b.log}, {"nvrtc", lib.version}, {"target", b.target}});
    } catch (...) {
      if (found == cache::Found::bad) cache::discard(b.path, key);  // never leave a bad entry behind
      throw;
    }
  }
  log_kernel_resources(name, b.target, b.kernels);
  loaded[key] = b;
  return b;
}

}  // namespace seastar::runtime
