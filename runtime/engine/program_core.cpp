/** \file ProgramCore and Signature: the trace cache, the call checks, the binding; see program_core.h. */
#include "runtime/engine/program_core.h"

#include <set>
#include <sstream>

#include "core/passes/passes.h"
#include "core/util/errors.h"
#include "runtime/engine/autograd.h"
#include "runtime/cuda/cuda_emulator.h"
#include "runtime/engine/fused_program.h"

namespace seastar {
namespace {

bool is_dst_view(const std::string& name) { return name.rfind(passes::kDstSuffix) != std::string::npos; }

std::string base_name(const std::string& name) { return name.substr(0, name.rfind(passes::kDstSuffix)); }

/// ['a', 'b']: how Python prints a sorted list of strings, so messages read alike from both ends.
std::string list_text(const std::set<std::string>& items) {
  std::string s = "[";
  for (const std::string& i : items) s += (s.size() > 1 ? ", '" : "'") + i + "'";
  return s + "]";
}

std::string key_of(const Graph& graph, const TensorInfos& infos) {
  std::ostringstream key;
  for (const auto& [name, t] : infos) {
    key << name << ':' << t.shape.size() << ':';
    for (size_t i = 1; i < t.shape.size(); ++i) key << t.shape[i] << ',';
    key << ':' << static_cast<int>(t.dtype) << ':' << t.requires_grad << ';';
  }
  const GraphData& d = graph.data();
  key << '|' << d.is_bipartite() << d.has_node_types() << d.has_edge_types() << ':' << d.types().num_node_types << ':'
      << d.types().num_edge_types;
  return key.str();
}

void collect_inputs(const ir::Module& m, std::map<std::string, ir::Op>& used) {
  for (const ir::Value& v : m.values)
    if (v.op == ir::Op::input_vertex || v.op == ir::Op::input_edge || v.op == ir::Op::param) used.emplace(v.name, v.op);
}

}  // namespace

TensorInfo TensorInfo::of(const torch::Tensor& t) {
  TensorInfo i;
  i.shape = t.sizes().vec();
  i.dtype = t.scalar_type();
  i.device = t.device();
  i.requires_grad = t.requires_grad();
  i.strided = t.layout() == torch::kStrided;
  return i;
}

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::BFloat16: return "torch.bfloat16";
    case c10::ScalarType::Long: return "torch.int64";
    case c10::ScalarType::Int: return "torch.int32";
    case c10::ScalarType::Short: return "torch.int16";
    case c10::ScalarType::Char: return "torch.int8";
    case c10::ScalarType::Byte: return "torch.uint8";
    case c10::ScalarType::Bool: return "torch.bool";
    case c10::ScalarType::ComplexFloat: return "torch.complex64";
    case c10::ScalarType::ComplexDouble: return "torch.complex128";
    default: return std::string("torch.") + c10::toString(dtype);
  }
}

// ---- Signature ----------------------------------------------------------------------------------

Signature::Signature(LoweredProgram lowered, const ir::Module& traced, const TensorInfos& infos)
    : lowered_(std::move(lowered)) {
  collect_inputs(lowered_.forward, used_as_);
  collect_inputs(lowered_.backward, used_as_);
  for (const auto& kv : used_as_) names_.push_back(kv.first);
  // every traced parameter, even one simplify removed: its shape shaped the trace
  for (const ir::Value& v : traced.values)
    if (v.op == ir::Op::param && infos.count(v.name)) param_shapes_[v.name] = infos.at(v.name).shape;
}

bool Signature::fits(const TensorInfos& infos) const {
  for (const auto& [name, shape] : param_shapes_) {
    auto it = infos.find(name);
    if (it == infos.end() || it->second.shape != shape) return false;
  }
  return true;
}

void Signature::check(const std::string& prog, const Graph& graph, const TensorInfos& infos) const {
  std::set<c10::ScalarType> dtypes;
  std::set<std::string> devices;
  for (const auto& [name, op] : used_as_) {
    if (is_dst_view(name)) {
      if (graph.data().sources_global())
        SEASTAR_THROW(ValueError, prog, ": '", base_name(name), "' is read at both sources and destinations, but this "
                      "block's sources are global vertex ids (destination i is not source i): pass the destinations' "
                      "rows as a separate tensor, or use the block with local ids (Graph.local_block)");
      if (graph.num_dst() > graph.num_src())
        SEASTAR_THROW(ValueError, prog, ": '", base_name(name), "' is read at both sources and destinations, which ",
                      "needs every destination to be a source (num_dst=", graph.num_dst(),
                      " <= num_src=", graph.num_src(), ")");
      continue;  // otherwise a view of a checked input
    }
    const TensorInfo& t = infos.at(name);
    if (!c10::isFloatingType(t.dtype))
      SEASTAR_THROW(TypeError, prog, ": '", name, "' must be a floating-point tensor, got ", dtype_name(t.dtype));
    if (!t.strided) SEASTAR_THROW(TypeError, prog, ": '", name, "' must be a dense (strided) tensor");
    dtypes.insert(t.dtype);
    devices.insert(t.device.str());
    if (op != ir::Op::param && t.shape.empty())
      SEASTAR_THROW(ValueError, prog, ": '", name, "' is a 0-dimensional tensor but is read per ",
                    op == ir::Op::input_vertex ? "vertex" : "edge", " (its first axis must be the rows)");
    const int64_t rows = t.shape.empty() ? 0 : t.shape[0];
    if (op == ir::Op::input_vertex) {
      auto side = lowered_.vertex_inputs.find(name);
      const bool src = side != lowered_.vertex_inputs.end() && side->second == ir::Group::Src;
      const int64_t want = src ? graph.num_src() : graph.num_dst();
      if (rows != want)
        SEASTAR_THROW(ValueError, prog, ": '", name, "' has ", rows, " rows but the graph has ", want,
                      !graph.is_bipartite() ? " vertices" : src ? " sources" : " destinations");
    }
    if (op == ir::Op::input_edge && rows != graph.num_edges())
      SEASTAR_THROW(ValueError, prog, ": '", name, "' has ", rows, " rows but the graph has ", graph.num_edges(),
                    " edges");
  }
  if (dtypes.size() > 1) {
    std::set<std::string> names;
    for (auto d : dtypes) names.insert(dtype_name(d));
    SEASTAR_THROW(TypeError, prog, ": inputs mix dtypes ", list_text(names), "; convert them to one");
  }
  if (devices.size() > 1) SEASTAR_THROW(ValueError, prog, ": inputs are on different devices ", list_text(devices));
}

std::string Signature::unsupported(const TensorInfos& infos) const {
  std::set<std::string> other_devices, other_dtypes, cpu_half;
  bool cuda = false;
  for (const auto& [name, t] : infos) {
    if (t.device.is_cuda()) cuda = true;
    else if (!t.device.is_cpu()) other_devices.insert(c10::DeviceTypeName(t.device.type(), /*lower_case=*/true));
    const bool half = t.dtype == c10::ScalarType::Half || t.dtype == c10::ScalarType::BFloat16;
    // 16-bit tensors are storage of the CUDA kernels (float32 accumulation), or of their emulator
    if (half && !t.device.is_cuda() && !runtime::cuda_emulation_requested()) cpu_half.insert(dtype_name(t.dtype));
    else if (c10::isFloatingType(t.dtype) && t.dtype != c10::ScalarType::Float && t.dtype != c10::ScalarType::Double &&
             !half)
      other_dtypes.insert(dtype_name(t.dtype));
  }
  if (!other_devices.empty()) return other_device_refusal(list_text(other_devices));
  if (!other_dtypes.empty())
    return "the fused kernels compute in float32 and float64 (and read float16/bfloat16 on CUDA devices), not " +
           list_text(other_dtypes);
  if (!cpu_half.empty())
    return "the fused C++ kernels compute in float32 and float64; " + list_text(cpu_half) +
           " inputs run in the CUDA kernels (float32 accumulation), so on the CPU pass float32";
#ifndef SEASTAR_WITH_CUDA
  if (cuda) return no_cuda_build_refusal("a CUDA device");
#else
  (void)cuda;
#endif
  return kernels()->unsupported();
}

std::vector<torch::Tensor> Signature::bind(const Graph& graph, const Tensors& tensors) const {
  std::vector<torch::Tensor> out;
  out.reserve(names_.size());
  for (const std::string& n : names_) {
    if (!is_dst_view(n)) {
      out.push_back(tensors.at(n));
      continue;
    }
    const torch::Tensor& t = tensors.at(base_name(n));
    if (graph.num_dst() > t.size(0))
      SEASTAR_THROW(ValueError, lowered_.name, ": '", base_name(n), "' has ", t.size(0), " rows, fewer than the ",
                    graph.num_dst(), " destinations it is read at");
    out.push_back(t.narrow(0, 0, graph.num_dst()));
  }
  return out;
}

const std::shared_ptr<FusedProgram>& Signature::kernels() const {
  std::call_once(planned_, [&] { kernels_ = std::make_shared<FusedProgram>(lowered_); });
  return kernels_;
}

std::vector<torch::Tensor> Signature::run(const Graph& graph, const Tensors& tensors) const {
  return apply_fused(kernels(), graph, names_, bind(graph, tensors));
}

// ---- ProgramCore --------------------------------------------------------------------------------

std::shared_ptr<const Signature> ProgramCore::signature(const Graph& graph, const TensorInfos& infos,
                                                        const Tracer& trace) {
  if (!graph.defined()) SEASTAR_THROW(ValueError, name_, ": the graph is undefined (a default-constructed Graph)");
  const std::string key = key_of(graph, infos);
  std::lock_guard<std::mutex> lock(mutex_);
  auto& entries = cache_[key];
  for (const auto& s : entries)
    if (s->fits(infos)) return s;
  ir::Module traced = trace();
  std::vector<std::string> wrt;
  for (const auto& [name, t] : infos)
    if (t.requires_grad) wrt.push_back(name);
  auto made = std::make_shared<const Signature>(seastar::lower(traced, wrt, name_, graph.is_bipartite()), traced, infos);
  entries.push_back(made);
  ++num_traces_;
  return made;
}

PreparedCall ProgramCore::prepare(const Graph& graph, const TensorInfos& infos, const Tracer& trace) {
  PreparedCall call;
  call.signature = signature(graph, infos, trace);
  try {
    call.signature->check(name_, graph, infos);
  } catch (const ValueError&) {
    call.misfit = std::current_exception();
    return call;
  } catch (const TypeError&) {
    call.misfit = std::current_exception();
    return call;
  }
  call.unsupported = call.signature->unsupported(infos);
  return call;
}

TensorInfos infos_of(const Tensors& tensors) {
  TensorInfos infos;
  for (const auto& [name, t] : tensors) infos.emplace(name, TensorInfo::of(t));
  return infos;
}

CallResult ProgramCore::call(const Graph& graph, const Tensors& tensors, const Tracer& trace, bool use_fused) {
  return run_prepared(prepare(graph, infos_of(tensors), trace), graph, tensors, use_fused);
}

CallResult ProgramCore::run_prepared(PreparedCall prepared, const Graph& graph, const Tensors& tensors,
                                     bool use_fused) {
  CallResult result;
  result.prepared = std::move(prepared);
  if (result.prepared.misfit || !result.prepared.unsupported.empty() || !use_fused) return result;
  result.outputs = result.prepared.signature->run(graph, tensors);
  result.ran = true;
  return result;
}

size_t ProgramCore::num_traces() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_traces_;
}

}  // namespace seastar
