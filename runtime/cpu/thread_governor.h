/** \file
 * How many threads torch's CPU ops get while other processes take cores.
 *
 * torch's CPU ops split their work statically among torch.get_num_threads() threads. When another
 * CPU-bound process shares a core with one of them, every op waits for that thread's share, and
 * two threads end up slower than one (benchmarks/bench_threads.py). The worker pool's kernels cope
 * (their items are claimed dynamically, worker_pool.h), torch's ops do not. So before a CPU launch,
 * at most every kSampleSeconds, the governor measures how many cores other processes kept busy
 * since its last sample: the busy time of the CPUs this process may run on (/proc/stat) less this
 * process's own CPU time. While that is half a core or more, torch's count is lowered to the cores
 * left (at least 1; the kernels keep the user's count); when the other processes leave, the
 * user's count comes back. A change needs two samples in a row that agree, so one noisy interval
 * does not flip it. The user's count is torch's count whenever that differs from what the
 * governor set last (torch.set_num_threads between launches). It changes torch's global thread
 * count, which torch.compile guards on, so it is off unless the user asks for it
 * (SEASTAR_THREAD_GOVERNOR=1 or seastar.set_thread_governor(True)); the launcher leaves it off
 * while torch's deterministic algorithms are on. This half has no
 * torch: the launcher (torch_threads.h) asks it and applies the answer.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace seastar::runtime {

/// Cumulative counters at one instant.
struct LoadReading {
  double wall_s = 0;  ///< a monotonic clock
  double busy_s = 0;  ///< CPU time every process spent on the CPUs this process may use
  double own_s = 0;   ///< this process's CPU time (all its threads)
};

/// The thread count for `requested` threads on `cpus` usable CPUs while other processes keep
/// `other_cores` of them busy: `requested` below half a core of other load, else the cores left,
/// rounded to the nearest, at least 1 and at most `requested`.
int governed_threads(int requested, int cpus, double other_cores);

/// The busy seconds (user, nice, system, irq, softirq, steal; not idle or iowait) of `cpus` in
/// the text of /proc/stat, whose counters are in 1/ticks_per_second; nullopt if one is missing.
std::optional<double> busy_seconds(std::string_view proc_stat, const std::vector<int>& cpus, long ticks_per_second);

struct ThreadGovernorStats {
  bool enabled = false;     ///< not switched off (SEASTAR_THREAD_GOVERNOR=0, set_thread_governor)
  bool available = false;   ///< the load can be read here (/proc/stat)
  int requested = 0;        ///< the user's thread count (0: no launch yet)
  int threads = 0;          ///< the count the governor gives now
  double other_cores = 0;   ///< the other processes' load it acts on
  int64_t samples = 0;      ///< load measurements taken
  int64_t lowered = 0;      ///< times it lowered torch's count
  int64_t restored = 0;     ///< times it raised it again
};

/// The decisions, given readings (runtime::govern_threads takes them from the system).
class ThreadGovernor {
 public:
  static constexpr double kSampleSeconds = 0.2;  ///< the shortest interval a sample covers
  static constexpr double kStaleSeconds = 1.0;   ///< a longer gap starts over from a new baseline

  explicit ThreadGovernor(int cpus) : cpus_(cpus) {}

  /// `current`: torch's count now. Returns the count torch should have (current: no change).
  /// `reading`: the load now, or nullopt when no sample is due.
  int advise(int current, const std::optional<LoadReading>& reading);
  /// What advise would return now, without a reading or the bookkeeping of a change.
  int target() const { return requested_ > 0 ? governed_threads(requested_, cpus_, other_cores_) : 0; }
  /// The user's count (0 before the first advise, or after release).
  int requested() const { return requested_; }
  /// Forgets a change of its own: `current` becomes the user's count (the governor switched off).
  int release(int current);
  ThreadGovernorStats stats() const;
  /// Whether a reading taken at wall_s would be used (a sample is due).
  bool sample_due(double wall_s) const { return !baseline_ || wall_s - baseline_->wall_s >= kSampleSeconds; }

 private:
  void measure(const LoadReading& reading);

  int cpus_;
  int requested_ = 0, applied_ = 0;
  double other_cores_ = 0;         // the accepted measurement
  int pending_ = 0;                // a target the last sample pointed at, waiting for a second one
  std::optional<LoadReading> baseline_;
  int64_t samples_ = 0, lowered_ = 0, restored_ = 0;
};

/// The thread counts for a launch: torch's ops (static split) get the governed count, the
/// kernels the user's (their pool hands items out dynamically, and a helper sharing a core with
/// another process still takes some).
struct LaunchThreads {
  int torch;
  int kernels;
};

/// The process's governor, for torch's count `current` on the calling thread: takes a reading
/// when a sample is due. Only the process's main thread is governed (torch.set_num_threads acts
/// on the thread that calls it); other threads, and a governor switched off, get `current` back.
/// Not `allowed` (torch's deterministic algorithms on): the user's count, and no sampling.
LaunchThreads govern_threads(int current, bool allowed);
/// Switches the process's governor on or off; returns the count torch should have now (off: the
/// user's count if the governor had lowered it, else `current`).
int set_thread_governor_enabled(bool enabled, int current);
ThreadGovernorStats thread_governor_stats();

}  // namespace seastar::runtime
