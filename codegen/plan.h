/** \file
 * The back half of lowering: a GIR module -> kernels and buffers (FusedPlan), then source.
 * `plan` (plan.cpp) runs these steps in this order, one function and file each:
 *   lower_softmax  (lower_softmax.cpp) softmax.G(s) -> m = agg_max.G(s); x = exp(s - gather.G(m));
 *                  z = agg_sum.G(x); y = x / gather.G(z) (max-subtracted, so finite for any
 *                  logits), or, for agg_sum.G(softmax.G(s) * f), one online pass
 *   simplify       (core/passes/simplify.cpp) again, over what lower_softmax made
 *   fuse           (fuse.cpp) reductions whose inputs are ready are grouped, one traversal
 *                  kernel per group (dst: over the CSC, src: over the CSR); reductions that read
 *                  another of the same kernel at the centre vertex (softmax's max, then its sum,
 *                  then the weighted sum) become later passes over the centre's edges inside the
 *                  same kernel; every edge value is computed where it is consumed, never stored;
 *                  parameter gradients (sum_rows over every vertex or edge) are reduced in
 *                  whichever traversal runs, into fixed blocks of centres summed in block order,
 *                  so they are bitwise deterministic whatever the thread count
 *   materialize    (materialize.cpp) the vertex expressions of bound tensors that a traversal
 *                  reads at the neighbour, when materialize.h's cost model says storing them is
 *                  cheaper, computed first by a per-vertex kernel per side; other vertex
 *                  expressions are recomputed where they are read
 *   place_outputs  (place_outputs.cpp) a vertex output that reads only one traversal's results at
 *                  the centre becomes that traversal's epilogue; the others get a final
 *                  per-vertex / per-edge / parameter map
 *   save_edge_values (save_edge_values.cpp) the edge values that several passes or kernels
 *                  read, when save_edge_values.h's cost model says a row per edge is cheaper
 *                  than computing them again: the first pass that computes one stores it, the
 *                  others read it
 *   plan_buffers   (plan_buffers.cpp) inputs, outputs, aggregation results and stored values
 * Then, per variant (float type, index type, host or GPU) on its first call: emit (emit_cpu /
 * emit_cuda, cpu_emitter.h, cuda_emitter.h) and compile (the host compiler or NVRTC), the
 * steps of runtime/engine/kernel_variant.h. SEASTAR_DUMP_DIR receives the GIR after each front-half
 * pass (core/passes/pipeline.cpp), after each step of plan() and every generated source
 * (the list: core/util/dumps.h).
 */
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/ir.h"

namespace seastar::codegen {

/// Why `m` cannot run fused (empty when it can).
std::string unsupported_reason(const ir::Module& m);

/// sum_rows / sum_rows_typed: a reduction over every vertex or edge into a Param value.
bool is_row_reduction(const ir::Value& v);

ir::Module lower_softmax(const ir::Module& m);

struct Kernel {
  enum class Kind { Traverse, VertexMap, EdgeMap, ParamMap } kind;
  ir::Group group = ir::Group::None;  ///< Traverse: the centre endpoint
  std::vector<int> values;            ///< aggregations (Traverse) or outputs (maps) it stores
  std::vector<int> pass;              ///< Traverse: the pass over the centre's edges of each value
  /// The vertex set a Traverse or VertexMap kernel iterates: destinations (num_dst rows) or
  /// sources (num_src rows); the same set on a square graph.
  ir::Group side = ir::Group::Dst;
  /// VertexMap: stores vertex expressions that later kernels read back (materialize.h), not
  /// outputs.
  bool precompute = false;
  /// Traverse: vertex outputs computed per centre after the last pass, from this kernel's
  /// results at the centre (GCN's `d * sum(...)`), instead of by a separate per-vertex map.
  std::vector<int> epilogue;
  /// Traverse: this kernel's aggregations that only its epilogue reads (not outputs): an emitter
  /// may hand the epilogue the accumulator instead of storing it (their buffer then stays unwritten).
  std::vector<int> epilogue_only;
  /// Traverse, EdgeMap: edge values this kernel computes and stores per edge, for its later
  /// passes and later kernels to read instead of computing them again (save_edge_values.h).
  struct EdgeSave {
    int value;
    int pass;      ///< the pass that computes and stores it
    bool by_slot;  ///< rows in the traversal's edge order (its slot j), not at the edge's id:
                   ///< only this traversal reads it, so its writes and reads are sequential
  };
  std::vector<EdgeSave> saves;
};

/// A buffer the launcher passes to the kernels.
struct Buffer {
  enum class Role { Input, GradOutput, Intermediate, Output } role;
  int value = -1;        ///< the value it holds
  std::string name;      ///< input name (Input)
  int index = -1;        ///< output or grad_output position
  ir::Space rows;        ///< Vertex: N rows, Edge: E rows, Param: one
  int64_t numel = 1;     ///< feature elements per row
  bool is_int = false;   ///< int64 (argmax, ids) instead of the float type
  ir::Group side = ir::Group::Dst;  ///< Vertex rows: destinations (num_dst) or sources (num_src)
  /// Held in the kernels' compute type (float32 under 16-bit storage), not the tensors': an edge
  /// value stored for later passes (save_edge_values.h), which rounding to 16 bits would change.
  bool compute_type = false;
};

struct FusedPlan {
  ir::Module module;  ///< after lower_softmax and simplify
  bool bipartite = false;  ///< kernels of source-side vertices iterate num_src, not num_dst
  std::vector<Kernel> kernels;
  std::vector<Buffer> buffers;
};

/// Where plan() dumps its steps (core/util/dumps.h): the program's name and which module it
/// plans; an empty name dumps nothing.
struct PlanDumps {
  std::string program;
  bool backward = false;
};

/// `bipartite`: the module was lowered for bipartite graphs (passes::split_sides ran).
FusedPlan plan(const ir::Module& m, bool bipartite = false, const PlanDumps& dumps = {});

/// The plan as text: its module, each kernel's values, the buffers (the .gir dumps of plan()'s steps).
std::string plan_text(const FusedPlan& p);

/// Whether the plan's kernels read the graph's out-edge index: a traversal centred at sources,
/// or a source's degree. The launcher asks the graph for that index only then.
bool reads_out_edges(const FusedPlan& p);

/// Walks from `roots` to their inputs, depth first, each value once: `visit(v)` says whether to
/// go on into v's inputs (the planning steps stop at reductions, gathers, ...).
template <class Visit>
void visit_inputs(const ir::Module& m, const std::vector<int>& roots, Visit visit) {
  std::vector<int> stack(roots);
  std::set<int> seen;
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (!seen.insert(id).second) continue;
    const ir::Value& v = m.at(id);
    if (visit(v)) stack.insert(stack.end(), v.inputs.begin(), v.inputs.end());
  }
}

// the steps of plan, in order (`sides`: passes::vertex_sides of the module)
/// Values a traversal kernel computes and stores: aggregations and reductions over all rows.
bool is_reduction(const ir::Value& v);
std::vector<Kernel> fuse(const ir::Module& m, const std::vector<ir::Group>& sides, bool bipartite);
/// The kernels that compute `stored` (materialize_vertex_values) before every traversal.
std::vector<Kernel> precompute_kernels(const std::vector<int>& stored, const std::vector<ir::Group>& sides);
void place_outputs(FusedPlan& p, const std::vector<ir::Group>& sides);
/// `stored`: the vertex values of materialize and the edge values of save_edge_values.
std::vector<Buffer> plan_buffers(const ir::Module& m, const std::vector<int>& stored,
                                 const std::vector<ir::Group>& sides);

}  // namespace seastar::codegen
