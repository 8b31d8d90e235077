/** The caching CPU allocator (runtime/cpu/cpu_allocator.h) as torch's CPU allocator: blocks are
 * reused, lent in pieces that merge again when freed, evicted so that the mapped total never exceeds the most ever live, and
 * stay correct under threads and through torch's raw allocation API. One process, so the
 * counters start from zero. */
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/util/errors.h"
#include "runtime/cpu/cpu_allocator.h"

namespace seastar::runtime {
namespace {

constexpr size_t MiB = size_t(1) << 20;

c10::Allocator* installed() {
  EXPECT_TRUE(install_caching_cpu_allocator());
  return c10::GetCPUAllocator();
}

void expect_within_peak() {
  const CpuAllocatorStats s = caching_cpu_allocator_stats();
  EXPECT_LE(s.live_bytes + s.idle_bytes, s.peak_live_bytes);
}

TEST(CpuAllocator, ReusesAFreedBlockOfTheSameSize) {
  c10::Allocator* a = installed();
  void* first;
  {
    c10::DataPtr p = a->allocate(5 * MiB + 123);
    first = p.get();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    std::memset(first, 7, 5 * MiB + 123);
  }
  const int64_t reused = caching_cpu_allocator_stats().reused;
  c10::DataPtr again = a->allocate(5 * MiB + 100);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(caching_cpu_allocator_stats().reused, reused + 1);
  expect_within_peak();
}

size_t grains(size_t n) { return (n + 64 * 1024 - 1) / (64 * 1024) * (64 * 1024); }

/// With no idle block left, a size larger than anything live so far: its allocation sets the peak.
size_t peak_setting_size() {
  release_idle_cpu_blocks();
  return std::max(24 * MiB, caching_cpu_allocator_stats().peak_live_bytes + MiB);
}

/// Where a block of `n` bytes was, now idle.
void* allocate_and_free(c10::Allocator* a, size_t n) {
  c10::DataPtr p = a->allocate(n);
  return p.get();
}

TEST(CpuAllocator, LendsTheFrontOfALargerIdleBlockRatherThanGrowing) {
  c10::Allocator* a = installed();
  const size_t big = peak_setting_size();
  void* base = allocate_and_free(a, big);
  const int64_t mapped = caching_cpu_allocator_stats().mapped;
  const int64_t unmapped = caching_cpu_allocator_stats().unmapped;
  // a third of it: no idle block within the slack, and a new block would pass the peak
  c10::DataPtr small = a->allocate(big / 3);
  EXPECT_EQ(small.get(), base);
  EXPECT_EQ(caching_cpu_allocator_stats().mapped, mapped);
  // the rest stays mapped and idle, for the next request
  EXPECT_EQ(caching_cpu_allocator_stats().idle_bytes, grains(big) - grains(big / 3));
  EXPECT_EQ(caching_cpu_allocator_stats().unmapped, unmapped);
  std::memset(small.get(), 1, big / 3);
  expect_within_peak();
}

TEST(CpuAllocator, PiecesOfABlockMergeAgainWhenFreed) {
  // An epoch's pattern: a large tensor freed, smaller ones cut from its pages, then the large
  // size asked for again. The pieces join up, so the second large request maps nothing.
  c10::Allocator* a = installed();
  const size_t big = peak_setting_size();
  void* base = allocate_and_free(a, big);
  const int64_t mapped = caching_cpu_allocator_stats().mapped;
  {
    c10::DataPtr first = a->allocate(big / 4);
    c10::DataPtr second = a->allocate(big / 4);
    c10::DataPtr third = a->allocate(big / 4);
    EXPECT_EQ(first.get(), base);
    EXPECT_EQ(second.get(), static_cast<char*>(base) + grains(big / 4));
    std::memset(second.get(), 2, big / 4);
    // freed out of order: the middle piece merges with both neighbours once they are idle
    second.clear();
    first.clear();
    third.clear();
  }
  EXPECT_EQ(caching_cpu_allocator_stats().idle_blocks, 1);
  c10::DataPtr again = a->allocate(big);
  EXPECT_EQ(again.get(), base);
  std::memset(again.get(), 3, big);
  EXPECT_EQ(caching_cpu_allocator_stats().mapped, mapped);
  expect_within_peak();
}

TEST(CpuAllocator, MappedTotalStaysWithinTheMostEverLive) {
  c10::Allocator* a = installed();
  std::mt19937 rng(3);
  std::vector<c10::DataPtr> live;
  for (int step = 0; step < 400; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      live.erase(live.begin() + static_cast<long>(rng() % live.size()));
    } else {
      const size_t n = MiB + rng() % (12 * MiB);
      live.push_back(a->allocate(n));
      static_cast<char*>(live.back().get())[n - 1] = 1;
    }
    if (live.size() > 12) live.erase(live.begin());
    expect_within_peak();
  }
}

TEST(CpuAllocator, ThreadsGetDistinctBlocks) {
  c10::Allocator* a = installed();
  const size_t live_before = caching_cpu_allocator_stats().live_bytes;
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([a, t, &bad] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 150; ++i) {
        const size_t n = MiB + rng() % (4 * MiB);
        c10::DataPtr p = a->allocate(n);
        auto* b = static_cast<unsigned char*>(p.get());
        std::memset(b, t + 1, n);
        std::this_thread::yield();
        for (size_t k = 0; k < n; k += 4096)
          if (b[k] != t + 1) ++bad[static_cast<size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
  EXPECT_EQ(caching_cpu_allocator_stats().live_bytes, live_before);
}

TEST(CpuAllocator, RawAllocationOfEitherSize) {
  c10::Allocator* a = installed();
  ASSERT_NE(a->raw_deleter(), nullptr);
  for (size_t n : {size_t(64), 3 * MiB}) {
    void* p = a->raw_allocate(n);
    std::memset(p, 3, n);
    a->raw_deallocate(p);
  }
}

TEST(CpuAllocator, SmallRequestsGoToTorchsAllocator) {
  c10::Allocator* a = installed();
  const CpuAllocatorStats before = caching_cpu_allocator_stats();
  c10::DataPtr p = a->allocate(4096);
  const CpuAllocatorStats after = caching_cpu_allocator_stats();
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.mapped + after.reused, before.mapped + before.reused);
}

TEST(CpuAllocator, AnUnknownChoiceInTheEnvironmentIsAnError) {
  setenv("SEASTAR_CPU_ALLOCATOR", "jemalloc", 1);
  try {
    install_cpu_allocator_from_env();
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("SEASTAR_CPU_ALLOCATOR='jemalloc'"), std::string::npos) << e.what();
  }
  setenv("SEASTAR_CPU_ALLOCATOR", "torch", 1);
  EXPECT_FALSE(install_cpu_allocator_from_env());
  unsetenv("SEASTAR_CPU_ALLOCATOR");
}

}  // namespace
}  // namespace seastar::runtime
