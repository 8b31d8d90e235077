/** \file
 * Mini-batch GraphSAGE on Cora from C++: the neighbour sampler (seastar::sampling), sampled
 * blocks as bipartite seastar::Graphs, a vertex program for the neighbour mean and LibTorch's
 * torch::nn / torch::optim, no Python. The C++ twin of examples/train_minibatch.py.
 *
 *   seastar_train_minibatch --epochs 30 --fanouts 25,10 --batch-size 64 --seed 0 [--device cuda] [DATA_DIR]
 *
 * --device cuda (or cuda:N) trains on the GPU: a batch's rows are gathered on the host into pinned
 * memory and copied, like its blocks' index arrays, without blocking on torch's current stream,
 * where the step's kernels follow them; the loss and accuracy are summed on the device and read
 * once per epoch, so no step makes the host wait for the GPU.
 *
 * Each layer is out = W_l mean_{j -> i} h_j + b + W_r h_i on a block whose destinations are its
 * first num_dst sources (so h_i is a view of the first num_dst rows of h). Evaluation samples
 * every neighbour (fanout -1) of every vertex, which is full-graph inference.
 */
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "core/frontend/builder.h"
#include "core/graph/graph.h"
#include "core/sampling/neighbor_sampler.h"
#include "runtime/cpu/cpu_allocator.h"
#include "kernels/cpu/row_gather.h"
#include "examples/cpp/planetoid.h"
#include "api/program.h"

#ifndef SEASTAR_CORA_DIR
#define SEASTAR_CORA_DIR "python/seastar/datasets/data/planetoid/cora"
#endif

namespace {

using seastar::Graph;

/// One sampled mini-batch: blocks outermost first, the global ids of the first block's sources.
struct Batch {
  std::vector<Graph> blocks;
  torch::Tensor input_nodes, seeds;
};

Batch sample(const Graph& g, const std::vector<int64_t>& seeds, const std::vector<int64_t>& fanouts, uint64_t seed) {
  seastar::sampling::SamplerOptions o;
  o.seed = seed;
  seastar::sampling::Fanouts f;
  for (int64_t k : fanouts) f.push_back({k});
  auto hops = seastar::sampling::sample_neighbors(g.data(), seeds, f, o);
  Batch b;
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {  // the sampler gives the innermost hop first
    const int64_t ns = it->num_src();
    b.blocks.emplace_back(seastar::GraphData::from_csc_bipartite(it->ptr, it->src, ns));
  }
  b.input_nodes = torch::tensor(hops.back().src_nodes, torch::kLong);
  b.seeds = torch::tensor(seeds, torch::kLong);
  return b;
}

const seastar::Program& neighbour_mean() {
  static const seastar::Program p(
      [](seastar::Vertex& v) { return seastar::mean(v.in_edges(), [](const seastar::Edge& e) { return e.src()["h"]; }); },
      "neighbour_mean");
  return p;
}

struct SAGELayerImpl : torch::nn::Module {
  torch::nn::Linear lin_l{nullptr}, lin_r{nullptr};
  SAGELayerImpl(int64_t in, int64_t out)
      : lin_l(register_module("lin_l", torch::nn::Linear(in, out))),
        lin_r(register_module("lin_r", torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)))) {}
  torch::Tensor forward(const Graph& block, const torch::Tensor& h) {
    torch::Tensor agg = neighbour_mean().call(block, {{"h", h}});
    return lin_l(agg) + lin_r(h.narrow(0, 0, block.num_dst()));
  }
};
TORCH_MODULE(SAGELayer);

struct Args {
  int epochs = 30, batch_size = 64, hidden = 64;
  std::vector<int64_t> fanouts{25, 10};
  uint64_t seed = 0;
  std::string data = SEASTAR_CORA_DIR;
  std::string device = "cpu";
};

/// The device of --device, or an error saying why this machine or build cannot train there.
torch::Device training_device(const std::string& name) {
  std::optional<torch::Device> d;
  try {
    d.emplace(name);
  } catch (const std::exception&) {
    throw std::runtime_error("--device must be cpu, cuda or cuda:N, got '" + name + "'");
  }
  if (d->is_cpu()) return *d;
  if (!d->is_cuda()) throw std::runtime_error("--device must be cpu, cuda or cuda:N, got '" + name + "'");
#ifndef SEASTAR_WITH_CUDA
  throw std::runtime_error("--device " + name + ": this build of Seastar has no CUDA backend (it was built without "
                           "the CUDA toolkit); rebuild with the toolkit installed, or use --device cpu");
#endif
  if (!torch::cuda::is_available())
    throw std::runtime_error("--device " + name + ": no CUDA device is available here (torch::cuda::is_available() "
                             "is false)");
  const auto count = static_cast<int64_t>(torch::cuda::device_count());
  if (d->index() >= count)
    throw std::runtime_error("--device " + name + ": this machine has " + std::to_string(count) + " CUDA device(s)");
  return d->has_index() ? *d : torch::Device(torch::kCUDA, 0);
}

/// `t` on `device`: through pinned memory and a copy that does not block the host on a GPU
/// (torch's host allocator keeps the pinned block until the copy has run).
torch::Tensor to_device(const torch::Tensor& t, const torch::Device& device) {
  return device.is_cpu() ? t : t.pin_memory().to(device, /*non_blocking=*/true);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(k + " needs a value");
      return argv[++i];
    };
    auto positive = [&](const std::string& s) {
      int v = std::stoi(s);
      if (v < 1) throw std::runtime_error(k + " must be at least 1, got " + s);
      return v;
    };
    if (k == "--epochs") a.epochs = positive(value());
    else if (k == "--batch-size") a.batch_size = positive(value());
    else if (k == "--hidden") a.hidden = positive(value());
    else if (k == "--seed") a.seed = std::stoull(value());
    else if (k == "--device") a.device = value();
    else if (k == "--fanouts") {
      a.fanouts.clear();
      std::stringstream ss(value());
      for (std::string f; std::getline(ss, f, ',');) {
        int64_t v = std::stoll(f);
        if (v < -1) throw std::runtime_error("--fanouts: each fanout must be >= 0, or -1 for every neighbour");
        a.fanouts.push_back(v);
      }
      if (a.fanouts.empty()) throw std::runtime_error("--fanouts needs at least one fanout");
    } else if (k == "--help" || k == "-h") {
      std::cout << "usage: seastar_train_minibatch [--epochs N] [--fanouts 25,10] [--batch-size B] [--hidden H] "
                   "[--seed S] [--device cpu|cuda|cuda:N] [DATA_DIR]\n";
      std::exit(0);
    } else if (!k.empty() && k[0] == '-') throw std::runtime_error("unknown option " + k);
    else a.data = k;
  }
  return a;
}

int run(const Args& args) {
  const torch::Device device = training_device(args.device);
  std::printf("training on %s\n", device.str().c_str());
  torch::manual_seed(static_cast<int64_t>(args.seed));
  auto ds = seastar_examples::load_planetoid(args.data, /*sparse_features=*/false);
  const int64_t n = ds.graph.num_nodes();
  std::vector<SAGELayer> layers;
  std::vector<int64_t> dims{ds.num_features};
  for (size_t i = 1; i < args.fanouts.size(); ++i) dims.push_back(args.hidden);
  dims.push_back(ds.num_classes);
  torch::nn::ModuleList model;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    layers.emplace_back(dims[i], dims[i + 1]);
    model->push_back(layers.back());
  }
  model->to(device);
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(0.01).weight_decay(5e-4));
  auto forward = [&](const Batch& b, const torch::Tensor& x, bool training) {
    torch::Tensor h = x;
    for (size_t i = 0; i < layers.size(); ++i) {
      h = layers[i]->forward(b.blocks[i], h);
      if (i + 1 < layers.size()) h = torch::dropout(torch::relu(h), 0.5, training);
    }
    return h;
  };
  std::vector<int64_t> train_ids;
  auto tm = ds.train_mask.nonzero().view(-1);
  for (int64_t i = 0; i < tm.numel(); ++i) train_ids.push_back(tm[i].item<int64_t>());
  std::vector<int64_t> all(n);
  for (int64_t v = 0; v < n; ++v) all[v] = v;
  const Batch full = sample(ds.graph, all, std::vector<int64_t>(args.fanouts.size(), -1), 0);

  double best_val = -1, best_test = 0;
  int best_epoch = 0;
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    auto t0 = std::chrono::steady_clock::now();
    model->train();
    auto perm = torch::randperm(static_cast<int64_t>(train_ids.size()));
    double sample_s = 0;
    // summed on the device: reading the loss back each step would make the host wait for the GPU
    torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
    for (int64_t lo = 0; lo < perm.numel(); lo += args.batch_size) {
      std::vector<int64_t> seeds;
      for (int64_t i = lo; i < std::min<int64_t>(perm.numel(), lo + args.batch_size); ++i)
        seeds.push_back(train_ids[perm[i].item<int64_t>()]);
      auto s0 = std::chrono::steady_clock::now();
      Batch b = sample(ds.graph, seeds, args.fanouts, args.seed * 1000003 + epoch * 7919 + lo);
      sample_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      // the blocks' index arrays go ahead of the rows, on the stream the step's kernels use; the
      // hidden layers' out-edge index too (their backward reads it), not the input block's
      for (size_t i = 0; i < b.blocks.size(); ++i)
        b.blocks[i].on(device, /*coo=*/false, /*out=*/i > 0, /*non_blocking=*/true);
      opt.zero_grad();
      auto x = to_device(seastar::runtime::gather_rows(ds.x, b.input_nodes), device);  // a recycled host buffer
      auto y = to_device(ds.y.index_select(0, b.seeds), device);
      auto loss = torch::nn::functional::cross_entropy(forward(b, x, true), y);
      loss.backward();
      opt.step();
      loss_sum += loss.detach() * static_cast<double>(seeds.size());
    }
    const double mean_loss = loss_sum.item<double>() / static_cast<double>(train_ids.size());  // waits for the GPU
    double epoch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    model->eval();
    torch::NoGradGuard no_grad;
    auto pred = forward(full, to_device(seastar::runtime::gather_rows(ds.x, full.input_nodes), device), false)
                    .argmax(-1)
                    .cpu();
    // full.seeds = every vertex in id order, so pred[v] is vertex v's prediction
    auto acc = [&](const torch::Tensor& m) { return pred.index({m}).eq(ds.y.index({m})).to(torch::kDouble).mean().item<double>(); };
    double val = acc(ds.val_mask), test = acc(ds.test_mask);
    if (val > best_val) best_val = val, best_test = test, best_epoch = epoch;
    std::printf("epoch %3d  loss %.4f  val %.3f  test %.3f  epoch %.0f ms (sampling %.0f ms)\n", epoch,
                mean_loss, val, test, epoch_s * 1e3, sample_s * 1e3);
  }
  std::printf("mini-batch sage: test accuracy %.4f at the best validation epoch %d (val %.4f)\n", best_test,
              best_epoch, best_val);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    seastar::runtime::install_cpu_allocator_from_env();  // as `import seastar` does in Python
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "seastar_train_minibatch: " << e.what() << "\n";
    return 2;
  }
}
