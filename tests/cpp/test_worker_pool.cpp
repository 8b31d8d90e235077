/** \file The kernels' worker pool (kernels/worker_pool.h): every item runs exactly once, on any
 * thread count, with concurrent callers, and in the child of a fork. */
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "kernels/worker_pool.h"

using seastar::kernels::pool_parallel_for;

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
