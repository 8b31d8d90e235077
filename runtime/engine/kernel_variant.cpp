/** \file Steps 6-emit and 7-compile of the back half per variant; see kernel_variant.h. */
#include "runtime/engine/kernel_variant.h"

#include <cstdlib>

#include "codegen/cpu_emitter.h"
#include "core/util/dumps.h"
#include "core/util/errors.h"
#include "runtime/cuda/cuda_emulator.h"

namespace seastar::runtime {

std::string Variant::name() const {
  const char* f = f64 ? "f64" : half == Half::f16 ? "f16" : half == Half::bf16 ? "bf16" : "f32";
  return std::string(f) + (i64 ? "_i64" : "_i32") + (emulate_cuda ? "_cudaemu" : "");
}

int64_t hub_degree_setting() {
  const char* env = std::getenv("SEASTAR_CUDA_HUB_DEGREE");
  if (!env || !*env) return launch::kDefaultHubDegree;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 0)
    SEASTAR_THROW(ValueError, "SEASTAR_CUDA_HUB_DEGREE must be a non-negative integer (0: no hub path), got '", env,
                  "'");
  return v;
}

codegen::EmitOptions emit_options(const std::string& program, const std::string& direction, const Variant& v) {
  codegen::EmitOptions o;
  o.float_type = v.f64 ? "double" : "float";
  if (v.half != Variant::Half::none) o.storage_type = v.half == Variant::Half::f16 ? "sx::half_t" : "sx::bfloat16_t";
  o.index_type = v.i64 ? "int64_t" : "int32_t";
  o.name = program + "." + direction;
  o.hub_degree = hub_degree_setting();
  return o;
}

codegen::CudaProgram emit_cuda_variant(const codegen::FusedPlan& plan, const std::string& program,
                                       const std::string& direction, const Variant& v) {
  Variant device = v;
  device.emulate_cuda = false;  // the same CUDA whoever runs it
  codegen::CudaProgram cuda = codegen::emit_cuda(plan, emit_options(program, direction, device));
  dumps::write(program, dumps::source_file(direction, device.name(), ".cu"), cuda.source);
  return cuda;
}

std::string emit_host_variant(const codegen::FusedPlan& plan, const std::string& program, const std::string& direction,
                              const Variant& v) {
  std::string source = v.emulate_cuda ? emulated_cuda_source(emit_cuda_variant(plan, program, direction, v))
                                      : codegen::emit_cpu(plan, emit_options(program, direction, v));
  dumps::write(program, dumps::source_file(direction, v.name(), ".cpp"), source);
  return source;
}

CompiledKernel compile_host_variant(const std::string& source, const std::string& program,
                                    const std::string& direction, const Variant& v) {
  return compile_cpu(source, program + "_" + direction + "_" + v.name());
}

}  // namespace seastar::runtime
