/** \file
 * Compiles generated C++ into a shared object with the host compiler, caches it on disk and
 * loads it. Cache key: a hash of the source, the compiler's version and the flags. Files are
 * written under a temporary name and renamed, so concurrent processes never load half a file.
 * Directory: $SEASTAR_CACHE_DIR, else $XDG_CACHE_HOME/seastar/kernels, else ~/.cache/seastar/kernels.
 */
#pragma once

#include <cstdint>
#include <string>

namespace seastar::kernels {

using EntryFn = void (*)(const int64_t*, void* const*, void* const*);

struct CompiledKernel {
  EntryFn entry = nullptr;
  std::string path;  ///< the shared object
  bool cache_hit = false;
};

/// Compiles (or finds in a cache) and loads `source`; resolves `seastar_entry`. Throws
/// CompileError with the compiler's output and the path of the source on failure.
CompiledKernel compile_cpu(const std::string& source, const std::string& name);

std::string cache_dir();

/// The cache key of `text` (64-bit FNV-1a, hex); the NVRTC cache (nvrtc_compiler.h) uses it too.
std::string content_hash(const std::string& text);

}  // namespace seastar::kernels
