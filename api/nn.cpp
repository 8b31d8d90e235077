/** \file GCNConv and GATConv for LibTorch users; see nn.h. */
#include "api/nn.h"

#include <torch/nn/functional/linear.h>
#include <torch/types.h>

#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/util/errors.h"

namespace seastar::nn {

namespace {

/// PyG's glorot: uniform in +-sqrt(6 / (fan_in + fan_out)) over the last two axes.
void glorot(torch::Tensor& t) {
  if (!t.defined()) return;
  const double a = std::sqrt(6.0 / static_cast<double>(t.size(-2) + t.size(-1)));
  torch::NoGradGuard no_grad;
  t.uniform_(-a, a);
}

void zeros(torch::Tensor& t) {
  if (!t.defined()) return;
  torch::NoGradGuard no_grad;
  t.zero_();
}

void check_graph(const char* layer, const Graph& graph, const torch::Tensor& x) {
  if (!graph.defined()) SEASTAR_THROW(ValueError, layer, ".forward: the graph is undefined");
  if (!x.defined()) SEASTAR_THROW(ValueError, layer, ".forward: x is an undefined tensor");
  if (x.dim() != 2) SEASTAR_THROW(ValueError, layer, ": x must be 2-d [N, F], got shape ", x.sizes());
  if (x.size(0) != graph.num_nodes())
    SEASTAR_THROW(ValueError, layer, ": x has ", x.size(0), " rows but the graph has ", graph.num_nodes(),
                  " vertices");
}

/// Inverted-dropout mask Bernoulli(1 - p) / (1 - p) in `like`'s dtype and device, drawn as
/// uniform >= p (as the Python layer: same distribution, faster than bernoulli_ on CPU).
torch::Tensor dropout_mask(at::IntArrayRef shape, double p, const torch::Tensor& like) {
  auto opts = torch::TensorOptions().dtype(like.dtype()).device(like.device());
  if (p >= 1.0) return torch::zeros(shape, opts);
  torch::Tensor keep = torch::empty(shape, opts).uniform_() >= p;
  return keep.to(like.scalar_type()).mul_(1.0 / (1.0 - p));
}

Program* leak(Program p) { return new Program(std::move(p)); }  // never destroyed: no exit-order issues

}  // namespace

// ---- the propagation programs --------------------------------------------------------

const Program& weighted_sum_program() {
  static const Program* p = leak(Program(
      [](Vertex& v) {
        return sum(v.in_edges(), [](const Edge& e) {
          Var h = e.src()["h"];  // operands named first: C++ leaves argument order unspecified
          Var w = e["w"];
          return h * w;
        });
      },
      "gcn_weighted_sum"));
  return *p;
}

const Program& neighbour_sum_program() {
  static const Program* p =
      leak(Program([](Vertex& v) { return sum(v.in_edges(), [](const Edge& e) { return e.src()["h"]; }); },
                   "neighbour_sum"));
  return *p;
}

const Program& gat_program(double negative_slope, bool attention_dropout) {
  // the slope is a constant baked into the trace: one program per slope (shared by all layers)
  static std::mutex mutex;
  static auto* programs = new std::map<std::pair<double, bool>, Program>();
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(negative_slope, attention_dropout);
  auto it = programs->find(key);
  if (it != programs->end()) return it->second;
  auto fn = [negative_slope, attention_dropout](Vertex& v) {
    Var alpha = softmax(v.in_edges(), [&](const Edge& e) {
      Var el = e.src()["el"];
      Var er = v["er"];
      return leaky_relu(el + er, negative_slope);
    });
    Edge e = v.in_edges().edge();
    if (attention_dropout) {
      Var m = e["m"];
      Var am = alpha * m;
      Var h = e.src()["h"];
      return sum(am * h);
    }
    Var h = e.src()["h"];
    return sum(alpha * h);
  };
  return programs->emplace(key, Program(Program::Fn(fn), attention_dropout ? "gat_dropout" : "gat")).first->second;
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight) {
  if (x.is_sparse()) return torch::mm(x, weight.t());
  return torch::nn::functional::linear(x, weight);
}

// ---- GCNConv ---------------------------------------------------------------------------

GCNConvImpl::GCNConvImpl(const GCNConvOptions& options_) : options(options_) { reset(); }

void GCNConvImpl::reset() {
  lin = register_module(
      "lin", torch::nn::Linear(torch::nn::LinearOptions(options.in_channels(), options.out_channels()).bias(false)));
  bias = options.bias() ? register_parameter("bias", torch::empty({options.out_channels()})) : torch::Tensor();
  reset_parameters();
}

void GCNConvImpl::reset_parameters() {
  glorot(lin->weight);
  zeros(bias);
}

torch::Tensor GCNConvImpl::forward(const Graph& graph, const torch::Tensor& x) {
  check_graph("GCNConv", graph, x);
  torch::Tensor h = seastar::nn::linear(x, lin->weight);
  torch::Tensor out;
  if (options.normalize()) {
    const bool loops = options.add_self_loops();
    // kept by the graph (Graph::derived): the structure and its float64 weights, once per graph,
    // then the weights in each device and dtype they are asked for
    const std::string norm_key = std::string("nn.GCNConv.norm/loops=") + (loops ? "1" : "0");
    using Norm = std::pair<Graph, torch::Tensor>;
    const Norm norm = graph.derived<Norm>(norm_key, [&] {
      // one-time O(N + E) preprocessing of the structure, in float64
      Graph g = loops ? graph.add_self_loops() : graph;
      torch::Tensor deg = g.in_degrees().to(torch::kDouble);
      torch::Tensor dinv = deg.pow(-0.5);
      dinv.masked_fill_(deg == 0, 0.0);
      torch::Tensor ei = g.edge_index();
      return Norm(g, (dinv.index_select(0, ei[0]) * dinv.index_select(0, ei[1])).unsqueeze(-1));
    });
    const Graph& g = norm.first;
    const torch::Tensor w = graph.derived<torch::Tensor>(
        norm_key + "/" + h.device().str() + "/" + std::string(c10::toString(h.scalar_type())),
        [&] { return norm.second.to(h.device(), h.scalar_type()); });
    out = weighted_sum_program().call(g, {{"h", h}, {"w", w}});
  } else {
    out = neighbour_sum_program().call(graph, {{"h", h}});
  }
  if (bias.defined()) out = out + bias;
  return out;
}

void GCNConvImpl::pretty_print(std::ostream& stream) const {
  stream << "seastar::nn::GCNConv(" << options.in_channels() << ", " << options.out_channels() << ")";
}

// ---- GATConv ---------------------------------------------------------------------------

GATConvImpl::GATConvImpl(const GATConvOptions& options_) : options(options_) {
  if (!(options.dropout() >= 0.0 && options.dropout() < 1.0))
    SEASTAR_THROW(ValueError, "GATConv: dropout must be in [0, 1), got ", options.dropout());
  if (options.heads() < 1) SEASTAR_THROW(ValueError, "GATConv: heads must be >= 1, got ", options.heads());
  reset();
}

void GATConvImpl::reset() {
  const int64_t H = options.heads(), C = options.out_channels();
  lin = register_module("lin",
                        torch::nn::Linear(torch::nn::LinearOptions(options.in_channels(), H * C).bias(false)));
  att_src = register_parameter("att_src", torch::empty({1, H, C}));
  att_dst = register_parameter("att_dst", torch::empty({1, H, C}));
  bias = options.bias() ? register_parameter("bias", torch::empty({options.concat() ? H * C : C})) : torch::Tensor();
  reset_parameters();
}

void GATConvImpl::reset_parameters() {
  glorot(lin->weight);
  glorot(att_src);
  glorot(att_dst);
  zeros(bias);
}

torch::Tensor GATConvImpl::forward(const Graph& graph, const torch::Tensor& x) {
  check_graph("GATConv", graph, x);
  const int64_t H = options.heads(), C = options.out_channels();
  torch::Tensor h = seastar::nn::linear(x, lin->weight).view({-1, H, C});
  torch::Tensor el = (h * att_src).sum(-1, /*keepdim=*/true);  // [N, H, 1]
  torch::Tensor er = (h * att_dst).sum(-1, /*keepdim=*/true);
  Graph g = graph;
  if (options.add_self_loops()) {
    g = graph.derived<Graph>("nn.GATConv.loops",
                             [&] { return graph.remove_self_loops().first.add_self_loops(); });
  }
  torch::Tensor out;
  if (is_training() && options.dropout() > 0.0) {
    torch::Tensor m = dropout_mask({g.num_edges(), H, 1}, options.dropout(), h);
    out = gat_program(options.negative_slope(), true).call(g, {{"h", h}, {"el", el}, {"er", er}, {"m", m}});
  } else {
    out = gat_program(options.negative_slope(), false).call(g, {{"h", h}, {"el", el}, {"er", er}});
  }
  out = options.concat() ? out.reshape({-1, H * C}) : out.mean(1);
  if (bias.defined()) out = out + bias;
  return out;
}

void GATConvImpl::pretty_print(std::ostream& stream) const {
  stream << "seastar::nn::GATConv(" << options.in_channels() << ", " << options.out_channels()
         << ", heads=" << options.heads() << ")";
}

}  // namespace seastar::nn
