/** \file
 * What generated kernels and the runtime that calls them agree on, in one dependency-free
 * header (no IR, no torch, no CUDA): the slots of the graph arrays and sizes every entry point
 * receives, the options of an emission, and the CUDA kernels' feature-adaptive thread mapping
 * (the emitter bakes the group size into the source; the runtime sizes the grid).
 *
 * Entry points (cpu_emitter.h, cuda_emitter.h: kEntrySymbol; the CUDA kernels: struct Args) receive
 *   sizes = {num_dst, num_edges, num_src}              (Size)
 *   graph = the GraphArray slots below, index type I   (kNumGraphArrays pointers)
 *   buffers in FusedPlan::buffers order.
 *
 * Thread mapping: a kernel works on items (centre vertices of a traversal, vertices or edges
 * of a map) with a group of `group_threads` threads per item, a power of two: every value that
 * is as wide as the kernel's widest value (S feature elements) is split across the group, lane
 * l holding elements l, l + group_threads, ... (or, with a vector of V, the V elements from
 * V*l, then from V*l + V*group_threads, ...); narrower values (per-head scores) are kept whole
 * by every lane.
 *   S < 32          group = the next power of two >= S (>= heads), 32 / group items per warp
 *   32 <= S < 256   group = one warp
 *   S >= 256        group = one block per item, 256..1024 threads, <= 4 elements per thread
 * Blocks never exceed 1,024 threads, whatever S and heads are (a block of in*out threads was
 * one of the original system's failures). Traversals take their items dynamically, in the
 * degree-sorted order, from a global counter; the grid only needs to fill the GPU.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace seastar::launch {

/// The graph arrays, in the order of the `graph` pointer array: the in-edge index (CSC: per
/// destination, its edges' sources and ids, and the destinations by decreasing degree), the
/// out-edge index (CSR, the same per source), each edge's endpoints, and the types.
enum GraphArray : int {
  kInPtr, kInNbr, kInEid, kInOrder,
  kOutPtr, kOutNbr, kOutEid, kOutOrder,
  kSrc, kDst, kNodeType, kEdgeType,
  kNumGraphArrays
};
/// The first of the four arrays (ptr, nbr, eid, order) of the in-edge or the out-edge index.
constexpr int edge_index_base(bool out_edges) { return out_edges ? kOutPtr : kInPtr; }

/// The `sizes` array.
enum Size : int { kNumDst, kNumEdges, kNumSrc, kNumSizes };

/// The host entry point of every C++ unit (cpu_emitter.cpp, and the CUDA emulator's), which the
/// loader resolves (runtime/jit/compiler.cpp), and the hook by which it hands the unit its workers.
inline constexpr const char* kEntrySymbol = "seastar_entry";
inline constexpr const char* kBindRuntimeSymbol = "seastar_bind_runtime";
/// The entry point's definition up to its body: `extern "C" void seastar_entry(const int64_t*
/// sizes, void* const* G, void* const* B) {` and a newline.
std::string entry_definition();

/// The CUDA kernels' one argument, passed by value: the sizes (N = num_dst, E, NS = num_src),
/// the graph arrays, the buffers (at least one slot), the launch's work counters and scratch.
/// cuda_emitter.cpp declares it in the source, cuda_runtime.cpp packs it, the CUDA emulator
/// fills it by field name. Every field is 8 bytes: no padding, the struct is its words in order.
std::string cuda_args_struct(int num_buffers);
std::vector<uint64_t> cuda_args_words(int64_t N, int64_t E, int64_t NS, void* const* graph, void* const* buffers,
                                      int num_buffers, void* counters, void* scratch);

/// Traversals (CUDA) give a centre with at least this many edges to a whole block, whose groups
/// split its edges and combine their partial results in a fixed order: on power-law graphs one
/// group walking a hub's edges alone would outlast the rest of the kernel. SEASTAR_CUDA_HUB_DEGREE
/// overrides it (0: no hub path), for the device benchmark's sweep.
constexpr int64_t kDefaultHubDegree = 512;
/// Threads per block of a traversal with the hub path: the groups that split a hub.
constexpr int kHubBlockThreads = 512;
/// Threads per block of groups narrower than a block (every map, and traversals without the hub
/// path).
constexpr int kSmallBlockThreads = 256;
/// Traversals with parameter-gradient partial sums cut hubs into pieces of the mean chunk's
/// edges over this: a chunk holding a piece then does at most about 1 + 1 / this of the mean
/// chunk's work, at the cost of reading a hub's centre once per piece.
constexpr int64_t kHubPiecesPerChunk = 2;

constexpr int kMaxBlockThreads = 1024;
constexpr int kWarpSize = 32;

/// The thread-mapping parameters the device benchmark sweeps (benchmarks/sweep_launch.py), so
/// that the defaults come from measurement. The runtime reads them from SEASTAR_CUDA_GROUP_THREADS,
/// SEASTAR_CUDA_BLOCK_THREADS and SEASTAR_CUDA_HUB_BLOCK_THREADS when it emits a program
/// (runtime/engine/kernel_variant.cpp); the defaults are the mapping described above.
struct MappingSettings {
  /// Widths under 256: at most this many threads per item (a power of two, 1..32). Fewer
  /// threads per item give each lane more elements (more independent loads in flight) and pack
  /// more low-degree centres into a warp; never fewer than one lane per head while heads fit in
  /// a warp.
  int max_group_threads = kWarpSize;
  /// Threads per block of groups narrower than a block: a multiple of 32, 32..1,024.
  int block_threads = kSmallBlockThreads;
  /// Threads per block of a traversal with the hub path: a multiple of 32, 64..1,024 (at least
  /// two groups must split a hub).
  int hub_block_threads = kHubBlockThreads;
  /// At most this many consecutive elements a lane holds together (1, 2 or 4): lane l then
  /// holds elements V*l .. V*l + V-1, then the same GT*V further on, which the code generator
  /// reads and writes as one 8- or 16-byte access; 1 keeps the one-element interleave.
  int vector_elems = 1;
  bool operator==(const MappingSettings& o) const {
    return max_group_threads == o.max_group_threads && block_threads == o.block_threads &&
           hub_block_threads == o.hub_block_threads && vector_elems == o.vector_elems;
  }
};

/// "" for valid settings, else what is wrong with them (named by the settings' variables).
std::string mapping_settings_error(const MappingSettings& s);

struct EmitOptions {
  std::string float_type = "float";     ///< "float" or "double"
  std::string index_type = "int32_t";   ///< "int32_t" or "int64_t"
  /// CUDA: the type float buffers hold when it is not float_type ("sx::half_t", "sx::bfloat16_t":
  /// 16-bit storage, read into and stored from float_type); "" = float_type.
  std::string storage_type;
  std::string name = "program";
  int64_t hub_degree = kDefaultHubDegree;  ///< CUDA: the hub path's least degree; 0 = none
  MappingSettings mapping;                 ///< CUDA: the thread mapping's parameters
};

struct ThreadMapping {
  int group_threads = 1;     ///< threads per item, a power of two
  int block_threads = 256;   ///< threads per block, <= kMaxBlockThreads, a multiple of group_threads
  int groups_per_block = 256;
  int64_t features = 1;      ///< S, the widest value's feature elements
  int64_t elems_per_thread = 1;  ///< ceil(S / group_threads): split elements each lane holds
  bool block_per_item = false;   ///< group_threads > 32: the whole block works on one item
  /// Consecutive elements a lane holds together (MappingSettings::vector_elems where the width
  /// allows it: S a multiple of group_threads * vector, so no lane holds part of a vector).
  int vector = 1;
};

/// The mapping for a kernel whose widest value has `features` elements (`heads` heads of
/// features / heads each). Any non-negative sizes and valid settings give a valid mapping.
ThreadMapping choose_mapping(int64_t features, int64_t heads = 1, const MappingSettings& settings = {});

/// Blocks for `items` items: enough for every group to have one, capped at `max_blocks`
/// (resident blocks of the device; 0 = no cap; work beyond it is taken dynamically or in a
/// grid-stride loop). Always >= 1 and <= 2^31 - 1.
int64_t grid_size(const ThreadMapping& m, int64_t items, int64_t max_blocks = 0);

}  // namespace seastar::launch
