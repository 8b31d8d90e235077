/** \file
 * The CUDA emitter: a FusedPlan -> one CUDA translation unit (compiled by NVRTC) plus the
 * host-side description of its launches, in order. Every kernel takes one argument,
 *   struct Args { int64_t N, E, NS; void* G[kNumGraphArrays]; void* B[num_buffers]; unsigned long long* counters; }
 * N = destinations, NS = sources (equal on a square graph), E = edges;
 * with G and B as in the C++ emitter (cpu_emitter.h) but device pointers, and `counters` one
 * zeroed work counter per traversal kernel (dynamic assignment over the degree order).
 *
 * Thread mapping (codegen/launch_layout.h): a group of threads per centre vertex (or edge)
 * sized by the kernel's widest value; values that wide are split across the group's lanes,
 * narrower ones (per-head scores) are kept whole by every lane; reductions of split values over
 * a feature axis are group (warp-shuffle, then block) reductions; no atomics touch results.
 * Needs no torch and no CUDA: the golden test of the generated source runs anywhere.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cpu_emitter.h"
#include "codegen/plan.h"
#include "codegen/traffic.h"

namespace seastar::codegen {

struct CudaLaunch {
  /// What the kernel's groups iterate over: N vertices, E edges, max(1, min(N, count)) blocks
  /// of centres (traversals with parameter gradients), or a fixed count.
  enum class Items { Vertices, Edges, Chunks, Fixed };
  std::string name;              ///< the kernel's extern "C" name
  std::string what;              ///< a one-line description (traversal, map, partial-sum reduction)
  Items items = Items::Vertices;
  int64_t count = 0;             ///< Chunks: the most blocks; Fixed: the items
  launch::ThreadMapping mapping;
  int counter = -1;              ///< its work counter (dynamic assignment), else -1
  /// Traversals: centres of at least this many edges take a block each (Items::Vertices, and
  /// Items::Chunks with hub_workers) or are cut into pieces of hub_piece_edges() edges
  /// (Items::Chunks otherwise); 0 = neither.
  int64_t hub_degree = 0;
  int hub_counter = -1;          ///< the hubs' work counter, else -1
  /// Items::Chunks on the hub path (partial sums and accumulators): the most hub workers, a
  /// block each, worker w taking hubs w, w + HW, ...; 0 when hubs are cut into pieces.
  int64_t hub_workers = 0;
  bool src_side = false;         ///< iterates the sources of a bipartite graph (NS, not N)
  int64_t shared_bytes = 0;      ///< dynamic shared memory per block
  /// What it reads and writes per edge, per vertex (centre) and per launch (traffic.h).
  std::vector<TrafficTerm> traffic;

  /// Items for a graph of N destinations, NS sources and E edges.
  int64_t num_items(int64_t N, int64_t E, int64_t NS) const {
    if (src_side) N = NS;
    switch (items) {
      case Items::Vertices: return N;
      case Items::Edges: return E;
      case Items::Chunks: return N < count ? (N < 1 ? 1 : N) : count;
      case Items::Fixed: break;
    }
    return count;
  }

  /// A traversal that cuts its hubs into pieces (Items::Chunks with hub_degree > 0): the edges
  /// of one piece (launch::kHubPiecesPerChunk); the generated code computes the same (PE).
  int64_t hub_piece_edges(int64_t N, int64_t E, int64_t NS) const {
    const int64_t slots = launch::kHubPiecesPerChunk * num_items(N, E, NS);
    return std::max<int64_t>(1, (E + slots - 1) / slots);
  }
};

struct CudaProgram {
  std::string source;
  std::vector<CudaLaunch> launches;  ///< in launch order
  int num_counters = 0;
  int num_buffers = 0;
  int64_t scratch_elems = 0;         ///< zeroed T elements behind Args::scratch
  int float_bytes = 4;               ///< sizeof(T)
  /// Bytes every buffer's address must be a multiple of (kernels that read vectors assume it;
  /// the runtime copies a tensor whose address is not), 0 = any.
  int64_t buffer_alignment = 0;
};

/// `options.float_type` / `index_type` as for emit_cpu.
CudaProgram emit_cuda(const FusedPlan& plan, const EmitOptions& options);

}  // namespace seastar::codegen
