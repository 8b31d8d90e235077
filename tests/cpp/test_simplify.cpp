/** \file
 * The simplify pass (core/passes/simplify.cpp) on small traced programs: constant folding and
 * merging duplicates, where a product's factors are applied (before a broadcast, at the vertex,
 * after the sum), and what it must leave alone.
 */
#include <gtest/gtest.h>

#include "core/frontend/builder.h"
#include "core/passes/passes.h"

using namespace seastar;

TEST(Simplify, FoldsAndMergesDuplicates) {
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

TEST(Simplify, AppliesASmallFactorBeforeTheBroadcast) {
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

TEST(Simplify, KeepsAProductThatIsUsedTwice) {
  Builder b({{"s", {30, 4, 1}}, {"x", {10, 1, 8}}, {"w", {30, 1}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  Var t = e["s"] * e.src()["x"];
  ir::Module m = passes::simplify(b.finish({sum(t * e["w"] + t)}));
  const std::string text = ir::print(m);
  EXPECT_EQ(count(text, ": Edge f[4, 1]\n"), 1) << text;  // only s: no s * w
}

TEST(Simplify, HoistsAProductOfOneEndpointToTheVertex) {
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

TEST(Simplify, AppliesACentreFactorAfterTheSum) {
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
