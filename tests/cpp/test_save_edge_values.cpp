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

// every stored value has an intermediate buffer of one row per edge
void expect_edge_buffers(const codegen::FusedPlan& p) {
  for (const Kernel& k : p.kernels)
    for (const Kernel::EdgeSave& e : k.saves) {
      bool found = false;
      for (const codegen::Buffer& b : p.buffers)
        found |= b.value == e.value && b.role == codegen::Buffer::Role::Intermediate && b.rows == ir::Space::Edge;
      EXPECT_TRUE(found) << "%" << e.value << " has no per-edge buffer";
    }
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

TEST(SaveEdgeValues, AnEdgeOutputReadsWhatTheTraversalStored) {
  // the softmax is an output too: three passes and a per-edge map, and the exp that the second
  // pass computes is read back by the third and by the map (so at the edge ids)
  Builder b({{"s", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  Var y = softmax(e["s"]);
  codegen::FusedPlan p = codegen::plan(b.finish({sum(y), y}));
  EXPECT_EQ(saves(p), "exp[1]@0.1");
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
