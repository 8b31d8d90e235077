/** \file Python binding of the neighbour sampler: blocks as bipartite seastar::Graphs. */
#include <pybind11/stl.h>
#include <omp.h>
#include <torch/python.h>

#include <algorithm>
#include <cstring>

#include "core/graph/generators.h"
#include "core/graph/graph_tensors.h"
#include "core/sampling/neighbor_sampler.h"
#include "core/util/errors.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace seastar::python {
namespace {

std::vector<int64_t> ids_of(const torch::Tensor& t, const char* what) {
  if (t.is_floating_point() || t.is_complex() || t.scalar_type() == torch::kBool)
    SEASTAR_THROW(TypeError, what, " must hold integer vertex ids, got ", t.scalar_type());
  if (t.dim() != 1) SEASTAR_THROW(ValueError, what, " must be one-dimensional, got shape ", t.sizes());
  auto c = t.to(torch::kCPU, torch::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

torch::Tensor tensor_of(std::vector<int64_t>&& v) {
  auto owner = new std::vector<int64_t>(std::move(v));
  return torch::from_blob(
      owner->data(), {static_cast<int64_t>(owner->size())}, [owner](void*) { delete owner; }, torch::kLong);
}

/// x[idx] for a CPU tensor whose rows are contiguous (the loader's feature gather): rows copied
/// without the GIL, each row prefetched a few rows ahead (the rows are scattered over x, so each
/// one's first cache lines miss; index_select waits for them one row at a time).
torch::Tensor gather_rows(const torch::Tensor& x, const torch::Tensor& idx) {
  // anything else (another device, strided or sparse rows, a tensor autograd tracks): torch's own gather
  if (!x.device().is_cpu() || x.is_sparse() || x.dim() < 1 || !x.is_contiguous() || x.requires_grad())
    return x.index_select(0, idx.to(x.device()));
  const std::vector<int64_t> rows = ids_of(idx, "idx");
  const int64_t n = x.size(0);
  for (size_t k = 0; k < rows.size(); ++k)
    if (rows[k] < 0 || rows[k] >= n)
      SEASTAR_THROW(ValueError, "idx[", k, "] = ", rows[k], " is out of range for ", n, " rows");
  std::vector<int64_t> shape = x.sizes().vec();
  shape[0] = static_cast<int64_t>(rows.size());
  torch::Tensor out = torch::empty(shape, x.options());
  const size_t row_bytes = static_cast<size_t>(x.numel() / std::max<int64_t>(n, 1)) * x.element_size();
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  py::gil_scoped_release nogil;
  constexpr int64_t kAhead = 8;
  const size_t lines = std::min<size_t>((row_bytes + 63) / 64, 8);  // the first 512 bytes of a row
  const int64_t m = static_cast<int64_t>(rows.size());
  // the calling thread's OpenMP threads (the sampler's convention): torch.set_num_threads on the
  // main thread; on the loader's thread, what it set with set_local_threads
#pragma omp parallel for schedule(dynamic, 512) if (m * static_cast<int64_t>(row_bytes) >= (1 << 20))
  for (int64_t k = 0; k < m; ++k) {
    if (k + kAhead < m) {
      const char* next = src + rows[k + kAhead] * row_bytes;
      for (size_t l = 0; l < lines; ++l) __builtin_prefetch(next + 64 * l);
    }
    std::memcpy(dst + k * row_bytes, src + rows[k] * row_bytes, row_bytes);
  }
  return out;
}

/// Samples and builds the block graphs without the GIL, so a loader thread overlaps training.
py::list sample(const Graph& graph, const torch::Tensor& seeds, const sampling::Fanouts& fanouts, uint64_t seed,
                bool replace, const std::optional<torch::Tensor>& weights) {
  sampling::SamplerOptions o;
  o.replace = replace;
  o.seed = seed;
  if (weights && weights->defined()) {
    if (!weights->is_floating_point() || weights->dim() != 1)
      SEASTAR_THROW(TypeError, "weights must be a one-dimensional floating-point tensor of edge weights");
    auto w = weights->to(torch::kCPU, torch::kDouble).contiguous();
    o.weights.assign(w.data_ptr<double>(), w.data_ptr<double>() + w.numel());
  }
  std::vector<int64_t> s = ids_of(seeds, "seeds");
  struct Out {
    Graph g;
    std::vector<int64_t> nodes, eid;
  };
  std::vector<Out> outs;
  {
    py::gil_scoped_release nogil;
    const GraphData& d = graph.data();
    auto blocks = sampling::sample_neighbors(d, s, fanouts, o);
    for (auto& b : blocks) {
      GraphTypes types;
      if (d.has_edge_types()) {
        types.num_edge_types = d.types().num_edge_types;
        types.edge_type.resize(b.eid.size());
        for (size_t k = 0; k < b.eid.size(); ++k) types.edge_type[k] = d.types().edge_type[b.eid[k]];
      }
      if (d.has_node_types()) {  // the sources' types; the destinations are the first num_dst sources
        types.num_node_types = d.types().num_node_types;
        types.node_type.resize(b.src_nodes.size());
        for (size_t k = 0; k < b.src_nodes.size(); ++k) types.node_type[k] = d.types().node_type[b.src_nodes[k]];
      }
      const int64_t ns = b.num_src();
      Graph g(GraphData::from_csc_bipartite(std::move(b.ptr), std::move(b.src), ns, std::move(types)));
      outs.push_back({std::move(g), std::move(b.src_nodes), std::move(b.eid)});
    }
  }
  py::list result;
  for (auto& o2 : outs) result.append(py::make_tuple(o2.g, tensor_of(std::move(o2.nodes)), tensor_of(std::move(o2.eid))));
  return result;
}

py::tuple sbm(int64_t num_nodes, double avg_degree, int64_t num_classes, double homophily, uint64_t seed) {
  generators::LabelledGraph lg;
  Graph g;
  {
    py::gil_scoped_release nogil;
    lg = generators::sbm_node_classification(num_nodes, avg_degree, num_classes, homophily, seed);
    g = Graph(GraphData::from_coo(std::move(lg.src), std::move(lg.dst), num_nodes));
  }
  return py::make_tuple(g, tensor_of(std::move(lg.label)));
}

}  // namespace

void bind_sampling(py::module_& m) {
  m.def("sbm_node_classification", &sbm, py::arg("num_nodes"), py::arg("avg_degree"), py::arg("num_classes"),
        py::arg("homophily"), py::arg("seed"),
        "A degree-corrected stochastic block model graph and its labels: (Graph, labels).");
  m.def("set_local_threads", [](int n) {
    if (n < 1) SEASTAR_THROW(ValueError, "set_local_threads needs n >= 1, got ", n);
    omp_set_num_threads(n);
  }, py::arg("n"),
        "The OpenMP threads of the parallel regions the calling thread starts from now on (sampling, "
        "gathering); other threads keep theirs (torch.set_num_threads sets torch's own, for every thread).");
  m.def("local_threads", [] { return omp_get_max_threads(); },
        "The OpenMP threads of the parallel regions the calling thread would start now.");
  m.def("gather_rows", &gather_rows, py::arg("x"), py::arg("idx"),
        "x[idx] along dim 0 (a CPU tensor with contiguous rows: copied without the GIL, rows prefetched; "
        "anything else: index_select).");
  m.def("sample_neighbors", &sample, py::arg("graph"), py::arg("seeds"), py::arg("fanouts"), py::arg("seed") = 0,
        py::arg("replace") = false, py::arg("weights") = py::none(),
        "Samples len(fanouts) hops of in-neighbours from `seeds`; returns [(block, src_nodes, edge_ids)] innermost "
        "hop first. fanouts[h] is [k] or one k per relation; -1 takes every neighbour.");
}

}  // namespace seastar::python
