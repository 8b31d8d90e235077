/** \file
 * Compiles generated C++ into a shared object with the host compiler, caches it on disk
 * (kernel_cache.h) and loads it.
 *
 * Key: a hash of the source, the compiler command, its version, the flags (with
 * SEASTAR_CXXFLAGS) and what they resolve to on this machine (host_toolchain.h). Every entry
 * carries a trailer with its key, size and content hash, checked before dlopen, and the code
 * itself exports `seastar_kernel_key`, checked after: a damaged or misplaced entry is rebuilt
 * once, with a warning, and never loaded; so is an entry that another user owns or that group
 * or others can write (cache_trust.h). The source is written and compiled in a private folder
 * (work_dir.h), and an entry is loaded through the descriptor it was checked through
 * (dlopen_fd.h). The compiler runs from an argument vector, never through a shell.
 *
 * An index per (source, flags, CPU) records the key last built for them, so a warm cache keeps
 * working where the compiler cannot be run (a deployment without g++): the JIT then loads the
 * indexed entry, or raises one CompileError naming the compiler when there is none.
 */
#pragma once

#include <cstdint>
#include <string>

#include "runtime/jit/kernel_cache.h"

namespace seastar::runtime {

using EntryFn = void (*)(const int64_t*, void* const*, void* const*);

struct CompiledKernel {
  EntryFn entry = nullptr;
  std::string path;  ///< the shared object
  bool cache_hit = false;
};

/// Compiles (or finds in a cache) and loads `source`; resolves `seastar_entry`. Throws
/// CompileError with the compiler's output and the path of the source on failure, Interrupted
/// when the compiler was ended by SIGINT. `name` may hold any characters (it is sanitised into
/// file names).
CompiledKernel compile_cpu(const std::string& source, const std::string& name);

/// What compile_cpu did in this process: to find what a first call costs, and which tests compile
/// the most (tests/python/conftest.py reports it per test file).
struct JitStats {
  int64_t compiled = 0;         ///< host-compiler runs
  double compile_seconds = 0;   ///< their wall time
  int64_t loaded_from_disk = 0; ///< entries the disk cache held
  int64_t reused = 0;           ///< calls answered by a kernel this process had loaded
};
JitStats jit_stats();

}  // namespace seastar::runtime
