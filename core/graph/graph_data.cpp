/** \file Builds and validates GraphData: counting sorts into CSC and CSR in O(N + E). */
#include "core/graph/graph_data.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <utility>

#include "core/util/errors.h"

namespace seastar {
namespace {

std::atomic<uint64_t> next_uid{1};

void check_ids(const std::vector<int64_t>& ids, int64_t limit, const char* what, const char* bound) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limit)
      SEASTAR_THROW(ValueError, what, "[", i, "] = ", ids[i], " is out of range: expected 0 <= id < ", bound, " = ",
                    limit);
  }
}

int64_t resolve_count(int64_t given, const std::vector<int64_t>& types, const char* what) {
  if (given >= 0) return given;
  if (given != -1) SEASTAR_THROW(ValueError, what, " must be >= 0 (or -1 to infer), got ", given);
  return types.empty() ? 0 : *std::max_element(types.begin(), types.end()) + 1;
}

/// Stable counting sort of edge ids by `key` (values in [0, buckets)), applied on top of the
/// order `in` so that a second sort keeps the first sort's order within equal keys.
std::vector<int64_t> counting_sort(const std::vector<int64_t>& in, const std::vector<int64_t>& key, int64_t buckets,
                                   std::vector<int64_t>* ptr_out) {
  std::vector<int64_t> ptr(buckets + 1, 0);
  for (int64_t e : in) ++ptr[key[e] + 1];
  std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
  std::vector<int64_t> out(in.size());
  std::vector<int64_t> cursor(ptr.begin(), ptr.end() - 1);
  for (int64_t e : in) out[cursor[key[e]]++] = e;
  if (ptr_out) *ptr_out = std::move(ptr);
  return out;
}

/// Resolves num_edge_types (-1: inferred) and checks the edge types against the edge count.
void check_edge_types(GraphTypes& types, size_t num_edges) {
  types.num_edge_types = resolve_count(types.num_edge_types, types.edge_type, "num_edge_types");
  if (types.num_edge_types > 0 && types.edge_type.size() != num_edges)
    SEASTAR_THROW(ValueError, "edge_type has ", types.edge_type.size(), " entries but the graph has ", num_edges,
                  " edges");
  check_ids(types.edge_type, types.num_edge_types, "edge_type", "num_edge_types");
}

/// Resolves num_node_types (-1: inferred) and checks the node types: one per vertex of a square
/// graph; on a bipartite graph one per source, the destinations taking the types of the first
/// num_dst sources (destination i is source i, as in a sampled block).
void check_node_types(GraphTypes& types, int64_t num_src, int64_t num_dst, bool bipartite) {
  types.num_node_types = resolve_count(types.num_node_types, types.node_type, "num_node_types");
  if (types.num_node_types > 0) {
    const int64_t n = bipartite ? num_src : num_dst;
    if (static_cast<int64_t>(types.node_type.size()) != n)
      SEASTAR_THROW(ValueError, "node_type has ", types.node_type.size(), " entries but the graph has ", n,
                    bipartite ? " sources (a bipartite graph's node types are its sources')" : " nodes");
    if (bipartite && num_dst > num_src)
      SEASTAR_THROW(ValueError, "node types on a bipartite graph need every destination to be a source (destination "
                    "i is source i, as in a sampled block): num_dst=", num_dst, " > num_src=", num_src);
  }
  check_ids(types.node_type, types.num_node_types, "node_type", "num_node_types");  // negative ids, inferred count 0
}

/// Centres by decreasing degree, ties by id: a counting sort over degrees, O(N + max degree)
/// (a sampled block's graph is built every batch, so this must not be N log N).
void set_degree_order(Adjacency& adj, int64_t num_nodes) {
  int64_t max_deg = 0;
  for (int64_t v = 0; v < num_nodes; ++v) max_deg = std::max(max_deg, adj.degree(v));
  std::vector<int64_t> start(max_deg + 2, 0);
  for (int64_t v = 0; v < num_nodes; ++v) ++start[max_deg - adj.degree(v) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  adj.degree_order.resize(num_nodes);
  for (int64_t v = 0; v < num_nodes; ++v) adj.degree_order[start[max_deg - adj.degree(v)]++] = v;
}

void fill_adjacency(Adjacency& adj, const std::vector<int64_t>& centre, const std::vector<int64_t>& other,
                    const std::vector<int64_t>* edge_type, int64_t num_types, int64_t num_nodes, bool narrow) {
  std::vector<int64_t> order(centre.size());
  std::iota(order.begin(), order.end(), 0);
  // Sorting by type first and then (stably) by centre leaves each centre's edges grouped by
  // type, so typed kernels reuse one relation's weights across consecutive slots.
  if (edge_type) order = counting_sort(order, *edge_type, num_types, nullptr);
  std::vector<int64_t> eid = counting_sort(order, centre, num_nodes, &adj.ptr);
  order.clear();
  order.shrink_to_fit();
  std::vector<int64_t> nbr(eid.size());
  for (size_t j = 0; j < eid.size(); ++j) nbr[j] = other[eid[j]];
  adj.eid = IndexArray(std::move(eid), narrow);
  adj.nbr = IndexArray(std::move(nbr), narrow);
  set_degree_order(adj, num_nodes);
}

bool ids_fit_int32(int64_t num_src, int64_t num_dst, int64_t num_edges) {
  constexpr int64_t lim = std::numeric_limits<int32_t>::max();
  return num_src < lim && num_dst < lim && num_edges < lim;
}

}  // namespace

std::shared_ptr<const GraphData> GraphData::from_coo(std::vector<int64_t> src, std::vector<int64_t> dst,
                                                     int64_t num_nodes, GraphTypes types) {
  if (num_nodes < 0) SEASTAR_THROW(ValueError, "num_nodes must be >= 0, got ", num_nodes);
  return build(std::move(src), std::move(dst), num_nodes, num_nodes, false, std::move(types));
}

std::shared_ptr<const GraphData> GraphData::from_coo_bipartite(std::vector<int64_t> src, std::vector<int64_t> dst,
                                                               int64_t num_src, int64_t num_dst, GraphTypes types) {
  if (num_src < 0 || num_dst < 0)
    SEASTAR_THROW(ValueError, "num_nodes = (num_src, num_dst) must be >= 0, got (", num_src, ", ", num_dst, ")");
  return build(std::move(src), std::move(dst), num_src, num_dst, true, std::move(types));
}

std::shared_ptr<const GraphData> GraphData::build(std::vector<int64_t> src, std::vector<int64_t> dst, int64_t num_src,
                                                  int64_t num_dst, bool bipartite, GraphTypes types) {
  if (src.size() != dst.size())
    SEASTAR_THROW(ValueError, "source and destination lists differ in length: ", src.size(), " vs ", dst.size());
  check_ids(src, num_src, "src", bipartite ? "num_src" : "num_nodes");
  check_ids(dst, num_dst, "dst", bipartite ? "num_dst" : "num_nodes");
  check_node_types(types, num_src, num_dst, bipartite);
  check_edge_types(types, src.size());

  std::shared_ptr<GraphData> g(new GraphData());
  g->num_src_ = num_src;
  g->num_dst_ = num_dst;
  g->bipartite_ = bipartite;
  g->types_ = std::move(types);
  g->uid_ = next_uid++;
  g->build_in_index(src, dst);
  return g;
}

std::shared_ptr<const GraphData> GraphData::from_csc_bipartite(std::vector<int64_t> ptr, std::vector<int64_t> src,
                                                               int64_t num_src, GraphTypes types) {
  if (ptr.empty() || ptr.front() != 0 || ptr.back() != static_cast<int64_t>(src.size()))
    SEASTAR_THROW(ValueError, "an in-edge index needs ptr[0] = 0 and ptr[num_dst] = the number of edges");
  const int64_t num_dst = static_cast<int64_t>(ptr.size()) - 1;
  for (int64_t v = 0; v < num_dst; ++v)
    if (ptr[v + 1] < ptr[v]) SEASTAR_THROW(ValueError, "ptr decreases at destination ", v);
  check_ids(src, num_src, "src", "num_src");
  check_node_types(types, num_src, num_dst, true);
  check_edge_types(types, src.size());

  std::shared_ptr<GraphData> g(new GraphData());
  g->num_src_ = num_src;
  g->num_dst_ = num_dst;
  g->bipartite_ = true;
  g->types_ = std::move(types);
  g->uid_ = next_uid++;
  const bool narrow = ids_fit_int32(num_src, num_dst, static_cast<int64_t>(src.size()));
  std::vector<int64_t> eid(src.size());
  std::iota(eid.begin(), eid.end(), int64_t(0));
  g->in_.ptr = std::move(ptr);
  g->in_.nbr = IndexArray(std::move(src), narrow);
  g->in_.eid = IndexArray(std::move(eid), narrow);
  set_degree_order(g->in_, num_dst);
  return g;
}

std::shared_ptr<const GraphData> GraphData::with_global_sources(const std::vector<int64_t>& source_ids,
                                                                int64_t num_src) const {
  if (!bipartite_) SEASTAR_THROW(ValueError, "global source ids are for a bipartite graph (a sampled block)");
  if (has_node_types())
    SEASTAR_THROW(ValueError, "a graph with node types cannot read global source ids: its node types are its "
                  "sources' (gather the input rows instead)");
  if (static_cast<int64_t>(source_ids.size()) != num_src_)
    SEASTAR_THROW(ValueError, "global source ids: ", source_ids.size(), " ids for ", num_src_, " sources");
  if (num_src < 0) SEASTAR_THROW(ValueError, "num_src must be >= 0, got ", num_src);
  check_ids(source_ids, num_src, "source_ids", "num_src");
  std::vector<int64_t> nbr(static_cast<size_t>(num_edges()));
  in_.nbr.visit([&](const auto* local) {
    for (size_t j = 0; j < nbr.size(); ++j) nbr[j] = source_ids[static_cast<size_t>(local[j])];
  });
  std::shared_ptr<GraphData> g(new GraphData());
  g->num_src_ = num_src;
  g->num_dst_ = num_dst_;
  g->bipartite_ = true;
  g->sources_global_ = true;
  g->types_ = types_;
  g->uid_ = next_uid++;
  const bool narrow = ids_fit_int32(num_src, num_dst_, num_edges());
  g->in_.ptr = in_.ptr;
  g->in_.nbr = IndexArray(std::move(nbr), narrow);
  g->in_.eid = IndexArray(in_.eid.to_vector(), narrow);
  g->in_.degree_order = in_.degree_order;
  return g;
}

void GraphData::require_destinations_are_sources(const char* what) const {
  if (sources_global_)
    SEASTAR_THROW(ValueError, what, " needs destination i to be source i, but this block's sources are global vertex "
                  "ids (num_src=", num_src_, "): use the block with local ids (Graph.local_block in Python)");
}

const Adjacency& GraphData::out() const {
  std::call_once(out_once_, [this] {
    const std::vector<int64_t>* et = has_edge_types() ? &types_.edge_type : nullptr;
    fill_adjacency(out_, src(), dst(), et, types_.num_edge_types, num_src_, fits_int32());
  });
  return out_;
}

int64_t GraphData::num_nodes() const {
  if (bipartite_)
    SEASTAR_THROW(ValueError, "a bipartite graph (num_src=", num_src_, ", num_dst=", num_dst_,
                  ") has no single vertex count: use num_src or num_dst");
  return num_dst_;
}

void GraphData::build_in_index(const std::vector<int64_t>& src, const std::vector<int64_t>& dst) {
  const std::vector<int64_t>* et = has_edge_types() ? &types_.edge_type : nullptr;
  const bool narrow = ids_fit_int32(num_src_, num_dst_, static_cast<int64_t>(src.size()));
  fill_adjacency(in_, dst, src, et, types_.num_edge_types, num_dst_, narrow);
}

std::vector<int64_t> GraphData::src() const {
  std::vector<int64_t> s(in_.nbr.size());
  in_.nbr.visit([&](const auto* nbr) {
    in_.eid.visit([&](const auto* eid) {
      for (size_t j = 0; j < in_.nbr.size(); ++j) s[eid[j]] = nbr[j];
    });
  });
  return s;
}

std::vector<int64_t> GraphData::dst() const {
  std::vector<int64_t> d(in_.nbr.size());
  in_.eid.visit([&](const auto* eid) {
    for (int64_t v = 0; v < num_dst_; ++v)
      for (int64_t j = in_.ptr[v]; j < in_.ptr[v + 1]; ++j) d[eid[j]] = v;
  });
  return d;
}

bool GraphData::fits_int32() const { return in_.nbr.narrow(); }

std::shared_ptr<const GraphData> GraphData::add_self_loops(int64_t loop_type) const {
  std::vector<int64_t> s = src(), d = dst();
  require_destinations_are_sources("add_self_loops");
  GraphTypes t = types_;
  if (bipartite_ && num_dst_ > num_src_)
    SEASTAR_THROW(ValueError, "self loops on a bipartite graph need every destination to be a source (num_dst=",
                  num_dst_, " <= num_src=", num_src_, ")");
  for (int64_t v = 0; v < num_dst_; ++v) {
    s.push_back(v);
    d.push_back(v);
  }
  if (has_edge_types()) t.edge_type.insert(t.edge_type.end(), num_dst_, loop_type);
  return build(std::move(s), std::move(d), num_src_, num_dst_, bipartite_, std::move(t));
}

std::shared_ptr<const GraphData> GraphData::remove_self_loops(std::vector<int64_t>* kept) const {
  require_destinations_are_sources("remove_self_loops");  // a self loop is an edge u -> u
  const std::vector<int64_t> src0 = src(), dst0 = dst();
  std::vector<int64_t> s, d, ids;
  GraphTypes t = types_;
  t.edge_type.clear();
  for (int64_t e = 0; e < num_edges(); ++e) {
    if (src0[e] == dst0[e]) continue;
    s.push_back(src0[e]);
    d.push_back(dst0[e]);
    ids.push_back(e);
    if (has_edge_types()) t.edge_type.push_back(types_.edge_type[e]);
  }
  if (kept) *kept = ids;
  return build(std::move(s), std::move(d), num_src_, num_dst_, bipartite_, std::move(t));
}

namespace {

/// Which edges (by id) are self loops, read off the in-edge index in one pass; `found` (when
/// given) receives (edge id, vertex) of the loops at vertices below num_loops, in index order.
std::vector<uint8_t> self_loop_flags(const Adjacency& in, int64_t num_dst, int64_t num_loops,
                                     std::vector<std::pair<int64_t, int64_t>>* found) {
  std::vector<uint8_t> is_loop(in.nbr.size(), 0);
  in.nbr.visit([&](const auto* nbr) {
    in.eid.visit([&](const auto* eid) {
      for (int64_t v = 0; v < num_dst; ++v)
        for (int64_t j = in.ptr[v]; j < in.ptr[v + 1]; ++j) {
          if (nbr[j] != v) continue;
          is_loop[static_cast<size_t>(eid[j])] = 1;
          if (found && v < num_loops) found->emplace_back(static_cast<int64_t>(eid[j]), v);
        }
    });
  });
  return is_loop;
}

void check_num_loops(int64_t num_loops, int64_t num_src, int64_t num_dst) {
  if (num_loops < 0 || num_loops > std::min(num_src, num_dst))
    SEASTAR_THROW(ValueError, "num_loops = ", num_loops, " must be in [0, min(num_src, num_dst) = ",
                  std::min(num_src, num_dst), "]");
}

/// The edge list's side of the same rule (a typed graph's replace_self_loops): an edge u -> u
/// is dropped, and reported in `loops` when u < num_loops; every other edge is kept, in order.
void split_self_loops(const std::vector<int64_t>& src, const std::vector<int64_t>& dst, int64_t num_loops,
                      int64_t num_src, int64_t num_dst, std::vector<int64_t>& kept, std::vector<int64_t>& loops,
                      std::vector<int64_t>& loop_vertex) {
  check_num_loops(num_loops, num_src, num_dst);
  kept.clear();
  loops.clear();
  loop_vertex.clear();
  for (int64_t e = 0; e < static_cast<int64_t>(src.size()); ++e) {
    if (src[e] != dst[e]) {
      kept.push_back(e);
    } else if (src[e] < num_loops) {
      loops.push_back(e);
      loop_vertex.push_back(src[e]);
    }
  }
}

}  // namespace

std::shared_ptr<const GraphData> GraphData::replace_self_loops(int64_t num_loops) const {
  require_destinations_are_sources("replace_self_loops");
  if (!has_edge_types()) return replace_self_loops_from_index(num_loops);
  // a typed in-edge index orders a vertex's edges by type, the new graph's by id: rebuild
  const std::vector<int64_t> src0 = src(), dst0 = dst();
  std::vector<int64_t> kept, loops, loop_vertex;
  split_self_loops(src0, dst0, num_loops, num_src_, num_dst_, kept, loops, loop_vertex);
  const int64_t n = static_cast<int64_t>(kept.size());
  std::vector<int64_t> s(n + num_loops), d(n + num_loops);
  for (int64_t k = 0; k < n; ++k) {
    s[k] = src0[kept[k]];
    d[k] = dst0[kept[k]];
  }
  for (int64_t v = 0; v < num_loops; ++v) s[n + v] = d[n + v] = v;
  return build(std::move(s), std::move(d), num_src_, num_dst_, bipartite_, GraphTypes{});
}

std::shared_ptr<const GraphData> GraphData::replace_self_loops_from_index(int64_t num_loops) const {
  check_num_loops(num_loops, num_src_, num_dst_);
  const size_t E = static_cast<size_t>(num_edges());
  // Walks the in-edge index once to find the loops, once to copy it without them: an untyped
  // index lists each vertex's edges by id, so the kept edges stay in order, the vertex's new
  // loop (the largest id) goes last, and nothing needs sorting.
  std::vector<uint8_t> is_loop = self_loop_flags(in_, num_dst_, 0, nullptr);
  std::vector<int64_t> rank(E);  // new id of each kept edge: the kept edges before it
  int64_t num_kept = 0;
  for (size_t e = 0; e < E; ++e) {
    rank[e] = num_kept;
    num_kept += is_loop[e] ? 0 : 1;
  }
  is_loop.clear();
  is_loop.shrink_to_fit();
  const int64_t total = num_kept + num_loops;
  std::vector<int64_t> ptr(static_cast<size_t>(num_dst_) + 1, 0), nbr_new(static_cast<size_t>(total)),
      eid_new(static_cast<size_t>(total));
  int64_t k = 0;
  in_.nbr.visit([&](const auto* nbr) {
    in_.eid.visit([&](const auto* eid) {
      for (int64_t v = 0; v < num_dst_; ++v) {
        for (int64_t j = in_.ptr[v]; j < in_.ptr[v + 1]; ++j) {
          if (nbr[j] == v) continue;
          nbr_new[k] = nbr[j];
          eid_new[k++] = rank[static_cast<size_t>(eid[j])];
        }
        if (v < num_loops) {
          nbr_new[k] = v;
          eid_new[k++] = num_kept + v;
        }
        ptr[v + 1] = k;
      }
    });
  });
  std::shared_ptr<GraphData> g(new GraphData());
  g->num_src_ = num_src_;
  g->num_dst_ = num_dst_;
  g->bipartite_ = bipartite_;
  g->uid_ = next_uid++;
  const bool narrow = ids_fit_int32(num_src_, num_dst_, total);
  g->in_.ptr = std::move(ptr);
  g->in_.nbr = IndexArray(std::move(nbr_new), narrow);
  g->in_.eid = IndexArray(std::move(eid_new), narrow);
  set_degree_order(g->in_, num_dst_);
  return g;
}

void GraphData::self_loop_ids(int64_t num_loops, std::vector<int64_t>& kept, std::vector<int64_t>& loops,
                              std::vector<int64_t>& loop_vertex) const {
  require_destinations_are_sources("self_loop_ids");
  check_num_loops(num_loops, num_src_, num_dst_);
  std::vector<std::pair<int64_t, int64_t>> found;
  const std::vector<uint8_t> is_loop = self_loop_flags(in_, num_dst_, num_loops, &found);
  kept.clear();
  kept.reserve(is_loop.size());
  for (size_t e = 0; e < is_loop.size(); ++e)
    if (!is_loop[e]) kept.push_back(static_cast<int64_t>(e));
  std::sort(found.begin(), found.end());  // by edge id, as split_self_loops lists them
  loops.clear();
  loop_vertex.clear();
  for (const auto& [e, v] : found) {
    loops.push_back(e);
    loop_vertex.push_back(v);
  }
}

std::shared_ptr<const GraphData> GraphData::in_edge_order() const {
  if (sources_global_)
    SEASTAR_THROW(ValueError, "in_edge_order: this block reads its sources through global vertex ids; renumber "
                  "the edges of the block with local ids (Graph.local_block in Python)");
  std::shared_ptr<GraphData> g(new GraphData());
  g->num_src_ = num_src_;
  g->num_dst_ = num_dst_;
  g->bipartite_ = bipartite_;
  g->types_.node_type = types_.node_type;
  g->types_.num_node_types = types_.num_node_types;
  g->types_.num_edge_types = types_.num_edge_types;
  g->uid_ = next_uid++;
  const size_t E = static_cast<size_t>(num_edges());
  if (has_edge_types()) {
    g->types_.edge_type.resize(E);
    in_.eid.visit([&](const auto* eid) {
      for (size_t j = 0; j < E; ++j) g->types_.edge_type[j] = types_.edge_type[static_cast<size_t>(eid[j])];
    });
  }
  std::vector<int64_t> slots(E);
  std::iota(slots.begin(), slots.end(), int64_t(0));
  g->in_.ptr = in_.ptr;
  g->in_.nbr = in_.nbr;
  g->in_.eid = IndexArray(std::move(slots), fits_int32());
  g->in_.degree_order = in_.degree_order;
  return g;
}

}  // namespace seastar
