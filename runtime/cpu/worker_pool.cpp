/** \file The kernels' worker pool; see worker_pool.h. */
#include "runtime/cpu/worker_pool.h"


#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "core/util/log.h"
#include "runtime/cpu/per_process.h"

namespace seastar::runtime {
namespace {

class WorkerPool {
 public:
  void run(int64_t n, void* ctx, void (*fn)(void*, int64_t), int threads) {
    const int helpers = static_cast<int>(std::min<int64_t>(threads, n)) - 1;
    std::unique_lock<std::mutex> job(submit_, std::try_to_lock);
    const bool poolable = helpers > 0 && job.owns_lock();  // more than one item and thread, pool free
    const int64_t start = poolable ? now_ns() : 0;
    if (!poolable || start < inline_until_ns_) {  // or helpers have lately cost more than they gave
      if (poolable) ++stats_.benched;
      for (int64_t i = 0; i < n; ++i) fn(ctx, i);
      return;
    }
    ++stats_.pooled;
    {
      std::lock_guard<std::mutex> lock(m_);
      while (static_cast<int>(spawned_) < helpers) {
        std::thread([this] { work(); }).detach();  // never joined: the pool lives until exit
        ++spawned_;
      }
      ctx_ = ctx, fn_ = fn, n_ = n;
      next_.store(0, std::memory_order_relaxed);
      ++generation_;
      invited_ = helpers;
    }
    wake_.notify_all();
    const int64_t own = drain();
    const int64_t drained = now_ns();
    {
      std::unique_lock<std::mutex> lock(m_);
      invited_ = 0;  // a helper waking from now on leaves this job alone
      idle_.wait(lock, [this] { return active_ == 0; });
    }
    judge(n, own, drained - start, now_ns() - drained, start);
  }

  WorkerPoolStats stats() {
    std::lock_guard<std::mutex> job(submit_);
    return stats_;
  }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  /// Whether the helpers paid for themselves in the job just run: the caller did `own` of the `n`
  /// items in `busy` ns, so alone it would have needed about busy * n / own; the job took busy +
  /// `waited` (the wait for items the helpers had claimed). A helper descheduled in the middle of
  /// an item (its core taken by another process, or by torch's OpenMP threads spinning after an
  /// op) makes the caller wait for a whole time slice. After kStrikes such jobs in a row the
  /// kernels run on their caller alone for a back-off that doubles while the job that ends it
  /// (the probe) still loses, so two threads never stay slower than one. Called holding submit_.
  void judge(int64_t n, int64_t own, int64_t busy, int64_t waited, int64_t start) {
    if (own <= 0 || own >= n) return;  // the helpers took all or none: nothing to compare
    const bool lost = static_cast<double>(waited) * static_cast<double>(own) >
                      static_cast<double>(busy) * static_cast<double>(n - own);
    stats_.lost += lost;
    if (!lost) {
      strikes_ = 0, backoff_ns_ = kFirstBackoffNs;
      return;
    }
    // benched before and no win since: this job was a probe, and one loss sends kernels back
    const bool probe = backoff_ns_ > kFirstBackoffNs;
    if (++strikes_ < kStrikes && !probe) return;
    inline_until_ns_ = start + busy + waited + backoff_ns_;
    log::debug("kernel helpers were slower than the caller alone " + std::to_string(strikes_) +
               " time(s) in a row; kernels run on their caller for " +
               std::to_string(backoff_ns_ / 1000000) + " ms");
    backoff_ns_ = std::min(2 * backoff_ns_, kMaxBackoffNs);
    strikes_ = 0;
  }

  int64_t drain() {
    int64_t done = 0;
    for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n_; ++done) fn_(ctx_, i);
    return done;
  }

  void work() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen && invited_ > 0; });
      seen = generation_;
      --invited_;
      ++active_;
      lock.unlock();
      drain();
      lock.lock();
      if (--active_ == 0) idle_.notify_all();
    }
  }

  static constexpr int kStrikes = 3;
  static constexpr int64_t kFirstBackoffNs = 10'000'000, kMaxBackoffNs = 1'000'000'000;

  std::mutex submit_;  // one job at a time; guards the judging state below
  int64_t inline_until_ns_ = 0, backoff_ns_ = kFirstBackoffNs;
  int strikes_ = 0;
  WorkerPoolStats stats_;
  std::mutex m_;
  std::condition_variable wake_, idle_;
  size_t spawned_ = 0;
  uint64_t generation_ = 0;
  int invited_ = 0, active_ = 0;
  void* ctx_ = nullptr;
  void (*fn_)(void*, int64_t) = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
};

// the child of a fork has none of the parent's helpers, and the parent's locks may be held there
WorkerPool& pool() { return per_process<WorkerPool>(); }

std::atomic<int> g_threads{1};

void parallel_for_kernel_threads(int64_t n, void* ctx, void (*fn)(void*, int64_t)) {
  pool_parallel_for(n, ctx, fn, g_threads.load(std::memory_order_relaxed));
}

const KernelRuntime kRuntime{&parallel_for_kernel_threads};

}  // namespace

void pool_parallel_for(int64_t n, void* ctx, void (*fn)(void*, int64_t), int threads) {
  if (n <= 0) return;
  pool().run(n, ctx, fn, threads);
}

const KernelRuntime* kernel_runtime() { return &kRuntime; }

WorkerPoolStats worker_pool_stats() { return pool().stats(); }

void set_kernel_threads(int threads) { g_threads.store(std::max(1, threads), std::memory_order_relaxed); }

}  // namespace seastar::runtime
