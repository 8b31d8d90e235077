/** \file Launch glue of FusedProgram: checks tensors, allocates buffers, calls the kernels. */
#include "runtime/engine/fused_program.h"

#include <torch/types.h>

#include <algorithm>

#include "codegen/launch_layout.h"
#include "core/util/errors.h"
#include "core/util/log.h"
#include "runtime/cuda/cuda_emulator.h"
#include "runtime/engine/kernel_variant.h"
#include "runtime/cpu/torch_threads.h"
#include "runtime/cpu/worker_pool.h"
#ifdef SEASTAR_WITH_CUDA
#include "runtime/cuda/cuda_runtime.h"
#endif

namespace seastar {

FusedProgram::FusedProgram(LoweredProgram lowered) : lowered_(std::move(lowered)) {
  unsupported_ = codegen::unsupported_reason(lowered_.forward);
  if (unsupported_.empty() && !lowered_.wrt.empty()) unsupported_ = codegen::unsupported_reason(lowered_.backward);
  if (!unsupported_.empty()) return;
  fwd_.plan = codegen::plan(lowered_.forward, lowered_.bipartite, {lowered_.name, false});
  if (!lowered_.wrt.empty()) bwd_.plan = codegen::plan(lowered_.backward, lowered_.bipartite, {lowered_.name, true});
  // which graph arrays each direction's kernels read: asked of the graph on every call
  for (Side* side : {&fwd_, &bwd_}) {
    side->coo = std::any_of(side->plan.kernels.begin(), side->plan.kernels.end(),
                            [](const codegen::Kernel& k) { return k.kind == codegen::Kernel::Kind::EdgeMap; });
    side->out_edges = codegen::reads_out_edges(side->plan);
  }
}

bool FusedProgram::backward_reads(const std::string& name) const {
  if (lowered_.wrt.empty()) return false;
  if (!unsupported_.empty()) return true;
  for (const codegen::Buffer& b : bwd_.plan.buffers)
    if (b.role == codegen::Buffer::Role::Input && b.name == name) return true;
  return false;
}

namespace {

/// The buffer alignment of the emulated CUDA kernels: the widest vector access (16 bytes).
constexpr int64_t kEmulatedAlignment = 16;

/// Whether `t`'s address is not a multiple of `alignment` bytes (0: nothing is misaligned).
bool misaligned(const torch::Tensor& t, int64_t alignment) {
  return alignment > 1 && reinterpret_cast<uintptr_t>(t.data_ptr()) % static_cast<uintptr_t>(alignment) != 0;
}

runtime::Variant variant_of(torch::ScalarType dtype, torch::ScalarType index_dtype, bool emulate_cuda = false) {
  runtime::Variant v;
  v.f64 = dtype == torch::kDouble;
  v.half = dtype == torch::kHalf       ? runtime::Variant::Half::f16
           : dtype == torch::kBFloat16 ? runtime::Variant::Half::bf16
                                       : runtime::Variant::Half::none;
  v.i64 = index_dtype != torch::kInt;
  v.emulate_cuda = emulate_cuda;
  return v;
}

/// The float type and device of a call: every bound float tensor agrees (a backward that reads no
/// inputs, a linear program's, takes its gradients'); both supported by this build.
std::pair<torch::ScalarType, torch::Device> call_types(const std::string& prog,
                                                       const std::map<std::string, torch::Tensor>& inputs,
                                                       const std::vector<torch::Tensor>& grad_outputs) {
  torch::ScalarType dtype = torch::kFloat;
  torch::Device device = torch::kCPU;
  bool first = true;
  for (const auto& [name, t] : inputs) {
    if (!t.defined()) SEASTAR_THROW(ValueError, prog, ": '", name, "' is an undefined tensor");
    const bool half = t.scalar_type() == torch::kHalf || t.scalar_type() == torch::kBFloat16;
    if (t.scalar_type() != torch::kFloat && t.scalar_type() != torch::kDouble && !half)
      SEASTAR_THROW(TypeError, prog, ": '", name, "' must be float32, float64, float16 or bfloat16, got ",
                    t.scalar_type());
    // 16-bit tensors are storage for the CUDA kernels, which compute in float32; the C++ kernels
    // have no such path (the emulator of the CUDA ones does, for tests)
    if (half && !t.is_cuda() && !runtime::cuda_emulation_requested())
      SEASTAR_THROW(TypeError, prog, ": '", name, "' is ", t.scalar_type(),
                    " on the CPU; 16-bit inputs run on CUDA devices (float32 accumulation). "
                    "On the CPU, pass float32 (x.float())");
    if (!first && t.scalar_type() != dtype)
      SEASTAR_THROW(TypeError, prog, ": inputs mix float types ('", name, "' is ", t.scalar_type(), ", another input ",
                    dtype, ")");
    if (!first && t.device() != device)
      SEASTAR_THROW(ValueError, prog, ": inputs are on different devices ('", name, "' is on ", t.device(),
                    ", another input on ", device, ")");
    dtype = t.scalar_type();
    device = t.device();
    first = false;
  }
  if (first) {
    for (const torch::Tensor& t : grad_outputs)
      if (t.defined()) {
        dtype = t.scalar_type();
        device = t.device();
        break;
      }
  }
  if (!device.is_cpu() && !device.is_cuda())
    SEASTAR_THROW(NotImplementedError, prog, ": ", other_device_refusal(device.str()));
#ifndef SEASTAR_WITH_CUDA
  if (device.is_cuda()) SEASTAR_THROW(NotImplementedError, prog, ": ", no_cuda_build_refusal(device.str()));
#endif
  return {dtype, device};
}

/// The graph's index arrays in the kernels' slots (codegen/launch_layout.h).
void fill_graph_arrays(const DeviceGraph& dg, bool coo, void* (&graph_arrays)[launch::kNumGraphArrays]) {
  auto ptr = [](const torch::Tensor& t) -> void* { return t.defined() ? t.data_ptr() : nullptr; };
  graph_arrays[launch::kInPtr] = ptr(dg.in.ptr), graph_arrays[launch::kInNbr] = ptr(dg.in.nbr);
  graph_arrays[launch::kInEid] = ptr(dg.in.eid), graph_arrays[launch::kInOrder] = ptr(dg.in.degree_order);
  graph_arrays[launch::kOutPtr] = ptr(dg.out.ptr), graph_arrays[launch::kOutNbr] = ptr(dg.out.nbr);
  graph_arrays[launch::kOutEid] = ptr(dg.out.eid), graph_arrays[launch::kOutOrder] = ptr(dg.out.degree_order);
  graph_arrays[launch::kSrc] = coo ? ptr(dg.src) : nullptr, graph_arrays[launch::kDst] = coo ? ptr(dg.dst) : nullptr;
  graph_arrays[launch::kNodeType] = ptr(dg.node_type), graph_arrays[launch::kEdgeType] = ptr(dg.edge_type);
}

}  // namespace

std::string other_device_refusal(const std::string& devices) {
  return "the fused backend runs CPU and CUDA tensors, not " + devices;
}

std::string no_cuda_build_refusal(const std::string& device) {
  return "the tensors are on " + device +
         " but this build of Seastar has no CUDA backend (it was built without the CUDA toolkit); rebuild with "
         "the toolkit installed, move the tensors to the CPU, or use backend='reference'";
}

std::string FusedProgram::source(const std::string& direction, torch::ScalarType dtype, torch::ScalarType index_dtype) {
  if (!unsupported_.empty()) SEASTAR_THROW(NotImplementedError, unsupported_);
  const Side& side = direction == "forward" ? fwd_ : bwd_;
  return runtime::emit_host_variant(side.plan, lowered_.name, direction, variant_of(dtype, index_dtype));
}

const codegen::CudaProgram& FusedProgram::cuda_program(const std::string& direction, torch::ScalarType dtype,
                                                       torch::ScalarType index_dtype) {
  if (!unsupported_.empty()) SEASTAR_THROW(NotImplementedError, unsupported_);
  if (direction != "forward" && direction != "backward")
    SEASTAR_THROW(ValueError, "direction must be 'forward' or 'backward', got '", direction, "'");
  Side& side = direction == "forward" ? fwd_ : bwd_;
  std::lock_guard<std::mutex> lock(cuda_mutex_);
  const runtime::Variant variant = variant_of(dtype, index_dtype);
  auto it = side.cuda.find(variant.name());
  if (it == side.cuda.end())  // 7-emit (runtime/engine/kernel_variant.h); NVRTC compiles it at launch
    it = side.cuda.emplace(variant.name(), runtime::emit_cuda_variant(side.plan, lowered_.name, direction, variant)).first;
  return it->second;
}

std::vector<torch::Tensor> FusedProgram::forward(const Graph& g, const std::map<std::string, torch::Tensor>& inputs) {
  return launch(fwd_, "forward", g, inputs, {});
}

std::vector<torch::Tensor> FusedProgram::backward(const Graph& g, const std::map<std::string, torch::Tensor>& inputs,
                                                  const std::vector<torch::Tensor>& grad_outputs) {
  if (lowered_.wrt.empty()) return {};
  return launch(bwd_, "backward", g, inputs, grad_outputs);
}

std::vector<void*> FusedProgram::bind_buffers(const codegen::FusedPlan& plan, const Graph& g,
                                              const std::map<std::string, torch::Tensor>& inputs,
                                              const std::vector<torch::Tensor>& grad_outputs, torch::ScalarType dtype,
                                              torch::Device device, runtime::ScratchLease& scratch,
                                              int64_t alignment, std::vector<torch::Tensor>& keep,
                                              std::vector<torch::Tensor>& outputs) {
  const std::string& prog = lowered_.name;
  const int64_t N = g.num_dst(), E = g.num_edges(), NS = g.num_src();
  const auto options = torch::TensorOptions().device(device);
  std::vector<void*> buffers(plan.buffers.size(), nullptr);
  // a buffer's element type: int64, the call's float type, or float32 where the kernels keep the
  // compute type under 16-bit storage
  const bool half = dtype == torch::kHalf || dtype == torch::kBFloat16;
  auto type_of = [&](const codegen::Buffer& buf) {
    return buf.is_int ? torch::kLong : buf.compute_type && half ? torch::kFloat : dtype;
  };
  keep.assign(plan.buffers.size(), torch::Tensor());
  outputs.assign(plan.module.outputs.size(), torch::Tensor());
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const codegen::Buffer& buf = plan.buffers[b];
    const ir::Value& v = plan.module.at(buf.value);
    const int64_t vertex_rows = buf.side == ir::Group::Src ? NS : N;
    const int64_t rows = buf.rows == ir::Space::Vertex ? vertex_rows : (buf.rows == ir::Space::Edge ? E : 1);
    // sized up front: growing it with insert() makes GCC 12 report a false -Wstringop-overflow
    const size_t lead = buf.rows != ir::Space::Param ? 1 : 0;
    std::vector<int64_t> full(lead + v.shape.size());
    if (lead) full[0] = rows;
    std::copy(v.shape.begin(), v.shape.end(), full.begin() + lead);
    torch::Tensor t;
    if (buf.role == codegen::Buffer::Role::Input || buf.role == codegen::Buffer::Role::GradOutput) {
      if (buf.role == codegen::Buffer::Role::Input) {
        auto it = inputs.find(buf.name);
        if (it == inputs.end()) SEASTAR_THROW(ValueError, prog, ": input '", buf.name, "' is not bound");
        t = it->second;
      } else {
        if (buf.index >= static_cast<int>(grad_outputs.size()))
          SEASTAR_THROW(ValueError, prog, ": missing gradient of output ", buf.index);
        t = grad_outputs[buf.index].defined() ? grad_outputs[buf.index] : torch::zeros(full, options.dtype(dtype));
        t = t.to(device, dtype);
      }
      if (t.sizes().vec() != full) {
        if (t.numel() == ir::numel(full) && buf.role == codegen::Buffer::Role::GradOutput) {
          t = t.reshape(full);
        } else {
          SEASTAR_THROW(ValueError, prog, ": '", buf.name.empty() ? "grad_output" : buf.name, "' has shape ",
                        t.sizes(), " but the program (and the graph: ",
                        g.is_bipartite() ? "num_src=" + std::to_string(NS) + ", num_dst=" + std::to_string(N)
                                         : "N=" + std::to_string(N),
                        ", E=", E, ") needs ",
                        c10::IntArrayRef(full));
        }
      }
      t = t.contiguous();
      if (misaligned(t, alignment)) t = t.clone();  // a fresh allocation: aligned
    } else if (buf.role == codegen::Buffer::Role::Intermediate && device.is_cpu()) {
      t = scratch.take(full, type_of(buf));
      if (misaligned(t, alignment)) t = torch::empty(full, options.dtype(type_of(buf)));
    } else {
      t = torch::empty(full, options.dtype(type_of(buf)));
      if (buf.role == codegen::Buffer::Role::Output) outputs[buf.index] = t;
    }
    keep[b] = t;
    buffers[b] = t.data_ptr();
  }

  return buffers;
}

runtime::CompiledKernel FusedProgram::cpu_kernel(Side& side, const std::string& direction, torch::ScalarType dtype,
                                                 torch::ScalarType index_dtype) {
  // SEASTAR_CUDA_EMULATE=1: the CUDA kernels, run by the host emulator (tests without a GPU)
  const runtime::Variant variant = variant_of(dtype, index_dtype, runtime::cuda_emulation_requested());
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = side.compiled.find(variant.name());
  if (it == side.compiled.end()) {  // 7-emit, 8-compile (runtime/engine/kernel_variant.h)
    const std::string src = runtime::emit_host_variant(side.plan, lowered_.name, direction, variant);
    it = side.compiled.emplace(variant.name(), runtime::compile_host_variant(src, lowered_.name, direction, variant)).first;
  }
  return it->second;
}

std::vector<torch::Tensor> FusedProgram::launch(Side& side, const std::string& direction, const Graph& g,
                                                const std::map<std::string, torch::Tensor>& inputs,
                                                const std::vector<torch::Tensor>& grad_outputs) {
  if (!unsupported_.empty()) SEASTAR_THROW(NotImplementedError, unsupported_);
  const std::string& prog = lowered_.name;
  if (g.is_bipartite() != lowered_.bipartite)
    SEASTAR_THROW(ValueError, prog, ": lowered for a ", lowered_.bipartite ? "bipartite" : "square",
                  " graph but called with a ", g.is_bipartite() ? "bipartite" : "square", " one");
  // destinations, edges, sources: the vertex sets of a bipartite graph (equal when square)
  const int64_t N = g.num_dst(), E = g.num_edges(), NS = g.num_src();
  const auto [dtype, device] = call_types(prog, inputs, grad_outputs);
  const DeviceGraph& dg = g.on(device, side.coo, side.out_edges);  // arrays a graph builds on first use

  runtime::ScratchLease scratch(scratch_);  // intermediates of CPU calls, back to the pool at the end
  std::vector<torch::Tensor> keep, outputs;
  // CUDA kernels that read vectors need aligned buffers; the emulator's always get them, so
  // that the host compiler may use aligned instructions too
  int64_t alignment = runtime::cuda_emulation_requested() ? kEmulatedAlignment : 0;
#ifdef SEASTAR_WITH_CUDA
  // looked up once a call: each lookup takes the program mutex (the map's references stay valid)
  const codegen::CudaProgram* cuda = device.is_cuda() ? &cuda_program(direction, dtype, dg.index_dtype) : nullptr;
  if (cuda) alignment = cuda->buffer_alignment;
#endif
  std::vector<void*> buffers =
      bind_buffers(side.plan, g, inputs, grad_outputs, dtype, device, scratch, alignment, keep, outputs);
  void* graph_arrays[launch::kNumGraphArrays];
  fill_graph_arrays(dg, side.coo, graph_arrays);
  if (device.is_cuda()) {
#ifdef SEASTAR_WITH_CUDA
    runtime::launch_cuda(*cuda, prog + "_" + direction + "_" + variant_of(dtype, dg.index_dtype).name(), device.index(), N, E, NS,
                         graph_arrays, buffers.data());
#endif
    return outputs;
  }
  const runtime::CompiledKernel kernel = cpu_kernel(side, direction, dtype, dg.index_dtype);
  int64_t sizes[launch::kNumSizes];
  sizes[launch::kNumDst] = N, sizes[launch::kNumEdges] = E, sizes[launch::kNumSrc] = NS;
  runtime::set_kernel_threads(runtime::launch_threads());  // torch.set_num_threads (and the governor) apply to the kernels too
  kernel.entry(sizes, graph_arrays, buffers.data());
  return outputs;
}

}  // namespace seastar
