/** \file Program: trace per signature, lower, run fused with autograd; see program.h. */
#include "kernels/program.h"

#include <torch/torch.h>

#include <mutex>
#include <set>
#include <sstream>

#include "core/passes/passes.h"
#include "core/util/errors.h"
#include "kernels/autograd.h"
#include "kernels/fused_program.h"

namespace seastar {

struct Program::Impl {
  MultiFn fn;
  std::string name;
  std::mutex mutex;
  // signature -> the compiled traces of that signature, told apart by their parameters' full
  // shapes; entries are immutable once inserted (FusedProgram locks itself)
  std::map<std::string, std::vector<std::shared_ptr<const Compiled>>> cache;
  size_t num_traces = 0;
};

struct Program::Compiled {
  std::shared_ptr<FusedProgram> fused;
  /// The bound tensors the program reads (forward or backward), sorted: what apply_fused gets.
  /// A name `x@dst` (bipartite graphs) is bound to the first num_dst rows of `x`.
  std::vector<std::string> names;
  /// How each of them is used: its op (input_vertex, input_edge or param).
  std::map<std::string, ir::Op> used_as;
  /// The full shape of every tensor bound as a parameter (its rows are not vertices or edges).
  std::map<std::string, std::vector<int64_t>> param_shapes;

  bool fits(const Program::Tensors& tensors) const {
    for (const auto& [name, shape] : param_shapes) {
      auto it = tensors.find(name);
      if (it == tensors.end() || it->second.sizes().vec() != shape) return false;
    }
    return true;
  }
};

namespace {

/// The trace-cache key, as python/seastar/program.py: every bound tensor's name, feature shape
/// (its shape without the first axis), dtype and requires_grad, and the graph's kind and type
/// signature. Vertex and edge counts never enter it, so every mini-batch reuses one trace;
/// parameters, whose first axis is not a row count, are told apart by Compiled::fits.
std::string signature(const Graph& graph, const Program::Tensors& tensors) {
  std::ostringstream key;
  for (const auto& [name, t] : tensors) {
    key << name << ':' << t.dim() << ':' << (t.dim() > 0 ? t.sizes().slice(1) : t.sizes()) << ':' << t.scalar_type()
        << ':' << t.requires_grad() << ';';
  }
  const GraphData& d = graph.data();
  key << "|" << d.is_bipartite() << d.has_node_types() << d.has_edge_types() << ':' << d.types().num_node_types << ':'
      << d.types().num_edge_types;
  return key.str();
}

/// The tensor bound to `name`: `x@dst` is a view of x's first num_dst rows (no copy).
torch::Tensor bound_tensor(const std::string& prog, const Graph& graph, const Program::Tensors& tensors,
                           const std::string& name) {
  const size_t at = name.rfind(passes::kDstSuffix);
  if (at == std::string::npos) return tensors.at(name);
  const std::string base = name.substr(0, at);
  const torch::Tensor& t = tensors.at(base);
  if (graph.num_dst() > graph.num_src())
    SEASTAR_THROW(ValueError, prog, ": '", base, "' is read at both sources and destinations, which needs every ",
                  "destination to be a source (num_dst=", graph.num_dst(), " <= num_src=", graph.num_src(), ")");
  return t.narrow(0, 0, graph.num_dst());
}

void collect_inputs(const ir::Module& m, std::map<std::string, ir::Op>& used) {
  for (const ir::Value& v : m.values)
    if (v.op == ir::Op::input_vertex || v.op == ir::Op::input_edge || v.op == ir::Op::param) used.emplace(v.name, v.op);
}

void check_call(const std::string& prog, const Graph& graph, const Program::Tensors& tensors) {
  if (!graph.defined()) SEASTAR_THROW(ValueError, prog, ": the graph is undefined (a default-constructed Graph)");
  for (const auto& [name, t] : tensors)
    if (!t.defined()) SEASTAR_THROW(ValueError, prog, ": '", name, "' is an undefined tensor");
}

/// Row counts, dtypes, layouts and devices of the tensors the program reads (Python's
/// _check_inputs), with messages that name the tensor.
void check_inputs(const std::string& prog, const std::map<std::string, ir::Op>& used,
                  const std::map<std::string, ir::Group>& sides, const Graph& graph, const Program::Tensors& tensors) {
  std::set<c10::ScalarType> dtypes;
  std::set<std::string> devices;
  for (const auto& [name, op] : used) {
    if (name.rfind(passes::kDstSuffix) != std::string::npos) continue;  // a view of a checked input
    const torch::Tensor& t = tensors.at(name);
    if (!t.is_floating_point())
      SEASTAR_THROW(TypeError, prog, ": '", name, "' must be a floating-point tensor, got ", t.scalar_type());
    if (t.layout() != torch::kStrided)
      SEASTAR_THROW(TypeError, prog, ": '", name, "' must be a dense (strided) tensor, got layout ", t.layout());
    dtypes.insert(t.scalar_type());
    devices.insert(t.device().str());
    if (op == ir::Op::input_vertex) {
      auto side = sides.find(name);
      const bool src = side != sides.end() && side->second == ir::Group::Src;
      const int64_t rows = src ? graph.num_src() : graph.num_dst();
      if (t.size(0) != rows)
        SEASTAR_THROW(ValueError, prog, ": '", name, "' has ", t.size(0), " rows but the graph has ", rows,
                      !graph.is_bipartite() ? " vertices" : src ? " sources" : " destinations");
    }
    if (op == ir::Op::input_edge && t.size(0) != graph.num_edges())
      SEASTAR_THROW(ValueError, prog, ": '", name, "' has ", t.size(0), " rows but the graph has ", graph.num_edges(),
                    " edges");
  }
  if (dtypes.size() > 1) {
    std::ostringstream os;
    for (auto d : dtypes) os << (os.tellp() ? ", " : "") << d;
    SEASTAR_THROW(TypeError, prog, ": inputs mix dtypes [", os.str(), "]; convert them to one");
  }
  if (devices.size() > 1) {
    std::string s;
    for (const auto& d : devices) s += (s.empty() ? "" : ", ") + d;
    SEASTAR_THROW(ValueError, prog, ": inputs are on different devices [", s, "]");
  }
}

}  // namespace

Program::Program(Fn fn, std::string name) : impl_(std::make_shared<Impl>()) {
  if (!fn) SEASTAR_THROW(ValueError, "seastar::Program '", name, "': the vertex function is empty");
  impl_->fn = [fn = std::move(fn)](Vertex& v) { return std::vector<Var>{fn(v)}; };
  impl_->name = std::move(name);
}

Program::Program(MultiFn fn, std::string name) : impl_(std::make_shared<Impl>()) {
  if (!fn) SEASTAR_THROW(ValueError, "seastar::Program '", name, "': the vertex function is empty");
  impl_->fn = std::move(fn);
  impl_->name = std::move(name);
}

const std::string& Program::name() const { return impl_->name; }

size_t Program::num_traces() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->num_traces;
}

ir::Module Program::trace(const Graph& graph, const Tensors& tensors) const {
  check_call(impl_->name, graph, tensors);
  std::map<std::string, TensorSig> sigs;
  for (const auto& [name, t] : tensors) sigs.emplace(name, TensorSig(t.sizes().vec()));
  const GraphData& d = graph.data();
  GraphSig gs;
  gs.has_node_types = d.has_node_types();
  gs.has_edge_types = d.has_edge_types();
  gs.num_node_types = d.types().num_node_types;
  gs.num_edge_types = d.types().num_edge_types;

  Builder b(std::move(sigs), gs);
  // C++ has no portable way to learn the caller's line inside operator overloads, so errors
  // name the program instead.
  b.set_loc(ir::Loc{"<C++ program " + impl_->name + ">", 0});
  Vertex v(&b);
  std::vector<Var> outs;
  try {
    outs = impl_->fn(v);
  } catch (const TraceError&) {
    throw;
  } catch (const Error& e) {  // e.g. an undefined Var used in an expression
    b.fail(e.what());
  }
  for (size_t i = 0; i < outs.size(); ++i)
    if (!outs[i].defined() || outs[i].builder() != &b)
      b.fail("output " + std::to_string(i) + " of '" + impl_->name +
             "' is not a value traced from this call's vertex v (a default-constructed or stale Var)");
  return b.finish(outs);
}

std::shared_ptr<const Program::Compiled> Program::compiled(const Graph& graph, const Tensors& tensors) const {
  check_call(impl_->name, graph, tensors);
  const std::string key = signature(graph, tensors);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto& entries = impl_->cache[key];
  for (const auto& c : entries)
    if (c->fits(tensors)) return c;

  ir::Module module = trace(graph, tensors);
  std::vector<std::string> wrt;
  for (const auto& [name, t] : tensors)
    if (t.requires_grad()) wrt.push_back(name);
  auto c = std::make_shared<Compiled>();
  c->fused = std::make_shared<FusedProgram>(seastar::lower(module, wrt, impl_->name, graph.is_bipartite()));
  collect_inputs(c->fused->lowered().forward, c->used_as);
  collect_inputs(c->fused->lowered().backward, c->used_as);
  for (const auto& kv : c->used_as) {
    c->names.push_back(kv.first);
    if (kv.second == ir::Op::param) c->param_shapes[kv.first] = tensors.at(kv.first).sizes().vec();
  }
  entries.push_back(c);
  ++impl_->num_traces;
  return c;
}

LoweredProgram Program::lower(const Graph& graph, const Tensors& tensors) const {
  return compiled(graph, tensors)->fused->lowered();
}

std::vector<torch::Tensor> Program::operator()(const Graph& graph, const Tensors& tensors) const {
  auto c = compiled(graph, tensors);
  check_inputs(impl_->name, c->used_as, c->fused->lowered().vertex_inputs, graph, tensors);
  if (!c->fused->unsupported().empty())
    SEASTAR_THROW(NotImplementedError, impl_->name, ": ", c->fused->unsupported());
  std::vector<torch::Tensor> bound;
  bound.reserve(c->names.size());
  for (const std::string& n : c->names) bound.push_back(bound_tensor(impl_->name, graph, tensors, n));
  return apply_fused(c->fused, graph, c->names, bound);
}

torch::Tensor Program::call(const Graph& graph, const Tensors& tensors) const {
  auto outs = (*this)(graph, tensors);
  if (outs.size() != 1)
    SEASTAR_THROW(ValueError, impl_->name, ": call() returns one output but the program has ", outs.size(),
                  "; use operator()");
  return outs[0];
}

}  // namespace seastar
