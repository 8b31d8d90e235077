/** \file Program: trace per signature, lower, run fused with autograd; see program.h. */
#include "kernels/program.h"

#include <torch/torch.h>

#include <mutex>
#include <set>
#include <sstream>

#include "core/util/errors.h"
#include "kernels/autograd.h"
#include "kernels/fused_program.h"

namespace seastar {

struct Program::Impl {
  MultiFn fn;
  std::string name;
  std::mutex mutex;
  // signature -> compiled; entries are immutable once inserted (FusedProgram locks itself)
  std::map<std::string, std::shared_ptr<const Compiled>> cache;
};

struct Program::Compiled {
  std::shared_ptr<FusedProgram> fused;
  /// The bound tensors the program reads (forward or backward), sorted: what apply_fused gets.
  std::vector<std::string> names;
  /// How each of them is used: its op (input_vertex, input_edge or param).
  std::map<std::string, ir::Op> used_as;
};

namespace {

/// The trace-cache key, as python/seastar/program.py: every bound tensor's name, full shape,
/// dtype and requires_grad, and the graph's type signature.
std::string signature(const Graph& graph, const Program::Tensors& tensors) {
  std::ostringstream key;
  for (const auto& [name, t] : tensors) {
    key << name << ':' << t.sizes() << ':' << t.scalar_type() << ':' << t.requires_grad() << ';';
  }
  const GraphData& d = graph.data();
  key << "|" << d.has_node_types() << d.has_edge_types() << ':' << d.types().num_node_types << ':'
      << d.types().num_edge_types;
  return key.str();
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
void check_inputs(const std::string& prog, const std::map<std::string, ir::Op>& used, const Graph& graph,
                  const Program::Tensors& tensors) {
  std::set<c10::ScalarType> dtypes;
  std::set<std::string> devices;
  for (const auto& [name, op] : used) {
    const torch::Tensor& t = tensors.at(name);
    if (!t.is_floating_point())
      SEASTAR_THROW(TypeError, prog, ": '", name, "' must be a floating-point tensor, got ", t.scalar_type());
    if (t.layout() != torch::kStrided)
      SEASTAR_THROW(TypeError, prog, ": '", name, "' must be a dense (strided) tensor, got layout ", t.layout());
    dtypes.insert(t.scalar_type());
    devices.insert(t.device().str());
    if (op == ir::Op::input_vertex && t.size(0) != graph.num_nodes())
      SEASTAR_THROW(ValueError, prog, ": '", name, "' has ", t.size(0), " rows but the graph has ", graph.num_nodes(),
                    " vertices");
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
  return impl_->cache.size();
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
  auto it = impl_->cache.find(key);
  if (it != impl_->cache.end()) return it->second;

  ir::Module module = trace(graph, tensors);
  std::vector<std::string> wrt;
  for (const auto& [name, t] : tensors)
    if (t.requires_grad()) wrt.push_back(name);
  auto c = std::make_shared<Compiled>();
  c->fused = std::make_shared<FusedProgram>(seastar::lower(module, wrt, impl_->name));
  collect_inputs(c->fused->lowered().forward, c->used_as);
  collect_inputs(c->fused->lowered().backward, c->used_as);
  for (const auto& kv : c->used_as) c->names.push_back(kv.first);
  impl_->cache.emplace(key, c);
  return c;
}

LoweredProgram Program::lower(const Graph& graph, const Tensors& tensors) const {
  return compiled(graph, tensors)->fused->lowered();
}

std::vector<torch::Tensor> Program::operator()(const Graph& graph, const Tensors& tensors) const {
  auto c = compiled(graph, tensors);
  check_inputs(impl_->name, c->used_as, graph, tensors);
  if (!c->fused->unsupported().empty())
    SEASTAR_THROW(NotImplementedError, impl_->name, ": ", c->fused->unsupported());
  std::vector<torch::Tensor> bound;
  bound.reserve(c->names.size());
  for (const std::string& n : c->names) bound.push_back(tensors.at(n));
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
