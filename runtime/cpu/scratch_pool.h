/** \file
 * ScratchPool: the CPU buffers of a program's intermediates (aggregation results that are not
 * outputs, stored vertex expressions), kept across calls. A call that allocated them afresh
 * would page-fault every page of every N x F temporary again, and glibc keeps freed blocks of
 * that size in its heap anyway (peak RSS grows with the calls, not with the work). The kernels
 * write every row of an intermediate before reading it, so a reused buffer's old contents never
 * matter. Thread-safe: concurrent calls take different buffers. CUDA tensors do not need it
 * (torch's caching allocator reuses device memory).
 */
#pragma once

#include <torch/types.h>

#include <mutex>
#include <vector>

namespace seastar::runtime {

class ScratchPool {
 public:
  /// A tensor of `sizes` and `dtype` whose storage this pool lends until give_back; its
  /// contents are undefined.
  torch::Tensor take(c10::IntArrayRef sizes, torch::ScalarType dtype);
  /// Returns what take() lent (the tensors it returned).
  void give_back(const std::vector<torch::Tensor>& lent);

 private:
  static constexpr size_t kMaxKept = 16;  ///< free buffers kept; the smallest go first
  std::mutex mutex_;
  std::vector<torch::Tensor> free_;  ///< 1-D buffers
};

/// Gives back, at the end of a scope (also when a kernel throws), what a call took.
class ScratchLease {
 public:
  explicit ScratchLease(ScratchPool& pool) : pool_(pool) {}
  ~ScratchLease() { pool_.give_back(lent_); }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  torch::Tensor take(c10::IntArrayRef sizes, torch::ScalarType dtype) {
    lent_.push_back(pool_.take(sizes, dtype));
    return lent_.back();
  }

 private:
  ScratchPool& pool_;
  std::vector<torch::Tensor> lent_;
};

}  // namespace seastar::runtime
