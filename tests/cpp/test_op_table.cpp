/** \file Every op of core/ir/ops.def through the table, the printer, typing, lowering (autodiff)
 * and both emitters: an op added to the table that one of them does not handle fails here (and,
 * for a switch over Op, fails to build). */
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "codegen/cpu_emitter.h"
#include "codegen/cuda_emitter.h"
#include "codegen/plan.h"
#include "core/frontend/builder.h"
#include "core/passes/passes.h"
#include "core/passes/pipeline.h"
#include "core/util/errors.h"

using namespace seastar;

namespace {

bool elementwise(const ir::OpInfo& info) { return info.kind == ir::OpKind::Unary || info.kind == ir::OpKind::Binary; }

// Parameters inside each op's domain, so that the lowered program stays finite.
double param(ir::Op op, int i) {
  if (op == ir::Op::clamp || op == ir::Op::inside) return i == 0 ? -0.5 : 0.5;
  if (op == ir::Op::softplus) return i == 0 ? 2.0 : 20.0;
  return 0.3;
}

// sum over in-edges of op(h[src]) (or op(h[src], g[dst])) for one elementwise op.
ir::Module program_of(ir::Op op) {
  const ir::OpInfo& info = ir::op_info(op);
  Builder b({{"h", {6, 3}}, {"g", {6, 3}}, {"t", {6}}}, {});
  Vertex v(&b);
  Edge e = v.in_edges().edge();
  Var x = e.src()["h"];
  double p0 = info.params.size() > 0 ? param(op, 0) : 0, p1 = info.params.size() > 1 ? param(op, 1) : 0;
  Var y;
  if (op == ir::Op::cast) {
    y = b.unary(op, e.id(), p0, p1) * x;  // cast reads an integer
  } else if (info.kind == ir::OpKind::Binary) {
    y = b.binary(op, x, v["g"]);
  } else {
    y = b.unary(op, x, p0, p1);
  }
  return b.finish({sum(y)});
}

}  // namespace

TEST(OpTable, NamesRoundTripAndParametersAreWellFormed) {
  std::set<std::string> names;
  for (int i = 0; i < ir::num_ops(); ++i) {
    const ir::Op op = static_cast<ir::Op>(i);
    const ir::OpInfo& info = ir::op_info(op);
    ir::Op back;
    ASSERT_TRUE(ir::op_from_name(info.name, &back)) << info.name;
    EXPECT_EQ(back, op);
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate " << info.name;
    EXPECT_LE(info.params.size(), 2u) << info.name;
    EXPECT_EQ(elementwise(info), std::string(info.c_expr) != "") << info.name << ": expr";
    EXPECT_EQ(elementwise(info), std::string(info.torch_ref) != "") << info.name << ": reference";
    EXPECT_EQ(info.is_public, std::string(info.doc) != "") << info.name << ": a public op has a docstring";
    if (info.is_public) EXPECT_TRUE(elementwise(info)) << info.name << ": public ops are elementwise";
  }
  ir::Op none;
  EXPECT_FALSE(ir::op_from_name("no_such_op", &none));
}

TEST(OpTable, ConstantFoldingEvaluatesTheTableExpression) {
  double r = 0;
  ASSERT_TRUE(ir::eval_elementwise(ir::Op::softplus, 0.5, 0, 1, 20, &r));
  EXPECT_DOUBLE_EQ(r, std::log1p(std::exp(0.5)));
  ASSERT_TRUE(ir::eval_elementwise(ir::Op::softplus, 30, 0, 1, 20, &r));
  EXPECT_EQ(r, 30);  // above the threshold: x itself
  ASSERT_TRUE(ir::eval_elementwise(ir::Op::leaky_relu, -2, 0, 0.1, 0, &r));
  EXPECT_DOUBLE_EQ(r, -0.2);
  ASSERT_TRUE(ir::eval_elementwise(ir::Op::maximum, 1, 3, 0, 0, &r));
  EXPECT_EQ(r, 3);
  EXPECT_FALSE(ir::eval_elementwise(ir::Op::agg_sum, 1, 0, 0, 0, &r));
  EXPECT_FALSE(ir::eval_elementwise(ir::Op::gather, 1, 0, 0, 0, &r));
}

TEST(OpTable, EveryElementwiseOpPrintsLowersAndEmits) {
  int checked = 0;
  for (int i = 0; i < ir::num_ops(); ++i) {
    const ir::Op op = static_cast<ir::Op>(i);
    const ir::OpInfo& info = ir::op_info(op);
    if (!elementwise(info)) continue;
    SCOPED_TRACE(info.name);
    ir::Module m = program_of(op);
    passes::verify(m);
    const std::string text = ir::print(m);
    EXPECT_NE(text.find(std::string(" = ") + info.name + " "), std::string::npos) << text;
    if (!info.params.empty()) EXPECT_NE(text.find(" {"), std::string::npos) << text;  // prints its parameters
    const std::vector<std::string> wrt = info.kind == ir::OpKind::Binary ? std::vector<std::string>{"h", "g"}
                                                                         : std::vector<std::string>{"h"};
    LoweredProgram p = lower(m, wrt, std::string("op_") + info.name);
    for (const ir::Module* mod : {&p.forward, &p.backward}) {
      if (mod->outputs.empty()) continue;  // a piecewise-constant op has no gradient program
      codegen::FusedPlan plan = codegen::plan(*mod);
      codegen::EmitOptions opt;
      opt.float_type = "double", opt.name = std::string("op_") + info.name;
      EXPECT_NE(codegen::emit_cpu(plan, opt).find("seastar_entry"), std::string::npos);
      EXPECT_NE(codegen::emit_cuda(plan, opt).source.find("__global__"), std::string::npos);
    }
    ++checked;
  }
  EXPECT_GE(checked, 28);  // the table has 28 today: nothing was skipped
}

TEST(OpTable, TheBuilderFillsDefaultsAndChecksParameters) {
  Builder b({{"h", {4, 2}}}, {});
  b.set_loc({"model.py", 7});
  Vertex v(&b);
  Var x = v["h"];
  EXPECT_EQ(leaky_relu(x).value().p0, 0.01);  // the row's default
  EXPECT_EQ(leaky_relu(x, 0.2).value().p0, 0.2);
  EXPECT_EQ(softplus(x).value().p1, 20);
  EXPECT_EQ(softplus(x, 2).value().p0, 2);
  try {
    clamp(x, 1.0);
    FAIL() << "clamp without max traced";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("model.py:7: clamp(x, min, max) needs 'max'"), std::string::npos) << e.what();
  }
  try {
    leaky_relu(x, 0.1, 0.2);
    FAIL() << "a third parameter traced";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("leaky_relu(x, negative_slope=0.01) takes 1 parameters"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(clamp(x, 1.0, 0.0), TraceError);
  EXPECT_THROW(softplus(x, 0.0), TraceError);
  EXPECT_THROW(b.elementwise(ir::Op::step, {x}, {}), TraceError);  // internal: not a user function
}
