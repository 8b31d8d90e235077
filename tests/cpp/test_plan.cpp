/** \file codegen::plan on small programs: the kernels it forms (kind, centre, the reductions
 * of each pass, epilogues) and the buffers it asks for. Each test suite is named for the step of
 * plan.cpp whose decision it checks: LowerSoftmax (lower_softmax.cpp), Fuse (fuse.cpp),
 * PlaceOutputs (place_outputs.cpp); Materialize is test_materialize.cpp. */
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/plan.h"
#include "core/frontend/builder.h"
#include "core/passes/passes.h"
#include "core/passes/pipeline.h"

using namespace seastar;
using codegen::Kernel;

namespace {

// "T.dst[agg_sum@0 agg_max@0 | epi 1]" for a traversal, "V.dst[2]" for a vertex map, ...
std::string describe(const codegen::FusedPlan& p) {
  std::string s;
  for (const Kernel& k : p.kernels) {
    if (!s.empty()) s += "; ";
    s += k.kind == Kernel::Kind::Traverse ? "T" : k.kind == Kernel::Kind::VertexMap ? "V"
         : k.kind == Kernel::Kind::EdgeMap ? "E" : "P";
    if (k.kind == Kernel::Kind::Traverse) s += k.group == ir::Group::Dst ? ".dst" : ".src";
    if (k.precompute) s += ".stored";
    s += "[";
    for (size_t i = 0; i < k.values.size(); ++i) {
      s += (i ? " " : "") + std::string(ir::op_info(p.module.at(k.values[i]).op).name);
      if (k.kind == Kernel::Kind::Traverse) s += "@" + std::to_string(k.pass[i]);
    }
    if (!k.epilogue.empty()) s += " | epi " + std::to_string(k.epilogue.size());
    s += "]";
  }
  return s;
}

int buffers_of(const codegen::FusedPlan& p, codegen::Buffer::Role role) {
  int n = 0;
  for (const codegen::Buffer& b : p.buffers) n += b.role == role;
  return n;
}

}  // namespace

TEST(Fuse, AWeightedSumIsOneTraversal) {
  Builder b({{"h", {10, 4}}, {"w", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  codegen::FusedPlan p = codegen::plan(b.finish({sum(e.src()["h"] * e["w"])}));
  EXPECT_EQ(describe(p), "T.dst[agg_sum@0]");
  EXPECT_EQ(buffers_of(p, codegen::Buffer::Role::Input), 2);
  EXPECT_EQ(buffers_of(p, codegen::Buffer::Role::Output), 1);
}

TEST(LowerSoftmax, AttentionIsOneOnlinePass) {
  // softmax feeding only a weighted sum: lower_softmax makes one agg_softmax_sum
  Builder b({{"el", {10, 2, 1}}, {"er", {10, 2, 1}}, {"h", {10, 2, 4}}}, {});
  Vertex v(&b);
  Var s = softmax(v.in_edges(), [&](const Edge& e) { return leaky_relu(e.src()["el"] + v["er"], 0.2); });
  Edge e = v.in_edges().edge();
  codegen::FusedPlan p = codegen::plan(b.finish({sum(s * e.src()["h"])}));
  EXPECT_EQ(describe(p), "T.dst[agg_softmax_sum@0]");
}

TEST(LowerSoftmax, ASoftmaxThatIsAlsoAnOutputTakesThreePasses) {
  Builder b({{"s", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  Var y = softmax(e["s"]);
  codegen::FusedPlan p = codegen::plan(b.finish({sum(y), y}));
  // the max, then the sum of exps at the centre, then the sum of the normalised scores; the
  // per-edge output is stored by that last pass, which computes it anyway (save_edge_values),
  // not by a map of its own
  EXPECT_EQ(describe(p), "T.dst[agg_max@0 agg_sum@1 agg_sum@2]");
}

TEST(Fuse, AnAggregationReadAtTheNeighbourNeedsASecondTraversal) {
  // a sum read at the source of another edge is complete only after every centre's traversal
  Builder b({{"h", {10, 4}}}, {});
  Vertex v(&b);
  Var inner = sum(v.in_edges(), [](const Edge& e) { return e.src()["h"]; });
  Edge e = v.in_edges().edge();
  Var outer = sum(b.gather(inner, ir::Group::Src, ir::Group::Dst) * e.src()["h"]);
  codegen::FusedPlan p = codegen::plan(b.finish({outer}));
  EXPECT_EQ(describe(p), "T.dst[agg_sum@0]; T.dst[agg_sum@0]");
  EXPECT_EQ(buffers_of(p, codegen::Buffer::Role::Intermediate), 1);  // the inner sum, read back
}

TEST(PlaceOutputs, ACentreFactorAfterTheSumIsTheTraversalsEpilogue) {
  // d * sum(h[src] * w): the output reads only the centre's d and the sum, so the traversal
  // computes it per centre after its pass instead of a separate vertex map
  Builder b({{"h", {10, 4}}, {"w", {30, 1}}, {"d", {10, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  codegen::FusedPlan p = codegen::plan(b.finish({v["d"] * sum(e.src()["h"] * e["w"])}));
  EXPECT_EQ(describe(p), "T.dst[agg_sum@0 | epi 1]");
}

TEST(Fuse, TheGradientOfASourceReadIsAnOutEdgeTraversal) {
  Builder b({{"h", {10, 4}}, {"w", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  LoweredProgram lp = lower(b.finish({sum(e.src()["h"] * e["w"])}), {"h", "w"}, "weighted");
  codegen::FusedPlan p = codegen::plan(lp.backward);
  // d/dh sums over each source's out-edges; d/dw is per edge, g * h summed back to w's width
  EXPECT_EQ(describe(p), "T.src[agg_sum@0]; E[sum_to]");
}
