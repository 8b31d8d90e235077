/** \file
 * Graph storage, independent of torch: the in-edge index (CSC, destination-major, sorted by
 * edge type within a destination) and the out-edge index (CSR, source-major, sorted on first
 * use), each with the original edge id of every slot so that edge features stay aligned
 * whatever the order; the edge list in the given order is rebuilt from the in-edge index when
 * asked. Kernels traverse these; the torch layer (graph.h) turns them into tensors on
 * a device.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/graph/index_array.h"

namespace seastar {

/// A compressed adjacency: the edges of centre vertex v occupy slots ptr[v] .. ptr[v+1]-1;
/// slot j connects v to nbr[j] through original edge eid[j]. The E-long arrays are int32 when the
/// graph fits (IndexArray); the N-long ones stay int64, being small and read on every path.
struct Adjacency {
  std::vector<int64_t> ptr;  ///< num_nodes + 1 offsets
  IndexArray nbr;            ///< the other endpoint of each slot
  IndexArray eid;            ///< original edge id of each slot
  /// Centre vertices by decreasing degree (ties by id): processing hubs first lets a dynamic
  /// schedule spread the remaining small vertices over the threads that finish early.
  std::vector<int64_t> degree_order;

  int64_t degree(int64_t v) const { return ptr[v + 1] - ptr[v]; }
};

/// Optional vertex and edge types of a heterogeneous graph.
struct GraphTypes {
  std::vector<int64_t> node_type;  ///< empty when the graph has no node types
  std::vector<int64_t> edge_type;  ///< empty when the graph has no edge types
  int64_t num_node_types = 0;
  int64_t num_edge_types = 0;
};

class GraphData {
 public:
  /// Builds both indices from an edge list. Throws ValueError naming the first bad entry for
  /// negative or out-of-range ids, mismatched lengths or types out of range. Zero nodes or
  /// zero edges are legal. num_node_types / num_edge_types of -1 mean 1 + the largest type.
  static std::shared_ptr<const GraphData> from_coo(std::vector<int64_t> src, std::vector<int64_t> dst,
                                                   int64_t num_nodes, GraphTypes types = {});
  /// A bipartite graph: sources are 0 .. num_src-1, destinations 0 .. num_dst-1, two vertex
  /// sets. The in-edge index has num_dst centres and the out-edge index num_src. When a value
  /// is read both at sources and at destinations (a sampled block), destination i is source i,
  /// which needs num_dst <= num_src. Node types, when given, are the sources' (num_src entries,
  /// num_dst <= num_src): destination i has the type of source i.
  static std::shared_ptr<const GraphData> from_coo_bipartite(std::vector<int64_t> src, std::vector<int64_t> dst,
                                                             int64_t num_src, int64_t num_dst, GraphTypes types = {});

  /// A bipartite graph straight from its in-edge index (what the neighbour sampler makes, already
  /// destination-major): destination v's edges are slots ptr[v] .. ptr[v+1]-1 with sources
  /// `src`; the edge ids are the slots. The out-edge index is sorted on first use (out()).
  /// `edge_type` per slot must already be sorted within each destination, as a sampled typed
  /// graph's is; `node_type` (optional) has one entry per source.
  static std::shared_ptr<const GraphData> from_csc_bipartite(std::vector<int64_t> ptr, std::vector<int64_t> src,
                                                             int64_t num_src, GraphTypes types = {});

  /// The same bipartite graph read through global source ids: source j becomes source_ids[j] of
  /// num_src sources (a mini-batch's input block then reads the full feature table in place,
  /// nothing gathered). Destination i is then no longer source i: self-loop helpers, node types
  /// and a program reading one tensor at both sides refuse such a graph (sources_global()).
  /// Throws ValueError unless this graph is bipartite without node types and the ids, one per
  /// source, lie in [0, num_src).
  std::shared_ptr<const GraphData> with_global_sources(const std::vector<int64_t>& source_ids, int64_t num_src) const;

  /// The vertex count of a square graph; a bipartite graph has two (num_src, num_dst) and
  /// raises here, so code written for square graphs cannot silently use the wrong one.
  int64_t num_nodes() const;
  int64_t num_src() const { return num_src_; }
  int64_t num_dst() const { return num_dst_; }
  bool is_bipartite() const { return bipartite_; }
  /// True for with_global_sources' graphs, whose destination i is not source i.
  bool sources_global() const { return sources_global_; }
  /// Throws ValueError naming `what` when sources_global(): it needs destination i to be source i.
  void require_destinations_are_sources(const char* what) const;
  int64_t num_edges() const { return static_cast<int64_t>(in_.nbr.size()); }
  /// The edge list in edge-id order, rebuilt from the in-adjacency on each call (not kept: it
  /// would cost two more E-long arrays per graph, and only edge_index and the self-loop helpers need it).
  std::vector<int64_t> src() const;
  std::vector<int64_t> dst() const;
  const Adjacency& in() const { return in_; }    ///< CSC: centre = destination
  /// CSR: centre = source, sorted on first use (thread-safe). Only a pass over the sources'
  /// out-edges reads it (backward into source features, out-edge programs, out-degrees), and
  /// many graphs never have one: a first layer's input needs no gradient, and the block of a
  /// mini-batch's input layer, the largest, is such a layer. Until then it costs no memory.
  const Adjacency& out() const;
  const GraphTypes& types() const { return types_; }
  bool has_node_types() const { return types_.num_node_types > 0; }
  bool has_edge_types() const { return types_.num_edge_types > 0; }
  /// True when every index fits int32: the E-long arrays are then stored as int32 and kernels
  /// use the narrower (faster) width.
  bool fits_int32() const;
  /// A process-unique id: device copies and compiled launches are keyed by it, never by
  /// sizes, so two graphs of equal size can never share cached state.
  uint64_t uid() const { return uid_; }

  /// A new graph with a self loop added to every vertex (edge ids E .. E+N-1, type
  /// `loop_type` when the graph has edge types). Bipartite: one loop per destination.
  std::shared_ptr<const GraphData> add_self_loops(int64_t loop_type = 0) const;
  /// A new graph without self loops; `kept` receives the original ids of the kept edges so
  /// the caller can select the matching rows of edge features.
  std::shared_ptr<const GraphData> remove_self_loops(std::vector<int64_t>* kept = nullptr) const;
  /// The graph PyG's remove_self_loops + add_self_loops make: the edges that are not self loops,
  /// in order, then loops at vertices 0 .. num_loops-1 (num_loops <= min(num_src, num_dst)),
  /// without types.
  std::shared_ptr<const GraphData> replace_self_loops(int64_t num_loops) const;
  /// What edge values need to follow replace_self_loops: `kept` receives the ids of the edges
  /// that are not self loops, `loops` the ids of the self loops at vertices below num_loops,
  /// `loop_vertex` their vertices.
  void self_loop_ids(int64_t num_loops, std::vector<int64_t>& kept, std::vector<int64_t>& loops,
                     std::vector<int64_t>& loop_vertex) const;
  /// The same graph with its edges renumbered in in-edge order: the edge in slot j of the
  /// in-edge index gets id j (edge types move with their edges). A destination-parallel kernel
  /// then reads per-edge tensors as a stream instead of through the edge-id map. O(E): the
  /// in-edge index is copied, not sorted again; the original id of new edge j is in().eid[j].
  /// Throws ValueError for a graph read through global source ids.
  std::shared_ptr<const GraphData> in_edge_order() const;

 private:
  GraphData() = default;
  void build_in_index(const std::vector<int64_t>& src, const std::vector<int64_t>& dst);
  /// replace_self_loops of an untyped graph, from its in-edge index in O(E), without sorting.
  std::shared_ptr<const GraphData> replace_self_loops_from_index(int64_t num_loops) const;
  static std::shared_ptr<const GraphData> build(std::vector<int64_t> src, std::vector<int64_t> dst, int64_t num_src,
                                                int64_t num_dst, bool bipartite, GraphTypes types);

  int64_t num_src_ = 0, num_dst_ = 0;
  bool bipartite_ = false;
  bool sources_global_ = false;  ///< see with_global_sources()
  GraphTypes types_;
  Adjacency in_;
  mutable Adjacency out_;            ///< see out()
  mutable std::once_flag out_once_;  ///< builds out_ on first use
  uint64_t uid_ = 0;
};

}  // namespace seastar
