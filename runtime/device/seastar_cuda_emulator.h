/** \file
 * A host emulation of the CUDA subset Seastar's generated kernels use, so that the CUDA
 * emitter's output can be *run* and checked on machines without a GPU (SEASTAR_CUDA_EMULATE=1,
 * see runtime/cuda/cuda_emulator.h). Blocks run one after another; the threads of a block run as
 * std::threads, so barriers, warp shuffles and group reductions interleave for real:
 *   __syncthreads          a barrier of the block's threads
 *   __syncwarp(mask)       a barrier of the lanes in mask (per warp and mask)
 *   __shfl(_xor)_sync      lanes publish their value, barrier, read the partner's, barrier
 *   atomicAdd              a mutex
 *   __shared__             static storage (one block at a time)
 * A barrier that waits for more than SEASTAR_EMU_TIMEOUT seconds (default 20) aborts with a
 * message: a deadlock of the generated code (threads of a mask that never arrive) would hang a
 * GPU too. Slow (a thread per CUDA thread): meant for tests on small graphs.
 */
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#define SEASTAR_DEVICE_TYPES 1  // <cstdint>'s types, not seastar_types.cuh's
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)

namespace emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

inline double timeout_seconds() {
  const char* t = std::getenv("SEASTAR_EMU_TIMEOUT");
  return t && *t ? std::atof(t) : 20.0;
}

[[noreturn]] inline void deadlock(const char* what, unsigned tid) {
  std::fprintf(stderr, "seastar CUDA emulator: %s of thread %u timed out: the generated kernel deadlocks\n", what, tid);
  std::abort();
}

/// A reusable barrier for `count` threads.
struct Barrier {
  std::mutex m;
  std::condition_variable cv;
  unsigned arrived = 0;
  uint64_t generation = 0;
  void wait(unsigned count, const char* what, unsigned tid) {
    std::unique_lock<std::mutex> lock(m);
    const uint64_t gen = generation;
    if (++arrived == count) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    if (!cv.wait_for(lock, std::chrono::duration<double>(timeout_seconds()), [&] { return generation != gen; }))
      deadlock(what, tid);
  }
};

/// One block's synchronisation state.
struct Block {
  Barrier block;
  std::mutex warp_mutex;
  std::map<std::pair<unsigned, unsigned>, Barrier> warp_barriers;  ///< (warp, mask)
  std::vector<uint64_t> slots;                                      ///< one shuffle slot per thread
  std::vector<unsigned char> dynamic_shared;
  Barrier& warp_barrier(unsigned warp, unsigned mask) {
    std::lock_guard<std::mutex> lock(warp_mutex);
    return warp_barriers[{warp, mask}];
  }
};

inline Dim3 grid_dim, block_dim;
inline thread_local Dim3 thread_idx, block_idx;
inline thread_local Block* current = nullptr;
inline std::mutex atomic_mutex;

inline unsigned popcount(unsigned m) { return static_cast<unsigned>(__builtin_popcount(m)); }

/// Runs kernel(args) on grid x block threads, blocks one after another.
template <class Args>
void launch(void (*kernel)(Args), unsigned grid, unsigned block, size_t shared_bytes, const Args& args) {
  grid_dim = Dim3{grid, 1, 1};
  block_dim = Dim3{block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    Block state;
    state.slots.assign(block, 0);
    state.dynamic_shared.assign(shared_bytes + 16, 0);
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, t] {
        thread_idx = Dim3{t, 0, 0};
        block_idx = Dim3{b, 0, 0};
        current = &state;
        kernel(args);
      });
    for (auto& th : threads) th.join();
  }
}

template <class T>
T shuffle(unsigned mask, T v, unsigned src_lane) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a wide type");
  const unsigned tid = thread_idx.x, warp = tid / 32, lane = tid % 32;
  Block& b = *current;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  b.slots[tid] = bits;
  Barrier& bar = b.warp_barrier(warp, mask);
  bar.wait(popcount(mask), "a warp shuffle", tid);
  if (!(mask >> (src_lane % 32) & 1u)) {
    std::fprintf(stderr, "seastar CUDA emulator: lane %u reads lane %u outside mask %08x\n", lane, src_lane, mask);
    std::abort();
  }
  T out;
  std::memcpy(&out, &b.slots[warp * 32 + src_lane], sizeof(T));
  bar.wait(popcount(mask), "a warp shuffle", tid);
  return out;
}

}  // namespace emu

#define threadIdx (emu::thread_idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define SX_DYNAMIC_SHARED(name) unsigned char* name = emu::current->dynamic_shared.data()

inline void __syncthreads() { emu::current->block.wait(emu::block_dim.x, "__syncthreads", emu::thread_idx.x); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  emu::current->warp_barrier(emu::thread_idx.x / 32, mask).wait(emu::popcount(mask), "__syncwarp", emu::thread_idx.x);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const unsigned lane = emu::thread_idx.x % 32, base = lane / width * width;
  return emu::shuffle(mask, v, base + static_cast<unsigned>(src) % width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const unsigned lane = emu::thread_idx.x % 32, base = lane / width * width;
  return emu::shuffle(mask, v, base + ((lane - base) ^ static_cast<unsigned>(lane_mask)) % width);
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> lock(emu::atomic_mutex);
  const unsigned long long old = *p;
  *p = old + v;
  return old;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
