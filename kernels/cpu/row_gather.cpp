/** \file The loaders' row gather and the buffers it recycles; see row_gather.h. */
#include "kernels/cpu/row_gather.h"

#include <omp.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "core/graph/graph.h"
#include "core/util/errors.h"

namespace seastar::runtime {
namespace {

/// Idle buffers, the smallest first lent. Never destroyed: a tensor may die (and return its
/// buffer) during static destruction at exit.
class BufferShelf {
 public:
  static BufferShelf& instance() {
    static BufferShelf* shelf = new BufferShelf();
    return *shelf;
  }

  /// A buffer of at least `bytes`; *capacity receives its size.
  void* take(size_t bytes, size_t* capacity) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto best = idle_.end();
      for (auto it = idle_.begin(); it != idle_.end(); ++it)
        if (it->bytes >= bytes && (best == idle_.end() || it->bytes < best->bytes)) best = it;
      // a much larger buffer is kept for a batch that needs it: a small gather allocates anew
      if (best != idle_.end() && best->bytes <= 2 * bytes + kGrain) {
        void* p = best->ptr;
        *capacity = best->bytes;
        idle_bytes_ -= best->bytes;
        idle_.erase(best);
        return p;
      }
    }
    // batches vary in size around a mean: an eighth of headroom lets the next one fit
    *capacity = (bytes + bytes / 8 + kGrain - 1) / kGrain * kGrain;
    void* p = std::aligned_alloc(kAlign, *capacity);
    if (!p) throw std::bad_alloc();
    return p;
  }

  void give_back(void* p, size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back({p, capacity});
    idle_bytes_ += capacity;
    // more idle buffers than a loader keeps alive: the smallest are the least useful
    while (idle_.size() > kMaxIdle) {
      auto smallest = std::min_element(idle_.begin(), idle_.end(),
                                       [](const Buffer& a, const Buffer& b) { return a.bytes < b.bytes; });
      idle_bytes_ -= smallest->bytes;
      std::free(smallest->ptr);
      idle_.erase(smallest);
    }
  }

  size_t idle_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return idle_bytes_;
  }

  size_t release_idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Buffer& b : idle_) std::free(b.ptr);
    idle_.clear();
    return std::exchange(idle_bytes_, 0);
  }

 private:
  struct Buffer {
    void* ptr;
    size_t bytes;
  };
  static constexpr size_t kAlign = 64;
  static constexpr size_t kGrain = size_t(1) << 16;  ///< capacities are multiples of 64 KiB
  static constexpr size_t kMaxIdle = 4;
  std::mutex mutex_;
  std::vector<Buffer> idle_;
  size_t idle_bytes_ = 0;
};

/// Below this a gather allocates from torch as usual: the page faults are few.
constexpr size_t kRecycleFrom = size_t(1) << 20;

torch::Tensor output_like(const torch::Tensor& x, std::vector<int64_t> shape, size_t bytes) {
  if (bytes < kRecycleFrom) return torch::empty(shape, x.options());
  size_t capacity = 0;
  void* p = BufferShelf::instance().take(bytes, &capacity);
  return torch::from_blob(p, shape, [p, capacity](void*) { BufferShelf::instance().give_back(p, capacity); },
                          x.options());
}

}  // namespace

torch::Tensor gather_rows(const torch::Tensor& x, const torch::Tensor& rows) {
  if (!x.defined()) SEASTAR_THROW(ValueError, "x is undefined");
  check_id_tensor(rows, "idx", "row ids");
  // anything else (another device, strided or sparse rows, a tensor autograd tracks): torch's own gather
  if (!x.device().is_cpu() || x.is_sparse() || x.dim() < 1 || !x.is_contiguous() || x.requires_grad())
    return x.index_select(0, rows.to(x.device()));
  const torch::Tensor idx = rows.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* ids = idx.data_ptr<int64_t>();
  const int64_t n = x.size(0), m = idx.numel();
  for (int64_t k = 0; k < m; ++k)
    if (ids[k] < 0 || ids[k] >= n)
      SEASTAR_THROW(ValueError, "idx[", k, "] = ", ids[k], " is out of range for ", n, " rows");
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = m;
  const size_t row_bytes = static_cast<size_t>(x.numel() / std::max<int64_t>(n, 1)) * x.element_size();
  torch::Tensor out = output_like(x, shape, row_bytes * static_cast<size_t>(m));
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  // a row's first cache lines miss (the rows are scattered over x): ask for them a few rows ahead,
  // so that their misses overlap where index_select waits for them one row at a time
  constexpr int64_t kAhead = 8;
  const size_t lines = std::min<size_t>((row_bytes + 63) / 64, 8);  // the first 512 bytes of a row
  // the calling thread's OpenMP threads (the sampler's convention): torch.set_num_threads on the
  // main thread; on a loader's thread, what it set with set_local_threads
#pragma omp parallel for schedule(dynamic, 512) if (m * static_cast<int64_t>(row_bytes) >= (1 << 20))
  for (int64_t k = 0; k < m; ++k) {
    if (k + kAhead < m) {
      const char* next = src + ids[k + kAhead] * row_bytes;
      for (size_t l = 0; l < lines; ++l) __builtin_prefetch(next + 64 * l);
    }
    std::memcpy(dst + k * row_bytes, src + ids[k] * row_bytes, row_bytes);
  }
  return out;
}

size_t gather_buffers_idle_bytes() { return BufferShelf::instance().idle_bytes(); }

size_t release_idle_gather_buffers() { return BufferShelf::instance().release_idle(); }

}  // namespace seastar::runtime
