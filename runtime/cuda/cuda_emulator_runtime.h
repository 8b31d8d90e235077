/** \file
 * The host half of the CUDA emulator (cuda_emulator.h): the threads of a launch, the barriers,
 * the warp shuffles and the dynamic shared memory, compiled once into Seastar. An emulated
 * kernel (kernels/device/seastar_cuda_emulator.h) includes no standard header and reaches these
 * through the table that the JIT hands every object exporting kBindSymbol when it loads it
 * (compiler.h, bind_loaded_objects): each emulated kernel's compile parses only its own code.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace seastar::runtime::emulator {

/// The symbol an emulated kernel exports to receive the table.
inline constexpr const char* kBindSymbol = "seastar_bind_emulator";

/// The table, as the kernel side declares it field for field (seastar_cuda_emulator.h).
struct Table {
  /// Runs run(args, block, thread, state) for every thread of grid x block, blocks one after
  /// another, the threads of a block as fibers of the calling thread; `state` is the block's.
  void (*launch)(unsigned grid, unsigned block, size_t shared_bytes,
                 void (*run)(const void* args, unsigned block_idx, unsigned thread_idx, void* state),
                 const void* args);
  /// __syncthreads: a barrier of the block's threads.
  void (*sync_block)(void* state, unsigned thread);
  /// __syncwarp(mask): a barrier of the lanes in mask of the thread's warp.
  void (*sync_warp)(void* state, unsigned thread, unsigned mask);
  /// A warp shuffle: the thread publishes `bits`, and reads those of lane src_lane of its warp.
  uint64_t (*shuffle)(void* state, unsigned thread, unsigned mask, uint64_t bits, unsigned src_lane);
  /// The block's dynamic shared memory (shared_bytes of the launch, zeroed, 16-byte aligned).
  unsigned char* (*dynamic_shared)(void* state);
};

/// The table of this process.
const Table* table();

}  // namespace seastar::runtime::emulator
