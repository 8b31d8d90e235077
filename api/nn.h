/** \file
 * GNN layers for LibTorch users: the C++ twins of python/seastar/nn (same math, same
 * initialisation, same parameter names, so state dicts line up), as torch::nn modules.
 * Dense work (x W, the per-vertex attention halves) is ordinary torch; the propagation is a
 * seastar::Program run by the fused kernels.
 *
 *   seastar::nn::GCNConv conv1(1433, 16);
 *   seastar::nn::GATConv conv2(seastar::nn::GATConvOptions(64, 7).heads(1).concat(false).dropout(0.6));
 *   torch::Tensor out = conv2(graph, torch::relu(conv1(graph, x)));
 *
 * Layers take the graph first, as in Python: forward(const Graph&, const torch::Tensor& x);
 * `x` may be a sparse COO tensor (bag-of-words features). Per-graph preprocessing (self loops,
 * GCN's edge weights) is kept by the graph itself (Graph::derived), shared by every layer.
 */
#pragma once

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <ostream>

#include "core/graph/graph.h"
#include "api/program.h"

namespace seastar::nn {

/// The propagation programs the layers use (traced once per signature, shared by all layers).
/// sum over in-edges of e.src.h * e.w  ("gcn_weighted_sum"; GCN and APPNP propagation)
const Program& weighted_sum_program();
/// sum over in-edges of e.src.h  ("neighbour_sum")
const Program& neighbour_sum_program();
/// GAT: alpha = softmax(leaky_relu(e.src.el + v.er, slope)); sum(alpha [* e.m] * e.src.h).
/// With attention_dropout the program also reads a per-edge mask `m` [E, H, 1] ("gat_dropout").
const Program& gat_program(double negative_slope, bool attention_dropout);

/// `x W^T` for a dense or sparse COO x.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight);

struct GCNConvOptions {
  GCNConvOptions(int64_t in_channels, int64_t out_channels) : in_channels_(in_channels), out_channels_(out_channels) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);
  TORCH_ARG(bool, bias) = true;
  /// propagate over A + I (one loop appended per vertex, as graph.add_self_loops())
  TORCH_ARG(bool, add_self_loops) = true;
  /// symmetric normalisation D^-1/2 (A + I) D^-1/2; false: a plain sum over in-edges, no loops
  TORCH_ARG(bool, normalize) = true;
};

/// Graph convolution (Kipf & Welling 2017): out = D^-1/2 (A + I) D^-1/2 (x W) + b.
/// Per vertex i: out_i = b + sum_{e = (j -> i)} w_e (x_j W), w_e = 1 / sqrt(d_j d_i), d the
/// in-degree in A + I. Weights glorot, bias zeros (as PyG). See python/seastar/nn/gcn_conv.py.
class GCNConvImpl : public torch::nn::Cloneable<GCNConvImpl> {
 public:
  GCNConvImpl(int64_t in_channels, int64_t out_channels) : GCNConvImpl(GCNConvOptions(in_channels, out_channels)) {}
  explicit GCNConvImpl(const GCNConvOptions& options);

  void reset() override;  ///< (re)creates the parameters (torch::nn::Cloneable)
  void reset_parameters();
  torch::Tensor forward(const Graph& graph, const torch::Tensor& x);
  void pretty_print(std::ostream& stream) const override;

  GCNConvOptions options;
  torch::nn::Linear lin{nullptr};  ///< weight [out, in], no bias ("lin.weight" as in Python)
  torch::Tensor bias;              ///< [out], undefined without bias
};
TORCH_MODULE(GCNConv);

struct GATConvOptions {
  GATConvOptions(int64_t in_channels, int64_t out_channels) : in_channels_(in_channels), out_channels_(out_channels) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, out_channels);  ///< per head
  TORCH_ARG(int64_t, heads) = 1;
  /// heads concatenated [N, heads * out] (true) or averaged [N, out] (false)
  TORCH_ARG(bool, concat) = true;
  TORCH_ARG(double, negative_slope) = 0.2;
  /// dropout on the attention coefficients while training, in [0, 1)
  TORCH_ARG(double, dropout) = 0.0;
  /// as PyG: remove the graph's own self loops, then add one per vertex
  TORCH_ARG(bool, add_self_loops) = true;
  TORCH_ARG(bool, bias) = true;
};

/// Graph attention (Velickovic et al. 2018). h = x W split into heads [N, H, C];
/// s_e = leaky_relu(<h_j, a_src> + <h_i, a_dst>) for e = (j -> i); alpha = softmax over the
/// in-edges of i (max-subtracted); out_i = sum_e alpha_e h_j; heads concatenated or averaged,
/// plus bias. Attention dropout is a per-edge mask m [E, H, 1] (Bernoulli(1-p)/(1-p)) drawn
/// with torch and bound as an edge feature: sum_e alpha_e m_e h_j is exactly dropout(alpha)
/// followed by the weighted sum. See python/seastar/nn/gat_conv.py.
class GATConvImpl : public torch::nn::Cloneable<GATConvImpl> {
 public:
  GATConvImpl(int64_t in_channels, int64_t out_channels) : GATConvImpl(GATConvOptions(in_channels, out_channels)) {}
  explicit GATConvImpl(const GATConvOptions& options);

  void reset() override;
  void reset_parameters();
  torch::Tensor forward(const Graph& graph, const torch::Tensor& x);
  void pretty_print(std::ostream& stream) const override;

  GATConvOptions options;
  torch::nn::Linear lin{nullptr};  ///< weight [heads * out, in], no bias
  torch::Tensor att_src, att_dst;  ///< [1, heads, out]
  torch::Tensor bias;              ///< [heads * out] (concat) or [out]; undefined without bias
};
TORCH_MODULE(GATConv);

}  // namespace seastar::nn
