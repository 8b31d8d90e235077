/** \file
 * A lowered vertex program ready to run fused on CPU or CUDA tensors: the forward and backward
 * FusedPlans, their generated source per (float type, index type) and target (C++ or CUDA),
 * compiled on first use, and the launch glue that binds torch tensors to the kernels' buffers.
 * The autograd function (autograd.h) is the public way to run it.
 */
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda_emitter.h"
#include "codegen/plan.h"
#include "core/graph/graph.h"
#include "core/passes/pipeline.h"
#include "runtime/jit/compiler.h"
#include "runtime/cpu/scratch_pool.h"

namespace seastar {

/// The fused backend's two refusals of a device, worded once for the orchestrator's
/// `unsupported` query and for the launcher's own guard (which direct callers rely on).
std::string other_device_refusal(const std::string& devices);  ///< neither CPU nor CUDA
std::string no_cuda_build_refusal(const std::string& device);  ///< CUDA tensors, a build without CUDA

class FusedProgram {
 public:
  explicit FusedProgram(LoweredProgram lowered);

  /// Empty when both directions can run fused; otherwise why not.
  const std::string& unsupported() const { return unsupported_; }
  const LoweredProgram& lowered() const { return lowered_; }
  /// Whether backward() reads the bound input `name` (autograd keeps only those alive: APPNP's
  /// steps, linear in h, need none of the K intermediate h for their gradients).
  bool backward_reads(const std::string& name) const;

  /// Outputs of the forward program. `inputs` by name (vertex, edge and param tensors).
  std::vector<torch::Tensor> forward(const Graph& g, const std::map<std::string, torch::Tensor>& inputs);
  /// Gradients of lowered().wrt, in that order.
  std::vector<torch::Tensor> backward(const Graph& g, const std::map<std::string, torch::Tensor>& inputs,
                                      const std::vector<torch::Tensor>& grad_outputs);

  /// The generated C++ of one direction ("forward" / "backward") for a float and index type.
  std::string source(const std::string& direction, torch::ScalarType dtype, torch::ScalarType index_dtype);
  /// The generated CUDA of one direction and the host-side description of its launches (built
  /// without a GPU; compiled by NVRTC when a CUDA tensor runs it).
  const codegen::CudaProgram& cuda_program(const std::string& direction, torch::ScalarType dtype,
                                           torch::ScalarType index_dtype);

 private:
  struct Side {
    codegen::FusedPlan plan;
    bool coo = false;        ///< an edge kernel reads the graph's COO arrays
    bool out_edges = false;  ///< a kernel reads the out-edge index (codegen::reads_out_edges)
    std::map<std::string, runtime::CompiledKernel> compiled;  // by variant
    std::map<std::string, codegen::CudaProgram> cuda;         // by variant
  };
  /// One direction on a graph: the call's types, its buffers, the graph arrays, the kernels.
  std::vector<torch::Tensor> launch(Side& side, const std::string& direction, const Graph& g,
                                    const std::map<std::string, torch::Tensor>& inputs,
                                    const std::vector<torch::Tensor>& grad_outputs);
  /// The plan's buffers as pointers: bound inputs and output gradients (checked against the plan's
  /// shapes), pooled intermediates, fresh outputs; `keep` holds them alive for the call. Every
  /// address is a multiple of `alignment` bytes (0: any), which kernels that read vectors
  /// assume: a tensor that is not (a view at an odd offset) is copied.
  std::vector<void*> bind_buffers(const codegen::FusedPlan& plan, const Graph& g,
                                  const std::map<std::string, torch::Tensor>& inputs,
                                  const std::vector<torch::Tensor>& grad_outputs, torch::ScalarType dtype,
                                  torch::Device device, runtime::ScratchLease& scratch, int64_t alignment,
                                  std::vector<torch::Tensor>& keep, std::vector<torch::Tensor>& outputs);
  /// The compiled C++ of one direction and variant (emitted and compiled on first use; with
  /// SEASTAR_CUDA_EMULATE=1, the CUDA kernels through the host emulator).
  runtime::CompiledKernel cpu_kernel(Side& side, const std::string& direction, torch::ScalarType dtype,
                                     torch::ScalarType index_dtype);

  LoweredProgram lowered_;
  std::string unsupported_;
  Side fwd_, bwd_;
  std::mutex mutex_;
  std::mutex cuda_mutex_;  ///< guards the CUDA sources (launch() holds mutex_ around the C++ ones)
  runtime::ScratchPool scratch_;  ///< the CPU intermediates, reused across calls
};

}  // namespace seastar
