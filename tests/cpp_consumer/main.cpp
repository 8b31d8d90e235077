/** \file
 * A user's program against an installed Seastar: a vertex program and a seastar::nn layer
 * trained for a few steps with torch::optim on a small ring graph. Prints the version it was
 * compiled with and the losses; exits non-zero when training does not reduce the loss.
 */
#include <seastar/nn.h>
#include <seastar/version.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>

int main() {
  using namespace seastar;
  std::printf("seastar %s (LibTorch %s)\n", SEASTAR_VERSION, SEASTAR_TORCH_VERSION);
  torch::manual_seed(0);

  // a ring of N vertices with chords: every vertex has in-edges from i-1 and i+3
  const int64_t n = 64;
  torch::Tensor ids = torch::arange(n);
  torch::Tensor src = torch::cat({(ids + n - 1) % n, (ids + 3) % n});
  torch::Tensor dst = torch::cat({ids, ids});
  Graph g = Graph::from_edge_index(torch::stack({src, dst}), n);

  // a vertex program of its own: the sum of the in-neighbours' features
  Program neighbour_sum([](Vertex& v) { return sum(v.in_edges(), [](Edge e) { return e.src()["h"]; }); },
                        "consumer_neighbour_sum");
  torch::Tensor h = torch::randn({n, 4});
  torch::Tensor s = neighbour_sum.call(g, {{"h", h}});
  torch::Tensor expected = h.index_select(0, (ids + n - 1) % n) + h.index_select(0, (ids + 3) % n);
  if (!torch::allclose(s, expected, 1e-5, 1e-5)) {
    std::printf("vertex program: wrong result\n");
    return 1;
  }

  // a GCN layer learning to predict the parity of each vertex from random features
  nn::GCNConv conv(8, 2);
  torch::Tensor x = torch::randn({n, 8});
  torch::Tensor y = ids % 2;
  torch::optim::Adam opt(conv->parameters(), torch::optim::AdamOptions(0.05));
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(conv(g, x), y);
    loss.backward();
    opt.step();
    last = loss.item<double>();
    if (step == 0) first = last;
  }
  std::printf("GCNConv: loss %.4f -> %.4f\n", first, last);
  if (!std::isfinite(last) || !(last < first)) {
    std::printf("training did not reduce the loss\n");
    return 1;
  }
  std::printf("consumer ok\n");
  return 0;
}
