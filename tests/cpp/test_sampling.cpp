/** \file The C++ neighbour sampler and bipartite graph storage, without torch. */
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "core/graph/graph_data.h"
#include "core/sampling/neighbor_sampler.h"
#include "core/util/errors.h"

namespace seastar {
namespace {

std::shared_ptr<const GraphData> ring_with_hub(int64_t n) {
  std::vector<int64_t> s, d;
  for (int64_t v = 0; v < n; ++v) {
    s.push_back(v), d.push_back((v + 1) % n);  // a ring
    s.push_back(v), d.push_back(0);            // vertex 0 is a hub
  }
  return GraphData::from_coo(s, d, n);
}

TEST(Bipartite, SizesAndIndices) {
  auto g = GraphData::from_coo_bipartite({0, 4, 2, 4}, {1, 0, 1, 1}, 5, 2);
  EXPECT_TRUE(g->is_bipartite());
  EXPECT_EQ(g->num_src(), 5);
  EXPECT_EQ(g->num_dst(), 2);
  EXPECT_EQ(g->in().ptr.size(), 3u);   // num_dst centres
  EXPECT_EQ(g->out().ptr.size(), 6u);  // num_src centres
  EXPECT_EQ(g->in().degree(1), 3);
  EXPECT_EQ(g->out().degree(4), 2);
  EXPECT_THROW(g->num_nodes(), ValueError);
  EXPECT_THROW(GraphData::from_coo_bipartite({0}, {2}, 5, 2), ValueError);
  auto loops = g->add_self_loops();
  EXPECT_EQ(loops->num_edges(), 6);
  EXPECT_EQ(loops->num_dst(), 2);
}

TEST(Bipartite, FromCscKeepsTheInEdgeOrder) {
  auto g = GraphData::from_csc_bipartite({0, 2, 2, 3}, {4, 1, 0}, 5);
  EXPECT_EQ(g->num_dst(), 3);
  EXPECT_EQ(g->in().nbr.to_vector(), (std::vector<int64_t>{4, 1, 0}));
  EXPECT_EQ(g->in().eid.to_vector(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(g->dst(), (std::vector<int64_t>{0, 0, 2}));
  EXPECT_EQ(g->out().degree(4), 1);
  EXPECT_THROW(GraphData::from_csc_bipartite({0, 2}, {4}, 5), ValueError);
  EXPECT_THROW(GraphData::from_csc_bipartite({0, 1}, {5}, 5), ValueError);
}

TEST(Bipartite, FromCscSortsTheOutIndexOnFirstUseAsFromCooDoes) {
  // a random typed block: the deferred out-index equals the one an edge list builds eagerly,
  // whichever of several threads asks first
  std::mt19937_64 rng(5);
  const int64_t num_src = 300, num_dst = 120;
  std::vector<int64_t> ptr = {0}, src, dst;
  GraphTypes t;
  t.num_edge_types = 3;
  for (int64_t v = 0; v < num_dst; ++v) {
    const int64_t deg = static_cast<int64_t>(rng() % 9);
    std::vector<int64_t> types(deg);
    for (auto& r : types) r = static_cast<int64_t>(rng() % 3);
    std::sort(types.begin(), types.end());  // a sampled typed block is type-sorted per destination
    for (int64_t r : types) {
      src.push_back(static_cast<int64_t>(rng() % num_src));
      dst.push_back(v);
      t.edge_type.push_back(r);
    }
    ptr.push_back(static_cast<int64_t>(src.size()));
  }
  auto eager = GraphData::from_coo_bipartite(src, dst, num_src, num_dst, t);
  auto lazy = GraphData::from_csc_bipartite(ptr, src, num_src, t);
  std::vector<const Adjacency*> seen(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { seen[i] = &lazy->out(); });
  for (auto& th : threads) th.join();
  for (const Adjacency* a : seen) EXPECT_EQ(a, &lazy->out());
  EXPECT_EQ(lazy->out().ptr, eager->out().ptr);
  EXPECT_EQ(lazy->out().nbr.to_vector(), eager->out().nbr.to_vector());
  EXPECT_EQ(lazy->out().eid.to_vector(), eager->out().eid.to_vector());
  EXPECT_EQ(lazy->out().degree_order, eager->out().degree_order);
  EXPECT_EQ(lazy->in().nbr.to_vector(), eager->in().nbr.to_vector());
}

TEST(Bipartite, NodeTypesAreTheSources) {
  GraphTypes t;
  t.node_type = {0, 2, 1, 1, 0};
  t.num_node_types = -1;
  auto g = GraphData::from_csc_bipartite({0, 2, 2, 3}, {4, 1, 0}, 5, t);
  EXPECT_EQ(g->types().num_node_types, 3);
  EXPECT_EQ(g->types().node_type, t.node_type);
  auto h = GraphData::from_coo_bipartite({4, 1, 0}, {0, 0, 2}, 5, 3, t);
  EXPECT_TRUE(h->has_node_types());
  GraphTypes short_types = t;
  short_types.node_type.pop_back();  // one per source is needed
  EXPECT_THROW(GraphData::from_coo_bipartite({4, 1, 0}, {0, 0, 2}, 5, 3, short_types), ValueError);
  // destination i is source i: more destinations than sources have no node type
  EXPECT_THROW(GraphData::from_coo_bipartite({4, 1, 0}, {0, 0, 5}, 5, 6, t), ValueError);
}

TEST(Bipartite, GlobalSourcesRenameTheSourcesOnly) {
  // a block of 3 sources (the first 2 are the destinations) read from a table of 9 rows
  auto local = GraphData::from_coo_bipartite({2, 0, 1, 2}, {0, 1, 1, 0}, 3, 2);
  auto g = local->with_global_sources({7, 4, 8}, 9);
  EXPECT_TRUE(g->sources_global());
  EXPECT_FALSE(local->sources_global());
  EXPECT_EQ(g->num_src(), 9);
  EXPECT_EQ(g->num_dst(), 2);
  EXPECT_EQ(g->src(), (std::vector<int64_t>{8, 7, 4, 8}));  // edge order and ids kept
  EXPECT_EQ(g->dst(), local->dst());
  EXPECT_EQ(g->in().ptr, local->in().ptr);
  EXPECT_EQ(g->in().eid.to_vector(), local->in().eid.to_vector());
  EXPECT_EQ(g->out().ptr.size(), 10u);  // the out-edge index has a centre per table row
  EXPECT_NE(g->uid(), local->uid());
  // what needs destination i to be source i refuses
  EXPECT_THROW(g->add_self_loops(), ValueError);
  EXPECT_THROW(g->remove_self_loops(), ValueError);
  EXPECT_THROW(g->replace_self_loops(1), ValueError);
  // bad input
  EXPECT_THROW(local->with_global_sources({7, 4}, 9), ValueError);      // an id per source
  EXPECT_THROW(local->with_global_sources({7, 4, 9}, 9), ValueError);   // out of range
  EXPECT_THROW(GraphData::from_coo({0}, {1}, 2)->with_global_sources({0, 1}, 2), ValueError);  // square
  GraphTypes t;
  t.node_type = {0, 1, 0};
  t.num_node_types = 2;
  auto typed = GraphData::from_coo_bipartite({2}, {0}, 3, 2, t);
  EXPECT_THROW(typed->with_global_sources({0, 1, 2}, 5), ValueError);
}

TEST(Sampler, CountsRelabellingAndDeterminism) {
  auto g = ring_with_hub(50);
  sampling::SamplerOptions o;
  o.seed = 7;
  auto blocks = sampling::sample_neighbors(*g, {0, 3, 9}, {{4}, {2}}, o);
  ASSERT_EQ(blocks.size(), 2u);
  const auto& b = blocks[0];
  EXPECT_EQ(b.num_dst, 3);
  EXPECT_EQ(b.ptr[1] - b.ptr[0], 4);  // the hub: 4 of its 51 in-edges
  EXPECT_EQ(b.ptr[2] - b.ptr[1], 1);  // vertex 3: its one in-edge (2 -> 3)
  EXPECT_EQ(std::vector<int64_t>(b.src_nodes.begin(), b.src_nodes.begin() + 3), (std::vector<int64_t>{0, 3, 9}));
  const std::vector<int64_t> gs = g->src(), gd = g->dst();
  for (int64_t i = 0; i < b.num_dst; ++i) {
    std::set<int64_t> seen;
    for (int64_t k = b.ptr[i]; k < b.ptr[i + 1]; ++k) {
      EXPECT_EQ(gs[b.eid[k]], b.src_nodes[b.src[k]]);
      EXPECT_EQ(gd[b.eid[k]], b.src_nodes[i]);
      EXPECT_TRUE(seen.insert(b.eid[k]).second);
    }
  }
  EXPECT_EQ(blocks[1].num_dst, b.num_src());  // the next hop starts from this block's sources
  auto again = sampling::sample_neighbors(*g, {0, 3, 9}, {{4}, {2}}, o);
  EXPECT_EQ(again[1].eid, blocks[1].eid);
  EXPECT_EQ(again[1].src_nodes, blocks[1].src_nodes);
}

TEST(Sampler, ExpandOnceSamplesEachVertexAtTheHopThatReachesIt) {
  auto g = ring_with_hub(50);
  sampling::SamplerOptions o;
  o.seed = 11;
  const std::vector<int64_t> seeds{0, 3, 9};
  const sampling::Fanouts f{{4}, {2}, {-1}};
  auto every = sampling::sample_neighbors(*g, seeds, f, o);
  o.expand_once = true;
  auto once = sampling::sample_neighbors(*g, seeds, f, o);
  ASSERT_EQ(once.size(), 3u);
  // hop 0 is the same; the later hops give the vertices reached before no edges and the new
  // ones the draws they get without the option (the draws are keyed by hop and vertex)
  EXPECT_EQ(once[0].eid, every[0].eid);
  EXPECT_EQ(once[0].src_nodes, every[0].src_nodes);
  std::set<int64_t> eids(once[0].eid.begin(), once[0].eid.end());
  for (size_t h = 1; h < once.size(); ++h) {
    const auto& b = once[h];
    const int64_t reached = once[h - 1].num_dst;
    EXPECT_EQ(b.num_dst, once[h - 1].num_src());
    EXPECT_EQ(b.ptr[reached], 0);  // no edge into an earlier frontier
    // without the option a hop's frontier holds more vertices (the earlier ones' new draws):
    // a vertex's row there is found by its id
    std::map<int64_t, int64_t> row;
    for (int64_t i = 0; i < every[h].num_dst; ++i) row[every[h].src_nodes[i]] = i;
    for (int64_t i = reached; i < b.num_dst; ++i) {
      const int64_t n = b.ptr[i + 1] - b.ptr[i];
      ASSERT_EQ(row.count(b.src_nodes[i]), 1u);
      const int64_t r = row[b.src_nodes[i]];
      ASSERT_EQ(n, every[h].ptr[r + 1] - every[h].ptr[r]) << "hop " << h << " destination " << i;
      for (int64_t k = 0; k < n; ++k) {
        EXPECT_EQ(b.eid[b.ptr[i] + k], every[h].eid[every[h].ptr[r] + k]);
        EXPECT_TRUE(eids.insert(b.eid[b.ptr[i] + k]).second);  // no edge twice in the union
      }
    }
    // the local ids continue the previous block's: source j is the same vertex in every block
    for (int64_t j = 0; j < once[h - 1].num_src(); ++j) EXPECT_EQ(b.src_nodes[j], once[h - 1].src_nodes[j]);
  }
}

TEST(Sampler, BadInputIsAValueError) {
  auto g = ring_with_hub(10);
  sampling::SamplerOptions o;
  EXPECT_THROW(sampling::sample_neighbors(*g, {10}, {{2}}, o), ValueError);
  EXPECT_THROW(sampling::sample_neighbors(*g, {1, 1}, {{2}}, o), ValueError);
  EXPECT_THROW(sampling::sample_neighbors(*g, {1}, {}, o), ValueError);
  EXPECT_THROW(sampling::sample_neighbors(*g, {1}, {{-3}}, o), ValueError);
  o.weights = {1.0};
  EXPECT_THROW(sampling::sample_neighbors(*g, {1}, {{2}}, o), ValueError);
}

}  // namespace
}  // namespace seastar
