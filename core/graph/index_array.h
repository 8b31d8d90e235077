/** \file
 * IndexArray: one graph array of ids (neighbours, edge ids) at the narrowest width that holds
 * every id of its graph. Graphs below 2^31 vertices and edges (nearly all) keep int32: half the
 * memory of int64, and the width the kernels read, so a CPU device view wraps this storage
 * instead of copying it (graph.cpp).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace seastar {

class IndexArray {
 public:
  IndexArray() = default;
  /// `ids` narrowed to int32 when `narrow` (the caller has checked that every id fits), else kept.
  IndexArray(std::vector<int64_t> ids, bool narrow);

  bool narrow() const { return narrow_; }
  size_t size() const { return narrow_ ? n32_.size() : n64_.size(); }
  bool empty() const { return size() == 0; }
  /// One id, widened: for code off the hot paths. Hot loops take a typed pointer from visit().
  int64_t operator[](size_t i) const { return narrow_ ? static_cast<int64_t>(n32_[i]) : n64_[i]; }
  const void* data() const { return narrow_ ? static_cast<const void*>(n32_.data()) : n64_.data(); }
  /// f(const int32_t*) or f(const int64_t*), whichever this array holds.
  template <class F>
  decltype(auto) visit(F&& f) const {
    return narrow_ ? f(n32_.data()) : f(n64_.data());
  }
  std::vector<int64_t> to_vector() const;

 private:
  bool narrow_ = true;
  std::vector<int32_t> n32_;
  std::vector<int64_t> n64_;
};

}  // namespace seastar
