/** \file The cache key a CUDA image carries in its own code, read on the host before the image
 * reaches the driver.
 *
 * compile_cuda appends `extern "C" __device__ char seastar_kernel_key[] = "<key>";` to every
 * source it compiles, so a cubin or PTX module proves which source it was built from (as the
 * host JIT's shared objects export the same symbol, checked after dlopen). The entry's trailer
 * (kernel_cache.h) catches damage and a file copied under another key; this catches a valid entry
 * resealed under the wrong key, which would otherwise run one program's kernels on another's
 * buffers. Reading it needs no GPU: a cubin is an ELF file whose symbol table locates the
 * initialiser, PTX spells it out as a byte list. No CUDA or torch headers.
 */
#pragma once

#include <string>

#include "runtime/jit/kernel_cache.h"

namespace seastar::runtime {

/// The line compile_cuda appends to a source built for `key`.
std::string image_key_definition(const std::string& key);

/// The string `seastar_kernel_key` holds in `image` (cubin bytes, or PTX text when `is_ptx`);
/// empty when the image has no such symbol or is not well formed. Never reads out of bounds.
std::string image_key(const std::string& image, bool is_ptx);

}  // namespace seastar::runtime
