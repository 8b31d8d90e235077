/** \file Steps 7-emit and 8-compile of the back half per variant; see kernel_variant.h. */
#include "runtime/engine/kernel_variant.h"

#include <cerrno>
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

namespace {

/// The integer in environment variable `name`, or `fallback` when it is unset or empty;
/// ValueError, naming the variable and `what` it must be, for anything else.
int64_t integer_setting(const char* name, int64_t fallback, const char* what) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || errno == ERANGE || v < 0) SEASTAR_THROW(ValueError, name, " must be ", what, ", got '", env, "'");
  return v;
}

}  // namespace

int64_t hub_degree_setting() {
  return integer_setting("SEASTAR_CUDA_HUB_DEGREE", launch::kDefaultHubDegree,
                         "a non-negative integer (0: no hub path)");
}

launch::MappingSettings mapping_settings() {
  launch::MappingSettings s;
  const auto read = [](const char* name, int fallback, const char* what) {
    const int64_t v = integer_setting(name, fallback, what);
    if (v > launch::kMaxBlockThreads) SEASTAR_THROW(ValueError, name, " must be ", what, ", got ", v);
    return static_cast<int>(v);
  };
  s.max_group_threads = read("SEASTAR_CUDA_GROUP_THREADS", s.max_group_threads, "a power of two from 1 to 32");
  s.block_threads = read("SEASTAR_CUDA_BLOCK_THREADS", s.block_threads, "a multiple of 32 from 32 to 1024");
  s.hub_block_threads = read("SEASTAR_CUDA_HUB_BLOCK_THREADS", s.hub_block_threads, "a multiple of 32 from 64 to 1024");
  s.vector_elems = read("SEASTAR_CUDA_VECTOR_ELEMS", s.vector_elems, "1, 2 or 4");
  const std::string bad = launch::mapping_settings_error(s);
  if (!bad.empty()) SEASTAR_THROW(ValueError, bad);
  return s;
}

codegen::EmitOptions emit_options(const std::string& program, const std::string& direction, const Variant& v) {
  codegen::EmitOptions o;
  o.float_type = v.f64 ? "double" : "float";
  if (v.half != Variant::Half::none) o.storage_type = v.half == Variant::Half::f16 ? "sx::half_t" : "sx::bfloat16_t";
  o.index_type = v.i64 ? "int64_t" : "int32_t";
  o.name = program + "." + direction;
  o.hub_degree = hub_degree_setting();
  o.mapping = mapping_settings();
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
