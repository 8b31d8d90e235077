/** \file The cost model that decides which vertex expressions to store; see materialize.h. */
#include "codegen/materialize.h"

#include <set>

#include "codegen/cost_model.h"
#include "codegen/plan.h"

namespace seastar::codegen {
using namespace ir;
using namespace cost;

namespace {

/// What X reads and computes: its distinct Vertex leaves and its elementwise op count (times
/// the elements of each op); `pure` is false when X reads anything but bound tensors and
/// constants (an aggregation, a typed table, an edge value).
struct Expr {
  std::set<int> leaves;
  double flops = 0;
  bool pure = true;
};

void walk(const Module& m, int id, Expr& e, std::set<int>& seen) {
  if (!seen.insert(id).second) return;
  const Value& v = m.at(id);
  const OpKind kind = op_info(v.op).kind;
  if (v.space == Space::Param && (v.op == Op::param || v.op == Op::constant)) return;
  if (v.op == Op::input_vertex || v.op == Op::grad_output) {
    e.leaves.insert(id);
    return;
  }
  if (v.space != Space::Vertex || (kind != OpKind::Unary && kind != OpKind::Binary)) {
    e.pure = false;
    return;
  }
  e.flops += static_cast<double>(numel(v.shape));
  for (int in : v.inputs) walk(m, in, e, seen);
}

bool worth_storing(const Module& m, int x) {
  Expr e;
  std::set<int> seen;
  walk(m, x, e, seen);
  if (!e.pure || e.leaves.empty()) return false;
  double operand_lines = 0;
  for (int l : e.leaves) operand_lines += lines(m.at(l));
  const double per_edge_saving = (operand_lines - lines(m.at(x))) * kRandomLine + e.flops * kFlop;
  const double per_vertex_cost = (operand_lines + lines(m.at(x))) * kStreamLine + e.flops * kFlop;
  return kAssumedDegree * per_edge_saving > per_vertex_cost;
}

}  // namespace

std::vector<int> materialize_vertex_values(const Module& m) {
  // the vertex expressions read at the far end of some traversal: X in gather.G(X) consumed
  // (without passing another reduction) by a reduction over the other endpoint
  std::set<int> far;
  for (const Value& r : m.values) {
    if (op_info(r.op).kind != OpKind::Aggregate) continue;
    visit_inputs(m, r.inputs, [&](const Value& v) {
      if (is_reduction(v)) return false;
      if (v.op == Op::gather) {
        const Value& x = m.at(v.inputs[0]);
        const OpKind k = op_info(x.op).kind;
        if (v.group != r.group && (k == OpKind::Unary || k == OpKind::Binary)) far.insert(x.id);
        return false;  // the centre's side is computed once per centre anyway
      }
      return true;
    });
  }
  std::vector<int> out;
  for (int x : far)
    if (worth_storing(m, x)) out.push_back(x);
  return out;
}

std::vector<Kernel> precompute_kernels(const std::vector<int>& stored, const std::vector<Group>& sides) {
  std::vector<Kernel> first;  // one per side, each computing that side's stored values
  for (Group side : {Group::Dst, Group::Src}) {
    Kernel k{Kernel::Kind::VertexMap, Group::None, {}, {}, side};
    k.precompute = true;
    for (int x : stored)
      if ((sides[x] == Group::Src) == (side == Group::Src)) k.values.push_back(x);
    if (!k.values.empty()) first.push_back(k);
  }
  return first;
}

}  // namespace seastar::codegen
