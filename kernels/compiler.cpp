/** \file Host-compiler JIT with an on-disk cache; see compiler.h. */
#include "kernels/compiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "core/util/errors.h"
#include "core/util/log.h"

namespace fs = std::filesystem;

namespace seastar::kernels {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string run_capture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) SEASTAR_THROW(CompileError, "cannot run: ", cmd);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = pclose(p);
  return out;
}

std::string compiler() {
  const char* cxx = std::getenv("SEASTAR_CXX");
  return cxx && *cxx ? cxx : "g++";
}

const std::string& compiler_version() {
  static std::string v = [] {
    int status = 0;
    std::string out = run_capture(compiler() + " --version", &status);
    if (status != 0) SEASTAR_THROW(CompileError, "the host compiler '", compiler(), "' does not run: ", out);
    return out.substr(0, out.find('\n'));
  }();
  return v;
}

const char* kFlags = "-O3 -march=native -fopenmp -shared -fPIC -std=c++17 -fno-math-errno";

}  // namespace

std::string cache_dir() {
  if (const char* d = std::getenv("SEASTAR_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/seastar/kernels";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/seastar/kernels";
}

std::string content_hash(const std::string& text) {
  std::ostringstream key;
  key << std::hex << fnv1a(text);
  return key.str();
}

CompiledKernel compile_cpu(const std::string& source, const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, CompiledKernel> loaded;  // in-process cache by key
  std::lock_guard<std::mutex> lock(mutex);

  std::ostringstream key;
  key << std::hex << fnv1a(source + "\n" + compiler_version() + "\n" + kFlags);
  auto it = loaded.find(key.str());
  if (it != loaded.end()) {
    CompiledKernel k = it->second;
    k.cache_hit = true;
    return k;
  }
  const std::string dir = cache_dir();
  fs::create_directories(dir);
  const std::string base = dir + "/" + name + "-" + key.str();
  const std::string so = base + ".so", src = base + ".cpp";
  CompiledKernel k;
  k.path = so;
  k.cache_hit = fs::exists(so);
  if (!k.cache_hit) {
    const std::string tag = "." + std::to_string(getpid()) + ".tmp";
    { std::ofstream(src + tag) << source; }
    fs::rename(src + tag, src);
    std::string cmd = compiler() + " " + kFlags + " -o " + so + tag + " " + src;
    log::info("compiling " + src);
    int status = 0;
    std::string out = run_capture(cmd, &status);
    if (status != 0) {
      std::error_code ec;
      fs::remove(so + tag, ec);
      SEASTAR_THROW(CompileError, "compiling the kernels of '", name, "' failed (source: ", src, ")\n", cmd, "\n", out);
    }
    fs::rename(so + tag, so);  // atomic: another process sees the old state or the whole file
  }
  void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) SEASTAR_THROW(CompileError, "cannot load ", so, ": ", dlerror());
  k.entry = reinterpret_cast<EntryFn>(dlsym(handle, "seastar_entry"));
  if (!k.entry) SEASTAR_THROW(CompileError, so, " has no seastar_entry");
  loaded[key.str()] = k;
  return k;
}

}  // namespace seastar::kernels
