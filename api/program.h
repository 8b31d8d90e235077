/** \file
 * The C++ user API of a vertex program, the counterpart of Python's `@seastar.vertex_program`
 * (python/seastar/program.py): a lambda of the centre vertex, traced once per signature of the
 * bound tensors, lowered, compiled to fused kernels and run as a torch autograd function.
 *
 *   seastar::Program gat([](seastar::Vertex& v) {
 *     using namespace seastar;
 *     Var alpha = softmax(v.in_edges(), [&](const Edge& e) {
 *       Var el = e.src()["el"];
 *       Var er = v["er"];
 *       return leaky_relu(el + er, 0.2);
 *     });
 *     Var h = v.in_edges().edge().src()["h"];
 *     return sum(alpha * h);
 *   }, "gat");
 *   torch::Tensor out = gat.call(graph, {{"h", h}, {"el", el}, {"er", er}});  // [N, heads, F]
 *
 * Names read through `v[...]`, `e.src()[...]`, `e.dst()[...]` are vertex tensors [N, ...],
 * names read through `e[...]` are edge tensors [E, ...], names read through `v.param(...)` are
 * parameters (no row axis). Gradients flow to every bound tensor that requires grad.
 */
#pragma once

#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/frontend/builder.h"
#include "core/graph/graph.h"
#include "core/passes/pipeline.h"
#include "runtime/engine/program_core.h"

namespace seastar {

/// A traced GNN layer; call it with a graph and named tensors. Copies share one trace cache
/// (a ProgramCore, the orchestrator Python's vertex programs use too). Thread-safe: concurrent
/// calls share one cache entry per signature and its compiled kernels.
class Program {
 public:
  using Fn = std::function<Var(Vertex&)>;
  using MultiFn = std::function<std::vector<Var>(Vertex&)>;
  using Tensors = std::map<std::string, torch::Tensor>;

  /// A program with one output.
  Program(Fn fn, std::string name = "program");
  /// A program with several outputs (returned in this order by operator()).
  Program(MultiFn fn, std::string name = "program");

  /// Runs the program (tracing it first for a new signature); outputs carry autograd history.
  /// Throws ValueError / TypeError for tensors that do not fit the graph or each other,
  /// TraceError for a mistake in the vertex program, NotImplementedError for what the fused
  /// backend cannot run (the reason is in the message), CompileError if the host compiler fails.
  std::vector<torch::Tensor> operator()(const Graph& graph, const Tensors& tensors) const;
  /// The single output of a one-output program.
  torch::Tensor call(const Graph& graph, const Tensors& tensors) const;

  /// The traced GIR for these tensors' shapes (not cached; for inspection and tests).
  ir::Module trace(const Graph& graph, const Tensors& tensors) const;
  /// The forward and backward GIR for these tensors (traced and cached like a call).
  LoweredProgram lower(const Graph& graph, const Tensors& tensors) const;

  const std::string& name() const;
  /// How many signatures have been traced so far (the size of the trace cache).
  size_t num_traces() const;

 private:
  struct Impl;
  /// The cached signature (traced on a miss); `infos` describe `tensors`, checked by check_call.
  std::shared_ptr<const Signature> signature(const Graph& graph, const Tensors& tensors, const TensorInfos& infos) const;
  std::shared_ptr<Impl> impl_;
};

}  // namespace seastar
