/** \file The kernels' worker pool (runtime/cpu/worker_pool.h): every item runs exactly once, on any
 * thread count, with concurrent callers, and in the child of a fork; helpers that make jobs
 * slower than the caller alone are left out for a while, then tried again. */
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "runtime/cpu/worker_pool.h"

using seastar::runtime::pool_parallel_for;
using seastar::runtime::worker_pool_stats;
using seastar::runtime::WorkerPoolStats;

namespace {

struct Counts {
  std::vector<std::atomic<int>> hits;
  std::mutex m;
  std::set<std::thread::id> threads;
  explicit Counts(int64_t n) : hits(static_cast<size_t>(n)) {}
};

void count(void* ctx, int64_t i) {
  auto* c = static_cast<Counts*>(ctx);
  c->hits[static_cast<size_t>(i)].fetch_add(1);
  // a little work per item, so helpers get the chance to take some
  volatile double x = 0;
  for (int k = 0; k < 2000; ++k) x = x + k;
  std::lock_guard<std::mutex> lock(c->m);
  c->threads.insert(std::this_thread::get_id());
}

bool each_once(Counts& c) {
  for (auto& h : c.hits)
    if (h.load() != 1) return false;
  return true;
}

}  // namespace

TEST(WorkerPool, EveryItemRunsOnceOnAnyThreadCount) {
  for (int threads : {1, 2, 3, 8})
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      Counts c(n);
      pool_parallel_for(n, &c, &count, threads);
      EXPECT_TRUE(each_once(c)) << "threads " << threads << ", n " << n;
      if (threads == 1) EXPECT_LE(c.threads.size(), 1u);
      EXPECT_LE(c.threads.size(), static_cast<size_t>(threads));
    }
}

TEST(WorkerPool, ManyJobsInARow) {
  // helpers that wake late for one job must not run items of (or miss) the next
  for (int job = 0; job < 300; ++job) {
    Counts c(1 + job % 17);
    pool_parallel_for(static_cast<int64_t>(c.hits.size()), &c, &count, 2 + job % 3);
    ASSERT_TRUE(each_once(c)) << "job " << job;
  }
}

TEST(WorkerPool, ConcurrentCallersEachGetTheirItemsDone) {
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int job = 0; job < 50; ++job) {
        Counts c(200);
        pool_parallel_for(200, &c, &count, 3);
        if (!each_once(c)) bad.fetch_add(1);
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(WorkerPool, WorksInTheChildOfAFork) {
  {
    Counts c(100);
    pool_parallel_for(100, &c, &count, 2);  // the parent's helpers exist now
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Counts c(100);
    pool_parallel_for(100, &c, &count, 2);
    _exit(each_once(c) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

namespace {

/// Items that take `item_us` on the caller; on a helper each takes `helper_us` instead (a helper
/// whose core is taken by another process).
struct SlowHelpers {
  std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> item_us{50}, helper_us{5000};
  std::atomic<int> on_helpers{0};
};

void spin_for_us(int us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

void slow_on_helpers(void* ctx, int64_t) {
  auto* s = static_cast<SlowHelpers*>(ctx);
  if (std::this_thread::get_id() == s->caller) {
    spin_for_us(s->item_us.load());
  } else {
    s->on_helpers.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(s->helper_us.load()));
  }
}

}  // namespace

TEST(WorkerPool, HelpersThatMakeJobsSlowerAreLeftOutThenTriedAgain) {
  SlowHelpers s;
  // Each job: the caller does its items in about 1 ms, then waits about 5 ms for the item a helper
  // claimed. After a few such jobs the pool stops offering jobs to helpers for a while.
  const WorkerPoolStats before = worker_pool_stats();
  for (int job = 0; job < 40 && worker_pool_stats().benched == before.benched; ++job)
    pool_parallel_for(20, &s, &slow_on_helpers, 2);
  const WorkerPoolStats benched = worker_pool_stats();
  EXPECT_GT(benched.benched, before.benched) << "helpers still offered every job";
  EXPECT_GE(benched.lost - before.lost, 3) << "benched before three losses";
  // Helpers as fast as the caller again: once the back-off has passed they are offered jobs
  // again, and take items.
  s.helper_us = 200, s.item_us = 200;
  bool used = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!used && std::chrono::steady_clock::now() < give_up) {
    s.on_helpers = 0;
    pool_parallel_for(50, &s, &slow_on_helpers, 2);
    used = s.on_helpers.load() > 0;
    if (!used) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(used) << "the helpers were not tried again";
  EXPECT_GT(worker_pool_stats().pooled, benched.pooled);
}
