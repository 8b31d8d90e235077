/** \file
 * Tables handed to the objects the JIT loads (compiler.h): how generated code reaches a runtime
 * that lives in Seastar without including its headers (the CUDA emulator's threads, for one).
 * The worker pool of the C++ kernels is bound the same way, by compiler.cpp itself.
 */
#pragma once

namespace seastar::runtime {

/// From now on, every object compile_cpu loads that exports `symbol` (a function taking a
/// `const void*`) is called with `table` once loaded.
void bind_loaded_objects(const char* symbol, const void* table);

}  // namespace seastar::runtime
