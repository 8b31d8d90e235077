/** \file
 * Runs generated CUDA on the host, for tests without a GPU: the CUDA emitter's output, the
 * device helpers (kernels/device/*.cuh) and a host emulation of the CUDA subset they use
 * (kernels/device/seastar_cuda_emulator.h) in one C++ translation unit whose
 * `seastar_entry(sizes, G, B)` launches the kernels as the CUDA runtime would (same Args, same
 * launch order, items and block sizes; the grid is capped at two blocks, which the dynamic
 * and grid-stride work assignment must cope with). FusedProgram takes this path for CPU
 * tensors when SEASTAR_CUDA_EMULATE=1; compiled and cached like the C++ kernels. Slow: one
 * host thread per CUDA thread. No torch, no CUDA.
 */
#pragma once

#include <string>

#include "codegen/cuda_emitter.h"

namespace seastar::runtime {

/// The C++ source that runs `program` on the host (see the file comment).
std::string emulated_cuda_source(const codegen::CudaProgram& program);

/// True when SEASTAR_CUDA_EMULATE is set to a non-empty value other than 0.
bool cuda_emulation_requested();

}  // namespace seastar::runtime
