/** \file
 * Runs a CudaProgram (codegen/cuda_emitter.h) on a CUDA device: NVRTC compiles it for the
 * device's architecture (cached on disk and in process), the driver API loads it once per
 * device (the module lives in torch's primary context of that device), and every kernel is
 * launched in order on torch's current stream of that device. Any device index: nothing assumes
 * device 0. Declared without torch or CUDA headers; defined in cuda_runtime.cpp, the one
 * translation unit that includes torch's CUDA headers, compiled only with SEASTAR_WITH_CUDA.
 */
#pragma once

#include <cstdint>
#include <string>

#include "codegen/cuda_emitter.h"

namespace seastar::runtime {

/// `graph`: the 12 device index arrays of cpu_emitter.h's G (null where absent); `buffers`:
/// program.num_buffers device pointers in FusedPlan::buffers order. N destinations, NS sources
/// (N on a square graph), E edges. Asynchronous on the stream.
void launch_cuda(const codegen::CudaProgram& program, const std::string& name, int device, int64_t N, int64_t E,
                 int64_t NS, void* const* graph, void* const* buffers);

}  // namespace seastar::runtime
