/** \file
 * The value visitor shared by the C++ and the CUDA emitters (the CodeGenC / CodeGenCUDA split
 * of TVM): what reads the same in both languages lives here (elementwise math from ops.def's
 * c_expr, broadcasting, feature-axis reductions, matvec, gathers, aggregation accumulators,
 * parameter-gradient partial sums, stores, the passes of a traversal over a centre's edges);
 * cpu_emitter.cpp and cuda_emitter.cpp override hooks for what differs: the kernel signature
 * and skeleton (the vertex loop, thread indexing, work assignment), how a feature loop is split
 * across the threads of a group, reductions across those threads, shared memory, the entry point.
 *
 * A computed value is held in one of two layouts: Whole (an array `v[S]` indexed by the flat
 * feature index k, or a pointer into a buffer) or Split (CUDA: `v[t]` holds element
 * lane + t * GT of the value; only values as wide as the kernel's widest value). Temporaries are
 * named after value ids (`v12_e`: value 12 at the current edge), so the output is deterministic.
 */
#pragma once

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu_emitter.h"
#include "codegen/plan.h"
#include "codegen/traffic.h"

namespace seastar::codegen {

enum class Layout { Whole, Split };

/// An expression holding a value's elements in a layout.
struct Operand {
  std::string expr;
  Layout layout = Layout::Whole;
};

class EmitterBase {
 public:
  EmitterBase(const FusedPlan& plan, const EmitOptions& options);
  virtual ~EmitterBase() = default;

 protected:
  /// A reduction over all rows (a parameter gradient) in a traversal: partial sums per block of
  /// centres at `offset` within the `partial_elems` floats of one block.
  struct RowReduction {
    int value;
    int64_t numel;
    int64_t offset;
  };
  /// The body of a traversal for one centre (`c`, edges `beg..end`), and its row reductions.
  struct Traversal {
    std::string passes;
    std::vector<RowReduction> rows;
    int64_t partial_elems = 0;
  };

  // ---- the visitor ---------------------------------------------------------------------------
  /// Resets the per-kernel state.
  void begin_kernel(const Kernel& k);
  /// Emits code computing value `id` at `row` ("c" centre, "n" neighbour, "e" edge, "s"/"d"
  /// edge-map endpoints, "" parameter), once per kernel, and returns where its elements are.
  Operand val(int id, const std::string& row);
  /// Stores `src` (a value of S elements) to every output buffer of `value` at `row`.
  void store(std::ostringstream& os, int value, const Operand& src, const std::string& row, int64_t S);
  /// The passes of traversal kernel `k` over a centre's edges (accumulators, updates, stores).
  Traversal traversal(const Kernel& k);
  /// "// kernel 3: in-edges (CSC), destination-parallel; computes %4 %7\n"
  std::string kernel_comment(int index, const Kernel& k) const;
  /// A pointer to row `row` of buffer `b` ("" for a parameter buffer), for stores.
  std::string buffer_ptr(int b, const std::string& row) const;
  /// The same row for reads: its [] gives the kernel's float type T (a float buffer of 16-bit
  /// storage reads through sx::cvt_ptr; otherwise buffer_ptr).
  std::string buffer_read_ptr(int b, const std::string& row) const;
  /// Element `k` of `o` (a value of shape `shape`) broadcast to a result of shape `out`; a Split
  /// operand is read at the current slot t (it has as many elements as the result).
  std::string at(const Operand& o, const ir::Shape& shape, const ir::Shape& out) const;
  /// The header of a loop over a value's elements of a layout, binding k (and t when Split):
  /// "for (int64_t k = 0; k < S; ++k) " or the split form; followed by one statement.
  std::string loop(Layout layout, int64_t S) const;
  /// The index of the current element in an array of that layout: "k" or "t".
  static const char* slot(Layout layout) { return layout == Layout::Split ? "t" : "k"; }
  /// Elements an array of S elements in `layout` declares.
  int64_t extent(Layout layout, int64_t S) const;
  const char* ctype(const ir::Value& v) const { return v.dtype == ir::DType::Int ? "int64_t" : "T"; }
  static std::string indent(const std::string& s);
  static std::string lit(double x);

  // ---- hooks ---------------------------------------------------------------------------------
  /// The layout of a computed value / of an aggregation's accumulator. C++: always Whole.
  virtual Layout layout_of(const ir::Value&) const { return Layout::Whole; }
  virtual Layout accumulator_layout(const ir::Value&) const { return Layout::Whole; }
  /// A math function of the target: "std::max" (C++), "sx::max" (CUDA).
  virtual std::string fn(const char* name) const { return std::string("std::") + name; }
  /// ops.def's scalar expression in the target's language.
  virtual std::string scalar_expr(const std::string& c_expr) const { return c_expr; }
  /// The vectorisation pragma of a feature loop of a layout ("" for none).
  virtual std::string simd(Layout) const { return "#pragma omp simd"; }
  /// The same for a loop that sums into the scalar `acc` (vectorised partial sums, in a fixed order).
  virtual std::string simd_sum(const std::string& acc) const { return "#pragma omp simd reduction(+:" + acc + ")"; }
  /// How the kernels name the graph arrays and buffers: G[i], B[b] (C++), a.G[i], a.B[b] (CUDA).
  virtual std::string graph_array(int i) const { return "G[" + std::to_string(i) + "]"; }
  virtual std::string buffer_array(int b) const { return "B[" + std::to_string(b) + "]"; }
  /// Split layouts (CUDA): the loop header over a lane's elements, its slot count, a Whole view
  /// of a Split value (through shared memory), and a reduction of `n` elements of `array`
  /// across the group ("Sum", "Max"). The C++ emitter never splits, so the defaults throw.
  virtual std::string split_loop(int64_t S) const;
  virtual int64_t split_extent(int64_t S) const;
  virtual Operand whole_view(std::ostringstream& os, const std::string& name, const Operand& split, int64_t S);
  virtual void group_reduce(std::ostringstream& os, const std::string& array, int64_t n, const char* op);
  /// The header of a loop of `var` over 0..n-1 that adds a value every thread holds whole into
  /// memory private to the item (a parameter gradient's partial sums): C++ one thread, every
  /// element; CUDA the group's lanes share the elements, so each is added once.
  virtual std::string shared_loop(const std::string& var, int64_t n) const {
    return "for (int64_t " + var + " = 0; " + var + " < " + std::to_string(n) + "; ++" + var + ") ";
  }
  /// A store of S elements of `src` through pointer `ptr` (one statement).
  virtual std::string store_stmt(const std::string& ptr, const Operand& src, int64_t S) const;
  /// Between two passes of a traversal over one centre's edges (CUDA: a group barrier, so a
  /// value stored by one lane in pass p is seen by every lane in pass p + 1).
  virtual void pass_barrier(std::ostringstream&) {}
  /// Called for every computed value and accumulator (lets the CUDA emitter size its mapping).
  virtual void note_width(const ir::Value&) {}
  /// The bounds of a traversal pass's edge loop: the centre's edges `beg`, `end` (C++), or the
  /// slice of them this group walks (CUDA: a hub's edges are split over a block's groups).
  virtual std::string edge_loop_bounds() const { return "j = beg; j < end"; }
  /// After a pass's edge loop, before its accumulators are finished and stored (CUDA: the
  /// groups that split a hub combine their accumulators, `pass_accumulators_`).
  virtual void after_edge_loop(std::ostringstream&) {}
  /// The statements a traversal runs once per centre after a pass's edge loop or in its
  /// epilogue (finishing, stores, per-centre partial sums), as they are (C++), or guarded where
  /// several work items share one centre's edges (CUDA: a hub cut into pieces).
  virtual std::string once_per_centre(const std::string& code) const { return code; }
  /// What precedes a centre's own (per-vertex) parameter-gradient term: a condition, where
  /// several workers share a centre and one of them adds it (the CUDA hub path), else nothing.
  virtual std::string centre_row_guard() const { return ""; }
  /// The rows a traversal's edge loop reads where the loop's own order does not predict them:
  /// at the neighbour (`n`) and at the edge's original id (`e`, through the CSC slot's `eid`);
  /// buffer and elements per row, as read in the current pass.
  struct RandomRows {
    std::vector<std::pair<int, int64_t>> nbr, edge;
    bool empty() const { return nbr.empty() && edge.empty(); }
  };
  /// Statements at the top of a traversal's edge loop that prefetch the rows a later edge reads;
  /// "" for none (CUDA).
  virtual std::string prefetch(const RandomRows& /*rows*/) const { return ""; }
  /// Whether a traversal's epilogue reads Kernel::epilogue_only aggregations from their
  /// accumulators (in scope for the whole centre: C++) instead of from their buffers.
  virtual bool epilogue_reads_accumulators() const { return false; }

  /// The current kernel's traffic (traffic.h), recorded as its reads and stores are emitted;
  /// begin_kernel clears it, so an emission that is thrown away (a probe) leaves nothing.
  void note_traffic(TrafficTerm::Per per, const std::string& what, int buffer, int64_t bytes, bool write,
                    bool gathered);
  /// Index bytes (sizeof(I)) and float bytes (sizeof(T)) of this emission.
  int64_t index_bytes() const { return o_.index_type == "int64_t" ? 8 : 4; }
  int64_t float_bytes() const { return o_.float_type == "double" ? 8 : 4; }
  /// Bytes of a float buffer's element in memory: 2 for 16-bit storage, else float_bytes().
  int64_t storage_bytes() const { return o_.storage_type.empty() ? float_bytes() : 2; }
  std::vector<TrafficTerm> traffic_;
  /// An accumulator of the pass being emitted, as its edge loop leaves it: `acc` (extent
  /// elements, in `layout`; S elements in all) and, for the online softmax, its per-score
  /// running max `mx` and normaliser `zz` (`stats` elements each, whole) and the score index
  /// of element k (`stat_index`); for argmax and argmin (`acc` the int64 edge ids) the extremes
  /// `best` (extent elements, in `layout`).
  struct PassAccumulator {
    ir::Op op;
    std::string acc;
    Layout layout = Layout::Whole;
    int64_t S = 0, extent = 0;
    std::string mx, zz, stat_index;
    int64_t stats = 0;
    std::string best;
  };
  std::vector<PassAccumulator> pass_accumulators_;
  int pass_ = 0;                ///< the traversal pass being emitted
  bool reads_edge_id_ = false;  ///< the current pass reads `e` (a traversal's eid[j])
  bool reads_nbr_ = false;      ///< the current pass reads `n` (a traversal's nbr[j])

  const FusedPlan& p_;
  const ir::Module& m_;
  EmitOptions o_;
  std::map<int, int> read_;                 ///< value -> the buffer it is read from
  std::map<int, std::vector<int>> write_;   ///< value -> the buffers it is stored to
  std::map<std::pair<int, std::string>, Operand> memo_;
  std::set<int> computing_;                 ///< values the current (precompute) kernel computes, not reads
  std::vector<Kernel::EdgeSave> saves_;     ///< the current kernel's Kernel::saves
  std::set<int> by_slot_;                   ///< stored edge values in their traversal's edge order
  std::set<int> saving_;                    ///< edge values the current pass computes and stores, not reads
  std::ostringstream pre_, body_;           ///< per-centre and per-edge code of the current pass
  RandomRows random_rows_;  ///< buffers read at the neighbour's or the edge's row in this pass
  Kernel::Kind kind_ = Kernel::Kind::Traverse;
  std::set<int> unstored_;  ///< aggregations of the current traversal handed to its epilogue unstored
  ir::Group group_ = ir::Group::None;

 private:
  std::string endpoint_row(ir::Group endpoint) const;
  /// A row's item kind for the traffic model: "c" a vertex, "n"/"e"/"s"/"d" an edge, "" the launch.
  TrafficTerm::Per per_of(const std::string& row) const;
  std::string buffer_label(int b) const;
  std::ostringstream& stream_for(const std::string& row);

  // ---- val's op families, one file each; each emits one value and returns where it is -----------
  /// The value being emitted: `name` its temporary (v12_e: value 12 at the edge), `S` its
  /// elements, `lay` its layout, `os` the stream of its row.
  struct Site {
    const ir::Value& v;
    std::string row;
    std::string name;
    int64_t S;
    Layout lay;
    std::ostringstream& os;
  };
  static constexpr const char* kIndent = "      ";
  /// The edge's slot in the traversal's index (its loop counter j under a name no inner loop
  /// takes): the row of a stored edge value in edge order.
  static constexpr const char* kEdgeSlot = "es";
  /// "T v12_e[S];" in layout `l`; the vectorisation pragma of a loop of layout `l`.
  void declare(const Site& s, Layout l);
  /// The code computing a value that is neither memoised nor read from a buffer (val's op switch).
  Operand compute(const Site& s);
  void simd_pragma(std::ostringstream& os, Layout l, const std::string& at_indent) const;
  Operand emit_leaf(const Site& s);               ///< emit_leaves.cpp: constants, ids, types, degrees
  Operand emit_type_index(const Site& s);         ///< emit_leaves.cpp: a row of a typed table
  Operand emit_feature_reduction(const Site& s);  ///< emit_reductions.cpp: fsum, fmean, fmax
  Operand emit_sum_to(const Site& s);             ///< emit_reductions.cpp
  Operand emit_expand(const Site& s);             ///< emit_linear.cpp
  Operand emit_matvec(const Site& s);             ///< emit_linear.cpp: matvec, matvec_t
  Operand emit_outer(const Site& s);              ///< emit_linear.cpp
  Operand emit_elementwise(const Site& s);        ///< emit_elementwise.cpp: every ops.def elementwise row
  void reduction(int a, std::ostringstream& init, std::ostringstream& update, std::ostringstream& fin,
                 Traversal& t);
  /// emit_aggregations.cpp: a parameter gradient's per-block partial sums (sum_rows, sum_rows_typed)
  void emit_row_reduction(int a, std::ostringstream& update, std::ostringstream& fin, Traversal& t);
  /// emit_aggregations.cpp: an aggregation's accumulator (init, per-edge update, finish); returns it
  Operand emit_aggregation(int a, std::ostringstream& init, std::ostringstream& update, std::ostringstream& fin);
};

/// Index into an operand of shape `a` for flat position `k` of a broadcast result of shape `o`.
std::string bcast_index(const ir::Shape& a, const ir::Shape& o, const std::string& k);
/// The same for an element of `o` addressed as (row, col): col runs over `o`'s last axis.
std::string bcast_index_rows(const ir::Shape& a, const ir::Shape& o, const std::string& row, const std::string& col);
/// `s` with every `from` replaced by `to` (ops.def's std::f read as a target's own namespace).
std::string replace_all(std::string s, const std::string& from, const std::string& to);

}  // namespace seastar::codegen
