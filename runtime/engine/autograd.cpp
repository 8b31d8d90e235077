/** \file FusedFunction: the autograd face of FusedProgram; see autograd.h. */
#include "runtime/engine/autograd.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/types.h>

#include "core/util/errors.h"

namespace seastar {
namespace {

/// What backward needs besides tensors; travels in ctx->saved_data as a capsule.
struct CallState : torch::CustomClassHolder {
  std::shared_ptr<FusedProgram> program;
  Graph graph;
  std::vector<std::string> names;
  std::vector<std::string> saved;  ///< the names backward reads, in the order they are saved
};

struct FusedFunction : public torch::autograd::Function<FusedFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                c10::intrusive_ptr<CallState> state,
                                                at::TensorList tensors) {
    std::map<std::string, torch::Tensor> named;
    for (size_t i = 0; i < tensors.size(); ++i) named[state->names[i]] = tensors[i];
    // the profiler's name for these kernels (the same as the torch.library ops' in seastar/torch_ops.py)
    RECORD_FUNCTION("seastar::" + state->program->lowered().name + ".forward", std::vector<c10::IValue>());
    auto outs = state->program->forward(state->graph, named);
    // only what the backward kernels read is kept alive until backward
    std::vector<torch::Tensor> keep;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (state->program->backward_reads(state->names[i])) {
        keep.push_back(tensors[i]);
        state->saved.push_back(state->names[i]);
      }
    ctx->save_for_backward(keep);
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return outs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    if (torch::GradMode::is_enabled())
      SEASTAR_THROW(NotImplementedError,
                    "Seastar's fused kernels do not support double backward (create_graph=True or higher-order "
                    "gradients); use backend='reference' for that");
    auto state = c10::static_intrusive_pointer_cast<CallState>(ctx->saved_data["state"].toCapsule());
    auto tensors = ctx->get_saved_variables();
    std::map<std::string, torch::Tensor> named;
    for (size_t i = 0; i < tensors.size(); ++i) named[state->saved[i]] = tensors[i];
    RECORD_FUNCTION("seastar::" + state->program->lowered().name + ".backward", std::vector<c10::IValue>());
    auto grads = state->program->backward(state->graph, named, grad_outputs);
    const auto& wrt = state->program->lowered().wrt;
    torch::autograd::variable_list result(1 + state->names.size());  // the state argument has no gradient
    for (size_t i = 0; i < state->names.size(); ++i) {
      for (size_t k = 0; k < wrt.size(); ++k)
        if (wrt[k] == state->names[i]) result[1 + i] = grads[k];
    }
    return result;
  }
};

}  // namespace

std::vector<torch::Tensor> apply_fused(const std::shared_ptr<FusedProgram>& program, const Graph& graph,
                                       const std::vector<std::string>& names,
                                       const std::vector<torch::Tensor>& tensors) {
  if (names.size() != tensors.size())
    SEASTAR_THROW(ValueError, "apply_fused: ", names.size(), " names for ", tensors.size(), " tensors");
  auto state = c10::make_intrusive<CallState>();
  state->program = program;
  state->graph = graph;
  state->names = names;
  // a TensorList argument is what autograd tracks input by input
  return FusedFunction::apply(state, at::TensorList(tensors));
}

}  // namespace seastar
