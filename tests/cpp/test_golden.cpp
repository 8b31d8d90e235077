/** \file
 * Golden tests of the C++ front end: GCN, GAT and R-GCN traced with the C++ API must print
 * exactly the GIR text in tests/golden/*.gir, which tests/python/test_golden_ir.py checks for
 * the same models written in Python (tests/python/models.py). So the two front ends cannot
 * drift apart. Each operand is named before it is combined because C++ leaves the evaluation
 * order of operator arguments unspecified, and the trace order is part of the text.
 * Regenerate the files from Python (SEASTAR_UPDATE_GOLDEN=1, see test_golden_ir.py).
 */
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/frontend/builder.h"
#include "core/passes/passes.h"
#include "core/passes/pipeline.h"

#ifndef SEASTAR_GOLDEN_DIR
#error "SEASTAR_GOLDEN_DIR must name the directory of the golden files"
#endif

using namespace seastar;

namespace {

std::string golden(const std::string& name) {
  std::string path = std::string(SEASTAR_GOLDEN_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The shape signature of tests/python/test_golden_ir.py: feature widths F = 3, HEADS = 2,
// OUT = 2 (row counts do not appear in the text) and a graph typed with 4 relations and
// 3 node types.
const GraphSig kTyped{true, true, 3, 4};

// sum(e.src.h * e.w for e in v.in_edges())
Var gcn(Vertex& v) {
  return sum(v.in_edges(), [](const Edge& e) {
    Var h = e.src()["h"];
    Var w = e["w"];
    return h * w;
  });
}

// alpha = softmax(leaky_relu(e.src.el + v.er, 0.2)); sum(alpha * e.src.h)
Var gat(Vertex& v) {
  Var alpha = softmax(v.in_edges(), [&](const Edge& e) {
    Var el = e.src()["el"];
    Var er = v["er"];
    return leaky_relu(el + er, 0.2);
  });
  Edge e = v.in_edges().edge();
  Var h = e.src()["h"];
  return sum(alpha * h);
}

// sum(e.src.h @ W[e.type] * e.norm for e in v.in_edges()) + v.h @ W0
Var rgcn(Vertex& v) {
  Var W = v.param("W");  // parameters are traced first, in signature order
  Var W0 = v.param("W0");
  Var msg = sum(v.in_edges(), [&](const Edge& e) {
    Var h = e.src()["h"];
    Var t = e.type();
    Var Wt = v.builder()->type_index(W, t);
    Var m = matmul(h, Wt);
    Var norm = e["norm"];
    return m * norm;
  });
  Var h = v["h"];
  Var self = matmul(h, W0);
  return msg + self;
}

ir::Module trace_gcn(Builder& b) {
  Vertex v(&b);
  return b.finish({gcn(v)});
}

ir::Module trace_gat(Builder& b) {
  Vertex v(&b);
  return b.finish({gat(v)});
}

}  // namespace

TEST(Golden, GcnTraceMatchesPython) {
  Builder b({{"h", {5, 3}}, {"w", {5, 1}}}, kTyped);
  EXPECT_EQ(ir::print(trace_gcn(b)), golden("gcn.gir"));
}

TEST(Golden, GatTraceMatchesPython) {
  Builder b({{"h", {5, 2, 3}}, {"el", {5, 2, 1}}, {"er", {5, 2, 1}}}, kTyped);
  EXPECT_EQ(ir::print(trace_gat(b)), golden("gat.gir"));
}

TEST(Golden, RgcnTraceMatchesPython) {
  Builder b({{"h", {5, 3}}, {"norm", {5, 1}}, {"W", {4, 3, 2}}, {"W0", {3, 2}}}, kTyped);
  Vertex v(&b);
  EXPECT_EQ(ir::print(b.finish({rgcn(v)})), golden("rgcn.gir"));
}

TEST(Golden, GcnBackwardMatchesPython) {
  Builder b({{"h", {5, 3}}, {"w", {5, 1}}}, kTyped);
  LoweredProgram p = lower(trace_gcn(b), {"h", "w"}, "gcn");
  EXPECT_EQ(ir::print(p.backward, "backward"), golden("gcn.backward.gir"));
}

TEST(Golden, GatBackwardMatchesPython) {
  Builder b({{"h", {5, 2, 3}}, {"el", {5, 2, 1}}, {"er", {5, 2, 1}}}, kTyped);
  LoweredProgram p = lower(trace_gat(b), {"el", "er", "h"}, "gat");  // Python lowers in sorted order
  EXPECT_EQ(ir::print(p.backward, "backward"), golden("gat.backward.gir"));
}
