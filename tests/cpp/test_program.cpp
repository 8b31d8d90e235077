/** \file
 * The C++ user API (api/program.h, api/nn.h) against plain torch written here
 * (index_add / scatter_reduce over the edge list), in float64, forward and gradients to 1e-10,
 * on a small graph with an isolated vertex, a self loop and a multi-edge. Then the errors a
 * user can make (kept together) and the trace cache.
 */
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include "core/util/errors.h"
#include "api/nn.h"
#include "api/program.h"

using namespace seastar;

namespace {

constexpr double kTol = 1e-10;

/// 6 vertices; 0 -> 1 twice (a multi-edge), 2 -> 2 (a self loop), vertex 5 isolated.
Graph small_graph() {
  auto ei = torch::tensor({{0, 0, 1, 2, 3, 1, 4, 2, 3}, {1, 1, 2, 2, 0, 3, 3, 4, 1}}, torch::kLong);
  return Graph::from_edge_index(ei, 6);
}

torch::Tensor rand64(std::vector<int64_t> shape, bool grad = true) {
  return torch::randn(shape, torch::kDouble).requires_grad_(grad);
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << ": undefined";
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double err = (got - want).abs().max().item<double>();
  const double scale = 1.0 + want.abs().max().item<double>();
  EXPECT_LE(err, kTol * scale) << what << ": max abs error " << err;
}

/// Gradients of sum(out * gout) with respect to `inputs`, for a fixed random gout.
std::vector<torch::Tensor> grads(const torch::Tensor& out, const torch::Tensor& gout,
                                 const std::vector<torch::Tensor>& inputs) {
  return torch::autograd::grad({(out * gout).sum()}, inputs, /*grad_outputs=*/{}, /*retain_graph=*/false,
                               /*create_graph=*/false, /*allow_unused=*/true);
}

// ---- plain-torch references ------------------------------------------------------------

struct Edges {
  torch::Tensor src, dst;
  int64_t n;
};
Edges edges_of(const Graph& g) {
  auto ei = g.edge_index();
  return {ei[0], ei[1], g.num_nodes()};
}

/// sum over in-edges of h[src] * w[e]
torch::Tensor ref_weighted_sum(const Edges& e, const torch::Tensor& h, const torch::Tensor& w) {
  auto msg = h.index_select(0, e.src) * w;
  std::vector<int64_t> shape = h.sizes().vec();
  return torch::zeros(shape, h.options().requires_grad(false)).index_add(0, e.dst, msg);
}

/// alpha = softmax over in-edges of leaky_relu(el[src] + er[dst]); sum alpha [* m] * h[src]
torch::Tensor ref_gat(const Edges& e, const torch::Tensor& h, const torch::Tensor& el, const torch::Tensor& er,
                      double slope, const torch::Tensor& m = {}) {
  auto s = torch::leaky_relu(el.index_select(0, e.src) + er.index_select(0, e.dst), slope);  // [E, H, 1]
  auto idx = e.dst.view({-1, 1, 1}).expand_as(s);
  auto mx = torch::full({e.n, s.size(1), 1}, -1e300, s.options().requires_grad(false))
                .scatter_reduce(0, idx, s.detach(), "amax", /*include_self=*/true);
  auto ex = torch::exp(s - mx.index_select(0, e.dst));
  auto z = torch::zeros({e.n, s.size(1), 1}, s.options().requires_grad(false)).index_add(0, e.dst, ex);
  auto alpha = ex / z.index_select(0, e.dst);
  if (m.defined()) alpha = alpha * m;
  auto msg = alpha * h.index_select(0, e.src);
  return torch::zeros(h.sizes(), h.options().requires_grad(false)).index_add(0, e.dst, msg);
}

// ---- programs vs plain torch -------------------------------------------------------------

TEST(Program, GCNWeightedSumForwardAndGradients) {
  torch::manual_seed(1);
  Graph g = small_graph();
  auto h = rand64({6, 4}), w = rand64({9, 1});
  auto out = nn::weighted_sum_program().call(g, {{"h", h}, {"w", w}});
  auto want = ref_weighted_sum(edges_of(g), h, w);
  expect_close(out, want, "forward");
  auto gout = torch::randn({6, 4}, torch::kDouble);
  auto got_g = grads(out, gout, {h, w}), want_g = grads(want, gout, {h, w});
  expect_close(got_g[0], want_g[0], "dh");
  expect_close(got_g[1], want_g[1], "dw");
  EXPECT_EQ(out[5].abs().sum().item<double>(), 0.0);  // the isolated vertex
}

TEST(Program, GATForwardAndGradients) {
  torch::manual_seed(2);
  Graph g = small_graph();
  const int64_t H = 2, C = 3;
  for (bool dropout : {false, true}) {
    auto h = rand64({6, H, C}), el = rand64({6, H, 1}), er = rand64({6, H, 1});
    Program::Tensors in{{"h", h}, {"el", el}, {"er", er}};
    std::vector<torch::Tensor> wrt{h, el, er};
    torch::Tensor m;
    if (dropout) {
      m = (torch::rand({9, H, 1}, torch::kDouble) >= 0.3).to(torch::kDouble).div(0.7).requires_grad_(true);
      in["m"] = m;
      wrt.push_back(m);
    }
    auto out = nn::gat_program(0.2, dropout).call(g, in);
    auto want = ref_gat(edges_of(g), h, el, er, 0.2, m);
    expect_close(out, want, dropout ? "forward (mask)" : "forward");
    auto gout = torch::randn({6, H, C}, torch::kDouble);
    auto got_g = grads(out, gout, wrt), want_g = grads(want, gout, wrt);
    const char* names[] = {"dh", "del", "der", "dm"};
    for (size_t i = 0; i < wrt.size(); ++i) expect_close(got_g[i], want_g[i], names[i]);
  }
}

TEST(Program, SeveralOutputs) {
  torch::manual_seed(3);
  Graph g = small_graph();
  Program p(
      [](Vertex& v) -> std::vector<Var> {
        Var s = sum(v.in_edges(), [](const Edge& e) { return e.src()["h"]; });
        Var m = mean(v.in_edges(), [](const Edge& e) { return e.src()["h"]; });
        return {s, m};
      },
      "sum_and_mean");
  auto h = rand64({6, 5});
  auto outs = p(g, {{"h", h}});
  ASSERT_EQ(outs.size(), 2u);
  Edges e = edges_of(g);
  auto ones = torch::ones({9, 1}, torch::kDouble);
  auto want_sum = ref_weighted_sum(e, h, ones);
  auto deg = g.in_degrees().to(torch::kDouble).clamp_min(1).unsqueeze(-1);
  auto want_mean = want_sum / deg;
  expect_close(outs[0], want_sum, "sum");
  expect_close(outs[1], want_mean, "mean");
  auto g0 = torch::randn({6, 5}, torch::kDouble), g1 = torch::randn({6, 5}, torch::kDouble);
  auto got = torch::autograd::grad({(outs[0] * g0).sum() + (outs[1] * g1).sum()}, {h})[0];
  auto want = torch::autograd::grad({(want_sum * g0).sum() + (want_mean * g1).sum()}, {h})[0];
  expect_close(got, want, "dh");
  EXPECT_THROW(p.call(g, {{"h", h}}), ValueError);  // call() is for one output
}

TEST(Program, ParameterReadThroughVParam) {
  torch::manual_seed(4);
  Graph g = small_graph();
  Program p(
      [](Vertex& v) {
        Var s = sum(v.in_edges(), [](const Edge& e) { return e.src()["h"]; });
        Var b = v.param("b");
        return s * b;
      },
      "scaled_sum");
  auto h = rand64({6, 3}), b = rand64({3}, /*grad=*/false);
  auto want = ref_weighted_sum(edges_of(g), h, torch::ones({9, 1}, torch::kDouble)) * b;
  expect_close(p.call(g, {{"h", h}, {"b", b}}), want, "forward");
  // a gradient for a parameter used inside a program: correct, or a plain NotImplementedError
  auto b2 = b.detach().clone().requires_grad_(true);
  try {
    auto out = p.call(g, {{"h", h}, {"b", b2}});
    auto want2 = ref_weighted_sum(edges_of(g), h, torch::ones({9, 1}, torch::kDouble)) * b2;
    auto gout = torch::randn({6, 3}, torch::kDouble);
    expect_close(grads(out, gout, {b2})[0], grads(want2, gout, {b2})[0], "db");
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("scaled_sum"), std::string::npos) << e.what();
  }
}

// ---- layers vs plain torch ---------------------------------------------------------------

TEST(Layers, GCNConvMatchesPlainTorch) {
  torch::manual_seed(5);
  Graph g = small_graph();
  nn::GCNConv conv(4, 3);
  conv->to(torch::kDouble);
  torch::nn::init::normal_(conv->bias);  // non-zero, so the bias path is checked
  auto x = rand64({6, 4});
  auto out = conv(g, x);

  // A + I: every vertex gets one appended loop (vertex 2 then has two); w = d_j^-1/2 d_i^-1/2
  Edges e = edges_of(g);
  auto loops = torch::arange(6, torch::kLong);
  Edges e2{torch::cat({e.src, loops}), torch::cat({e.dst, loops}), 6};
  auto deg = torch::zeros({6}, torch::kDouble).index_add(0, e2.dst, torch::ones({15}, torch::kDouble));
  auto dinv = deg.pow(-0.5);
  auto w = (dinv.index_select(0, e2.src) * dinv.index_select(0, e2.dst)).unsqueeze(-1);
  auto want = ref_weighted_sum(e2, torch::matmul(x, conv->lin->weight.t()), w) + conv->bias;
  expect_close(out, want, "forward");
  auto gout = torch::randn({6, 3}, torch::kDouble);
  std::vector<torch::Tensor> wrt{x, conv->lin->weight, conv->bias};
  auto got_g = grads(out, gout, wrt), want_g = grads(want, gout, wrt);
  expect_close(got_g[0], want_g[0], "dx");
  expect_close(got_g[1], want_g[1], "dW");
  expect_close(got_g[2], want_g[2], "db");

  // the normalised graph is cached per graph: a second forward gives the same result
  expect_close(conv(g, x), out.detach(), "second forward");
  // same math with a sparse x (bag-of-words features)
  expect_close(conv(g, x.detach().to_sparse()), out.detach(), "sparse x");
}

TEST(Layers, DerivedValuesAreKeptByTheGraphAndSharedByItsCopies) {
  Graph g = small_graph();
  int made = 0;
  auto make = [&] {
    ++made;
    return torch::full({1}, static_cast<double>(made));
  };
  const torch::Tensor a = g.derived<torch::Tensor>("test.value", make);
  Graph copy = g;  // one graph: copies share what is derived from it
  const torch::Tensor b = copy.derived<torch::Tensor>("test.value", make);
  EXPECT_EQ(made, 1);
  EXPECT_TRUE(a.is_same(b));
  EXPECT_EQ(copy.derived<torch::Tensor>("test.other", make).item<double>(), 2.0);  // another key
  Graph other = small_graph();  // another graph with the same edges keeps its own
  EXPECT_EQ(other.derived<torch::Tensor>("test.value", make).item<double>(), 3.0);
  EXPECT_EQ(made, 3);
  // the layers keep their preprocessing there, for every layer on the graph
  nn::GCNConv conv(nn::GCNConvOptions(4, 2));
  conv(g, torch::randn({6, 4}));
  using Norm = std::pair<Graph, torch::Tensor>;
  bool remade = false;
  g.derived<Norm>("nn.GCNConv.norm/loops=1", [&] {
    remade = true;
    return Norm(g, torch::Tensor());
  });
  EXPECT_FALSE(remade);
}

std::string golden(const std::string& name) {
  const std::string path = std::string(SEASTAR_GOLDEN_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

TEST(Layers, ProgramsPrintAsSeastarNnPrograms) {
  // the C++ layers write their programs in C++; tests/python/test_golden_ir.py writes these files
  // from seastar.nn's (the same shapes: 5 vertices, these 5 edges, F = 3, 2 heads)
  Graph g = Graph::from_edge_index(torch::tensor({0, 1, 2, 3, 1, 1, 2, 3, 0, 1}, torch::kLong).view({2, 5}), 5);
  const int64_t n = 5, e = 5, f = 3, heads = 2;
  const Program::Tensors gat{{"h", torch::zeros({n, heads, f})}, {"el", torch::zeros({n, heads, 1})},
                             {"er", torch::zeros({n, heads, 1})}};
  Program::Tensors gat_dropout = gat;
  gat_dropout.emplace("m", torch::zeros({e, heads, 1}));
  EXPECT_EQ(ir::print(nn::neighbour_sum_program().trace(g, {{"h", torch::zeros({n, f})}})),
            golden("nn_neighbour_sum.gir"));
  EXPECT_EQ(ir::print(nn::weighted_sum_program().trace(g, {{"h", torch::zeros({n, f})}, {"w", torch::zeros({e, 1})}})),
            golden("nn_gcn_weighted_sum.gir"));
  EXPECT_EQ(ir::print(nn::gat_program(0.2, false).trace(g, gat)), golden("nn_gat.gir"));
  EXPECT_EQ(ir::print(nn::gat_program(0.2, true).trace(g, gat_dropout)), golden("nn_gat_dropout.gir"));
}

TEST(Layers, GATConvMatchesPlainTorch) {
  Graph g = small_graph();
  const int64_t H = 2, C = 3;
  // PyG convention: the graph's own self loops are removed, then one loop per vertex added
  Edges e = edges_of(g);
  auto keep = e.src.ne(e.dst);
  auto loops = torch::arange(6, torch::kLong);
  Edges e2{torch::cat({e.src.index({keep}), loops}), torch::cat({e.dst.index({keep}), loops}), 6};
  const int64_t E2 = e2.src.size(0);

  for (bool concat : {true, false}) {
    for (bool training : {false, true}) {
      torch::manual_seed(6);
      nn::GATConv conv(nn::GATConvOptions(4, C).heads(H).concat(concat).negative_slope(0.1).dropout(0.4));
      conv->to(torch::kDouble);
      torch::nn::init::normal_(conv->bias);
      conv->train(training);
      auto x = rand64({6, 4});

      torch::manual_seed(7);
      auto out = conv(g, x);
      torch::Tensor m;
      if (training) {  // the mask the layer drew: the next random numbers after the seed
        torch::manual_seed(7);
        m = (torch::empty({E2, H, 1}, torch::kDouble).uniform_() >= 0.4).to(torch::kDouble).mul(1.0 / 0.6);
      }
      auto h = torch::matmul(x, conv->lin->weight.t()).view({-1, H, C});
      auto el = (h * conv->att_src).sum(-1, true), er = (h * conv->att_dst).sum(-1, true);
      auto want = ref_gat(e2, h, el, er, 0.1, m);
      want = (concat ? want.reshape({-1, H * C}) : want.mean(1)) + conv->bias;
      const std::string what = std::string(concat ? "concat" : "mean") + (training ? ", training" : ", eval");
      expect_close(out, want, what + ": forward");
      auto gout = torch::randn(out.sizes(), torch::kDouble);
      std::vector<torch::Tensor> wrt{x, conv->lin->weight, conv->att_src, conv->att_dst, conv->bias};
      auto got_g = grads(out, gout, wrt), want_g = grads(want, gout, wrt);
      const char* names[] = {"dx", "dW", "datt_src", "datt_dst", "db"};
      for (size_t i = 0; i < wrt.size(); ++i) expect_close(got_g[i], want_g[i], what + ": " + names[i]);
    }
  }
}

TEST(Layers, ParameterNamesAndShapesFollowPython) {
  nn::GATConv gat(nn::GATConvOptions(5, 4).heads(3).concat(false));
  auto p = gat->named_parameters();
  ASSERT_TRUE(p.contains("lin.weight"));
  EXPECT_EQ(p["lin.weight"].sizes(), (std::vector<int64_t>{12, 5}));
  EXPECT_EQ(p["att_src"].sizes(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(p["bias"].sizes(), (std::vector<int64_t>{4}));
  nn::GCNConv gcn(nn::GCNConvOptions(5, 2).bias(false));
  EXPECT_EQ(gcn->named_parameters().size(), 1u);
  auto copy = std::dynamic_pointer_cast<nn::GCNConvImpl>(gcn->clone());
  ASSERT_TRUE(copy);
  EXPECT_TRUE(torch::equal(copy->lin->weight, gcn->lin->weight));
}

// ---- errors a user can make --------------------------------------------------------------

Program neighbour_sum_of(const std::string& name) {
  return Program([](Vertex& v) { return sum(v.in_edges(), [](const Edge& e) { return e.src()["h"]; }); }, name);
}

TEST(ProgramErrors, WrongRowCountIsValueError) {
  Graph g = small_graph();
  try {
    neighbour_sum_of("rows").call(g, {{"h", torch::randn({5, 2})}});
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'h' has 5 rows but the graph has 6 vertices"), std::string::npos) << e.what();
  }
  // an edge tensor with the wrong number of rows
  EXPECT_THROW(nn::weighted_sum_program().call(g, {{"h", torch::randn({6, 2})}, {"w", torch::randn({8, 1})}}),
               ValueError);
  // a layer checks x against the graph
  nn::GCNConv conv(2, 2);
  EXPECT_THROW(conv(g, torch::randn({7, 2})), ValueError);
}

TEST(ProgramErrors, IntegerTensorIsTypeError) {
  Graph g = small_graph();
  try {
    neighbour_sum_of("ints").call(g, {{"h", torch::ones({6, 2}, torch::kLong)}});
    FAIL() << "no error";
  } catch (const TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("'h' must be a floating-point tensor"), std::string::npos) << e.what();
  }
  // float32 and float64 mixed
  EXPECT_THROW(nn::weighted_sum_program().call(
                   g, {{"h", torch::randn({6, 2})}, {"w", torch::randn({9, 1}, torch::kDouble)}}),
               TypeError);
}

TEST(ProgramErrors, UnboundNameIsTraceError) {
  Graph g = small_graph();
  Program p(
      [](Vertex& v) {
        return sum(v.in_edges(), [](const Edge& e) {
          Var h = e.src()["h"];
          Var k = e.src()["missing"];
          return h * k;
        });
      },
      "unbound");
  try {
    p.call(g, {{"h", torch::randn({6, 2})}});
    FAIL() << "no error";
  } catch (const TraceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("<C++ program unbound>"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'missing' is not bound"), std::string::npos) << msg;
  }
  EXPECT_EQ(p.num_traces(), 0u);  // a failed trace is not cached
}

TEST(ProgramErrors, ReturningAStaleValueIsTraceError) {
  Graph g = small_graph();
  Program p([](Vertex&) { return Var(); }, "nothing");
  EXPECT_THROW(p.call(g, {{"h", torch::randn({6, 2})}}), TraceError);
}

// ---- the trace cache -----------------------------------------------------------------------

// A CPU graph's E-long index tensors are views of the graph's own int32 storage, not copies,
// and keep that storage alive after the last Graph handle is gone.
TEST(GraphStorage, CpuIndexTensorsViewTheGraphsInt32Arrays) {
  torch::Tensor nbr, eid, ptr;
  const void* storage = nullptr;
  {
    auto g = Graph::from_edge_index(torch::tensor({{0, 0, 2, 3, 3}, {1, 2, 2, 0, 0}}), 5);
    ASSERT_TRUE(g.data().in().nbr.narrow());
    storage = g.data().in().nbr.data();
    const DeviceGraph& d = g.on(torch::kCPU, /*coo=*/false);
    EXPECT_EQ(d.in.nbr.scalar_type(), torch::kInt);
    EXPECT_EQ(d.in.nbr.data_ptr(), storage);
    EXPECT_EQ(d.in.eid.data_ptr(), g.data().in().eid.data());
    nbr = d.in.nbr, eid = d.in.eid, ptr = d.in.ptr;
  }
  EXPECT_EQ(nbr.data_ptr(), storage);  // the graph is gone; its arrays are still there
  EXPECT_TRUE(torch::equal(nbr, torch::tensor({3, 3, 0, 0, 2}, torch::kInt)));
  EXPECT_TRUE(torch::equal(eid, torch::tensor({3, 4, 0, 1, 2}, torch::kInt)));
  EXPECT_TRUE(torch::equal(ptr, torch::tensor({0, 2, 3, 5, 5, 5}, torch::kInt)));
}

TEST(ProgramCache, TracesOncePerSignature) {
  Graph g = small_graph();
  std::atomic<int> runs{0};
  Program p(
      [&runs](Vertex& v) {
        ++runs;
        return sum(v.in_edges(), [](const Edge& e) { return e.src()["h"]; });
      },
      "counted");
  auto a = p.call(g, {{"h", torch::randn({6, 3})}});
  auto b = p.call(g, {{"h", torch::randn({6, 3})}});  // same shapes, new values
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(p.num_traces(), 1u);
  p.call(g, {{"h", torch::randn({6, 4})}});  // new shape
  EXPECT_EQ(runs.load(), 2);
  p.call(g, {{"h", torch::randn({6, 4}).requires_grad_(true)}});  // requires_grad is in the key
  EXPECT_EQ(runs.load(), 3);
  Program copy = p;  // copies share the cache
  copy.call(g, {{"h", torch::randn({6, 3})}});
  EXPECT_EQ(runs.load(), 3);
  EXPECT_EQ(copy.num_traces(), 3u);
  // the trace itself does not depend on the graph's size: another graph, same shapes otherwise
  Graph g2 = Graph::from_edge_index(torch::tensor({{0}, {1}}, torch::kLong), 6);
  p.call(g2, {{"h", torch::randn({6, 3})}});
  EXPECT_EQ(runs.load(), 3);
}

TEST(ProgramCache, ConcurrentCallsTraceOnce) {
  Graph g = small_graph();
  std::atomic<int> runs{0};
  Program p(
      [&runs](Vertex& v) {
        ++runs;
        return sum(v.in_edges(), [](const Edge& e) { return e.src()["h"]; });
      },
      "concurrent");
  auto h = torch::randn({6, 3}, torch::kDouble);
  auto want = ref_weighted_sum(edges_of(g), h, torch::ones({9, 1}, torch::kDouble));
  std::vector<torch::Tensor> outs(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < outs.size(); ++i) threads.emplace_back([&, i] { outs[i] = p.call(g, {{"h", h}}); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(runs.load(), 1);
  for (const auto& o : outs) expect_close(o, want, "concurrent call");
}

}  // namespace
