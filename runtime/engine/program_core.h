/** \file
 * The one orchestrator of a vertex program, shared by the C++ API (seastar::Program) and
 * Python's `@seastar.vertex_program`: the trace cache keyed by what changes the code, the
 * lowering, the checks of a call's tensors against the graph and each other, whether the
 * fused kernels can run them, the binding of tensors to the kernels, and the kernels.
 *
 * Each front end keeps only what is its own: its tracer (a C++ lambda or Python proxies),
 * handed to ProgramCore::signature as a callback run on a cache miss; and what runs when the
 * fused kernels cannot (C++ raises, Python falls back to its reference executor).
 */
#pragma once

#include <torch/types.h>

#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/graph/graph.h"
#include "core/passes/pipeline.h"

namespace seastar {

class FusedProgram;

/// What the orchestrator reads of a bound tensor: a real tensor's, or, at torch.compile's trace
/// time, the description of one (shape, dtype, device, requires_grad, layout; never its data).
struct TensorInfo {
  std::vector<int64_t> shape;
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::kCPU);
  bool requires_grad = false;
  bool strided = true;

  static TensorInfo of(const torch::Tensor& t);
};
using TensorInfos = std::map<std::string, TensorInfo>;
using Tensors = std::map<std::string, torch::Tensor>;

/// The infos of named real tensors.
TensorInfos infos_of(const Tensors& tensors);

/// torch's Python name of a dtype ("torch.float32"), so both front ends word errors alike.
std::string dtype_name(c10::ScalarType dtype);

/// One traced and lowered signature of a program.
class Signature {
 public:
  /// `traced`: the tracer's module (its parameters' full shapes tell signatures apart).
  Signature(LoweredProgram lowered, const ir::Module& traced, const TensorInfos& infos);

  const LoweredProgram& lowered() const { return lowered_; }
  /// The tensors the forward and backward programs read, sorted: what the kernels are bound
  /// to. A name `x@dst` (bipartite graphs) is bound to the first num_dst rows of `x`.
  const std::vector<std::string>& names() const { return names_; }

  /// Whether these tensors' parameters have the shapes this signature was traced for.
  bool fits(const TensorInfos& infos) const;
  /// Row counts, dtypes, layouts and devices of the tensors the program reads, against the graph
  /// and each other; throws ValueError / TypeError naming the tensor.
  void check(const std::string& program, const Graph& graph, const TensorInfos& infos) const;
  /// Why the fused kernels cannot run these tensors (their device, dtype, this build, or what
  /// the program computes); empty when they can.
  std::string unsupported(const TensorInfos& infos) const;
  /// The tensors in names() order; `x@dst` is a view of x's first num_dst rows (no copy).
  std::vector<torch::Tensor> bind(const Graph& graph, const Tensors& tensors) const;
  /// The fused kernels, planned on first use (a program that always falls back never plans).
  const std::shared_ptr<FusedProgram>& kernels() const;
  /// Runs the fused kernels with autograd (check() and unsupported() first).
  std::vector<torch::Tensor> run(const Graph& graph, const Tensors& tensors) const;

 private:
  LoweredProgram lowered_;
  std::vector<std::string> names_;
  std::map<std::string, ir::Op> used_as_;  ///< how each name is read: input_vertex, input_edge or param
  std::map<std::string, std::vector<int64_t>> param_shapes_;
  mutable std::once_flag planned_;
  mutable std::shared_ptr<FusedProgram> kernels_;
};

/// What one call of a program needs before it runs, from one description of its tensors.
struct PreparedCall {
  std::shared_ptr<const Signature> signature;
  /// Why the fused kernels cannot run these tensors (their device, dtype, this build, or what
  /// the program computes); empty when they can.
  std::string unsupported;
  /// The tensors' ValueError / TypeError against the graph and the signature, if any: returned,
  /// not thrown, so that each front end raises it its own way (Python names the calling line).
  std::exception_ptr misfit;
};

/// One call, end to end (ProgramCore::call): the prepared call, and the outputs when the fused
/// kernels ran it.
struct CallResult {
  PreparedCall prepared;
  bool ran = false;  ///< whether the fused kernels ran: `outputs` holds their results
  std::vector<torch::Tensor> outputs;
};

/// The trace cache of one program. Thread-safe: concurrent calls meeting a new signature trace
/// it once (the tracer runs under the cache's lock; a caller whose tracer needs another lock, as
/// Python's needs the GIL, must not hold it while it waits here: the binding releases the GIL).
class ProgramCore {
 public:
  using Tracer = std::function<ir::Module()>;

  explicit ProgramCore(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  /// The signature for these tensors on this graph; on a miss, `trace` is called for the module
  /// and the module is lowered. Vertex and edge counts never enter the key (every mini-batch of
  /// a loader reuses one trace): each tensor's name, rank, feature shape (all but its first
  /// axis), dtype and requires_grad, and the graph's kind and type counts do.
  std::shared_ptr<const Signature> signature(const Graph& graph, const TensorInfos& infos, const Tracer& trace);
  /// Every call starts here, in both front ends: the signature (traced and lowered on a miss;
  /// their errors are thrown), the check of the tensors against it (returned as `misfit`), and
  /// whether the fused kernels can run them. Then the call runs Signature::run, or falls back.
  PreparedCall prepare(const Graph& graph, const TensorInfos& infos, const Tracer& trace);
  /// A warm call's one entry: prepare() from the tensors themselves, then, when the tensors fit,
  /// the fused kernels can run them and the front end allows them (`use_fused`), Signature::run.
  /// Otherwise nothing runs and the prepared call says why: the front end raises the misfit, or
  /// runs its fallback (Python's reference executor) or raises `unsupported` (C++).
  CallResult call(const Graph& graph, const Tensors& tensors, const Tracer& trace, bool use_fused);
  /// call()'s second half, for a front end that prepares without a lock it must hold to run
  /// (Python prepares without the GIL, which its tracer needs, and runs with it).
  static CallResult run_prepared(PreparedCall prepared, const Graph& graph, const Tensors& tensors, bool use_fused);
  /// How many signatures have been traced and kept (the size of the trace cache).
  size_t num_traces() const;

 private:
  std::string name_;
  mutable std::mutex mutex_;
  // key -> the signatures of that key, told apart by their parameters' full shapes; entries are
  // immutable once inserted (FusedProgram locks itself)
  std::map<std::string, std::vector<std::shared_ptr<const Signature>>> cache_;
  size_t num_traces_ = 0;
};

}  // namespace seastar
