/** \file
 * Thread groups: the feature-adaptive mapping gives each centre vertex (or edge) a group of GT
 * threads, a power of two. GT <= 32: the group is GT consecutive lanes of one warp (32 / GT
 * groups per warp); GT > 32: the group is the whole block. Lane l of a group holds features
 * l, l + GT, l + 2 GT, ... of every value split across the group (with vectors of V: features
 * V l .. V l + V-1, then the same V GT further on, ...).
 *
 * Work assignment over the degree-sorted vertex order is dynamic: a global counter, the only
 * atomic in Seastar's kernels, hands out the next vertices; it schedules work and never touches
 * results, so the output does not depend on which group ran which vertex. Reductions across a
 * group are butterflies (every lane ends with the same, bitwise identical value), then a fixed
 * order over warps: deterministic.
 */
#pragma once

#include "seastar_types.cuh"

/// The block's dynamic shared memory (the CUDA emulator of the tests defines its own).
#ifndef SX_DYNAMIC_SHARED
#define SX_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

namespace sx {

/// `p`, which the runtime has aligned to A bytes (CudaProgram::buffer_alignment): tells the
/// compiler that a lane's consecutive elements of a row may be read and written as one access.
template <int A>
__device__ __forceinline__ void* assume_aligned(void* p) {
  return __builtin_assume_aligned(p, A);
}

template <int GT>
struct Group {
  static_assert(GT >= 1 && GT <= 1024 && (GT & (GT - 1)) == 0, "group size must be a power of two <= 1024");
  static constexpr int size = GT;
  /// groups per warp (GT < 32; a group of 32 or more threads is one warp or one block)
  static constexpr int per_warp = GT < 32 ? 32 / GT : 1;
  int lane;          ///< 0 .. GT-1
  int index;         ///< the group's index in its block
  unsigned mask;     ///< the lanes of this group in its warp (GT <= 32)

  __device__ __forceinline__ Group() : lane(threadIdx.x % GT), index(threadIdx.x / GT) {
    if constexpr (GT >= 32) {
      mask = 0xffffffffu;
    } else {
      mask = ((1u << GT) - 1u) << ((threadIdx.x % 32) / GT * GT);
    }
  }

  __device__ __forceinline__ void sync() const {
    if constexpr (GT <= 32) {
      __syncwarp(mask);
    } else {
      __syncthreads();
    }
  }

  /// Dynamic assignment from a zeroed counter shared by the whole grid. Returns the first item
  /// of this round for the whole warp (GT <= 32: lane 0 takes per_warp items with one atomic,
  /// and the group's item is base + offset()) or block (GT > 32: one item). The value is the
  /// same in every lane of the warp or block, so `if (base >= n) break;` ends the loop for all
  /// of them in the same round, as the warp-wide shuffle here requires.
  __device__ __forceinline__ int64_t next_base(unsigned long long* counter) const {
    if constexpr (GT <= 32) {
      unsigned long long base = 0;
      if ((threadIdx.x & 31) == 0) base = atomicAdd(counter, (unsigned long long)per_warp);
      return (int64_t)__shfl_sync(0xffffffffu, base, 0);
    } else {
      __shared__ unsigned long long slot;
      __syncthreads();  // every thread has read the previous round's slot
      if (threadIdx.x == 0) slot = atomicAdd(counter, 1ull);
      __syncthreads();
      return (int64_t)slot;
    }
  }
  /// This group's item relative to next_base().
  __device__ __forceinline__ int64_t offset() const {
    if constexpr (GT < 32) {
      return (int64_t)((threadIdx.x & 31) / GT);
    } else {
      return 0;
    }
  }

  /// Static assignment for map kernels (a grid-stride loop over items).
  __device__ __forceinline__ int64_t first() const { return (int64_t)blockIdx.x * (blockDim.x / GT) + index; }
  __device__ __forceinline__ int64_t stride() const { return (int64_t)gridDim.x * (blockDim.x / GT); }
};

/// Block-wide dynamic assignment from a zeroed counter: the next item, the same in every
/// thread of the block (every thread must call it).
__device__ __forceinline__ int64_t block_next(unsigned long long* counter) {
  __shared__ unsigned long long slot;
  __syncthreads();  // every thread has read the previous round's slot
  if (threadIdx.x == 0) slot = atomicAdd(counter, 1ull);
  __syncthreads();
  return (int64_t)slot;
}

/// How many centres of a degree order (decreasing degree, ptr the offsets) have at least
/// `min_degree` edges: they are its first ones. A binary search, the same in every thread.
template <class I>
__device__ __forceinline__ int64_t hub_count(const I* ptr, const I* order, int64_t n, int64_t min_degree) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const int64_t c = order[mid];
    if ((int64_t)ptr[c + 1] - (int64_t)ptr[c] >= min_degree) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

struct Sum {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
struct Max {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a < b ? b : a; }
};
struct Min {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const { return b < a ? b : a; }
};

/// Every lane of the group gets op over the group's values of `v` (the same bits in every lane).
template <int GT, class A, class Op>
__device__ __forceinline__ A group_allreduce(const Group<GT>& g, A v, Op op) {
  constexpr int W = GT < 32 ? GT : 32;
#pragma unroll
  for (int off = W / 2; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(g.mask, v, off, W));
  if constexpr (GT > 32) {
    __shared__ A part[GT / 32];
    __syncthreads();  // the previous call's readers are done
    if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
#pragma unroll
    for (int w = 1; w < GT / 32; ++w) v = op(v, part[w]);
  }
  return v;
}

/// group_allreduce over each of n values, in place.
template <int GT, class A, class Op>
__device__ __forceinline__ void group_allreduce(const Group<GT>& g, A* v, int n, Op op) {
  for (int i = 0; i < n; ++i) v[i] = group_allreduce(g, v[i], op);
}

}  // namespace sx
