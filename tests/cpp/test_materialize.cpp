/** \file materialize_vertex_values (codegen/materialize.cpp) on small programs: which vertex
 * expressions read at the far end of a traversal the plan stores once per vertex, by its cost
 * model (materialize.h), and which it leaves in the edge loop, seen in the plan's precompute
 * kernels. The cases sit on both sides of the model's threshold, so that a change of its
 * constants shows up as the case it moves. */
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "codegen/materialize.h"
#include "core/frontend/builder.h"
#include "core/passes/passes.h"

using namespace seastar;
using codegen::Kernel;

namespace {

// the op names of the stored values, in the order the precompute kernels hold them ("" if none)
std::string stored(const codegen::FusedPlan& p) {
  std::string s;
  for (const Kernel& k : p.kernels) {
    if (!k.precompute) continue;
    EXPECT_EQ(k.kind, Kernel::Kind::VertexMap);
    for (int id : k.values) s += (s.empty() ? "" : " ") + std::string(ir::op_info(p.module.at(id).op).name);
  }
  return s;
}

// a traversal of in-edges summing f(source's tensors): the plan of that program
template <class F>
codegen::FusedPlan plan_of(std::map<std::string, TensorSig> inputs, F f) {
  Builder b(inputs, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  return codegen::plan(b.finish({sum(f(v, e))}));
}

}  // namespace

TEST(Materialize, GcnsSourceNormTimesRowsIsStored) {
  // norm * h at the source: two random reads per edge become one, for one streamed pass
  codegen::FusedPlan p = plan_of({{"h", {10, 64}}, {"norm", {10, 1}}},
                                 [](Vertex&, Edge& e) { return e.src()["norm"] * e.src()["h"]; });
  EXPECT_EQ(stored(p), "mul");
  // the stored value is a buffer of its own, read by the traversal after the map wrote it
  ASSERT_FALSE(p.kernels.empty());
  EXPECT_TRUE(p.kernels.front().precompute);
  EXPECT_EQ(p.kernels.back().kind, Kernel::Kind::Traverse);
}

TEST(Materialize, ANarrowFunctionOfOneRowStaysInTheEdgeLoop) {
  // exp(h) reads what it would store: no read is saved, and 4 elements of arithmetic do not
  // pay for a pass over the vertices
  codegen::FusedPlan p = plan_of({{"h", {10, 4}}}, [](Vertex&, Edge& e) { return exp(e.src()["h"]); });
  EXPECT_EQ(stored(p), "");
}

TEST(Materialize, AWideChainOfArithmeticOnOneRowIsStored) {
  // the same read, but enough arithmetic per row that computing it once per vertex wins
  codegen::FusedPlan p = plan_of({{"h", {10, 256}}}, [](Vertex&, Edge& e) {
    Var h = e.src()["h"];
    return exp(h) * h + h * h;
  });
  EXPECT_NE(stored(p), "");
}

TEST(Materialize, TheCentresSideIsNeverStored) {
  // v.x * e.src.h: the centre's factor is read once per centre already
  codegen::FusedPlan p = plan_of({{"h", {10, 64}}, {"x", {10, 64}}, {"y", {10, 64}}},
                                 [](Vertex& v, Edge& e) { return (v["x"] * v["y"]) * e.src()["h"]; });
  EXPECT_EQ(stored(p), "");
}

TEST(Materialize, AnExpressionOfAnAggregationIsNeverStored) {
  // inner's sum is complete only after its own traversal, so nothing of it can be precomputed
  Builder b({{"h", {10, 64}}, {"norm", {10, 1}}}, {});
  Vertex v(&b);
  Var inner = sum(v.in_edges(), [](const Edge& e) { return e.src()["h"]; });
  Edge e = v.in_edges().edge();
  Var scaled = b.gather(inner * v["norm"], ir::Group::Src, ir::Group::Dst);
  codegen::FusedPlan p = codegen::plan(b.finish({sum(scaled * e.src()["h"])}));
  EXPECT_EQ(stored(p), "");
}

TEST(Materialize, EdgeValuesAreNotVertexExpressions) {
  codegen::FusedPlan p = plan_of({{"h", {10, 64}}, {"w", {30, 1}}},
                                 [](Vertex&, Edge& e) { return e["w"] * e.src()["h"]; });
  EXPECT_EQ(stored(p), "");
}
