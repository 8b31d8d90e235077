/** \file The kernels' worker pool; see worker_pool.h. */
#include "kernels/worker_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace seastar::kernels {
namespace {

class WorkerPool {
 public:
  void run(int64_t n, void* ctx, void (*fn)(void*, int64_t), int threads) {
    const int helpers = static_cast<int>(std::min<int64_t>(threads, n)) - 1;
    std::unique_lock<std::mutex> job(submit_, std::try_to_lock);
    if (helpers <= 0 || !job.owns_lock()) {  // one item, one thread, or the pool is taken
      for (int64_t i = 0; i < n; ++i) fn(ctx, i);
      return;
    }
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
    drain();
    std::unique_lock<std::mutex> lock(m_);
    invited_ = 0;  // a helper waking from now on leaves this job alone
    idle_.wait(lock, [this] { return active_ == 0; });
  }

 private:
  void drain() {
    for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < n_;) fn_(ctx_, i);
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

  std::mutex submit_;  // one job at a time
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

std::atomic<WorkerPool*> g_pool{nullptr};
std::once_flag g_atfork;

WorkerPool& pool() {
  std::call_once(g_atfork, [] {
    // the child of a fork has none of the parent's helpers, and the parent's locks may be held
    // there: it starts over (the old pool is leaked, as its threads are not there to join)
    pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr); });
  });
  WorkerPool* p = g_pool.load();
  if (!p) {
    WorkerPool* fresh = new WorkerPool();
    if (g_pool.compare_exchange_strong(p, fresh)) {
      p = fresh;
    } else {
      delete fresh;
    }
  }
  return *p;
}

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

void set_kernel_threads(int threads) { g_threads.store(std::max(1, threads), std::memory_order_relaxed); }

}  // namespace seastar::kernels
