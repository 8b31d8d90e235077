/** \file
 * host_view_on: a CUDA tensor over pinned host memory, for feature tables larger than the GPU.
 *
 * Under unified virtual addressing (every 64-bit CUDA platform), memory from cudaHostAlloc (what
 * torch's pin_memory() returns) is mapped into every device's address space at the same address.
 * A tensor that says "cuda" but points there lets the fused kernels, index_select and every other
 * CUDA op read the table in place over the bus: the launch glue sees one device, and nothing
 * is copied. Only pinned memory qualifies; pageable memory at that address faults on the device,
 * so the caller (seastar.loader) checks x.is_pinned() first.
 */
#pragma once

#include <torch/types.h>

namespace seastar::runtime {

/// A tensor on `device` (CUDA, with an index) with `host`'s sizes, strides, dtype and address,
/// keeping `host` alive; it has no autograd history. ValueError when `host` is not a dense CPU
/// tensor or `device` is not an indexed CUDA device. Pinning is not checked here.
torch::Tensor host_view_on(const torch::Tensor& host, const torch::Device& device);

}  // namespace seastar::runtime
