/** \file Probing the host compiler once per process; see host_toolchain.h. */
#include "runtime/jit/host_toolchain.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>

#include "core/util/errors.h"
#include "core/util/log.h"
#include "runtime/jit/kernel_cache.h"
#include "runtime/jit/subprocess.h"

namespace seastar::runtime {
namespace {

const char* const kFlags[] = {"-O3", "-march=native", "-fopenmp-simd", "-shared", "-fPIC", "-std=c++17", "-fno-math-errno"};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += w + "\n";
  return s;
}

/// GCC: `-Q --help=target` lists every target option with its value for these flags.
std::string gcc_target(const HostToolchain& t) {
  std::vector<std::string> argv = t.command;
  argv.insert(argv.end(), t.flags.begin(), t.flags.end());
  argv.insert(argv.end(), {"-Q", "--help=target"});
  ProcessResult r = run_process(argv);
  if (!r.ok()) return "";
  std::string target;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string opt, value;
    words >> opt >> value;
    if (opt == "-march=" || opt == "-mtune=" || opt == "-mabi=") {
      target += opt + value + " ";
    } else if (opt.rfind("-m", 0) == 0 && value == "[enabled]") {
      target += opt + " ";
    }
  }
  return target;
}

/// Clang: a `-###` dry run prints the cc1 command with -target-cpu and -target-feature.
std::string clang_target(const HostToolchain& t) {
  std::vector<std::string> argv = t.command;
  argv.insert(argv.end(), t.flags.begin(), t.flags.end());
  argv.insert(argv.end(), {"-###", "-x", "c++", "-c", "/dev/null", "-o", "/dev/null"});
  ProcessResult r = run_process(argv);
  if (!r.ok()) return "";
  static const std::regex re(R"rx("-target-(cpu|feature)" "([^"]*)")rx");
  std::string target;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), re), end; it != end; ++it)
    target += (*it)[1].str() + "=" + (*it)[2].str() + " ";
  return target;
}

/// The resolved target, remembered in the cache directory: probing it costs a compiler start.
std::string resolved_target(const HostToolchain& t) {
  const std::string key = content_hash("target\n" + join(t.command) + join(t.flags) + t.version + "\n" + t.cpu);
  std::string path;
  try {
    path = cache::ensure_dir() + "/toolchain-" + key + ".target";
    cache::Entry e;
    if (cache::read_entry(path, key, &e, nullptr) == cache::Found::hit) return e.object;
  } catch (const Error&) {
    path.clear();  // no cache directory: probe every time
  }
  std::string target = gcc_target(t);
  if (target.empty()) target = clang_target(t);
  if (target.empty()) log::info("cannot tell what the host compiler's target flags resolve to; keying on the CPU");
  if (!path.empty()) {
    try {
      cache::write_entry(path, key, target, {});
    } catch (const Error& e) {
      log::debug(std::string("not remembering the compiler's target: ") + e.what());
    }
  }
  return target;
}

HostToolchain probe(const std::string& cxx, const std::string& cxxflags) {
  HostToolchain t;
  t.command = split_command(cxx);
  if (t.command.empty()) t.command = {"g++"};
  t.flags.assign(std::begin(kFlags), std::end(kFlags));
  for (const std::string& f : split_command(cxxflags)) t.flags.push_back(f);
  t.cpu = cpu_identity();
  std::vector<std::string> argv = t.command;
  argv.push_back("--version");
  ProcessResult r = run_process(argv);
  if (!r.ok()) {
    t.problem = "the host compiler '" + format_command(t.command) + "' (SEASTAR_CXX) cannot be run: " + r.describe();
    if (r.started && !r.output.empty()) t.problem += "\n" + r.output;
    log::debug(t.problem);
    return t;
  }
  t.runnable = true;
  t.version = r.output.substr(0, r.output.find('\n'));
  t.target = resolved_target(t);
  return t;
}

}  // namespace

std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string id;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) break;  // the first processor stands for all: they share the instruction set
    if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0 ||
        line.rfind("CPU part", 0) == 0 || line.rfind("isa", 0) == 0)
      id += line + "\n";
  }
  return id;
}

const HostToolchain& host_toolchain() {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::unique_ptr<HostToolchain>> probed;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = probed[{env("SEASTAR_CXX"), env("SEASTAR_CXXFLAGS")}];
  if (!slot) slot = std::make_unique<HostToolchain>(probe(env("SEASTAR_CXX"), env("SEASTAR_CXXFLAGS")));
  return *slot;
}

}  // namespace seastar::runtime
