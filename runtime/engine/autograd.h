/** \file
 * The torch::autograd::Function that runs a FusedProgram: forward kernels in forward, backward
 * kernels in backward. It saves only the input tensors (which the caller holds anyway): every
 * per-edge value is recomputed by the backward kernels, so no O(E) tensor outlives forward.
 * Double backward is refused with a clear error.
 */
#pragma once

#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/fused_program.h"

namespace seastar {

/// Runs `program` on `graph` with tensors bound by `names`; outputs carry autograd history.
std::vector<torch::Tensor> apply_fused(const std::shared_ptr<FusedProgram>& program, const Graph& graph,
                                       const std::vector<std::string>& names, const std::vector<torch::Tensor>& tensors);

}  // namespace seastar
