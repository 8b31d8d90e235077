/** \file
 * Tests of the torch-free graph storage (core/graph/graph_data.h): building the CSC (in()) and
 * CSR (out()) indices from an edge list, degrees and degree order, typed graphs, input
 * validation, empty graphs, and the self-loop helpers.
 *
 * Most checks are property checks on seeded random graphs rather than hand-written
 * expectations, so that they exercise the awkward shapes real data has (isolated vertices,
 * self loops, multi-edges, one hub vertex) without each case being spelled out by hand.
 */
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/graph/graph_data.h"
#include "core/util/errors.h"

using namespace seastar;

namespace {

using Ids = std::vector<int64_t>;

/// An edge list plus the vertex count, i.e. what from_coo takes.
struct Coo {
  Ids src, dst;
  int64_t num_nodes = 0;
};

/// A random graph that contains, whenever its size allows, each of the shapes that tend to
/// break index construction: the last ~10% of vertices are isolated (degree 0 both ways),
/// ~10% of edges touch one hub vertex (so degrees are very uneven), ~5% are self loops and
/// ~10% repeat an earlier edge (multi-edges). Seeded, so a failure reproduces.
Coo random_graph(uint32_t seed, int64_t num_nodes, int64_t num_edges) {
  std::mt19937 rng(seed);
  Coo g;
  g.num_nodes = num_nodes;
  if (num_nodes == 0) return g;
  const int64_t isolated = num_nodes >= 4 ? num_nodes / 10 + 1 : 0;
  const int64_t used = num_nodes - isolated;  // vertices 0 .. used-1 may carry edges
  std::uniform_int_distribution<int64_t> vertex(0, used - 1);
  std::uniform_int_distribution<int> percent(0, 99);
  const int64_t hub = vertex(rng);
  for (int64_t e = 0; e < num_edges; ++e) {
    const int roll = percent(rng);
    int64_t s = vertex(rng), d = vertex(rng);
    if (roll < 5) {
      s = hub;  // hub as source
    } else if (roll < 10) {
      d = hub;  // hub as destination
    } else if (roll < 15) {
      d = s;  // self loop
    } else if (roll < 25 && e > 0) {
      const int64_t earlier = std::uniform_int_distribution<int64_t>(0, e - 1)(rng);
      s = g.src[earlier];  // multi-edge
      d = g.dst[earlier];
    }
    g.src.push_back(s);
    g.dst.push_back(d);
  }
  return g;
}

/// Random types in [0, num_types) for `count` entries.
Ids random_types(uint32_t seed, size_t count, int64_t num_types) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> type(0, num_types - 1);
  Ids t(count);
  for (auto& x : t) x = type(rng);
  return t;
}

/// The sizes the random tests run over: a single vertex (every edge a self loop), small
/// dense graphs, and a larger sparse one; several seeds each.
struct Size {
  int64_t nodes, edges;
};
constexpr Size kSizes[] = {{1, 7}, {2, 0}, {5, 40}, {17, 120}, {200, 2000}, {1000, 300}};
constexpr uint32_t kSeeds[] = {1, 7, 42, 2024};

std::vector<std::pair<int64_t, int64_t>> sorted_pairs(const Ids& a, const Ids& b) {
  std::vector<std::pair<int64_t, int64_t>> p;
  for (size_t i = 0; i < a.size(); ++i) p.emplace_back(a[i], b[i]);
  std::sort(p.begin(), p.end());
  return p;
}

bool is_permutation_of_iota(Ids v) {
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<int64_t>(i)) return false;
  return true;
}

/// An adjacency with every array widened to int64, so that the checkers below read one kind
/// of array and the checker test can corrupt a copy freely.
struct PlainAdjacency {
  Ids ptr, nbr, eid, degree_order;
  int64_t degree(int64_t v) const { return ptr[v + 1] - ptr[v]; }
};

PlainAdjacency plain(const Adjacency& a) { return {a.ptr, a.nbr.to_vector(), a.eid.to_vector(), a.degree_order}; }

/// Checks an adjacency against the edge list it was built from. `centre` / `other` are
/// (dst, src) for in() and (src, dst) for out(). Each slot must name its original edge
/// (eid) and that edge's other endpoint (nbr); together the slots must be exactly the
/// input edges. `edge_type` null means untyped: slots of one centre are then in edge-id
/// order (the sort is stable). Otherwise they are ordered by (type, edge id).
void expect_adjacency_matches(const PlainAdjacency& adj, const Ids& centre, const Ids& other, int64_t num_nodes,
                              const Ids* edge_type) {
  const auto num_edges = static_cast<int64_t>(centre.size());
  ASSERT_EQ(adj.ptr.size(), static_cast<size_t>(num_nodes + 1));
  ASSERT_EQ(adj.nbr.size(), centre.size());
  ASSERT_EQ(adj.eid.size(), centre.size());
  EXPECT_EQ(adj.ptr.front(), 0);
  EXPECT_EQ(adj.ptr.back(), num_edges);
  EXPECT_TRUE(std::is_sorted(adj.ptr.begin(), adj.ptr.end()));
  EXPECT_TRUE(is_permutation_of_iota(adj.eid)) << "eid is not a permutation of 0..E-1";

  Ids rebuilt_centre, rebuilt_other;
  for (int64_t v = 0; v < num_nodes; ++v) {
    for (int64_t j = adj.ptr[v]; j < adj.ptr[v + 1]; ++j) {
      const int64_t e = adj.eid[j];
      ASSERT_TRUE(e >= 0 && e < num_edges) << "slot " << j;
      EXPECT_EQ(centre[e], v) << "slot " << j << " of centre " << v << " holds edge " << e;
      EXPECT_EQ(adj.nbr[j], other[e]) << "slot " << j << " edge " << e;
      rebuilt_centre.push_back(v);
      rebuilt_other.push_back(adj.nbr[j]);
      if (j == adj.ptr[v]) continue;
      const int64_t prev = adj.eid[j - 1];
      if (edge_type) {
        const auto key = std::make_pair((*edge_type)[e], e);
        const auto prev_key = std::make_pair((*edge_type)[prev], prev);
        EXPECT_LT(prev_key, key) << "centre " << v << ": slots not ordered by (type, eid) at " << j;
      } else {
        EXPECT_LT(prev, e) << "centre " << v << ": slots not in edge-id order at " << j;
      }
    }
  }
  // The multiset rebuilt from the index alone (no eid lookups) must equal the input.
  EXPECT_EQ(sorted_pairs(rebuilt_centre, rebuilt_other), sorted_pairs(centre, other));
}

/// Degrees read from ptr must equal the number of edges with that centre, and degree_order
/// must list every centre once, by decreasing degree, ties by increasing id.
void expect_degrees_match(const PlainAdjacency& adj, const Ids& centre, int64_t num_nodes) {
  Ids count(num_nodes, 0);
  for (int64_t c : centre) ++count[c];
  for (int64_t v = 0; v < num_nodes; ++v) EXPECT_EQ(adj.degree(v), count[v]) << "vertex " << v;

  ASSERT_EQ(adj.degree_order.size(), static_cast<size_t>(num_nodes));
  EXPECT_TRUE(is_permutation_of_iota(adj.degree_order)) << "degree_order is not a permutation";
  for (size_t i = 1; i < adj.degree_order.size(); ++i) {
    const int64_t a = adj.degree_order[i - 1], b = adj.degree_order[i];
    EXPECT_TRUE(count[a] > count[b] || (count[a] == count[b] && a < b))
        << "degree_order[" << i - 1 << "] = " << a << " (degree " << count[a] << ") before " << b << " (degree "
        << count[b] << ")";
  }
}

/// Both indices of `g` checked against g's own edge list.
void expect_indices_valid(const GraphData& g) {
  const Ids* et = g.has_edge_types() ? &g.types().edge_type : nullptr;
  {
    SCOPED_TRACE("in() / CSC");
    expect_adjacency_matches(plain(g.in()), g.dst(), g.src(), g.num_nodes(), et);
    expect_degrees_match(plain(g.in()), g.dst(), g.num_nodes());
  }
  {
    SCOPED_TRACE("out() / CSR");
    expect_adjacency_matches(plain(g.out()), g.src(), g.dst(), g.num_nodes(), et);
    expect_degrees_match(plain(g.out()), g.src(), g.num_nodes());
  }
}

/// Runs `make` and expects a seastar::ValueError whose message contains every fragment, so
/// that a test fails when the error is right but the message no longer names the problem.
template <typename F>
void expect_value_error(F make, std::initializer_list<const char*> fragments) {
  try {
    make();
    ADD_FAILURE() << "expected seastar::ValueError, nothing was thrown";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected seastar::ValueError, got another exception: " << e.what();
  }
}

GraphTypes edge_types(Ids t, int64_t count = -1) {
  GraphTypes types;
  types.edge_type = std::move(t);
  types.num_edge_types = count;
  return types;
}

GraphTypes node_types(Ids t, int64_t count = -1) {
  GraphTypes types;
  types.node_type = std::move(t);
  types.num_node_types = count;
  return types;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Construction from hand-checked and random edge lists.

TEST(Graph, BuildsCscAndCsr) {
  auto g = GraphData::from_coo({0, 1, 2, 2}, {1, 2, 0, 1}, 3);
  EXPECT_EQ(g->num_edges(), 4);
  EXPECT_EQ(g->in().ptr, (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(g->in().eid.to_vector(), (std::vector<int64_t>{2, 0, 3, 1}));
  EXPECT_EQ(g->out().ptr, (std::vector<int64_t>{0, 1, 2, 4}));
  // The remaining fields, worked out by hand for this graph.
  EXPECT_EQ(g->in().nbr.to_vector(), (Ids{2, 0, 2, 1}));
  EXPECT_EQ(g->out().eid.to_vector(), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(g->out().nbr.to_vector(), (Ids{1, 2, 0, 1}));
  EXPECT_EQ(g->in().degree_order, (Ids{1, 0, 2}));
  EXPECT_EQ(g->out().degree_order, (Ids{2, 0, 1}));
  EXPECT_EQ(g->src(), (Ids{0, 1, 2, 2}));
  EXPECT_EQ(g->dst(), (Ids{1, 2, 0, 1}));
  EXPECT_FALSE(g->has_node_types());
  EXPECT_FALSE(g->has_edge_types());
}

// The generator must actually produce the awkward shapes, or the round-trip tests below
// would pass without testing them.
TEST(Graph, RandomGeneratorCoversAwkwardShapes) {
  for (uint32_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Coo c = random_graph(seed, 200, 2000);
    int64_t loops = 0;
    for (size_t e = 0; e < c.src.size(); ++e) loops += c.src[e] == c.dst[e];
    EXPECT_GT(loops, 0);
    const auto pairs = sorted_pairs(c.src, c.dst);
    EXPECT_NE(std::adjacent_find(pairs.begin(), pairs.end()), pairs.end()) << "no multi-edge";

    auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes);
    EXPECT_EQ(g->in().degree(199), 0);  // last vertices are isolated
    EXPECT_EQ(g->out().degree(199), 0);
    // The hub holds ~5% of edges at each end, far above the mean degree of 10.
    EXPECT_GE(g->in().degree(g->in().degree_order[0]), 50);
    EXPECT_GE(g->out().degree(g->out().degree_order[0]), 50);
  }
}

TEST(Graph, RandomRoundTripCscAndCsr) {
  for (const Size& size : kSizes) {
    for (uint32_t seed : kSeeds) {
      SCOPED_TRACE("nodes " + std::to_string(size.nodes) + " edges " + std::to_string(size.edges) + " seed " +
                   std::to_string(seed));
      const Coo c = random_graph(seed, size.nodes, size.edges);
      auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes);
      EXPECT_EQ(g->num_nodes(), c.num_nodes);
      EXPECT_EQ(g->num_edges(), static_cast<int64_t>(c.src.size()));
      EXPECT_EQ(g->src(), c.src);  // the COO is kept as given, not reordered
      EXPECT_EQ(g->dst(), c.dst);
      expect_indices_valid(*g);
    }
  }
}

TEST(Graph, DegreeOrderBreaksTiesByIncreasingId) {
  // In-degrees: v0 = 1, v1 = 2, v2 = 0, v3 = 2, v4 = 1 -> order 1, 3, 0, 4, 2.
  auto g = GraphData::from_coo({0, 2, 4, 4, 1, 3}, {1, 3, 1, 3, 0, 4}, 5);
  EXPECT_EQ(g->in().degree_order, (Ids{1, 3, 0, 4, 2}));
  // All degrees equal: identity.
  auto ring = GraphData::from_coo({0, 1, 2, 3}, {1, 2, 3, 0}, 4);
  EXPECT_EQ(ring->in().degree_order, (Ids{0, 1, 2, 3}));
  EXPECT_EQ(ring->out().degree_order, (Ids{0, 1, 2, 3}));
}

/// Runs a checker with its failures captured instead of reported, and returns their
/// messages joined, so a test can assert that the checker does complain.
template <typename F>
std::string captured_failures(F check) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter capture(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check();
  }
  std::string all;
  for (int i = 0; i < results.size(); ++i) all += std::string(results.GetTestPartResult(i).message()) + "\n";
  return all;
}

// The checkers above carry most of this file, so make sure they can fail: each kind of
// corruption of a correct index must be reported.
TEST(GraphCheckers, DetectCorruptedIndices) {
  auto g = GraphData::from_coo({0, 1, 2, 2}, {1, 2, 0, 1}, 3);
  const Ids& src = g->src();
  const Ids& dst = g->dst();
  auto in_failures = [&](const PlainAdjacency& adj) {
    return captured_failures([&] { expect_adjacency_matches(adj, dst, src, 3, nullptr); });
  };
  EXPECT_EQ(in_failures(plain(g->in())), "");

  PlainAdjacency swapped = plain(g->in());  // vertex 1's slots out of edge-id order
  std::swap(swapped.eid[1], swapped.eid[2]);
  std::swap(swapped.nbr[1], swapped.nbr[2]);
  EXPECT_NE(in_failures(swapped).find("edge-id order"), std::string::npos);

  PlainAdjacency wrong_nbr = plain(g->in());
  wrong_nbr.nbr[0] = 1;
  EXPECT_NE(in_failures(wrong_nbr).find("edge 2"), std::string::npos);

  PlainAdjacency wrong_centre = plain(g->in());  // edge 0 filed under vertex 2 instead of 1
  std::swap(wrong_centre.eid[1], wrong_centre.eid[3]);
  std::swap(wrong_centre.nbr[1], wrong_centre.nbr[3]);
  EXPECT_NE(in_failures(wrong_centre).find("holds edge"), std::string::npos);

  PlainAdjacency duplicated = plain(g->in());  // eid no longer a permutation
  duplicated.eid[0] = duplicated.eid[1];
  EXPECT_NE(in_failures(duplicated).find("permutation"), std::string::npos);

  PlainAdjacency bad_order = plain(g->in());  // ties must go by increasing id
  std::swap(bad_order.degree_order[1], bad_order.degree_order[2]);
  EXPECT_NE(captured_failures([&] { expect_degrees_match(bad_order, dst, 3); }).find("degree_order[1]"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------
// Typed graphs.

TEST(GraphTyped, SortsByEdgeTypeWithinEachCentre) {
  // All four edges enter vertex 1; types 1, 0, 1, 0 -> slots by (type, eid): 1, 3, 0, 2.
  auto g = GraphData::from_coo({0, 1, 2, 0}, {1, 1, 1, 1}, 3, edge_types({1, 0, 1, 0}));
  EXPECT_TRUE(g->has_edge_types());
  EXPECT_EQ(g->types().num_edge_types, 2);
  EXPECT_EQ(g->in().ptr, (Ids{0, 0, 4, 4}));
  EXPECT_EQ(g->in().eid.to_vector(), (Ids{1, 3, 0, 2}));
  EXPECT_EQ(g->in().nbr.to_vector(), (Ids{1, 0, 0, 2}));
  // Out: vertex 0 has edges 0 (type 1) and 3 (type 0) -> 3 first.
  EXPECT_EQ(g->out().ptr, (Ids{0, 2, 3, 4}));
  EXPECT_EQ(g->out().eid.to_vector(), (Ids{3, 0, 1, 2}));
}

TEST(GraphTyped, RandomRoundTripKeepsTypeThenEdgeIdOrder) {
  for (const Size& size : kSizes) {
    for (uint32_t seed : kSeeds) {
      for (int64_t num_types : {1, 3, 8}) {
        SCOPED_TRACE("nodes " + std::to_string(size.nodes) + " edges " + std::to_string(size.edges) + " seed " +
                     std::to_string(seed) + " types " + std::to_string(num_types));
        const Coo c = random_graph(seed, size.nodes, size.edges);
        GraphTypes types;
        types.edge_type = random_types(seed + 1, c.src.size(), num_types);
        types.node_type = random_types(seed + 2, static_cast<size_t>(c.num_nodes), 2);
        types.num_edge_types = num_types;
        types.num_node_types = 2;
        auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes, types);
        // The count is explicit, so even the edgeless size counts as typed.
        EXPECT_TRUE(g->has_edge_types());
        EXPECT_EQ(g->types().edge_type, types.edge_type);  // stored in edge-id order
        EXPECT_EQ(g->types().node_type, types.node_type);
        EXPECT_EQ(g->types().num_node_types, 2);
        EXPECT_EQ(g->types().num_edge_types, num_types);
        expect_indices_valid(*g);
      }
    }
  }
}

TEST(GraphTyped, NodeTypesAloneLeaveAdjacencyInEdgeIdOrder) {
  const Coo c = random_graph(5, 50, 400);
  auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes, node_types(random_types(6, 50, 4), 4));
  EXPECT_TRUE(g->has_node_types());
  EXPECT_FALSE(g->has_edge_types());
  expect_indices_valid(*g);  // untyped ordering expected
}

TEST(GraphTyped, InfersTypeCountsFromMinusOne) {
  GraphTypes t;
  t.node_type = {0, 2, 1};
  t.edge_type = {4, 0};
  t.num_node_types = -1;
  t.num_edge_types = -1;
  auto g = GraphData::from_coo({0, 1}, {1, 2}, 3, t);
  EXPECT_EQ(g->types().num_node_types, 3);
  EXPECT_EQ(g->types().num_edge_types, 5);
  EXPECT_TRUE(g->has_node_types());
  EXPECT_TRUE(g->has_edge_types());

  // -1 with no types at all infers zero: the graph is untyped.
  GraphTypes none;
  none.num_node_types = -1;
  none.num_edge_types = -1;
  auto u = GraphData::from_coo({0}, {1}, 2, none);
  EXPECT_EQ(u->types().num_node_types, 0);
  EXPECT_EQ(u->types().num_edge_types, 0);
  EXPECT_FALSE(u->has_node_types());
  EXPECT_FALSE(u->has_edge_types());
}

TEST(GraphTyped, AcceptsExplicitCountsLargerThanLargestType) {
  // A batch may simply not contain the highest relation; its count still comes from the schema.
  GraphTypes t;
  t.node_type = {0, 0, 1};
  t.edge_type = {1, 0, 1};
  t.num_node_types = 6;
  t.num_edge_types = 9;
  auto g = GraphData::from_coo({0, 1, 2}, {2, 2, 2}, 3, t);
  EXPECT_EQ(g->types().num_node_types, 6);
  EXPECT_EQ(g->types().num_edge_types, 9);
  EXPECT_EQ(g->in().eid.to_vector(), (Ids{1, 0, 2}));
  expect_indices_valid(*g);
}

// ---------------------------------------------------------------------------------------
// Validation: every bad input is a ValueError whose message names the problem.

TEST(GraphErrors, NegativeSourceId) {
  expect_value_error([] { GraphData::from_coo({0, -1}, {1, 1}, 2); }, {"src[1]", "-1", "out of range"});
}

TEST(GraphErrors, DestinationIdNotBelowNumNodes) {
  expect_value_error([] { GraphData::from_coo({0, 1}, {1, 3}, 3); },
                     {"dst[1]", "= 3", "out of range", "num_nodes = 3"});
  // An id equal to num_nodes is already out of range, in src as in dst.
  expect_value_error([] { GraphData::from_coo({2}, {0}, 2); }, {"src[0]", "= 2", "num_nodes = 2"});
}

TEST(GraphErrors, MismatchedSourceAndDestinationLengths) {
  expect_value_error([] { GraphData::from_coo({0, 1}, {1}, 2); }, {"differ in length", "2 vs 1"});
}

TEST(GraphErrors, NegativeNumNodes) {
  expect_value_error([] { GraphData::from_coo({}, {}, -2); }, {"num_nodes", ">= 0", "-2"});
}

TEST(GraphErrors, NodeTypeLengthMismatch) {
  expect_value_error([] { GraphData::from_coo({0}, {1}, 3, node_types({0, 1}, 2)); },
                     {"node_type has 2 entries", "3 nodes"});
  // An explicit count with no node types at all is a mismatch too, not an untyped graph.
  expect_value_error([] { GraphData::from_coo({0}, {1}, 3, node_types({}, 2)); }, {"node_type has 0 entries"});
}

TEST(GraphErrors, EdgeTypeLengthMismatch) {
  expect_value_error([] { GraphData::from_coo({0, 1}, {1, 0}, 2, edge_types({0}, 1)); },
                     {"edge_type has 1 entries", "2 edges"});
}

TEST(GraphErrors, TypeNotBelowTypeCount) {
  expect_value_error([] { GraphData::from_coo({0, 1}, {1, 0}, 2, edge_types({0, 3}, 3)); },
                     {"edge_type[1]", "= 3", "num_edge_types = 3"});
  expect_value_error([] { GraphData::from_coo({0}, {1}, 2, node_types({1, 2}, 2)); },
                     {"node_type[1]", "= 2", "num_node_types = 2"});
}

TEST(GraphErrors, NegativeType) {
  // Negative types are rejected whether the count is explicit or inferred.
  expect_value_error([] { GraphData::from_coo({0}, {1}, 2, node_types({0, -1}, 2)); }, {"node_type[1]", "-1"});
  expect_value_error([] { GraphData::from_coo({0}, {1}, 2, node_types({-3, -1})); }, {"node_type[0]", "-3"});
  expect_value_error([] { GraphData::from_coo({0, 1}, {1, 0}, 2, edge_types({-1, 0})); }, {"edge_type[0]", "-1"});
}

TEST(GraphErrors, TypeCountBelowMinusOne) {
  expect_value_error([] { GraphData::from_coo({0}, {1}, 2, edge_types({0}, -2)); },
                     {"num_edge_types", ">= 0", "-2"});
  expect_value_error([] { GraphData::from_coo({0}, {1}, 2, node_types({0, 0}, -5)); },
                     {"num_node_types", "-5"});
}

TEST(GraphErrors, TypesWithoutCountAreNotSilentlyDropped) {
  // GraphTypes defaults its counts to 0; types given with that default must be rejected
  // rather than ignored, or a typed model would quietly run as an untyped one.
  GraphTypes t;
  t.edge_type = {0};
  expect_value_error([&] { GraphData::from_coo({0}, {1}, 2, t); }, {"edge_type[0]", "num_edge_types = 0"});
}

// ---------------------------------------------------------------------------------------
// Index storage width.

TEST(IndexArray, NarrowAndWideHoldTheSameIds) {
  const Ids ids{0, 7, 2147483646, 3};
  const IndexArray narrow(ids, true), wide(ids, false);
  EXPECT_TRUE(narrow.narrow());
  EXPECT_FALSE(wide.narrow());
  for (const IndexArray* a : {&narrow, &wide}) {
    ASSERT_EQ(a->size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ((*a)[i], ids[i]);
    EXPECT_EQ(a->to_vector(), ids);
  }
  EXPECT_EQ(narrow.visit([](const auto* p) { return sizeof(*p); }), sizeof(int32_t));
  EXPECT_EQ(wide.visit([](const auto* p) { return sizeof(*p); }), sizeof(int64_t));
}

TEST(IndexArray, GraphsThatFitStoreInt32) {
  auto g = GraphData::from_coo({0, 1, 2}, {1, 2, 0}, 3);
  EXPECT_TRUE(g->fits_int32());
  for (const Adjacency* adj : {&g->in(), &g->out()}) {
    EXPECT_TRUE(adj->nbr.narrow());
    EXPECT_TRUE(adj->eid.narrow());
  }
  // a sampled block's arrays, and a block's deferred out-edge index, too
  auto b = GraphData::from_csc_bipartite({0, 2, 3}, {3, 1, 0}, 4);
  EXPECT_TRUE(b->in().nbr.narrow());
  EXPECT_TRUE(b->out().nbr.narrow());
  EXPECT_EQ(b->out().nbr.to_vector(), (Ids{1, 0, 0}));  // sources 0, 1, 3 -> destinations 1, 0, 0
}

// ---------------------------------------------------------------------------------------
// Empty graphs.

TEST(GraphEmpty, NoNodesNoEdges) {
  auto g = GraphData::from_coo({}, {}, 0);
  EXPECT_EQ(g->num_nodes(), 0);
  EXPECT_EQ(g->num_edges(), 0);
  for (const Adjacency* adj : {&g->in(), &g->out()}) {
    EXPECT_EQ(adj->ptr, (Ids{0}));
    EXPECT_TRUE(adj->nbr.empty());
    EXPECT_TRUE(adj->eid.empty());
    EXPECT_TRUE(adj->degree_order.empty());
  }
  EXPECT_TRUE(g->fits_int32());
}

TEST(GraphEmpty, NodesWithoutEdges) {
  const int64_t n = 6;
  auto g = GraphData::from_coo({}, {}, n);
  EXPECT_EQ(g->num_nodes(), n);
  EXPECT_EQ(g->num_edges(), 0);
  for (const Adjacency* adj : {&g->in(), &g->out()}) {
    EXPECT_EQ(adj->ptr, Ids(n + 1, 0));
    EXPECT_TRUE(adj->nbr.empty());
    EXPECT_TRUE(adj->eid.empty());
    Ids identity(n);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(adj->degree_order, identity);  // all degrees tie -> increasing id
  }
}

TEST(GraphEmpty, TypedWithoutEdges) {
  // Zero edges with an explicit edge-type count is still a typed graph.
  GraphTypes t;
  t.node_type = {0, 1, 1};
  t.num_node_types = -1;
  t.num_edge_types = 4;
  auto g = GraphData::from_coo({}, {}, 3, t);
  EXPECT_TRUE(g->has_edge_types());
  EXPECT_EQ(g->types().num_node_types, 2);
  expect_indices_valid(*g);
}

// ---------------------------------------------------------------------------------------
// Self-loop helpers, fits_int32 and uid.

TEST(GraphSelfLoops, AddAppendsOneLoopPerVertex) {
  for (uint32_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Coo c = random_graph(seed, 40, 300);
    auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes);
    auto h = g->add_self_loops(/*loop_type=*/5);  // ignored: g has no edge types
    const int64_t e = g->num_edges(), n = g->num_nodes();
    ASSERT_EQ(h->num_edges(), e + n);
    EXPECT_EQ(h->num_nodes(), n);
    // The original edges keep their ids, so existing edge features stay aligned.
    const Ids hs = h->src(), hd = h->dst();
    EXPECT_EQ(Ids(hs.begin(), hs.begin() + e), c.src);
    EXPECT_EQ(Ids(hd.begin(), hd.begin() + e), c.dst);
    for (int64_t v = 0; v < n; ++v) {
      EXPECT_EQ(hs[e + v], v);
      EXPECT_EQ(hd[e + v], v);
    }
    EXPECT_FALSE(h->has_edge_types());
    EXPECT_TRUE(h->types().edge_type.empty());
    expect_indices_valid(*h);
    // Every vertex, isolated ones included, now has in- and out-degree >= 1.
    for (int64_t v = 0; v < n; ++v) {
      EXPECT_EQ(h->in().degree(v), g->in().degree(v) + 1);
      EXPECT_EQ(h->out().degree(v), g->out().degree(v) + 1);
    }
    EXPECT_EQ(g->num_edges(), e);  // the original is untouched
  }
}

TEST(GraphSelfLoops, AddAppliesLoopTypeWhenTyped) {
  const Coo c = random_graph(3, 30, 200);
  GraphTypes t;
  t.edge_type = random_types(4, c.src.size(), 3);
  t.num_edge_types = 4;  // room for a dedicated self-loop relation
  t.node_type = random_types(5, 30, 2);
  t.num_node_types = 2;
  auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes, t);
  auto h = g->add_self_loops(3);
  const int64_t e = g->num_edges();
  ASSERT_EQ(h->types().edge_type.size(), static_cast<size_t>(e + 30));
  EXPECT_EQ(Ids(h->types().edge_type.begin(), h->types().edge_type.begin() + e), t.edge_type);
  for (int64_t v = 0; v < 30; ++v) EXPECT_EQ(h->types().edge_type[e + v], 3);
  EXPECT_EQ(h->types().num_edge_types, 4);
  EXPECT_EQ(h->types().node_type, t.node_type);
  EXPECT_EQ(h->types().num_node_types, 2);
  expect_indices_valid(*h);
  // The loop, having the highest type, comes last among each vertex's in-edges.
  for (int64_t v = 0; v < 30; ++v) EXPECT_EQ(h->in().eid[h->in().ptr[v + 1] - 1], e + v);

  // A loop type outside the graph's type count is rejected like any other bad type.
  expect_value_error([&] { g->add_self_loops(4); }, {"edge_type", "num_edge_types = 4"});
}

TEST(GraphSelfLoops, AddOnEmptyGraphs) {
  auto none = GraphData::from_coo({}, {}, 0)->add_self_loops();
  EXPECT_EQ(none->num_edges(), 0);
  auto isolated = GraphData::from_coo({}, {}, 3)->add_self_loops();
  EXPECT_EQ(isolated->src(), (Ids{0, 1, 2}));
  EXPECT_EQ(isolated->in().ptr, (Ids{0, 1, 2, 3}));
  expect_indices_valid(*isolated);
}

TEST(GraphSelfLoops, RemoveKeepsOtherEdgesAndReportsTheirIds) {
  for (uint32_t seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Coo c = random_graph(seed, 40, 300);
    GraphTypes t;
    t.edge_type = random_types(seed + 9, c.src.size(), 5);
    t.num_edge_types = 5;
    auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes, t);
    Ids kept{123};  // overwritten, not appended to
    auto h = g->remove_self_loops(&kept);

    Ids expected;
    for (int64_t e = 0; e < g->num_edges(); ++e)
      if (c.src[e] != c.dst[e]) expected.push_back(e);
    EXPECT_EQ(kept, expected);
    ASSERT_EQ(h->num_edges(), static_cast<int64_t>(kept.size()));
    EXPECT_LT(h->num_edges(), g->num_edges());  // the generator made some loops
    const Ids hs = h->src(), hd = h->dst();
    for (size_t i = 0; i < kept.size(); ++i) {
      EXPECT_EQ(hs[i], c.src[kept[i]]);
      EXPECT_EQ(hd[i], c.dst[kept[i]]);
      EXPECT_EQ(h->types().edge_type[i], t.edge_type[kept[i]]);  // types carried with edges
      EXPECT_NE(hs[i], hd[i]);
    }
    EXPECT_EQ(h->types().num_edge_types, 5);
    expect_indices_valid(*h);

    // The out-parameter is optional.
    EXPECT_EQ(g->remove_self_loops()->num_edges(), h->num_edges());
  }
}

TEST(GraphSelfLoops, RemoveEveryEdgeKeepsTypeCount) {
  auto g = GraphData::from_coo({0, 1, 1}, {0, 1, 1}, 2, edge_types({1, 0, 1}));
  Ids kept;
  auto h = g->remove_self_loops(&kept);
  EXPECT_TRUE(kept.empty());
  EXPECT_EQ(h->num_edges(), 0);
  EXPECT_EQ(h->types().num_edge_types, 2);
  EXPECT_EQ(h->in().ptr, (Ids{0, 0, 0}));
}

TEST(GraphSelfLoops, RemoveUndoesAdd) {
  auto g = GraphData::from_coo({0, 1, 2}, {1, 2, 0}, 3);
  Ids kept;
  auto h = g->add_self_loops()->remove_self_loops(&kept);
  EXPECT_EQ(kept, (Ids{0, 1, 2}));
  EXPECT_EQ(h->src(), g->src());
  EXPECT_EQ(h->dst(), g->dst());
  EXPECT_EQ(h->in().eid.to_vector(), g->in().eid.to_vector());
}

TEST(GraphSelfLoops, ReplaceKeepsNonLoopEdgesThenLoopsAtTheFirstVerticesAndReportsTheIds) {
  // loops at 1 (twice) and 3, a loop at 4 beyond num_loops = 4, a typed graph: types are dropped
  GraphTypes t;
  t.edge_type = {1, 0, 1, 0, 1, 0, 1};
  t.num_edge_types = 2;
  auto g = GraphData::from_coo({1, 0, 3, 1, 2, 4, 4}, {1, 2, 3, 1, 0, 4, 0}, 5, t);
  Ids kept, loops, loop_vertex;
  auto h = g->replace_self_loops(4);
  g->self_loop_ids(4, kept, loops, loop_vertex);
  EXPECT_EQ(kept, (Ids{1, 4, 6}));
  EXPECT_EQ(loops, (Ids{0, 2, 3}));
  EXPECT_EQ(loop_vertex, (Ids{1, 3, 1}));
  EXPECT_EQ(h->src(), (Ids{0, 2, 4, 0, 1, 2, 3}));
  EXPECT_EQ(h->dst(), (Ids{2, 0, 0, 0, 1, 2, 3}));
  EXPECT_EQ(h->num_nodes(), 5);
  EXPECT_FALSE(h->has_edge_types());
  expect_indices_valid(*h);
  // a bipartite graph: loops at destinations 0 .. num_loops-1, which are also sources
  auto b = GraphData::from_coo_bipartite({0, 2, 1}, {0, 1, 1}, 3, 2);
  auto hb = b->replace_self_loops(2);
  b->self_loop_ids(2, kept, loops, loop_vertex);
  EXPECT_TRUE(hb->is_bipartite());
  EXPECT_EQ(hb->src(), (Ids{2, 0, 1}));
  EXPECT_EQ(hb->dst(), (Ids{1, 0, 1}));
  EXPECT_EQ(kept, (Ids{1}));
  EXPECT_EQ(loops, (Ids{0, 2}));
  EXPECT_EQ(hb->num_src(), 3);
  EXPECT_EQ(hb->num_dst(), 2);
  EXPECT_EQ(hb->in().ptr, (Ids{0, 1, 3}));  // destination 0: the loop; 1: source 2, then the loop
  expect_value_error([&] { b->replace_self_loops(3); }, {"num_loops = 3"});
  expect_value_error([&] { b->self_loop_ids(3, kept, loops, loop_vertex); }, {"num_loops = 3"});
}

TEST(Graph, SmallGraphsFitInt32) {
  EXPECT_TRUE(GraphData::from_coo({0, 1}, {1, 0}, 2)->fits_int32());
  const Coo c = random_graph(1, 1000, 300);
  EXPECT_TRUE(GraphData::from_coo(c.src, c.dst, c.num_nodes)->fits_int32());
}

TEST(Graph, UidIsUniquePerGraph) {
  // Same content, different graphs: cached device state must never be shared between them.
  auto a = GraphData::from_coo({0, 1}, {1, 0}, 2);
  auto b = GraphData::from_coo({0, 1}, {1, 0}, 2);
  EXPECT_NE(a->uid(), 0u);
  EXPECT_NE(a->uid(), b->uid());
  // Derived graphs are new graphs too.
  auto loops = a->add_self_loops();
  auto bare = a->remove_self_loops();
  EXPECT_NE(loops->uid(), a->uid());
  EXPECT_NE(bare->uid(), a->uid());
  EXPECT_NE(loops->uid(), bare->uid());
}

/// The vector of an IndexArray, for comparisons.
Ids ids_of(const IndexArray& a) { return a.to_vector(); }

TEST(GraphInEdgeOrder, EdgeIdsFollowTheInEdgeIndexAndEqualABuildFromThePermutedList) {
  for (const Size& size : kSizes) {
    for (uint32_t seed : kSeeds) {
      for (int64_t num_types : {0, 3}) {
        SCOPED_TRACE("nodes " + std::to_string(size.nodes) + " edges " + std::to_string(size.edges) + " seed " +
                     std::to_string(seed) + " types " + std::to_string(num_types));
        const Coo c = random_graph(seed, size.nodes, size.edges);
        GraphTypes types;
        if (num_types) {
          types.edge_type = random_types(seed + 1, c.src.size(), num_types);
          types.node_type = random_types(seed + 2, static_cast<size_t>(c.num_nodes), 2);
          types.num_edge_types = num_types;
          types.num_node_types = 2;
        }
        auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes, types);
        auto h = g->in_edge_order();
        const Ids perm = ids_of(g->in().eid);  // original id of each slot = of each new edge
        Ids s, d, t;
        for (int64_t e : perm) {
          s.push_back(c.src[e]);
          d.push_back(c.dst[e]);
          if (num_types) t.push_back(types.edge_type[e]);
        }
        Ids slots(perm.size());
        std::iota(slots.begin(), slots.end(), int64_t(0));
        EXPECT_EQ(ids_of(h->in().eid), slots);
        EXPECT_EQ(h->src(), s);
        EXPECT_EQ(h->dst(), d);
        EXPECT_EQ(h->types().edge_type, t);
        EXPECT_EQ(h->types().node_type, types.node_type);
        EXPECT_EQ(h->types().num_edge_types, g->types().num_edge_types);
        EXPECT_NE(h->uid(), g->uid());
        expect_indices_valid(*h);
        // the same graph as one built from the permuted edge list, both indices
        GraphTypes pt = types;
        pt.edge_type = t;
        auto ref = GraphData::from_coo(s, d, c.num_nodes, pt);
        EXPECT_EQ(h->in().ptr, ref->in().ptr);
        EXPECT_EQ(ids_of(h->in().nbr), ids_of(ref->in().nbr));
        EXPECT_EQ(ids_of(h->in().eid), ids_of(ref->in().eid));
        EXPECT_EQ(h->in().degree_order, ref->in().degree_order);
        EXPECT_EQ(h->out().ptr, ref->out().ptr);
        EXPECT_EQ(ids_of(h->out().nbr), ids_of(ref->out().nbr));
        EXPECT_EQ(ids_of(h->out().eid), ids_of(ref->out().eid));
        EXPECT_EQ(h->fits_int32(), g->fits_int32());
      }
    }
  }
}

TEST(GraphInEdgeOrder, BipartiteBlocksAndGlobalSources) {
  auto b = GraphData::from_coo_bipartite({2, 0, 1, 2}, {1, 1, 0, 1}, 3, 2);
  auto h = b->in_edge_order();
  EXPECT_TRUE(h->is_bipartite());
  EXPECT_EQ(h->num_src(), 3);
  EXPECT_EQ(h->num_dst(), 2);
  EXPECT_EQ(h->src(), (Ids{1, 2, 0, 2}));  // destination 0's edge, then destination 1's in id order
  EXPECT_EQ(h->dst(), (Ids{0, 1, 1, 1}));
  auto ref = GraphData::from_coo_bipartite({1, 2, 0, 2}, {0, 1, 1, 1}, 3, 2);
  EXPECT_EQ(h->in().ptr, ref->in().ptr);
  EXPECT_EQ(ids_of(h->in().eid), ids_of(ref->in().eid));
  EXPECT_EQ(h->out().ptr, ref->out().ptr);
  EXPECT_EQ(ids_of(h->out().nbr), ids_of(ref->out().nbr));
  EXPECT_EQ(ids_of(h->out().eid), ids_of(ref->out().eid));
  auto global = b->with_global_sources({4, 0, 2}, 5);
  expect_value_error([&] { global->in_edge_order(); }, {"in_edge_order", "global"});
}

TEST(GraphSelfLoops, ReplaceAndIdsOnUntypedGraphsEqualTheEdgeListsDefinition) {
  // the untyped path copies the in-edge index instead of building one: compare with a build of
  // the edge list it stands for (the kept edges in order, then loops 0 .. num_loops-1)
  for (const Size& size : kSizes) {
    for (uint32_t seed : kSeeds) {
      const Coo c = random_graph(seed, size.nodes, size.edges);
      auto g = GraphData::from_coo(c.src, c.dst, c.num_nodes);
      for (int64_t num_loops : {int64_t(0), c.num_nodes / 2, c.num_nodes}) {
        SCOPED_TRACE("nodes " + std::to_string(size.nodes) + " edges " + std::to_string(size.edges) + " seed " +
                     std::to_string(seed) + " loops " + std::to_string(num_loops));
        Ids s, d;
        for (size_t e = 0; e < c.src.size(); ++e) {
          if (c.src[e] == c.dst[e]) continue;
          s.push_back(c.src[e]);
          d.push_back(c.dst[e]);
        }
        for (int64_t v = 0; v < num_loops; ++v) {
          s.push_back(v);
          d.push_back(v);
        }
        auto ref = GraphData::from_coo(s, d, c.num_nodes);
        auto h = g->replace_self_loops(num_loops);
        Ids kept, loops, loop_vertex, want_kept, want_loops, want_vertex;
        for (size_t e = 0; e < c.src.size(); ++e) {
          if (c.src[e] != c.dst[e]) {
            want_kept.push_back(static_cast<int64_t>(e));
          } else if (c.src[e] < num_loops) {
            want_loops.push_back(static_cast<int64_t>(e));
            want_vertex.push_back(c.src[e]);
          }
        }
        g->self_loop_ids(num_loops, kept, loops, loop_vertex);
        EXPECT_EQ(kept, want_kept);
        EXPECT_EQ(loops, want_loops);
        EXPECT_EQ(loop_vertex, want_vertex);
        EXPECT_EQ(h->in().ptr, ref->in().ptr);
        EXPECT_EQ(ids_of(h->in().nbr), ids_of(ref->in().nbr));
        EXPECT_EQ(ids_of(h->in().eid), ids_of(ref->in().eid));
        EXPECT_EQ(h->in().degree_order, ref->in().degree_order);
        EXPECT_EQ(h->src(), s);
        EXPECT_EQ(h->dst(), d);
        EXPECT_EQ(h->fits_int32(), ref->fits_int32());
        EXPECT_FALSE(h->has_edge_types() || h->has_node_types());
        expect_indices_valid(*h);
      }
    }
  }
  // a bipartite block: loops at the first destinations, which are also sources
  auto b = GraphData::from_coo_bipartite({3, 0, 1, 1, 2}, {1, 0, 2, 1, 0}, 4, 3);
  auto hb = b->replace_self_loops(3);
  auto rb = GraphData::from_coo_bipartite({3, 1, 2, 0, 1, 2}, {1, 2, 0, 0, 1, 2}, 4, 3);
  EXPECT_EQ(hb->in().ptr, rb->in().ptr);
  EXPECT_EQ(ids_of(hb->in().nbr), ids_of(rb->in().nbr));
  EXPECT_EQ(ids_of(hb->in().eid), ids_of(rb->in().eid));
  EXPECT_EQ(hb->src(), rb->src());
  EXPECT_TRUE(hb->is_bipartite());
}
