/** \file
 * simplify: one forward sweep that rebuilds the module, then dead-code elimination.
 *   fold:      op(constant...) -> constant                  (scalar elementwise ops)
 *   identity:  x*1, 1*x, x+0, 0+x, x-0, x/1 -> x;  neg(neg x) -> x;  sum_to/expand to own shape -> x
 *   cse:       two values with the same op, inputs and attributes -> one
 *   reassociate: (a * b) * c -> (a * c) * b when the product a*b is used once and a * c is
 *              smaller than the result (a scalar or per-head factor applied before a broadcast
 *              to the full feature shape, so it is multiplied once per row, not per element)
 *   hoist:     op(gather.G a, gather.G b) -> gather.G(op(a, b)) (also with Param operands): an
 *              elementwise op of values of one endpoint is a vertex value, so the planner may
 *              compute it once per vertex instead of once per edge (GCN's e.src.norm * e.src.h)
 *   factor:    agg_sum.G(gather.G(a) * x) -> keep_pos(a, degree.G) * agg_sum.G(x) (also agg_mean,
 *              and a Param a, taken as it is): a factor of the centre vertex is applied once per
 *              centre after the sum, not once per edge. keep_pos zeroes it at centres without
 *              edges, where it was never read: a hoisted per-centre value is computed there too
 *              and may be inf or NaN (a softmax normaliser over no edges), and a * 0 would be NaN
 *   dce:       values no output reaches are dropped (leaves too, so unused inputs vanish)
 */
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/passes/passes.h"
#include "core/util/errors.h"

namespace seastar::passes {
using namespace ir;

namespace {

bool is_const(const Module& m, int id, double x) {
  const Value& v = m.at(id);
  return v.op == Op::constant && v.p0 == x;
}

std::string key(const Value& v) {
  std::ostringstream os;
  os.precision(17);
  os << static_cast<int>(v.op) << "|" << static_cast<int>(v.group) << "|" << v.p0 << "|" << v.p1 << "|" << v.name
     << "|" << shape_str(v.attr_shape) << "|" << shape_str(v.shape) << "|" << static_cast<int>(v.dtype) << "|"
     << static_cast<int>(v.space) << "|";
  for (int i : v.inputs) os << i << ",";
  return os.str();
}

/// Returns the id `v` can be replaced by, or -1.
int identity(const Module& m, const Value& v) {
  auto same_type = [&](int id) {
    const Value& x = m.at(id);
    return x.shape == v.shape && x.space == v.space && x.dtype == v.dtype;
  };
  if (v.inputs.size() == 2) {
    int a = v.inputs[0], b = v.inputs[1];
    if ((v.op == Op::mul && is_const(m, b, 1)) || ((v.op == Op::add || v.op == Op::sub) && is_const(m, b, 0)) ||
        (v.op == Op::div && is_const(m, b, 1)))
      return same_type(a) ? a : -1;
    if ((v.op == Op::mul && is_const(m, a, 1)) || (v.op == Op::add && is_const(m, a, 0))) return same_type(b) ? b : -1;
  }
  if (v.op == Op::neg && m.at(v.inputs[0]).op == Op::neg) return m.at(v.inputs[0]).inputs[0];
  if ((v.op == Op::sum_to || v.op == Op::expand) && same_type(v.inputs[0])) return v.inputs[0];
  return -1;
}

Module dce(const Module& m) {
  std::vector<char> live(m.size(), 0);
  for (int o : m.outputs) live[o] = 1;
  for (int i = m.size() - 1; i >= 0; --i)
    if (live[i])
      for (int in : m.at(i).inputs) live[in] = 1;
  Module out;
  std::vector<int> remap(m.size(), -1);
  for (int i = 0; i < m.size(); ++i) {
    if (!live[i]) continue;
    Value v = m.at(i);
    for (int& in : v.inputs) in = remap[in];
    remap[i] = out.add(std::move(v));
  }
  for (int o : m.outputs) out.outputs.push_back(remap[o]);
  out.output_names = m.output_names;
  return out;
}

/// For v = mul(p, q) with p or q = mul(a, b) used only by v: the value (x * c) * y with x one of
/// a, b and y the other, when x * c has fewer elements than v; else v unchanged. `uses[id]` counts
/// the uses (in the original module) of the values merged into out's `id`.
Value reassociate(Module& out, const std::vector<int>& uses, Value v) {
  if (v.op != Op::mul || v.inputs.size() != 2) return v;
  for (int side = 0; side < 2; ++side) {
    const int t = v.inputs[side], c = v.inputs[1 - side];
    const Value tv = out.at(t);  // a copy: out.add below may move the values
    if (tv.op != Op::mul || uses[t] != 1 || numel(out.at(c).shape) >= numel(v.shape)) continue;
    int best = -1;
    int64_t best_numel = numel(v.shape);
    for (int k = 0; k < 2; ++k) {
      Shape b;
      if (broadcast_shapes(out.at(tv.inputs[k]).shape, out.at(c).shape, &b) && numel(b) < best_numel)
        best = k, best_numel = numel(b);
    }
    if (best < 0) continue;
    Value u;
    u.op = Op::mul, u.inputs = {tv.inputs[best], c}, u.loc = v.loc, u.id = out.size();
    infer_value(out, u);
    const int ui = out.add(std::move(u));
    Value w = v;
    w.inputs = {ui, tv.inputs[1 - best]}, w.id = out.size();
    infer_value(out, w);
    if (w.shape != v.shape || w.space != v.space) continue;  // (cannot happen: broadcasting is associative)
    return w;
  }
  return v;
}

/// Adds `v` (its id assigned) to `out`, typed; returns its id.
int add_typed(Module& out, Value v) {
  v.id = out.size();
  infer_value(out, v);
  return out.add(std::move(v));
}

/// hoist: for an elementwise v whose operands are gathers through one endpoint (and Param
/// values), the gather of the same op over the gathered vertex values; else v unchanged.
Value hoist(Module& out, Value v) {
  const OpKind kind = op_info(v.op).kind;
  if (kind != OpKind::Unary && kind != OpKind::Binary) return v;
  Group g = Group::None;
  std::vector<int> vertex_inputs;
  for (int in : v.inputs) {
    const Value& x = out.at(in);
    if (x.space == Space::Param) {
      vertex_inputs.push_back(in);
      continue;
    }
    if (x.op != Op::gather || (g != Group::None && x.group != g)) return v;
    g = x.group;
    vertex_inputs.push_back(x.inputs[0]);
  }
  if (g == Group::None) return v;
  Value u = v;
  u.inputs = vertex_inputs;
  const int ui = add_typed(out, std::move(u));
  Value r;
  r.op = Op::gather, r.group = g, r.inputs = {ui}, r.loc = v.loc, r.id = out.size();
  infer_value(out, r);
  return r.shape == v.shape && r.dtype == v.dtype ? r : v;
}

/// factor: for v = agg_sum.G / agg_mean.G of x = mul(p, q) used only by v, with p (or q) a
/// gather of the centre (group G) or a Param value, the product of that factor and the
/// aggregation of the other operand; else v unchanged.
Value factor_centre(Module& out, const std::vector<int>& uses, Value v) {
  if ((v.op != Op::agg_sum && v.op != Op::agg_mean) || uses[v.inputs[0]] != 1) return v;
  const Value x = out.at(v.inputs[0]);  // a copy: out.add below may move the values
  if (x.op != Op::mul) return v;
  for (int side = 0; side < 2; ++side) {
    const Value& f = out.at(x.inputs[side]);
    const bool centre = f.op == Op::gather && f.group == v.group;
    if (!centre && f.space != Space::Param) continue;
    int factor = f.id;
    if (centre) {
      Value deg;
      deg.op = Op::degree, deg.group = v.group, deg.dtype = DType::Float, deg.space = Space::Vertex, deg.loc = v.loc;
      Value kept;
      kept.op = Op::keep_pos, kept.inputs = {f.inputs[0], add_typed(out, std::move(deg))}, kept.loc = v.loc;
      factor = add_typed(out, std::move(kept));
    }
    Value agg = v;
    agg.inputs = {x.inputs[1 - side]};
    const int ai = add_typed(out, std::move(agg));
    Value r;
    r.op = Op::mul, r.inputs = {factor, ai}, r.loc = v.loc, r.id = out.size();
    infer_value(out, r);
    if (r.shape == v.shape && r.space == v.space && r.dtype == v.dtype) return r;
    return v;  // (the aggregation added above is dead and goes with dce)
  }
  return v;
}

}  // namespace

namespace {

/// One sweep of every rule, then dce.
Module sweep(const Module& m) {
  Module out;
  std::vector<int> remap(m.size(), -1);
  std::map<std::string, int> seen;
  std::vector<int> orig_uses(m.size(), 0), uses;
  for (const Value& v : m.values)
    for (int in : v.inputs) ++orig_uses[in];
  for (int o : m.outputs) ++orig_uses[o];
  auto bind = [&](int orig, int to) {
    remap[orig] = to;
    if (static_cast<int>(uses.size()) < out.size()) uses.resize(out.size(), 0);
    uses[to] += orig_uses[orig];
  };
  for (const Value& orig : m.values) {
    Value v = orig;
    for (int& in : v.inputs) in = remap[in];
    if (static_cast<int>(uses.size()) < out.size()) uses.resize(out.size(), 0);
    v = reassociate(out, uses, std::move(v));
    v = hoist(out, std::move(v));
    v = factor_centre(out, uses, std::move(v));
    // constant folding of scalar elementwise ops
    const OpKind kind = op_info(v.op).kind;
    if ((kind == OpKind::Unary || kind == OpKind::Binary) && v.op != Op::eq) {
      bool all_const = true;
      for (int in : v.inputs) all_const = all_const && out.at(in).op == Op::constant;
      double r;
      if (all_const && eval_elementwise(v.op, out.at(v.inputs[0]).p0, v.inputs.size() > 1 ? out.at(v.inputs[1]).p0 : 0, v.p0, v.p1, &r)) {
        Value c;
        c.op = Op::constant, c.dtype = DType::Float, c.space = Space::Param, c.p0 = r, c.loc = v.loc;
        v = c;
      }
    }
    if (v.op != Op::constant && op_info(v.op).kind != OpKind::Leaf) {
      int same = identity(out, v);
      if (same >= 0) {
        bind(orig.id, same);
        continue;
      }
    }
    std::string k = key(v);
    auto it = seen.find(k);
    if (it != seen.end()) {
      bind(orig.id, it->second);
      continue;
    }
    const int id = out.add(std::move(v));
    seen[k] = id;
    bind(orig.id, id);
  }
  for (int o : m.outputs) out.outputs.push_back(remap[o]);
  out.output_names = m.output_names;
  return dce(out);
}

}  // namespace

Module simplify(const Module& m) {
  // a rewrite can enable another on values the sweep has passed (a hoisted product of a
  // constant 1): sweep until nothing changes (a few sweeps; each one only shrinks or moves work)
  Module cur = sweep(m);
  for (int i = 0; i < 4; ++i) {
    Module next = sweep(cur);
    const bool same = ir::print(next) == ir::print(cur);
    cur = std::move(next);
    if (same) break;
  }
  return cur;
}

Module with_outputs(const Module& m, const std::vector<int>& outputs, const std::vector<std::string>& names) {
  Module r = m;
  r.outputs = outputs;
  r.output_names = names;
  return r;
}

}  // namespace seastar::passes
