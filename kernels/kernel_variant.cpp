/** \file Steps 6-emit and 7-compile of the back half per variant; see kernel_variant.h. */
#include "kernels/kernel_variant.h"

#include "codegen/cpu_emitter.h"
#include "core/util/dumps.h"
#include "kernels/cuda_emulator.h"

namespace seastar::kernels {

std::string Variant::name() const {
  return std::string(f64 ? "f64" : "f32") + (i64 ? "_i64" : "_i32") + (emulate_cuda ? "_cudaemu" : "");
}

codegen::EmitOptions emit_options(const std::string& program, const std::string& direction, const Variant& v) {
  codegen::EmitOptions o;
  o.float_type = v.f64 ? "double" : "float";
  o.index_type = v.i64 ? "int64_t" : "int32_t";
  o.name = program + "." + direction;
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

}  // namespace seastar::kernels
