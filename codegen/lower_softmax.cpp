/** \file lower_softmax: softmax as max, exp, sum and divide, or one online pass; see plan.h. */
#include "codegen/plan.h"

#include <map>

#include "core/passes/passes.h"

namespace seastar::codegen {
using namespace ir;

namespace {

/// For softmax value `y`: the agg_sum.G(y * f) nodes that consume it, or empty when y has any
/// other use (then the online form does not apply and y is computed in three passes).
std::vector<int> online_uses(const Module& m, int y, const std::vector<std::vector<int>>& users) {
  std::vector<int> sums;
  for (int o : m.outputs)
    if (o == y) return {};
  for (int u : users[y]) {
    const Value& mul = m.at(u);
    if (mul.op != Op::mul || mul.inputs[0] == mul.inputs[1] || users[u].empty()) return {};
    for (int o : m.outputs)
      if (o == u) return {};
    for (int a : users[u]) {
      const Value& agg = m.at(a);
      if (agg.op != Op::agg_sum || agg.group != m.at(y).group) return {};
      sums.push_back(a);
    }
  }
  return sums;
}

}  // namespace

Module lower_softmax(const Module& m) {
  std::vector<std::vector<int>> users(m.size());
  for (const Value& v : m.values)
    for (int in : v.inputs) users[in].push_back(v.id);
  // online form: agg_sum.G(softmax.G(s) * f) -> agg_softmax_sum.G(s, f), one pass over the edges
  std::map<int, int> online;  // agg_sum id -> softmax id
  for (const Value& v : m.values)
    if (v.op == Op::softmax)
      for (int a : online_uses(m, v.id, users)) online[a] = v.id;

  Module out;
  std::vector<int> remap(m.size(), -1);
  auto add = [&](Op op, std::vector<int> ins, Group g, const Loc& loc) {
    Value v;
    v.op = op, v.inputs = std::move(ins), v.group = g, v.loc = loc, v.id = out.size();
    infer_value(out, v);
    return out.add(std::move(v));
  };
  for (const Value& orig : m.values) {
    auto on = online.find(orig.id);
    if (on != online.end()) {
      const Value& mul = m.at(orig.inputs[0]);
      int f = mul.inputs[0] == on->second ? mul.inputs[1] : mul.inputs[0];
      int s = remap[m.at(on->second).inputs[0]];
      remap[orig.id] = add(Op::agg_softmax_sum, {s, remap[f]}, orig.group, orig.loc);
      continue;
    }
    if (orig.op != Op::softmax) {
      Value v = orig;
      for (int& in : v.inputs) in = remap[in];
      remap[orig.id] = out.add(std::move(v));
      continue;
    }
    int s = remap[orig.inputs[0]];
    int mx = add(Op::agg_max, {s}, orig.group, orig.loc);
    int ex = add(Op::exp, {add(Op::sub, {s, add(Op::gather, {mx}, orig.group, orig.loc)}, Group::None, orig.loc)},
                 Group::None, orig.loc);
    int z = add(Op::agg_sum, {ex}, orig.group, orig.loc);
    remap[orig.id] = add(Op::div, {ex, add(Op::gather, {z}, orig.group, orig.loc)}, Group::None, orig.loc);
  }
  for (int o : m.outputs) out.outputs.push_back(remap[o]);
  out.output_names = m.output_names;
  return out;
}

}  // namespace seastar::codegen
