/** \file IR tests from C++: tracing, printing, typing errors, autodiff structure (simplify: test_simplify.cpp). */
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

TEST(IR, EmptyFeatureAxisIsATraceError) {
  Builder b({{"a", {10, 0}}, {"W", {3, 0}}, {"rows", {0, 2}}}, {});
  Vertex v(&b);
  EXPECT_THROW((void)v["a"], TraceError);
  EXPECT_THROW((void)b.param("W"), TraceError);
  EXPECT_NO_THROW((void)v["rows"]);  // no rows (an empty graph) is fine; no features is not
}
