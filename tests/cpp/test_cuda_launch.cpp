// The feature-adaptive thread mapping of the CUDA kernels and their argument layout
// (codegen/launch_layout.h): pure arithmetic, checked without a GPU for every width and head
// count the models use and beyond.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/launch_layout.h"

using seastar::launch::choose_mapping;
using seastar::launch::grid_size;
using seastar::launch::kMaxBlockThreads;
using seastar::launch::ThreadMapping;
namespace launch = seastar::launch;

namespace {

bool pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

void check_mapping(int64_t S, int64_t heads, const launch::MappingSettings& settings = {}) {
  SCOPED_TRACE("S=" + std::to_string(S) + " heads=" + std::to_string(heads) + " group<=" +
               std::to_string(settings.max_group_threads) + " block=" + std::to_string(settings.block_threads));
  const ThreadMapping m = choose_mapping(S, heads, settings);
  EXPECT_LE(m.block_threads, kMaxBlockThreads);
  EXPECT_GE(m.block_threads, 1);
  EXPECT_TRUE(pow2(m.group_threads));
  EXPECT_EQ(m.block_threads % m.group_threads, 0);
  EXPECT_EQ(m.groups_per_block * m.group_threads, m.block_threads);
  EXPECT_EQ(m.block_per_item, m.group_threads > 32);
  if (m.group_threads > 32) {
    EXPECT_EQ(m.groups_per_block, 1);
  } else {
    EXPECT_EQ(m.block_threads % 32, 0) << "narrow groups fill whole warps";
  }
  // the threads map covers every feature exactly once: lane l holds l, l + G, l + 2G, ... or,
  // with vectors of V, V l .. V l + V-1, then the same V G further on (the emitter's formula)
  const int64_t width = std::max<int64_t>(S, 1);
  EXPECT_GE(m.group_threads * m.elems_per_thread, width);
  EXPECT_LT(m.group_threads * (m.elems_per_thread - 1), width) << "no lane is left without work in every slot";
  EXPECT_TRUE(m.vector == 1 || m.vector == 2 || m.vector == 4);
  EXPECT_LE(m.vector, settings.vector_elems);
  if (m.vector > 1) {
    EXPECT_EQ(width % (m.group_threads * m.vector), 0) << "vectors tile the value";
    EXPECT_EQ(m.elems_per_thread % m.vector, 0);
  }
  if (width <= 1 << 16) {
    std::vector<int> hits(width, 0);
    const int64_t V = m.vector;
    for (int lane = 0; lane < m.group_threads; ++lane)
      for (int64_t t = 0; t < m.elems_per_thread; ++t) {
        const int64_t k = V > 1 ? (t / V) * (m.group_threads * V) + lane * V + t % V : lane + t * m.group_threads;
        if (k < width) ++hits[k];
      }
    for (int64_t k = 0; k < width; ++k) ASSERT_EQ(hits[k], 1) << "feature " << k;
  }
  for (int64_t items : {int64_t(0), int64_t(1), int64_t(7), int64_t(1000), int64_t(2708), int64_t(1) << 40}) {
    const int64_t grid = grid_size(m, items);
    EXPECT_GT(grid, 0);
    EXPECT_LE(grid, 0x7fffffff);
    if (items > 0 && items < (int64_t(1) << 31)) EXPECT_GE(grid * m.groups_per_block, items) << "one group per item";
    EXPECT_LE(grid_size(m, items, 132 * 8), 132 * 8) << "capped at the resident blocks";
    EXPECT_GT(grid_size(m, items, 132 * 8), 0);
  }
}

}  // namespace

TEST(CudaLaunchConfig, WidthsAndHeads) {
  for (int64_t S : {1, 7, 32, 64, 256, 1024})
    for (int64_t heads : {1, 8}) check_mapping(S, heads);
}

TEST(CudaLaunchConfig, ExtremeSizesStayWithinLimits) {
  for (int64_t S : {int64_t(0), int64_t(-3), int64_t(2), int64_t(33), int64_t(255), int64_t(257), int64_t(4096),
                    int64_t(1) << 20, int64_t(1) << 33})
    for (int64_t heads : {int64_t(0), int64_t(1), int64_t(3), int64_t(64), int64_t(4096)}) check_mapping(S, heads);
}

TEST(CudaLaunchConfig, ShapesFollowTheWidth) {
  EXPECT_EQ(choose_mapping(1).group_threads, 1);
  EXPECT_EQ(choose_mapping(7).group_threads, 8);
  EXPECT_EQ(choose_mapping(8, 8).group_threads, 8);
  EXPECT_EQ(choose_mapping(32).group_threads, 32);
  EXPECT_EQ(choose_mapping(64, 8).group_threads, 32);
  EXPECT_EQ(choose_mapping(64, 8).elems_per_thread, 2);
  EXPECT_TRUE(choose_mapping(256).block_per_item);
  EXPECT_EQ(choose_mapping(1024).block_threads, 256);
  EXPECT_EQ(choose_mapping(1024).elems_per_thread, 4);
  EXPECT_EQ(choose_mapping(int64_t(1) << 20).block_threads, kMaxBlockThreads);
  // heads wider than the features per head: one lane per head while it fits in a warp
  EXPECT_EQ(choose_mapping(8, 8).elems_per_thread, 1);
}

TEST(CudaLaunchConfig, SettingsGiveValidMappings) {
  for (int group : {1, 2, 4, 8, 16, 32})
    for (int block : {32, 64, 96, 128, 512, 1024}) {
      launch::MappingSettings s;
      s.max_group_threads = group;
      s.block_threads = block;
      ASSERT_EQ(launch::mapping_settings_error(s), "");
      for (int64_t S : {int64_t(1), int64_t(7), int64_t(16), int64_t(64), int64_t(255), int64_t(256), int64_t(2048)})
        for (int64_t heads : {int64_t(1), int64_t(4), int64_t(8), int64_t(64)}) check_mapping(S, heads, s);
    }
}

TEST(CudaLaunchConfig, VectorsTileTheValueExactly) {
  for (int vec : {1, 2, 4})
    for (int group : {1, 4, 16, 32}) {
      launch::MappingSettings s;
      s.vector_elems = vec;
      s.max_group_threads = group;
      for (int64_t S : {int64_t(1), int64_t(3), int64_t(6), int64_t(16), int64_t(48), int64_t(64), int64_t(100),
                        int64_t(128), int64_t(1024), int64_t(1000)})
        for (int64_t heads : {int64_t(1), int64_t(4)}) check_mapping(S, heads, s);
    }
  launch::MappingSettings s;
  s.vector_elems = 4;
  EXPECT_EQ(choose_mapping(64, 1, s).vector, 2) << "32 lanes hold 2 each: vectors of 2";
  s.max_group_threads = 16;
  EXPECT_EQ(choose_mapping(64, 1, s).vector, 4);
  EXPECT_EQ(choose_mapping(48, 1, s).vector, 1) << "48 = 16 lanes x 3: no vector tiles it";
  EXPECT_EQ(choose_mapping(96, 1, s).vector, 2);
  EXPECT_EQ(choose_mapping(1024, 1, s).vector, 4) << "a block per item: 256 lanes x 4";
  EXPECT_EQ(choose_mapping(64, 1, launch::MappingSettings{}).vector, 1) << "the default interleaves single elements";
}

TEST(CudaLaunchConfig, SettingsShapeNarrowGroupsOnly) {
  launch::MappingSettings s;
  s.max_group_threads = 8;
  s.block_threads = 128;
  EXPECT_EQ(choose_mapping(64, 1, s).group_threads, 8);
  EXPECT_EQ(choose_mapping(64, 1, s).elems_per_thread, 8);
  EXPECT_EQ(choose_mapping(64, 1, s).groups_per_block, 16);
  EXPECT_EQ(choose_mapping(64, 16, s).group_threads, 16) << "never fewer lanes than heads in a warp";
  EXPECT_EQ(choose_mapping(4, 1, s).group_threads, 4) << "narrow values keep their own size";
  EXPECT_EQ(choose_mapping(256, 1, s).block_threads, 256) << "a block per item is sized by the width";
  EXPECT_TRUE(choose_mapping(256, 1, s).block_per_item);
  EXPECT_EQ(choose_mapping(64, 4, launch::MappingSettings{}).group_threads, 32) << "the defaults are the rule above";
}

TEST(CudaLaunchConfig, BadSettingsAreNamed) {
  launch::MappingSettings s;
  EXPECT_EQ(launch::mapping_settings_error(s), "");
  s.max_group_threads = 12;
  EXPECT_NE(launch::mapping_settings_error(s).find("SEASTAR_CUDA_GROUP_THREADS must be a power of two"),
            std::string::npos);
  s.max_group_threads = 64;
  EXPECT_NE(launch::mapping_settings_error(s).find("got 64"), std::string::npos);
  s = {};
  s.block_threads = 48;
  EXPECT_NE(launch::mapping_settings_error(s).find("SEASTAR_CUDA_BLOCK_THREADS must be a multiple of 32"),
            std::string::npos);
  s.block_threads = 2048;
  EXPECT_NE(launch::mapping_settings_error(s).find("got 2048"), std::string::npos);
  s = {};
  s.hub_block_threads = 32;  // one warp cannot split a hub among groups
  EXPECT_NE(launch::mapping_settings_error(s).find("SEASTAR_CUDA_HUB_BLOCK_THREADS"), std::string::npos);
  s = {};
  s.vector_elems = 3;
  EXPECT_NE(launch::mapping_settings_error(s).find("SEASTAR_CUDA_VECTOR_ELEMS must be 1, 2 or 4, got 3"),
            std::string::npos);
}

TEST(CudaArgs, TheWordsFollowTheStructsFields) {
  // the runtime packs what the source declares: one 8-byte word per field, in field order
  int g[launch::kNumGraphArrays], b[3], counters, scratch;
  void* graph[launch::kNumGraphArrays];
  void* buffers[3] = {&b[0], &b[1], &b[2]};
  for (int i = 0; i < launch::kNumGraphArrays; ++i) graph[i] = &g[i];
  const std::vector<uint64_t> w = launch::cuda_args_words(7, 11, 5, graph, buffers, 3, &counters, &scratch);
  ASSERT_EQ(w.size(), 3u + launch::kNumGraphArrays + 3 + 2);
  EXPECT_EQ(w[0], 7u);
  EXPECT_EQ(w[1], 11u);
  EXPECT_EQ(w[2], 5u);
  EXPECT_EQ(w[3 + launch::kEdgeType], reinterpret_cast<uint64_t>(&g[launch::kEdgeType]));
  EXPECT_EQ(w[3 + launch::kNumGraphArrays + 2], reinterpret_cast<uint64_t>(&b[2]));
  EXPECT_EQ(w[w.size() - 2], reinterpret_cast<uint64_t>(&counters));
  EXPECT_EQ(w.back(), reinterpret_cast<uint64_t>(&scratch));
  const std::string decl = launch::cuda_args_struct(3);
  EXPECT_NE(decl.find("int64_t N, E, NS;"), std::string::npos);
  EXPECT_NE(decl.find("void* G[" + std::to_string(launch::kNumGraphArrays) + "];"), std::string::npos);
  EXPECT_NE(decl.find("void* B[3];"), std::string::npos);
  // no buffers: B still has its one slot, and the word for it is there
  EXPECT_NE(launch::cuda_args_struct(0).find("void* B[1];"), std::string::npos);
  EXPECT_EQ(launch::cuda_args_words(1, 0, 1, graph, nullptr, 0, nullptr, nullptr).size(),
            3u + launch::kNumGraphArrays + 1 + 2);
}
