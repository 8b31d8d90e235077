/** \file The entry point and argument layouts, and the feature-adaptive thread mapping of the
 * CUDA kernels; see launch_layout.h. */
#include "codegen/launch_layout.h"

#include <algorithm>

namespace seastar::launch {
namespace {

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

constexpr int kMinBlockPerItem = 256;    ///< from this width on, one block per item
constexpr int kMaxElemsPerThread = 4;    ///< wide items: grow the block before the per-lane share

bool pow2(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

std::string mapping_settings_error(const MappingSettings& s) {
  if (!pow2(s.max_group_threads) || s.max_group_threads > kWarpSize)
    return "SEASTAR_CUDA_GROUP_THREADS must be a power of two from 1 to 32, got " + std::to_string(s.max_group_threads);
  if (s.block_threads < kWarpSize || s.block_threads > kMaxBlockThreads || s.block_threads % kWarpSize != 0)
    return "SEASTAR_CUDA_BLOCK_THREADS must be a multiple of 32 from 32 to 1024, got " + std::to_string(s.block_threads);
  if (s.hub_block_threads < 2 * kWarpSize || s.hub_block_threads > kMaxBlockThreads ||
      s.hub_block_threads % kWarpSize != 0)
    return "SEASTAR_CUDA_HUB_BLOCK_THREADS must be a multiple of 32 from 64 to 1024, got " +
           std::to_string(s.hub_block_threads);
  if (s.vector_elems != 1 && s.vector_elems != 2 && s.vector_elems != 4)
    return "SEASTAR_CUDA_VECTOR_ELEMS must be 1, 2 or 4, got " + std::to_string(s.vector_elems);
  return "";
}

ThreadMapping choose_mapping(int64_t features, int64_t heads, const MappingSettings& settings) {
  ThreadMapping m;
  const int64_t S = std::max<int64_t>(features, 1);
  heads = std::max<int64_t>(heads, 1);
  m.features = S;
  if (S >= kMinBlockPerItem) {
    const int64_t want = next_pow2((S + kMaxElemsPerThread - 1) / kMaxElemsPerThread);
    m.group_threads = static_cast<int>(std::clamp<int64_t>(want, kMinBlockPerItem, kMaxBlockThreads));
    m.block_threads = m.group_threads;
    m.block_per_item = true;
  } else {
    // a power of two >= min(S, the most threads per item); at least one lane per head while
    // that fits in a warp, so a head's reductions stay within its lanes' neighbourhood
    const int64_t most = std::clamp<int64_t>(settings.max_group_threads, 1, kWarpSize);
    const int64_t want = std::max(std::min<int64_t>(S, most), std::min<int64_t>(heads, kWarpSize));
    m.group_threads = static_cast<int>(std::min<int64_t>(next_pow2(want), kWarpSize));
    m.block_threads = std::clamp(settings.block_threads / kWarpSize * kWarpSize, kWarpSize, kMaxBlockThreads);
  }
  m.groups_per_block = m.block_threads / m.group_threads;
  m.elems_per_thread = (S + m.group_threads - 1) / m.group_threads;
  // the widest vector that tiles the value exactly: every lane's slots are whole vectors
  for (int v = std::clamp(settings.vector_elems, 1, 4); v > 1; v /= 2)
    if (S % (static_cast<int64_t>(m.group_threads) * v) == 0) {
      m.vector = v;
      break;
    }
  return m;
}

int64_t grid_size(const ThreadMapping& m, int64_t items, int64_t max_blocks) {
  const int64_t per_block = std::max(m.groups_per_block, 1);
  int64_t blocks = (std::max<int64_t>(items, 0) + per_block - 1) / per_block;
  if (max_blocks > 0) blocks = std::min(blocks, max_blocks);
  return std::clamp<int64_t>(blocks, 1, 0x7fffffff);
}

std::string entry_definition() {
  return std::string("extern \"C\" void ") + kEntrySymbol + "(const int64_t* sizes, void* const* G, void* const* B) {\n";
}

std::string cuda_args_struct(int num_buffers) {
  return "struct Args {\n  int64_t N, E, NS;\n  void* G[" + std::to_string(kNumGraphArrays) + "];\n  void* B[" +
         std::to_string(std::max(num_buffers, 1)) + "];\n  unsigned long long* counters;\n  void* scratch;\n};\n";
}

std::vector<uint64_t> cuda_args_words(int64_t N, int64_t E, int64_t NS, void* const* graph, void* const* buffers,
                                      int num_buffers, void* counters, void* scratch) {
  std::vector<uint64_t> w;
  w.reserve(3 + kNumGraphArrays + std::max(num_buffers, 1) + 2);
  w.push_back(static_cast<uint64_t>(N));
  w.push_back(static_cast<uint64_t>(E));
  w.push_back(static_cast<uint64_t>(NS));
  for (int i = 0; i < kNumGraphArrays; ++i) w.push_back(reinterpret_cast<uint64_t>(graph[i]));
  for (int b = 0; b < num_buffers; ++b) w.push_back(reinterpret_cast<uint64_t>(buffers[b]));
  if (num_buffers == 0) w.push_back(0);  // B[1]: C++ has no zero-length arrays
  w.push_back(reinterpret_cast<uint64_t>(counters));
  w.push_back(reinterpret_cast<uint64_t>(scratch));
  return w;
}

}  // namespace seastar::launch
