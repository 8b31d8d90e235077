/** \file The host-emulated CUDA translation unit; see cuda_emulator.h. */
#include "runtime/cuda/cuda_emulator.h"

#include <cstdlib>
#include <sstream>

#include "codegen/launch_layout.h"
#include "runtime/cuda/cuda_emulator_runtime.h"
#include "runtime/jit/loaded_bindings.h"
#include "seastar_device_headers.h"  // generated: kernels/device/*.cuh and the emulator header

namespace seastar::runtime {
namespace {

constexpr int kEmulatedMaxBlocks = 2;

/// A header's text without its include guard pragma and its includes of the other helpers.
std::string body_of(const char* text) {
  std::istringstream in(text);
  std::ostringstream out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#pragma once", 0) == 0 || line.rfind("#include \"", 0) == 0) continue;
    out << line << "\n";
  }
  return out.str();
}

const char* embedded(const std::string& name) {
  for (int i = 0; i < embedded_device::num_files; ++i)
    if (name == embedded_device::files[i].name) return embedded_device::files[i].text;
  return "";
}

}  // namespace

bool cuda_emulation_requested() {
  const char* e = std::getenv("SEASTAR_CUDA_EMULATE");
  return e && *e && std::string(e) != "0";
}

std::string emulated_cuda_source(const codegen::CudaProgram& program) {
  // every emulated kernel this process loads gets the emulator's threads (its source names them
  // only through the table); registered before the first such kernel can be compiled or loaded
  static const bool bound = (bind_loaded_objects(emulator::kBindSymbol, emulator::table()), true);
  (void)bound;
  std::ostringstream out;
  out << "// Host emulation of generated CUDA (runtime/cuda/cuda_emulator.h). Do not edit.\n"
      << body_of(embedded("seastar_cuda_emulator.h"))
      << body_of(embedded("seastar_types.cuh")) << body_of(embedded("seastar_math.cuh"))
      << body_of(embedded("seastar_half.cuh"))
      << body_of(embedded("seastar_group.cuh"));
  out << body_of(program.source.c_str());
  out << launch::entry_definition()
      << "  Args a;\n  __builtin_memset(&a, 0, sizeof a);\n"
      << "  a.N = sizes[" << launch::kNumDst << "];\n  a.E = sizes[" << launch::kNumEdges << "];\n  a.NS = sizes["
      << launch::kNumSrc << "];\n"
      << "  for (int i = 0; i < " << launch::kNumGraphArrays << "; ++i) a.G[i] = G[i];\n"
      << "  for (int b = 0; b < " << program.num_buffers << "; ++b) a.B[b] = B[b];\n"
      << "  unsigned long long* counters = new unsigned long long[" << std::max(program.num_counters, 1) << "]();\n"
      << "  T* scratch = new T[" << std::max<int64_t>(program.scratch_elems, 1) << "]();\n"
      << "  a.counters = counters;\n  a.scratch = scratch;\n"
      << "  const int64_t N = a.N, E = a.E, NS = a.NS;\n  (void)N; (void)E; (void)NS;\n";
  for (const codegen::CudaLaunch& l : program.launches) {
    std::string items;
    const std::string n = l.src_side ? "NS" : "N";
    switch (l.items) {
      case codegen::CudaLaunch::Items::Vertices: items = n; break;
      case codegen::CudaLaunch::Items::Edges: items = "E"; break;
      case codegen::CudaLaunch::Items::Chunks:
        items = "sx::max<int64_t>(1, sx::min<int64_t>(" + n + ", " + std::to_string(l.count) + "))";
        break;
      case codegen::CudaLaunch::Items::Fixed: items = std::to_string(l.count); break;
    }
    out << "  { const int64_t items = " << items << ";\n"
        << "    const int64_t blocks = sx::min<int64_t>((items + " << l.mapping.groups_per_block - 1 << ") / "
        << l.mapping.groups_per_block << ", " << kEmulatedMaxBlocks << ");\n"
        << "    if (items > 0) emu::launch(" << l.name << ", (unsigned)blocks, " << l.mapping.block_threads << "u, "
        << l.shared_bytes << ", a); }\n";
  }
  out << "  delete[] counters;\n  delete[] scratch;\n}\n";
  return out.str();
}

}  // namespace seastar::runtime
