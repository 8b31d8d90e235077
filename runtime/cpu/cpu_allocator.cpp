/** \file The caching CPU allocator; see cpu_allocator.h. */
#include "runtime/cpu/cpu_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/util/errors.h"
#include "core/util/log.h"

namespace seastar::runtime {
namespace {

constexpr size_t kCacheFrom = size_t(1) << 20;  ///< smaller requests go to torch's allocator
constexpr size_t kGrain = size_t(1) << 16;      ///< block capacities are multiples of 64 KiB
/// An idle block is lent to a request at most this much smaller than it (an eighth): an epoch's
/// tensors repeat their sizes exactly, a mini-batch's vary around a mean.
constexpr size_t kSlackDivisor = 8;
/// Idle blocks not lent during this many large requests go back to the system: sizes a
/// workload stopped asking for (an epoch of a model allocates far fewer).
constexpr int64_t kMaxIdleAge = 4096;
constexpr size_t kMaxIdleBlocks = 256;

class CachingCpuAllocator final : public c10::Allocator {
 public:
  static CachingCpuAllocator* instance() {
    // never destroyed: tensors die (and return their blocks) during static destruction at exit
    static CachingCpuAllocator* a = new CachingCpuAllocator(c10::GetCPUAllocator());
    return a;
  }

  c10::DataPtr allocate(size_t n) override {
    if (n < kCacheFrom) return fallback_->allocate(n);
    void* p = take(n);
    c10::profiledCPUMemoryReporter().New(p, n);
    return {p, p, &free_block, c10::Device(c10::DeviceType::CPU)};
  }

  /// Frees what raw_allocate returned, from either allocator: small blocks keep the deleter of
  /// the allocator that made them, so this is only raw_deallocate's.
  c10::DeleterFnPtr raw_deleter() const override { return fallback_->raw_deleter() ? &free_any : nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  CpuAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    CpuAllocatorStats s = stats_;
    s.idle_blocks = static_cast<int64_t>(idle_.size());
    return s;
  }

  void release_idle() {
    Regions victims;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [p, piece] : idle_) victims.emplace_back(p, piece.bytes);
      idle_.clear();
      stats_.idle_bytes = 0;
      stats_.unmapped += static_cast<int64_t>(victims.size());
    }
    for (const auto& [p, bytes] : victims) munmap(p, bytes);
  }

  bool installed() { return c10::GetCPUAllocator() == this; }

 private:
  struct Idle {
    size_t bytes;
    int64_t since;  ///< the request count when it (or its newest part) went idle
  };
  using IdleMap = std::map<char*, Idle>;  ///< by address, so that neighbours merge
  using Regions = std::vector<std::pair<char*, size_t>>;  ///< taken off the books, to unmap unlocked

  explicit CachingCpuAllocator(c10::Allocator* fallback) : fallback_(fallback) {
    // a fork while another thread holds the lock must not leave the child's lock held
    pthread_atfork([] { instance()->mutex_.lock(); }, [] { instance()->mutex_.unlock(); },
                   [] { instance()->mutex_.unlock(); });
  }

  void* take(size_t n) {
    const size_t bytes = (n + kGrain - 1) / kGrain * kGrain;
    Regions victims;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++requests_;
      auto best = idle_.end(), larger = idle_.end();
      for (auto it = idle_.begin(); it != idle_.end(); ++it) {
        const size_t have = it->second.bytes;
        if (have < bytes) continue;
        if (have - n <= n / kSlackDivisor + kGrain && (best == idle_.end() || have < best->second.bytes)) best = it;
        if (larger == idle_.end() || have < larger->second.bytes) larger = it;
      }
      if (best != idle_.end()) return lend(best, best->second.bytes);
      // A miss. The mapped total (live + idle) stays within the most ever live at once: past
      // it, the request takes the front of a larger idle block (pages already faulted in; the
      // rest stays idle and merges with it again when both are free), or the oldest idle
      // blocks go back to the system before a new block is mapped.
      if (stats_.live_bytes + stats_.idle_bytes + bytes > stats_.peak_live_bytes) {
        if (larger != idle_.end()) return lend(larger, bytes);
        while (!idle_.empty() && stats_.live_bytes + stats_.idle_bytes + bytes > stats_.peak_live_bytes)
          evict(oldest(), victims);
      }
    }
    for (const auto& [p, b] : victims) munmap(p, b);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {  // the idle blocks may be what stands in the way
      release_idle();
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, p != MAP_FAILED, "seastar's CPU allocator: out of memory mapping ", bytes,
                     " bytes");
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.mapped;
    note_live(p, bytes);
    return p;
  }

  /// Lends the first `bytes` of the idle block `it` (all of it, or its front: the rest stays
  /// idle); under mutex_.
  void* lend(IdleMap::iterator it, size_t bytes) {
    char* p = it->first;
    const Idle rest{it->second.bytes - bytes, it->second.since};
    idle_.erase(it);
    if (rest.bytes > 0) idle_.emplace(p + bytes, rest);
    stats_.idle_bytes -= bytes;
    ++stats_.reused;
    note_live(p, bytes);
    return p;
  }

  void note_live(void* p, size_t bytes) {  // under mutex_
    live_.emplace(p, bytes);
    stats_.live_bytes += bytes;
    stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);
  }

  IdleMap::iterator oldest() {  // under mutex_, idle_ not empty
    return std::min_element(idle_.begin(), idle_.end(),
                            [](const auto& a, const auto& b) { return a.second.since < b.second.since; });
  }

  /// Takes an idle block off the books; the caller unmaps it outside the lock.
  void evict(IdleMap::iterator it, Regions& victims) {  // under mutex_
    victims.emplace_back(it->first, it->second.bytes);
    stats_.idle_bytes -= it->second.bytes;
    ++stats_.unmapped;
    idle_.erase(it);
  }

  /// Returns the block if it is one of ours.
  bool give_back(void* ptr) {
    Regions victims;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto live = live_.find(ptr);
      if (live == live_.end()) return false;
      char* p = static_cast<char*>(ptr);
      Idle piece{live->second, requests_};
      live_.erase(live);
      stats_.live_bytes -= piece.bytes;
      stats_.idle_bytes += piece.bytes;
      // Merge with the idle blocks on either side: pieces of one block cut earlier join up again
      // (and so do adjacent mappings, which munmap treats as one range).
      auto next = idle_.lower_bound(p);
      if (next != idle_.end() && next->first == p + piece.bytes) {
        piece.bytes += next->second.bytes;
        next = idle_.erase(next);
      }
      if (next != idle_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second.bytes == p) {
          p = prev->first;
          piece.bytes += prev->second.bytes;
          idle_.erase(prev);
        }
      }
      idle_.emplace(p, piece);
      // (the mapped total is unchanged: take() keeps it within the peak) the oldest idle blocks
      // go first when there are too many or they were not lent for a long time
      while (!idle_.empty()) {
        auto old = oldest();
        if (idle_.size() <= kMaxIdleBlocks && requests_ - old->second.since <= kMaxIdleAge) break;
        evict(old, victims);
      }
    }
    for (const auto& [b, bytes] : victims) munmap(b, bytes);
    return true;
  }

  static void free_block(void* p) {
    c10::profiledCPUMemoryReporter().Delete(p);
    instance()->give_back(p);
  }

  static void free_any(void* p) {
    CachingCpuAllocator* a = instance();
    bool ours;
    {
      std::lock_guard<std::mutex> lock(a->mutex_);
      ours = a->live_.count(p) != 0;
    }
    if (ours)
      free_block(p);
    else
      a->fallback_->raw_deleter()(p);
  }

  c10::Allocator* fallback_;
  std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;
  IdleMap idle_;
  int64_t requests_ = 0;
  CpuAllocatorStats stats_;
};

}  // namespace

bool install_caching_cpu_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    CachingCpuAllocator* a = CachingCpuAllocator::instance();
    // priority 0, torch's own: an allocator someone installed above it stays
    c10::SetCPUAllocator(a, 0);
    if (a->installed())
      log::debug("caching CPU allocator installed (blocks of 1 MiB and up are kept for reuse)");
    else
      log::info("caching CPU allocator not installed: another CPU allocator has a higher priority");
  });
  return CachingCpuAllocator::instance()->installed();
}

bool install_cpu_allocator_from_env() {
  const char* env = std::getenv("SEASTAR_CPU_ALLOCATOR");
  const std::string choice = env ? env : "";
  if (choice.empty() || choice == "torch") return false;  // torch's allocator stays unless the user asks
  if (choice != "caching")
    SEASTAR_THROW(ValueError, "SEASTAR_CPU_ALLOCATOR='", choice, "': expected 'caching' or 'torch' (the default)");
  return install_caching_cpu_allocator();
}

CpuAllocatorStats caching_cpu_allocator_stats() {
  CpuAllocatorStats s = CachingCpuAllocator::instance()->stats();
  s.installed = CachingCpuAllocator::instance()->installed();
  return s;
}

void release_idle_cpu_blocks() { CachingCpuAllocator::instance()->release_idle(); }

}  // namespace seastar::runtime
