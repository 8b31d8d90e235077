/** \file Program: trace per signature, lower, run fused with autograd; see program.h. */
#include "api/program.h"

#include <torch/types.h>

#include "core/util/errors.h"

namespace seastar {

struct Program::Impl {
  explicit Impl(std::string name) : core(std::move(name)) {}
  MultiFn fn;
  ProgramCore core;
};

namespace {

void check_call(const std::string& prog, const Graph& graph, const Program::Tensors& tensors) {
  if (!graph.defined()) SEASTAR_THROW(ValueError, prog, ": the graph is undefined (a default-constructed Graph)");
  for (const auto& [name, t] : tensors)
    if (!t.defined()) SEASTAR_THROW(ValueError, prog, ": '", name, "' is an undefined tensor");
}

}  // namespace

Program::Program(Fn fn, std::string name) {
  if (!fn) SEASTAR_THROW(ValueError, "seastar::Program '", name, "': the vertex function is empty");
  impl_ = std::make_shared<Impl>(std::move(name));
  impl_->fn = [fn = std::move(fn)](Vertex& v) { return std::vector<Var>{fn(v)}; };
}

Program::Program(MultiFn fn, std::string name) {
  if (!fn) SEASTAR_THROW(ValueError, "seastar::Program '", name, "': the vertex function is empty");
  impl_ = std::make_shared<Impl>(std::move(name));
  impl_->fn = std::move(fn);
}

const std::string& Program::name() const { return impl_->core.name(); }

size_t Program::num_traces() const { return impl_->core.num_traces(); }

ir::Module Program::trace(const Graph& graph, const Tensors& tensors) const {
  check_call(name(), graph, tensors);
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
  b.set_loc(ir::Loc{"<C++ program " + name() + ">", 0});
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
      b.fail("output " + std::to_string(i) + " of '" + name() +
             "' is not a value traced from this call's vertex v (a default-constructed or stale Var)");
  return b.finish(outs);
}

std::shared_ptr<const Signature> Program::signature(const Graph& graph, const Tensors& tensors,
                                                    const TensorInfos& infos) const {
  return impl_->core.signature(graph, infos, [&] { return trace(graph, tensors); });
}

LoweredProgram Program::lower(const Graph& graph, const Tensors& tensors) const {
  check_call(name(), graph, tensors);
  return signature(graph, tensors, infos_of(tensors))->lowered();
}

std::vector<torch::Tensor> Program::operator()(const Graph& graph, const Tensors& tensors) const {
  check_call(name(), graph, tensors);
  CallResult call = impl_->core.call(graph, tensors, [&] { return trace(graph, tensors); }, /*use_fused=*/true);
  if (call.prepared.misfit) std::rethrow_exception(call.prepared.misfit);
  if (!call.ran) SEASTAR_THROW(NotImplementedError, name(), ": ", call.prepared.unsupported);
  return std::move(call.outputs);
}

torch::Tensor Program::call(const Graph& graph, const Tensors& tensors) const {
  auto outs = (*this)(graph, tensors);
  if (outs.size() != 1)
    SEASTAR_THROW(ValueError, name(), ": call() returns one output but the program has ", outs.size(),
                  "; use operator()");
  return outs[0];
}

}  // namespace seastar
