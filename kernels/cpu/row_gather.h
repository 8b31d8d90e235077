/** \file
 * gather_rows: x[rows] for the mini-batch loaders' feature gather, into recycled buffers.
 *
 * A batch's gathered features (tens of MB) are allocated once per batch and freed when training
 * is done with it. From glibc's heap or a fresh mapping, every page of such a block is faulted in
 * again on each batch, which costs about as much as the copy itself. The buffers here come back
 * when the last tensor viewing them dies (on whatever thread) and are lent again to the next
 * gather of a similar size, whose pages are then already mapped: a loader that keeps k batches
 * alive settles on k buffers.
 */
#pragma once

#include <torch/types.h>

namespace seastar::runtime {

/// x[rows] along dim 0. A CPU tensor with contiguous rows is copied row by row (rows prefetched
/// a few ahead, over the calling thread's OpenMP threads) into a recycled buffer; anything else
/// (another device, a sparse or strided tensor, one autograd tracks) goes to index_select.
/// ValueError for a row out of range, TypeError for non-integer ids.
torch::Tensor gather_rows(const torch::Tensor& x, const torch::Tensor& rows);

/// Bytes the recycled buffers hold while no tensor uses them (at most a few batches' worth).
size_t gather_buffers_idle_bytes();

/// Frees the idle recycled buffers (those in use come back later as usual); returns the bytes freed.
size_t release_idle_gather_buffers();

}  // namespace seastar::runtime

// C++ training programs call these as seastar::kernels::..., the runtime's earlier name.
namespace seastar { namespace kernels = runtime; }
