/** \file IndexArray: narrowing on construction, widening on the way out. */
#include "core/graph/index_array.h"

namespace seastar {

IndexArray::IndexArray(std::vector<int64_t> ids, bool narrow) : narrow_(narrow) {
  if (!narrow) {
    n64_ = std::move(ids);
    return;
  }
  n32_.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) n32_[i] = static_cast<int32_t>(ids[i]);
}

std::vector<int64_t> IndexArray::to_vector() const {
  return visit([&](const auto* p) { return std::vector<int64_t>(p, p + size()); });
}

}  // namespace seastar
