/** \file
 * A host emulation of the CUDA subset Seastar's generated kernels use, so that the CUDA
 * emitter's output can be *run* and checked on machines without a GPU (SEASTAR_CUDA_EMULATE=1,
 * see runtime/cuda/cuda_emulator.h). Blocks run one after another; the threads of a block run as
 * fibers of the launching thread, switched at every barrier, so barriers, warp shuffles and group
 * reductions interleave for real:
 *   __syncthreads          a barrier of the block's threads
 *   __syncwarp(mask)       a barrier of the lanes in mask (per warp and mask)
 *   __shfl(_xor)_sync      lanes publish their value, barrier, read the partner's, barrier
 *   atomicAdd              an atomic add of the compiler's
 *   __shared__             static storage (one block at a time)
 * The threads and barriers live in Seastar (runtime/cuda/cuda_emulator_runtime.h), which hands
 * the loaded kernel their table: this file includes no standard header, so that compiling an
 * emulated kernel costs its own code only. A barrier that can never complete aborts with a message.
 * The fibers of a block share the host thread, so the per-thread variables below are the running
 * fiber's: each call that may switch fibers puts them back before it returns. Slow (every CUDA
 * thread runs in turn): meant for tests on small graphs.
 */
#pragma once

typedef signed char int8_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef __SIZE_TYPE__ size_t;
#define SEASTAR_DEVICE_TYPES 1  // the types above, not seastar_types.cuh's
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)

// the C library's math functions that seastar_math.cuh calls (libm, which the process has loaded)
extern "C" {
float expf(float); double exp(double); float logf(float); double log(double);
float sqrtf(float); double sqrt(double); float fabsf(float); double fabs(double);
float tanhf(float); double tanh(double); float log1pf(float); double log1p(double);
float expm1f(float); double expm1(double); float powf(float, float); double pow(double, double);
}

namespace emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// field for field as runtime/cuda/cuda_emulator_runtime.h's Table
struct Table {
  void (*launch)(unsigned, unsigned, size_t, void (*)(const void*, unsigned, unsigned, void*), const void*);
  void (*sync_block)(void*, unsigned);
  void (*sync_warp)(void*, unsigned, unsigned);
  uint64_t (*shuffle)(void*, unsigned, unsigned, uint64_t, unsigned);
  unsigned char* (*dynamic_shared)(void*);
};
static const Table* rt = nullptr;

inline thread_local Dim3 grid_dim, block_dim, thread_idx, block_idx;
inline thread_local void* current = nullptr;

/// Calls f() (which may run other fibers) and restores this fiber's thread and block.
template <class F>
inline auto as_this_thread(F f) {
  const Dim3 t = thread_idx, b = block_idx;
  void* const c = current;
  auto r = f();
  thread_idx = t;
  block_idx = b;
  current = c;
  return r;
}

/// Runs kernel(args) on grid x block threads, blocks one after another.
template <class Args>
void launch(void (*kernel)(Args), unsigned grid, unsigned block, size_t shared_bytes, const Args& args) {
  if (!rt) __builtin_trap();  // loaded without the JIT's binding: nothing could run
  struct Call {
    void (*kernel)(Args);
    const Args* args;
  } call{kernel, &args};
  grid_dim = Dim3{grid, 1, 1};
  block_dim = Dim3{block, 1, 1};
  rt->launch(grid, block, shared_bytes, [](const void* c, unsigned b, unsigned t, void* state) {
    thread_idx = Dim3{t, 0, 0};
    block_idx = Dim3{b, 0, 0};
    current = state;
    const Call& k = *static_cast<const Call*>(c);
    k.kernel(*k.args);
  }, &call);
}

template <class T>
T shuffle(unsigned mask, T v, unsigned src_lane) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffle of a wide type");
  uint64_t bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  bits = as_this_thread([&] { return rt->shuffle(current, thread_idx.x, mask, bits, src_lane); });
  T out;
  __builtin_memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace emu

extern "C" __attribute__((visibility("default"))) void seastar_bind_emulator(const void* table) {
  emu::rt = static_cast<const emu::Table*>(table);
}

#define threadIdx (emu::thread_idx)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define SX_DYNAMIC_SHARED(name) unsigned char* name = emu::rt->dynamic_shared(emu::current)

inline void __syncthreads() {
  emu::as_this_thread([] { emu::rt->sync_block(emu::current, emu::thread_idx.x); return 0; });
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  emu::as_this_thread([&] { emu::rt->sync_warp(emu::current, emu::thread_idx.x, mask); return 0; });
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
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline float __int_as_float(int i) {
  float f;
  __builtin_memcpy(&f, &i, sizeof f);
  return f;
}
