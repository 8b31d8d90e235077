/** \file The reused intermediates of the CPU kernels; see scratch_pool.h. */
#include "runtime/cpu/scratch_pool.h"

#include <torch/types.h>

#include <algorithm>

namespace seastar::runtime {

torch::Tensor ScratchPool::take(c10::IntArrayRef sizes, torch::ScalarType dtype) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  torch::Tensor base;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // the smallest free buffer of this dtype that is large enough
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->scalar_type() == dtype && it->numel() >= numel && (best == free_.end() || it->numel() < best->numel()))
        best = it;
    if (best != free_.end()) {
      base = *best;
      free_.erase(best);
    }
  }
  if (!base.defined()) base = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
  // a view of the buffer's first numel elements: its storage is the buffer's, so give_back can
  // recover the whole buffer from it
  return base.narrow(0, 0, numel).view(sizes);
}

void ScratchPool::give_back(const std::vector<torch::Tensor>& lent) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const torch::Tensor& t : lent) {
    torch::Tensor whole = torch::empty({0}, torch::TensorOptions().dtype(t.scalar_type()));
    whole.set_(t.storage());  // the lent view's whole buffer, 1-D
    free_.push_back(whole);
  }
  if (free_.size() > kMaxKept) {
    std::sort(free_.begin(), free_.end(), [](const torch::Tensor& a, const torch::Tensor& b) {
      return a.numel() * a.element_size() > b.numel() * b.element_size();
    });
    free_.resize(kMaxKept);
  }
}

}  // namespace seastar::runtime
