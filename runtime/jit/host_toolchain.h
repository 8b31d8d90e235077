/** \file
 * What the host-compiler JIT compiles with, and everything about it that changes the object
 * code, so the cache key can include it:
 *   command  SEASTAR_CXX split on whitespace (default `g++`; e.g. "ccache g++" or "clang++ -v")
 *   flags    the fixed flags (-O3 -march=native -fopenmp-simd ...), then SEASTAR_CXXFLAGS's words
 *   version  the first line of `<command> --version`
 *   target   what the flags resolve to on this machine: `-Q --help=target`'s -march=, -mtune=
 *            and enabled -m options (GCC), else the -target-cpu/-target-feature words of a
 *            `-###` dry run (Clang), so -march=native is keyed by the CPU it expands to
 *   cpu      /proc/cpuinfo's model name and flags: known without running the compiler
 * Running the compiler for the version costs a few milliseconds per process; the target is
 * probed once per (command, version, flags, cpu) and remembered in the cache directory.
 * When the compiler cannot be run, `runnable` is false and `problem` says why; the JIT can
 * then still load kernels that a cache index records (see compiler.cpp).
 */
#pragma once

#include <string>
#include <vector>

namespace seastar::runtime {

struct HostToolchain {
  std::vector<std::string> command;
  std::vector<std::string> flags;
  std::string cpu;
  bool runnable = false;
  std::string problem;  ///< why the compiler cannot be run, when !runnable
  std::string version;
  std::string target;
};

/// The toolchain for the current SEASTAR_CXX / SEASTAR_CXXFLAGS, probed once per pair.
const HostToolchain& host_toolchain();

/// The identity of this machine's CPU from /proc/cpuinfo (empty where there is none).
std::string cpu_identity();

}  // namespace seastar::runtime
