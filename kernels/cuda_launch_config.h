/** \file
 * The feature-adaptive thread mapping of the CUDA kernels (no torch, no CUDA headers: the
 * emitter bakes the group size into the kernel source and the runtime sizes the grid).
 *
 * A kernel works on items (centre vertices of a traversal, vertices or edges of a map) with a
 * group of `group_threads` threads per item, a power of two: every value that is as wide as the
 * kernel's widest value (S feature elements) is split across the group, lane l holding elements
 * l, l + group_threads, ...; narrower values (per-head scores) are kept whole by every lane.
 *   S < 32          group = the next power of two >= S (>= heads), 32 / group items per warp
 *   32 <= S < 256   group = one warp
 *   S >= 256        group = one block per item, 256..1024 threads, <= 4 elements per thread
 * Blocks never exceed 1,024 threads, whatever S and heads are (a block of in*out threads was
 * one of the original system's failures). Traversals take their items dynamically, in the
 * degree-sorted order, from a global counter; the grid only needs to fill the GPU.
 */
#pragma once

#include <cstdint>

namespace seastar::kernels {

constexpr int kMaxBlockThreads = 1024;
constexpr int kWarpSize = 32;

struct ThreadMapping {
  int group_threads = 1;     ///< threads per item, a power of two
  int block_threads = 256;   ///< threads per block, <= kMaxBlockThreads, a multiple of group_threads
  int groups_per_block = 256;
  int64_t features = 1;      ///< S, the widest value's feature elements
  int64_t elems_per_thread = 1;  ///< ceil(S / group_threads): split elements each lane holds
  bool block_per_item = false;   ///< group_threads > 32: the whole block works on one item
};

/// The mapping for a kernel whose widest value has `features` elements (`heads` heads of
/// features / heads each). Any non-negative sizes give a valid mapping.
ThreadMapping choose_mapping(int64_t features, int64_t heads = 1);

/// Blocks for `items` items: enough for every group to have one, capped at `max_blocks`
/// (resident blocks of the device; 0 = no cap; work beyond it is taken dynamically or in a
/// grid-stride loop). Always >= 1 and <= 2^31 - 1.
int64_t grid_size(const ThreadMapping& m, int64_t items, int64_t max_blocks = 0);

}  // namespace seastar::kernels
