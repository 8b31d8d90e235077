/** \file
 * The threads the generated CPU kernels run on: a pool whose caller works too and whose
 * helpers wait passively.
 *
 * OpenMP's teams (libgomp, shared with torch) spin at the end of every parallel region before
 * they sleep; on a machine whose cores are busy with other processes a spinning thread takes the
 * core its own team's last worker needs, and a parallel region stalls at its barrier for a
 * scheduler time slice. An epoch runs hundreds of regions, so two threads end up slower than one.
 * Here a kernel's items (blocks of centres, chunks of rows) are claimed one at a time from an
 * atomic counter by the calling thread and by whichever helpers the scheduler wakes: a helper that
 * is not scheduled in time finds nothing left and claims nothing, so the caller never waits for a
 * thread that has not started, only for items already claimed, and a kernel never runs slower than
 * on the caller alone by more than one item. Helpers sleep on a condition variable between jobs
 * (no spinning). The thread count is torch's (`torch.set_num_threads`, passed in by the launcher); a kernel launched while
 * another thread's kernel holds the pool runs on its caller alone. After fork() the child starts
 * with a fresh pool (the parent's helpers do not exist there).
 */
#pragma once

#include <cstdint>

namespace seastar::kernels {

/// What the generated kernels are given (seastar_bind_runtime): C linkage, no C++ types, so the
/// kernels' shared objects need no Seastar header. Keep in step with cpu_emitter.cpp's prelude.
struct KernelRuntime {
  /// Runs fn(ctx, i) for every i in [0, n), on the pool; returns when all have run.
  void (*parallel_for)(int64_t n, void* ctx, void (*fn)(void* ctx, int64_t i));
};

/// The runtime the kernels are bound to when they are loaded.
const KernelRuntime* kernel_runtime();

/// parallel_for on `threads` threads (the caller and threads - 1 helpers; <= 1: inline).
void pool_parallel_for(int64_t n, void* ctx, void (*fn)(void*, int64_t), int threads);

/// The thread count KernelRuntime::parallel_for uses; the launcher sets it from torch's before
/// each launch (this library has no torch). Until then: 1.
void set_kernel_threads(int threads);

}  // namespace seastar::kernels
