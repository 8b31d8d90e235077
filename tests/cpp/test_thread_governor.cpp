/** \file The thread governor's decisions (runtime/cpu/thread_governor.h), from synthetic readings: the
 * count for a given load, /proc/stat parsing, two agreeing samples before a change, the user's
 * count taken from torch's, stale gaps, and switching it off. The real measurement against real
 * busy processes is tests/python/test_thread_governor.py. */
#include <gtest/gtest.h>

#include <optional>

#include "runtime/cpu/thread_governor.h"

using seastar::runtime::busy_seconds;
using seastar::runtime::governed_threads;
using seastar::runtime::LoadReading;
using seastar::runtime::ThreadGovernor;

namespace {

/// Readings `step` seconds apart in which other processes keep `other` cores busy (and this one 1).
struct Load {
  double wall = 100, busy = 5000, own = 40;
  LoadReading next(double other, double step = 0.25) {
    wall += step;
    own += step;
    busy += step * (other + 1);
    return LoadReading{wall, busy, own};
  }
};

}  // namespace

TEST(ThreadGovernor, CountForALoad) {
  EXPECT_EQ(governed_threads(2, 2, 0.0), 2);
  EXPECT_EQ(governed_threads(2, 2, 0.45), 2);   // under half a core: the static split still gains
  EXPECT_EQ(governed_threads(2, 2, 0.67), 1);   // one spinning process while this one runs 2 threads
  EXPECT_EQ(governed_threads(2, 2, 1.0), 1);    // the same process once this one is down to 1
  EXPECT_EQ(governed_threads(2, 2, 3.0), 1);    // never below 1
  EXPECT_EQ(governed_threads(16, 16, 0.94), 15);
  EXPECT_EQ(governed_threads(2, 16, 1.0), 2);   // cores to spare: the user's count
  EXPECT_EQ(governed_threads(4, 2, 0.0), 4);    // oversubscribed by choice, nobody else: kept
  EXPECT_EQ(governed_threads(4, 2, 1.0), 1);
  EXPECT_EQ(governed_threads(1, 2, 2.0), 1);
}

TEST(ThreadGovernor, ReadsTheUsableCpusFromProcStat) {
  const char* text =
      "cpu  900 0 300 5000 10 0 5 0 0 0\n"
      "cpu0 100 2 50 2000 4 1 2 7 3 0\n"
      "cpu1 400 0 100 1500 3 0 1 0 0 0\n"
      "cpu2 400 0 150 1500 3 0 2 0 0 0\n"
      "intr 123 4 5\n"
      "ctxt 99\n";
  // cpu0: user 100 + nice 2 + system 50 + irq 1 + softirq 2 + steal 7 (idle, iowait, guest out)
  EXPECT_DOUBLE_EQ(*busy_seconds(text, {0}, 100), 1.62);
  EXPECT_DOUBLE_EQ(*busy_seconds(text, {0, 2}, 100), 1.62 + 5.52);
  EXPECT_FALSE(busy_seconds(text, {3}, 100));                     // a CPU the text does not list
  EXPECT_FALSE(busy_seconds("cpu0 1 2 x\n", {0}, 100));           // a line cut short
  EXPECT_FALSE(busy_seconds(text, {0}, 0));
}

TEST(ThreadGovernor, TwoSamplesInARowChangeTheCount) {
  ThreadGovernor g(2);
  Load load;
  EXPECT_EQ(g.advise(2, load.next(0)), 2);  // baseline
  EXPECT_EQ(g.advise(2, load.next(0)), 2);
  EXPECT_EQ(g.advise(2, load.next(0.7)), 2);    // one busy interval: not yet
  EXPECT_EQ(g.advise(2, std::nullopt), 2);      // no sample due: nothing new
  EXPECT_EQ(g.advise(2, load.next(0.7)), 1);    // the second in a row: lowered
  EXPECT_EQ(g.stats().lowered, 1);
  EXPECT_EQ(g.advise(1, load.next(1.0)), 1);    // the other process has its core now
  EXPECT_EQ(g.advise(1, load.next(0.1)), 1);    // it left, or paused for one interval
  EXPECT_EQ(g.advise(1, load.next(1.0)), 1);    // it paused: still lowered
  EXPECT_EQ(g.advise(1, load.next(0.0)), 1);
  EXPECT_EQ(g.advise(1, load.next(0.0)), 2);    // gone for two intervals: the user's count again
  const auto s = g.stats();
  EXPECT_EQ(s.requested, 2);
  EXPECT_EQ(s.lowered, 1);
  EXPECT_EQ(s.restored, 1);
  EXPECT_EQ(s.samples, 8);
}

TEST(ThreadGovernor, TheUsersCountIsTorchsWhenItChanged) {
  ThreadGovernor g(4);
  Load load;
  g.advise(4, load.next(0));
  g.advise(4, load.next(2.0));
  EXPECT_EQ(g.advise(4, load.next(2.0)), 2);   // 4 cores, 2 busy elsewhere
  EXPECT_EQ(g.advise(3, std::nullopt), 2);     // torch.set_num_threads(3): the standing load governs it at once
  EXPECT_EQ(g.stats().requested, 3);
  EXPECT_EQ(g.advise(1, std::nullopt), 1);     // the user asks for 1: nothing to lower
  EXPECT_EQ(g.advise(1, load.next(0)), 1);
  EXPECT_EQ(g.advise(1, load.next(0)), 1);     // and 1 it stays when the load goes
  EXPECT_EQ(g.stats().requested, 1);
}

TEST(ThreadGovernor, AStaleGapOnlyStartsOver) {
  ThreadGovernor g(2);
  Load load;
  g.advise(2, load.next(0));
  g.advise(2, load.next(0.8));
  EXPECT_EQ(g.advise(2, load.next(0.8, 5.0)), 2);  // 5 s since the last launch: a new baseline, not a sample
  EXPECT_EQ(g.stats().samples, 1);
  EXPECT_EQ(g.advise(2, load.next(0.8)), 1);        // the pending target and this sample agree
}

TEST(ThreadGovernor, ReleaseGivesTheUsersCountBack) {
  ThreadGovernor g(2);
  Load load;
  g.advise(2, load.next(0));
  g.advise(2, load.next(0.9));
  ASSERT_EQ(g.advise(2, load.next(0.9)), 1);
  EXPECT_EQ(g.release(1), 2);     // torch still at the governor's 1: back to the user's 2
  EXPECT_EQ(g.stats().requested, 0);
  EXPECT_EQ(g.release(3), 3);     // the user's own count is left alone
  EXPECT_EQ(g.advise(2, std::nullopt), 1);  // switched on again: the load measured still stands
}

TEST(ThreadGovernor, NoSampleBeforeTheInterval) {
  ThreadGovernor g(2);
  EXPECT_TRUE(g.sample_due(10.0));
  g.advise(2, LoadReading{10.0, 1, 1});
  EXPECT_FALSE(g.sample_due(10.0 + ThreadGovernor::kSampleSeconds / 2));
  EXPECT_TRUE(g.sample_due(10.0 + ThreadGovernor::kSampleSeconds * 1.01));
}
