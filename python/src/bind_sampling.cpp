/** \file Python binding of the neighbour sampler: blocks as bipartite seastar::Graphs. */
#include <pybind11/stl.h>
#include <omp.h>
#include <torch/python.h>

#include "core/graph/generators.h"
#include "core/graph/graph.h"
#include "core/sampling/neighbor_sampler.h"
#include "core/util/errors.h"
#include "runtime/engine/host_view.h"
#include "kernels/cpu/row_gather.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace seastar::python {
namespace {

torch::Tensor tensor_of(std::vector<int64_t>&& v) {
  auto owner = new std::vector<int64_t>(std::move(v));
  return torch::from_blob(
      owner->data(), {static_cast<int64_t>(owner->size())}, [owner](void*) { delete owner; }, torch::kLong);
}

/// Samples and builds the block graphs without the GIL, so a loader thread overlaps training.
py::list sample(const Graph& graph, const torch::Tensor& seeds, const sampling::Fanouts& fanouts, uint64_t seed,
                bool replace, const std::optional<torch::Tensor>& weights, bool expand_once) {
  sampling::SamplerOptions o;
  o.replace = replace;
  o.expand_once = expand_once;
  o.seed = seed;
  if (weights && weights->defined()) {
    if (!weights->is_floating_point() || weights->dim() != 1)
      SEASTAR_THROW(TypeError, "weights must be a one-dimensional floating-point tensor of edge weights");
    auto w = weights->to(torch::kCPU, torch::kDouble).contiguous();
    o.weights.assign(w.data_ptr<double>(), w.data_ptr<double>() + w.numel());
  }
  std::vector<int64_t> s = ids_from_tensor(seeds, "seeds", "vertex ids");
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
  m.def("gather_rows", &runtime::gather_rows, py::arg("x"), py::arg("idx"),
        py::call_guard<py::gil_scoped_release>(),
        "x[idx] along dim 0 (a CPU tensor with contiguous rows: copied without the GIL, rows prefetched, "
        "into buffers recycled across batches; anything else: index_select).");
  m.def("host_view_on", [](const torch::Tensor& host, const std::string& device) {
    return runtime::host_view_on(host, torch::Device(device));
  }, py::arg("host"), py::arg("device"),
        "A tensor on `device` (cuda:N) over the same (pinned) host memory as `host`, read in place through "
        "unified addressing; keeps `host` alive. The caller checks that `host` is pinned.");
  m.def("gather_buffers_idle_bytes", &runtime::gather_buffers_idle_bytes,
        "Bytes of gather_rows' recycled buffers that no tensor uses now.");
  m.def("release_idle_gather_buffers", &runtime::release_idle_gather_buffers,
        "Frees gather_rows' recycled buffers that no tensor uses now; returns the bytes freed.");
  m.def("sample_neighbors", &sample, py::arg("graph"), py::arg("seeds"), py::arg("fanouts"), py::arg("seed") = 0,
        py::arg("replace") = false, py::arg("weights") = py::none(), py::arg("expand_once") = false,
        "Samples len(fanouts) hops of in-neighbours from `seeds`; returns [(block, src_nodes, edge_ids)] innermost "
        "hop first. fanouts[h] is [k] or one k per relation; -1 takes every neighbour. expand_once: a vertex's "
        "in-neighbours are sampled only at the hop that reaches it (the blocks' edges then form the subgraph).");
}

}  // namespace seastar::python
