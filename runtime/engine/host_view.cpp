/** \file A CUDA tensor over pinned host memory; see host_view.h. */
#include "runtime/engine/host_view.h"

#include <ATen/ops/from_blob.h>
#include <torch/types.h>

#include "core/util/errors.h"

namespace seastar::runtime {

torch::Tensor host_view_on(const torch::Tensor& host, const torch::Device& device) {
  if (!host.defined()) SEASTAR_THROW(ValueError, "host_view_on: the host tensor is undefined");
  if (!host.device().is_cpu())
    SEASTAR_THROW(ValueError, "host_view_on: the tensor must be in (pinned) host memory, but it is on ", host.device());
  if (host.layout() != torch::kStrided)
    SEASTAR_THROW(ValueError, "host_view_on: the tensor must be dense (strided), got a ", host.layout(), " one");
  if (!device.is_cuda() || !device.has_index())
    SEASTAR_THROW(ValueError, "host_view_on: the device must be a CUDA device with an index (cuda:N), got ", device);
  torch::Tensor keep = host.detach();  // the view owns a reference: the pinned block outlives it
  // target_device: torch would otherwise ask the driver which device owns the pointer, and a
  // pinned block answers with the device it was allocated under, not the one training uses
  return at::for_blob(keep.data_ptr(), keep.sizes())
      .strides(keep.strides())
      .deleter([keep](void*) mutable { keep = torch::Tensor(); })
      .options(keep.options().device(device))
      .target_device(device)
      .make_tensor();
}

}  // namespace seastar::runtime
