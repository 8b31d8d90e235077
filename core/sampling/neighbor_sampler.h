/** \file
 * Neighbour sampling for mini-batch training, independent of torch: from a batch of seed
 * vertices, each hop samples up to `fanout` in-neighbours of every destination, relabels the
 * sampled sources to block-local ids and emits the block's in-edge index directly (destination-
 * major, so a block's graph needs no sort of its in-edges), with the original edge id of every
 * sampled edge so edge features and edge types follow.
 *
 * Determinism: every random draw comes from a counter-based generator keyed by (seed, hop,
 * destination vertex, draw), so a given seed gives identical blocks at any thread count.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/graph/graph_data.h"

namespace seastar::sampling {

struct SamplerOptions {
  bool replace = false;         ///< sample with replacement (then exactly `fanout` draws per vertex with edges)
  std::vector<double> weights;  ///< optional per-edge weights (original edge ids): P(edge) ~ weight
  uint64_t seed = 0;            ///< the loader mixes the epoch into it
  /// Sample a vertex's in-neighbours only at the hop that reaches it (PyG's NeighborLoader):
  /// hop h > 0 gives the destinations the previous hop had (its first num_dst) no edges, so
  /// the blocks' edges, all in the outermost block's local ids, are disjoint and their union
  /// is the sampled subgraph. Off: every hop samples every destination afresh (DGL's blocks).
  bool expand_once = false;
};

/// One sampled layer: a bipartite block whose destinations are the first num_dst sources.
struct SampledBlock {
  std::vector<int64_t> ptr;        ///< num_dst + 1 offsets into src / eid
  std::vector<int64_t> src;        ///< block-local source of each sampled edge
  std::vector<int64_t> eid;        ///< the edge's id in the sampled graph
  std::vector<int64_t> src_nodes;  ///< global id of each block source; the first num_dst are the destinations
  int64_t num_dst = 0;
  int64_t num_src() const { return static_cast<int64_t>(src_nodes.size()); }
};

/// A fanout per hop; for a typed graph optionally one per relation: fanouts[hop][relation]
/// (a hop with one entry applies it to every relation). -1 takes every neighbour.
using Fanouts = std::vector<std::vector<int64_t>>;

/// Samples `fanouts.size()` hops from `seeds` (global ids, distinct). Returns the blocks
/// innermost hop first: blocks[0]'s destinations are the seeds; blocks.back()'s sources are
/// the vertices whose input features the first layer reads. Throws ValueError for bad seeds,
/// fanouts or weights. Parallel over destinations (OpenMP).
std::vector<SampledBlock> sample_neighbors(const GraphData& g, const std::vector<int64_t>& seeds,
                                           const Fanouts& fanouts, const SamplerOptions& options);

}  // namespace seastar::sampling
