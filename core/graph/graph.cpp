/** \file Graph <-> tensors: validation of user tensors and per-device index caches. */
#include "core/graph/graph.h"

#include <torch/types.h>

#include "core/util/errors.h"

namespace seastar {
namespace {

torch::Tensor to_tensor(const std::vector<int64_t>& v, torch::ScalarType dtype) {
  auto t = torch::from_blob(const_cast<int64_t*>(v.data()), {static_cast<int64_t>(v.size())}, torch::kLong);
  return dtype == torch::kLong ? t.clone() : t.to(dtype);  // one copy either way (to() copies to another dtype)
}

/// An E-long array as a tensor of `dtype`. At the array's own width this is a view of the
/// graph's storage that keeps the graph alive (`keep`): a CPU kernel reads it where it lies, and
/// another device copies it once. The graph is immutable, and nothing writes to index tensors.
torch::Tensor to_tensor(const IndexArray& a, torch::ScalarType dtype, const std::shared_ptr<const GraphData>& keep) {
  const torch::ScalarType own = a.narrow() ? torch::kInt : torch::kLong;
  auto t = torch::from_blob(const_cast<void*>(a.data()), {static_cast<int64_t>(a.size())}, [keep](void*) {},
                            torch::TensorOptions().dtype(own));
  return dtype == own ? t : t.to(dtype);
}

AdjacencyTensors adjacency_tensors(const Adjacency& a, torch::ScalarType dtype,
                                   const std::shared_ptr<const GraphData>& keep) {
  return {to_tensor(a.ptr, dtype), to_tensor(a.nbr, dtype, keep), to_tensor(a.eid, dtype, keep),
          to_tensor(a.degree_order, dtype)};
}

/// The edge list in edge-id order into `src` and `dst` (E entries each), written straight from
/// the in-adjacency: no E-long temporaries.
template <class T>
void fill_coo(const GraphData& g, T* src, T* dst) {
  const Adjacency& in = g.in();
  in.nbr.visit([&](const auto* nbr) {
    in.eid.visit([&](const auto* eid) {
      for (int64_t v = 0; v < g.num_dst(); ++v)
        for (int64_t j = in.ptr[v]; j < in.ptr[v + 1]; ++j) {
          src[eid[j]] = static_cast<T>(nbr[j]);
          dst[eid[j]] = static_cast<T>(v);
        }
    });
  });
}

/// [2, E]: row 0 the sources, row 1 the destinations.
torch::Tensor coo_tensor(const GraphData& g, torch::ScalarType dtype) {
  torch::Tensor t = torch::empty({2, g.num_edges()}, torch::TensorOptions().dtype(dtype));
  if (dtype == torch::kInt)
    fill_coo(g, t.data_ptr<int32_t>(), t.data_ptr<int32_t>() + g.num_edges());
  else
    fill_coo(g, t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + g.num_edges());
  return t;
}

}  // namespace

void check_id_tensor(const torch::Tensor& t, const char* what, const char* kind) {
  if (!t.defined()) SEASTAR_THROW(ValueError, what, " is undefined");
  if (t.is_floating_point() || t.is_complex() || t.scalar_type() == torch::kBool)
    SEASTAR_THROW(TypeError, what, " must hold integer ", kind, " (int64 or int32), got ", t.scalar_type());
  if (t.dim() != 1) SEASTAR_THROW(ValueError, what, " must be one-dimensional, got shape ", t.sizes());
}

std::vector<int64_t> ids_from_tensor(const torch::Tensor& t, const char* what, const char* kind) {
  check_id_tensor(t, what, kind);
  if (t.is_meta())
    SEASTAR_THROW(ValueError, what, " is on the meta device, which holds no values; use CPU or CUDA tensors");
  auto c = t.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

Graph::Graph(std::shared_ptr<const GraphData> data) : data_(std::move(data)), cache_(std::make_shared<Cache>()) {}

const GraphData& Graph::data() const {
  if (!data_) SEASTAR_THROW(ValueError, "the graph is empty (default-constructed); build it with from_edge_index");
  return *data_;
}

Graph Graph::from_coo(const torch::Tensor& src, const torch::Tensor& dst, std::optional<int64_t> num_nodes,
                      const std::optional<torch::Tensor>& node_type, const std::optional<torch::Tensor>& edge_type,
                      int64_t num_node_types, int64_t num_edge_types) {
  auto s = ids_from_tensor(src, "src", "vertex ids"), d = ids_from_tensor(dst, "dst", "vertex ids");
  int64_t n = 0;
  if (num_nodes) {
    n = *num_nodes;
  } else {
    for (int64_t x : s) n = std::max(n, x + 1);
    for (int64_t x : d) n = std::max(n, x + 1);
    if (node_type && node_type->defined()) n = std::max<int64_t>(n, node_type->numel());
  }
  GraphTypes types;
  types.num_node_types = num_node_types;
  types.num_edge_types = num_edge_types;
  if (node_type && node_type->defined()) {
    types.node_type = ids_from_tensor(*node_type, "node_type", "type ids");
  } else if (num_node_types == -1) {
    types.num_node_types = 0;
  }
  if (edge_type && edge_type->defined()) {
    types.edge_type = ids_from_tensor(*edge_type, "edge_type", "type ids");
  } else if (num_edge_types == -1) {
    types.num_edge_types = 0;
  }
  return Graph(GraphData::from_coo(std::move(s), std::move(d), n, std::move(types)));
}

Graph Graph::from_edge_index(const torch::Tensor& edge_index, std::optional<int64_t> num_nodes,
                             const std::optional<torch::Tensor>& node_type,
                             const std::optional<torch::Tensor>& edge_type, int64_t num_node_types,
                             int64_t num_edge_types) {
  if (!edge_index.defined()) SEASTAR_THROW(ValueError, "edge_index is undefined");
  if (edge_index.dim() != 2 || edge_index.size(0) != 2)
    SEASTAR_THROW(ValueError, "edge_index must have shape [2, num_edges] (row 0 = source, row 1 = destination), got ",
                  edge_index.sizes());
  return from_coo(edge_index[0], edge_index[1], num_nodes, node_type, edge_type, num_node_types, num_edge_types);
}

Graph Graph::bipartite(const torch::Tensor& edge_index, int64_t num_src, int64_t num_dst,
                       const std::optional<torch::Tensor>& edge_type, int64_t num_edge_types,
                       const std::optional<torch::Tensor>& node_type, int64_t num_node_types) {
  if (!edge_index.defined()) SEASTAR_THROW(ValueError, "edge_index is undefined");
  if (edge_index.dim() != 2 || edge_index.size(0) != 2)
    SEASTAR_THROW(ValueError, "edge_index must have shape [2, num_edges] (row 0 = source, row 1 = destination), got ",
                  edge_index.sizes());
  GraphTypes types;
  types.num_edge_types = num_edge_types;
  if (edge_type && edge_type->defined()) {
    types.edge_type = ids_from_tensor(*edge_type, "edge_type", "type ids");
  } else if (num_edge_types == -1) {
    types.num_edge_types = 0;
  }
  types.num_node_types = num_node_types;
  if (node_type && node_type->defined()) {
    types.node_type = ids_from_tensor(*node_type, "node_type", "type ids");
  } else if (num_node_types == -1) {
    types.num_node_types = 0;
  }
  return Graph(GraphData::from_coo_bipartite(ids_from_tensor(edge_index[0], "src", "vertex ids"),
                                             ids_from_tensor(edge_index[1], "dst", "vertex ids"), num_src, num_dst,
                                             std::move(types)));
}

const DeviceGraph& Graph::on(const torch::Device& device, bool coo, bool out, bool non_blocking) const {
  const GraphData& g = data();
  std::lock_guard<std::mutex> lock(cache_->mutex);
  auto& slot = cache_->by_device[device.str()];
  // pageable host memory makes a copy to a CUDA device wait for it; a pinned staging copy lets it
  // run behind the host (torch's host allocator keeps the staging block until the copy is done)
  const bool async = non_blocking && device.is_cuda();
  auto copy = [&](const torch::Tensor& t) { return async ? t.pin_memory().to(device, true) : t.to(device); };
  auto to_device = [&](std::initializer_list<torch::Tensor*> ts) {
    if (!device.is_cpu())
      for (torch::Tensor* t : ts)
        if (t->defined()) *t = copy(*t);
  };
  if (!slot) {
    auto dg = std::make_unique<DeviceGraph>();
    dg->index_dtype = g.fits_int32() ? torch::kInt : torch::kLong;
    dg->in = adjacency_tensors(g.in(), dg->index_dtype, data_);
    if (g.has_node_types()) dg->node_type = to_tensor(g.types().node_type, dg->index_dtype);
    if (g.has_edge_types()) dg->edge_type = to_tensor(g.types().edge_type, dg->index_dtype);
    to_device({&dg->in.ptr, &dg->in.nbr, &dg->in.eid, &dg->in.degree_order, &dg->node_type, &dg->edge_type});
    slot = std::move(dg);
  }
  if (out && !slot->out.ptr.defined()) {  // as the COO arrays below: written once, under the lock
    AdjacencyTensors o = adjacency_tensors(g.out(), slot->index_dtype, data_);
    to_device({&o.ptr, &o.nbr, &o.eid, &o.degree_order});
    slot->out = std::move(o);
  }
  if (coo && !slot->src.defined()) {  // written once under the lock, before any reader is handed them
    torch::Tensor coo = copy(coo_tensor(g, slot->index_dtype));
    slot->src = coo[0], slot->dst = coo[1];
  }
  return *slot;
}

torch::Tensor Graph::edge_index() const {
  const GraphData& g = data();
  std::lock_guard<std::mutex> lock(cache_->mutex);
  torch::Tensor& t = cache_->edge_index;
  if (!t.defined() || t._version() != cache_->edge_index_version) {
    t = coo_tensor(g, torch::kLong);
    cache_->edge_index_version = t._version();
  }
  return t;
}

torch::Tensor Graph::in_degrees() const {
  const auto& p = data().in().ptr;
  auto t = to_tensor(p, torch::kLong);
  return t.slice(0, 1) - t.slice(0, 0, -1);
}

torch::Tensor Graph::out_degrees() const {
  auto t = to_tensor(data().out().ptr, torch::kLong);
  return t.slice(0, 1) - t.slice(0, 0, -1);
}

Graph Graph::add_self_loops(int64_t loop_type) const { return Graph(data().add_self_loops(loop_type)); }

std::pair<Graph, torch::Tensor> Graph::remove_self_loops() const {
  std::vector<int64_t> kept;
  Graph g(data().remove_self_loops(&kept));
  return {g, to_tensor(kept, torch::kLong)};
}

Graph Graph::replace_self_loops(int64_t num_loops) const { return Graph(data().replace_self_loops(num_loops)); }

Graph Graph::in_edge_order() const { return Graph(data().in_edge_order()); }

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> Graph::self_loop_ids(int64_t num_loops) const {
  std::vector<int64_t> kept, loops, loop_vertex;
  data().self_loop_ids(num_loops, kept, loops, loop_vertex);
  return {to_tensor(kept, torch::kLong), to_tensor(loops, torch::kLong), to_tensor(loop_vertex, torch::kLong)};
}

}  // namespace seastar
