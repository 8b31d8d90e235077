/** \file
 * The last two steps of the back half, 7-emit and 8-compile (steps 1-6 are codegen::plan, the
 * list in codegen/plan.cpp), for one direction of a program and one variant: the float type, the
 * index type and how the kernels run. They run on a variant's first call, not with the plan,
 * because each variant is different code and emitting every one up front would compile code no
 * call uses; FusedProgram keeps what they return per variant. Each step dumps what it produced
 * (core/util/dumps.h). No torch headers.
 */
#pragma once

#include <string>

#include "codegen/cuda_emitter.h"
#include "codegen/plan.h"
#include "runtime/jit/compiler.h"

namespace seastar::runtime {

struct Variant {
  bool f64 = false;           ///< double, else float
  /// float buffers in 16-bit storage, computed in float (CUDA only): none, float16, bfloat16
  enum class Half { none, f16, bf16 } half = Half::none;
  bool i64 = false;           ///< int64_t graph indices, else int32_t
  bool emulate_cuda = false;  ///< host kernels: the CUDA ones through the emulator (tests without a GPU)
  /// "f32_i32", "f64_i64", ... (+ "_cudaemu"): the dumps' and compiled objects' suffix.
  std::string name() const;
};

/// The CUDA traversals' hub degree: SEASTAR_CUDA_HUB_DEGREE, else launch::kDefaultHubDegree;
/// ValueError for a value that is not a non-negative integer.
int64_t hub_degree_setting();

/// The CUDA thread mapping's parameters: SEASTAR_CUDA_GROUP_THREADS (the most threads per item
/// below a block's width), SEASTAR_CUDA_BLOCK_THREADS, SEASTAR_CUDA_HUB_BLOCK_THREADS,
/// SEASTAR_CUDA_VECTOR_ELEMS (consecutive elements a lane reads and writes at once), each
/// launch::MappingSettings' default when unset; ValueError naming the variable for a bad value.
launch::MappingSettings mapping_settings();

/// What the emitters are told: the variant's C types and `<program>.<direction>` as the name.
codegen::EmitOptions emit_options(const std::string& program, const std::string& direction, const Variant& v);

/// 7-emit for a GPU: the plan as CUDA and its launches (codegen/cuda_emitter.cpp); dumped as
/// `<direction>.<variant>.cu`.
codegen::CudaProgram emit_cuda_variant(const codegen::FusedPlan& plan, const std::string& program,
                                       const std::string& direction, const Variant& v);

/// 7-emit for the host: the plan as C++ (codegen/cpu_emitter.cpp), or with `v.emulate_cuda` its
/// CUDA (emit_cuda_variant) inside the emulator's unit (runtime/cuda/cuda_emulator.cpp); dumped as
/// `<direction>.<variant>.cpp`.
std::string emit_host_variant(const codegen::FusedPlan& plan, const std::string& program, const std::string& direction,
                              const Variant& v);

/// 8-compile for the host: the host compiler, its disk cache, dlopen (runtime/jit/compiler.cpp).
/// CUDA is compiled by NVRTC when launch_cuda first loads a program on a device, for that
/// device's architecture (runtime/cuda/cuda_runtime.cpp, runtime/cuda/nvrtc_compiler.cpp).
CompiledKernel compile_host_variant(const std::string& source, const std::string& program,
                                    const std::string& direction, const Variant& v);

}  // namespace seastar::runtime
