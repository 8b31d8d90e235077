/** \file
 * The torch-facing graph: GraphData plus its index arrays as tensors, built once per device
 * and cached inside the graph object (so a device copy can never be reused for another
 * graph that merely has the same size). This is the Graph that Python and C++ users hold.
 */
#pragma once

#include <torch/types.h>

#include <any>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/graph/graph_data.h"

namespace seastar {

/// Checks a tensor of ids: defined, of an integer dtype, one-dimensional. ValueError /
/// TypeError naming `what`; `kind` says which ids ("vertex ids", "row ids").
void check_id_tensor(const torch::Tensor& t, const char* what, const char* kind = "ids");
/// A checked tensor of ids (check_id_tensor, and not on the meta device, which holds no values)
/// as int64 values on the CPU.
std::vector<int64_t> ids_from_tensor(const torch::Tensor& t, const char* what, const char* kind = "ids");

/// One adjacency (CSC or CSR) as tensors of the graph's index dtype.
struct AdjacencyTensors {
  torch::Tensor ptr, nbr, eid, degree_order;
};

/// Everything a kernel needs about a graph, on one device.
struct DeviceGraph {
  AdjacencyTensors in, out;            ///< out: built only when asked (on(d, coo, true))
  torch::Tensor src, dst;              ///< COO in original edge order; built only when asked (on(d, true))
  torch::Tensor node_type, edge_type;  ///< undefined when the graph has none
  torch::ScalarType index_dtype;       ///< kInt when every id fits int32, else kLong
};

class Graph {
 public:
  Graph() = default;
  explicit Graph(std::shared_ptr<const GraphData> data);

  /// PyG convention: edge_index [2, E], row 0 = source. num_nodes defaults to 1 + max id.
  static Graph from_edge_index(const torch::Tensor& edge_index, std::optional<int64_t> num_nodes = std::nullopt,
                               const std::optional<torch::Tensor>& node_type = std::nullopt,
                               const std::optional<torch::Tensor>& edge_type = std::nullopt,
                               int64_t num_node_types = -1, int64_t num_edge_types = -1);
  static Graph from_coo(const torch::Tensor& src, const torch::Tensor& dst,
                        std::optional<int64_t> num_nodes = std::nullopt,
                        const std::optional<torch::Tensor>& node_type = std::nullopt,
                        const std::optional<torch::Tensor>& edge_type = std::nullopt, int64_t num_node_types = -1,
                        int64_t num_edge_types = -1);

  /// A bipartite graph (see GraphData::from_coo_bipartite): edge_index [2, E] with row 0 in
  /// [0, num_src) and row 1 in [0, num_dst); `node_type`, when given, has one entry per source
  /// (destination i has source i's type, as in a sampled block).
  static Graph bipartite(const torch::Tensor& edge_index, int64_t num_src, int64_t num_dst,
                         const std::optional<torch::Tensor>& edge_type = std::nullopt, int64_t num_edge_types = -1,
                         const std::optional<torch::Tensor>& node_type = std::nullopt, int64_t num_node_types = -1);

  const GraphData& data() const;
  const std::shared_ptr<const GraphData>& data_ptr() const { return data_; }
  bool defined() const { return data_ != nullptr; }
  int64_t num_nodes() const { return data().num_nodes(); }  ///< raises for a bipartite graph
  int64_t num_src() const { return data().num_src(); }
  int64_t num_dst() const { return data().num_dst(); }
  bool is_bipartite() const { return data().is_bipartite(); }
  int64_t num_edges() const { return data().num_edges(); }

  /// Index tensors on `device`, built on first use and cached for this graph. The COO arrays
  /// (src, dst) only with `coo`: kernels over edges read them, the others never do, and they
  /// cost two E-long arrays. The out-edge index only with `out`: kernels centred at sources
  /// read it, and a sampled block may never have sorted it (GraphData::out()).
  /// `non_blocking`: arrays copied to a CUDA device now go through pinned host memory and are
  /// copied asynchronously on the current stream, so the caller must make every other stream
  /// that reads them wait for it (NeighborLoader's side-stream transfer). Without it the copy
  /// completes before on() returns, and any stream may read the arrays at once.
  const DeviceGraph& on(const torch::Device& device, bool coo = true, bool out = true,
                        bool non_blocking = false) const;

  /// [2, E] int64 on CPU, built once and shared by every caller (layers read it on each call);
  /// an in-place change to it is noticed (torch's version counter) and the next call rebuilds it.
  torch::Tensor edge_index() const;
  torch::Tensor in_degrees() const;   ///< int64 [num_dst]
  torch::Tensor out_degrees() const;  ///< int64 [num_src]

  Graph add_self_loops(int64_t loop_type = 0) const;
  /// Also returns the ids of the kept edges, to select matching edge-feature rows.
  std::pair<Graph, torch::Tensor> remove_self_loops() const;
  Graph replace_self_loops(int64_t num_loops) const;
  /// GraphData::self_loop_ids: (kept, loops, loop_vertex) as int64 tensors.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> self_loop_ids(int64_t num_loops) const;
  /// GraphData::in_edge_order: edge j of the result is slot j of this graph's in-edge index.
  Graph in_edge_order() const;

  /// A value derived from this graph alone (a self-loop graph, normalisation weights on a
  /// device), made by `make` on first use and kept by the graph for its lifetime, shared by every
  /// layer and every copy of this Graph. `key` names the derivation and its arguments (a device,
  /// a dtype). `make` runs without the graph's locks (it may read the graph); when two threads
  /// make one key at once, the first value kept is the one both get.
  template <typename T>
  T derived(const std::string& key, const std::function<T()>& make) const {
    {
      std::lock_guard<std::mutex> lock(cache_->derived_mutex);
      auto it = cache_->derived.find(key);
      if (it != cache_->derived.end()) return std::any_cast<T>(it->second);
    }
    T value = make();
    std::lock_guard<std::mutex> lock(cache_->derived_mutex);
    return std::any_cast<T>(cache_->derived.emplace(key, std::move(value)).first->second);
  }

 private:
  struct Cache {
    std::mutex mutex;
    std::map<std::string, std::unique_ptr<DeviceGraph>> by_device;
    torch::Tensor edge_index;
    int64_t edge_index_version = 0;
    std::mutex derived_mutex;  // apart from `mutex`: a derivation reads the graph's tensors
    std::map<std::string, std::any> derived;
  };
  std::shared_ptr<const GraphData> data_;
  std::shared_ptr<Cache> cache_;
};

}  // namespace seastar
