/** \file save_edge_values (codegen/save_edge_values.cpp) on small programs: which edge values a
 * plan stores where it first computes them, and which it leaves to be computed where they are
 * read, by its cost model (save_edge_values.h). */
#include <gtest/gtest.h>

#include <string>

#include "codegen/plan.h"
#include "core/frontend/builder.h"
#include "core/passes/pipeline.h"

using namespace seastar;
using codegen::Kernel;

namespace {

// "div[2]@0.1" per stored value: its op, its row's elements, the kernel and pass that store it,
// and "j" when its rows are in the traversal's edge order
std::string saves(const codegen::FusedPlan& p) {
  std::string s;
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (const Kernel::EdgeSave& e : p.kernels[k].saves) {
      const ir::Value& x = p.module.at(e.value);
      s += (s.empty() ? "" : " ") + std::string(ir::op_info(x.op).name) + "[" + std::to_string(ir::numel(x.shape)) +
           "]@" + std::to_string(k) + "." + std::to_string(e.pass) + (e.by_slot ? "j" : "");
    }
  return s;
}

// every stored value has a buffer of one row per edge: its own, or the output it is
void expect_edge_buffers(const codegen::FusedPlan& p) {
  for (const Kernel& k : p.kernels)
    for (const Kernel::EdgeSave& e : k.saves) {
      bool found = false;
      for (const codegen::Buffer& b : p.buffers)
        found |= b.value == e.value && b.rows == ir::Space::Edge &&
                 (b.role == codegen::Buffer::Role::Intermediate || b.role == codegen::Buffer::Role::Output);
      EXPECT_TRUE(found) << "%" << e.value << " has no per-edge buffer";
    }
}

bool has_edge_map(const codegen::FusedPlan& p) {
  for (const Kernel& k : p.kernels)
    if (k.kind == Kernel::Kind::EdgeMap) return true;
  return false;
}

// GATv2's program: score = sum(leaky_relu(xl[src] + xr[dst]) * att), softmax, sum(a * xl[src])
LoweredProgram gatv2() {
  Builder b({{"xl", {10, 2, 8}}, {"xr", {10, 2, 8}}, {"att", {2, 8}}}, {});
  Vertex v(&b);
  Var att = b.param("att");
  Var a = softmax(v.in_edges(), [&](const Edge& e) {
    return b.unsqueeze(feature_sum(leaky_relu(e.src()["xl"] + v["xr"], 0.2) * att));
  });
  Edge e = v.in_edges().edge();
  return lower(b.finish({sum(a * e.src()["xl"])}), {"xl", "xr", "att"}, "gatv2");
}

}  // namespace

TEST(SaveEdgeValues, AnAttentionBackwardStoresItsNarrowEdgeValuesOnce) {
  codegen::FusedPlan p = codegen::plan(gatv2().backward);
  // the destination traversal's passes: the softmax's max, its sum, the sum of weight times
  // gradient, then the gradients; the source traversal sums xl's gradient
  ASSERT_EQ(p.kernels.size(), 2u);
  // the score (pass 0), its exp (pass 1), the weight and the gradient's dot product (pass 2) and
  // the score's gradient (pass 3), each H = 2 per edge, are computed once: no later pass and not
  // the source traversal computes a score again. The [2, 8] rows (the sum leaky_relu reads, the
  // gradient terms) are not worth their bytes. What only the destination traversal reads is
  // stored in its edge order (j); the weight and the score's gradient, which the source
  // traversal reads too, at the edge ids
  EXPECT_EQ(saves(p), "fsum[2]@0.0j exp[2]@0.1j div[2]@0.2 sum_to[2]@0.2j fsum[2]@0.3");
  expect_edge_buffers(p);
}

TEST(SaveEdgeValues, AnAttentionForwardInOnePassStoresNothing) {
  // the online softmax reads each score once
  EXPECT_EQ(saves(codegen::plan(gatv2().forward)), "");
}

TEST(SaveEdgeValues, AnEdgeOutputIsStoredByThePassThatComputesIt) {
  // the softmax is an output too: the third pass sums it, so it stores it (at the edge ids, the
  // output's rows) and no per-edge map computes it again; the exp that the second pass
  // computes is read back by the third, in edge order
  Builder b({{"s", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  Var y = softmax(e["s"]);
  codegen::FusedPlan p = codegen::plan(b.finish({sum(y), y}));
  EXPECT_EQ(saves(p), "div[1]@0.2 exp[1]@0.1j");
  EXPECT_FALSE(has_edge_map(p));
  expect_edge_buffers(p);
}

TEST(SaveEdgeValues, AnEdgeGradientSummedOntoTheSourcesNeedsNoMap) {
  // GINE's sum of relu(x[src] + ea): the gradient of ea per edge is the term the source
  // traversal sums into x's gradient, so that traversal writes it
  Builder b({{"x", {10, 4}}, {"ea", {30, 4}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  LoweredProgram lp = lower(b.finish({sum(relu(e.src()["x"] + e["ea"]))}), {"x", "ea"}, "gine");
  codegen::FusedPlan p = codegen::plan(lp.backward);
  EXPECT_FALSE(has_edge_map(p));
  EXPECT_EQ(saves(p), "mul[4]@0.0");
  expect_edge_buffers(p);
}

TEST(SaveEdgeValues, AValueOneSiteComputesIsNotStored) {
  // d/dh of sum(h[src] * w) sums g * w over each source's out-edges, and d/dw is g * h per edge:
  // no value is computed twice
  Builder b({{"h", {10, 4}}, {"w", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  LoweredProgram lp = lower(b.finish({sum(e.src()["h"] * e["w"])}), {"h", "w"}, "weighted");
  EXPECT_EQ(saves(codegen::plan(lp.backward)), "");
}
