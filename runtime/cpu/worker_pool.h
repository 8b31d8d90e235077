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
 * thread that has not started, only for items already claimed. A helper descheduled in the middle
 * of an item still makes the caller wait for its next time slice (on a busy core, or one where
 * torch's OpenMP threads spin after an op), so each job is judged: when three in a row took longer
 * than the caller's own pace says it alone would have, kernels run on their caller alone for a
 * back-off (10 ms, doubling up to 1 s while the job that ends it still loses), and two threads stay
 * about as fast as one where the second core is not to be had. Helpers sleep on a condition
 * variable between jobs (no spinning). The thread count is the user's torch.set_num_threads
 * (passed in by the launcher, after the thread governor, which lowers only torch's own count); a
 * kernel launched while another thread's kernel holds the pool runs on its caller alone. After
 * fork() the child starts with a fresh pool (the parent's helpers do not exist there).
 */
#pragma once

#include <cstdint>

namespace seastar::runtime {

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

/// What the pool has done since the process started (or since fork()).
struct WorkerPoolStats {
  int64_t pooled = 0;   ///< jobs offered to helpers
  int64_t lost = 0;     ///< of those, jobs that took longer than the caller alone would have
  int64_t benched = 0;  ///< jobs run on the caller alone because helpers had lately lost
};
WorkerPoolStats worker_pool_stats();

/// The thread count KernelRuntime::parallel_for uses; the launcher sets it from torch's before
/// each launch (this library has no torch). Until then: 1.
void set_kernel_threads(int threads);

}  // namespace seastar::runtime
