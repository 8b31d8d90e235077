/** \file IR tests from C++: tracing, printing, typing errors, autodiff structure. */
#include <gtest/gtest.h>

#include "core/frontend/builder.h"
#include "core/passes/passes.h"
#include "core/passes/pipeline.h"
#include "core/util/errors.h"

using namespace seastar;

namespace {
Var gat(Vertex& v) {
  Var score = softmax(v.in_edges(), [&](const Edge& e) { return leaky_relu(e.src()["el"] + v["er"], 0.2); });
  Edge e = v.in_edges().edge();
  return sum(score * e.src()["h"]);
}
}  // namespace

TEST(IR, TracesGatIntoOneSoftmaxAndOneSum) {
  Builder b({{"el", {10, 2, 1}}, {"er", {10, 2, 1}}, {"h", {10, 2, 4}}}, {});
  Vertex v(&b);
  ir::Module m = b.finish({gat(v)});
  passes::verify(m);
  std::string text = ir::print(m);
  EXPECT_NE(text.find("softmax.dst"), std::string::npos) << text;
  EXPECT_NE(text.find("agg_sum.dst"), std::string::npos) << text;
  EXPECT_NE(text.find(": Vertex f[2, 4]"), std::string::npos) << text;
}

TEST(IR, BackwardOfSourceReadIsOutEdgeSum) {
  Builder b({{"el", {10, 2, 1}}, {"er", {10, 2, 1}}, {"h", {10, 2, 4}}}, {});
  Vertex v(&b);
  LoweredProgram p = lower(b.finish({gat(v)}), {"el", "er", "h"}, "gat");
  ASSERT_EQ(p.wrt.size(), 3u);
  std::string text = ir::print(p.backward);
  EXPECT_NE(text.find("agg_sum.src"), std::string::npos) << text;  // d/dh and d/del
  EXPECT_NE(text.find("agg_sum.dst"), std::string::npos) << text;  // d/der
}

TEST(IR, ShapeMismatchIsATraceError) {
  Builder b({{"a", {10, 3}}, {"c", {10, 4}}}, {});
  Vertex v(&b);
  b.set_loc({"model.py", 12});
  try {
    Edge e = v.in_edges().edge();
    (void)(e.src()["a"] + e.src()["c"]);
    FAIL() << "expected a TraceError";
  } catch (const TraceError& err) {
    EXPECT_NE(std::string(err.what()).find("model.py:12"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("do not broadcast"), std::string::npos) << err.what();
  }
}

TEST(IR, MixingEdgeListsIsATraceError) {
  Builder b({{"a", {10, 3}}}, {});
  Vertex v(&b);
  Edge in = v.in_edges().edge(), out = v.out_edges().edge();
  EXPECT_THROW((void)(in.src()["a"] + out.dst()["a"]), TraceError);
}

TEST(IR, UnboundAttributeIsATraceError) {
  Builder b({{"a", {10, 3}}}, {});
  Vertex v(&b);
  EXPECT_THROW((void)v["missing"], TraceError);
}

TEST(IR, SimplifyFoldsAndMergesDuplicates) {
  Builder b({{"a", {10, 3}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  Var x = e.src()["a"] * (v.constant(2) - 1.0);  // * 1 after folding
  Var y = e.src()["a"];
  ir::Module m = passes::simplify(b.finish({sum(x + y)}));
  // a, gather, add, agg_sum: the folded constant and the duplicate gather are gone
  EXPECT_EQ(m.size(), 4) << ir::print(m);
}

namespace {
int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST(IR, SimplifyAppliesASmallFactorBeforeTheBroadcast) {
  // (s[4,1] * x[1,8]) * w[1] (s and w per edge): w multiplies s (4 elements), not the [4, 8] product
  Builder b({{"s", {30, 4, 1}}, {"x", {10, 1, 8}}, {"w", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  ir::Module m = passes::simplify(b.finish({sum(e["s"] * e.src()["x"] * e["w"])}));
  passes::verify(m);
  const std::string text = ir::print(m);
  EXPECT_EQ(count(text, "= mul"), 2) << text;
  EXPECT_EQ(count(text, ": Edge f[4, 1]\n"), 2) << text;  // s and s * w
  EXPECT_NE(text.find("agg_sum.dst"), std::string::npos) << text;
}

TEST(IR, SimplifyKeepsAProductThatIsUsedTwice) {
  Builder b({{"s", {30, 4, 1}}, {"x", {10, 1, 8}}, {"w", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  Var t = e["s"] * e.src()["x"];
  ir::Module m = passes::simplify(b.finish({sum(t * e["w"] + t)}));
  const std::string text = ir::print(m);
  EXPECT_EQ(count(text, ": Edge f[4, 1]\n"), 1) << text;  // only s: no s * w
}

TEST(IR, SimplifyHoistsAProductOfOneEndpointToTheVertex) {
  // s[src] * x[src] * w[e]: the product of the two source values is one vertex value, gathered once
  Builder b({{"s", {10, 4, 1}}, {"x", {10, 1, 8}}, {"w", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  ir::Module m = passes::simplify(b.finish({sum(e.src()["s"] * e.src()["x"] * e["w"])}));
  passes::verify(m);
  const std::string text = ir::print(m);
  EXPECT_EQ(count(text, "= gather.src"), 1) << text;
  EXPECT_EQ(count(text, ": Vertex f[4, 8]\n"), 2) << text;  // s * x, and the aggregation
}

TEST(IR, SimplifyAppliesACentreFactorAfterTheSum) {
  // sum(d[src] * h[src] * d[dst]) -> d * sum(gather.src(d * h)): no per-edge multiply is left
  Builder b({{"d", {10, 1}}, {"h", {10, 8}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  ir::Module m = passes::simplify(b.finish({sum(e.src()["d"] * e.src()["h"] * e.dst()["d"])}));
  passes::verify(m);
  const std::string text = ir::print(m);
  EXPECT_EQ(count(text, ": Edge "), 1) << text;  // only the gather
  EXPECT_EQ(count(text, "= mul"), 2) << text;
  EXPECT_EQ(text.find("gather.dst"), std::string::npos) << text;
  // a max does not distribute over a product: the factor stays inside
  Builder b2({{"d", {10, 1}}, {"h", {10, 8}}}, {});
  Vertex v2(&b2);
  Edge e2 = v2.in_edges().edge();
  ir::Module m2 = passes::simplify(b2.finish({max(e2.src()["h"] * e2.dst()["d"])}));
  EXPECT_NE(ir::print(m2).find("gather.dst"), std::string::npos) << ir::print(m2);
}

TEST(IR, EmptyFeatureAxisIsATraceError) {
  Builder b({{"a", {10, 0}}, {"W", {3, 0}}, {"rows", {0, 2}}}, {});
  Vertex v(&b);
  EXPECT_THROW((void)v["a"], TraceError);
  EXPECT_THROW((void)b.param("W"), TraceError);
  EXPECT_NO_THROW((void)v["rows"]);  // no rows (an empty graph) is fine; no features is not
}
