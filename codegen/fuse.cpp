/** \file lower_softmax, fuse and plan_materialization; see fuse.h. */
#include "codegen/fuse.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/passes/passes.h"
#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

std::string unsupported_reason(const Module& m) {
  for (const Value& v : m.values) {
    switch (v.op) {
      case Op::sum_rows: case Op::sum_rows_typed: case Op::outer:
        return std::string("the fused CPU backend does not yet reduce parameter gradients over all rows ('") +
               op_info(v.op).name + "' at " + v.loc.str() + "); compute x @ W outside the program or use "
               "backend='reference'";
      default:
        break;
    }
  }
  for (int o : m.outputs)
    if (m.at(o).space == Space::Param) return "a Param-space output";
  return "";
}

Module lower_softmax(const Module& m) {
  Module out;
  std::vector<int> remap(m.size(), -1);
  auto add = [&](Op op, std::vector<int> ins, Group g, const Loc& loc) {
    Value v;
    v.op = op, v.inputs = std::move(ins), v.group = g, v.loc = loc, v.id = out.size();
    passes::infer_value(out, v);
    return out.add(std::move(v));
  };
  for (const Value& orig : m.values) {
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

namespace {

bool is_agg(const Value& v) { return op_info(v.op).kind == OpKind::Aggregate; }

/// Aggregations reachable from `id`'s inputs without passing through another aggregation.
void agg_deps(const Module& m, int id, std::set<int>& out, std::set<int>& seen) {
  for (int in : m.at(id).inputs) {
    if (!seen.insert(in).second) continue;
    if (is_agg(m.at(in))) {
      out.insert(in);
    } else {
      agg_deps(m, in, out, seen);
    }
  }
}

}  // namespace

FusedPlan plan(const Module& input) {
  FusedPlan p;
  p.module = passes::simplify(lower_softmax(input));
  const Module& m = p.module;

  // fuse: repeatedly take every aggregation whose aggregation inputs are done; one kernel per group
  std::vector<int> pending;
  std::map<int, std::set<int>> deps;
  for (const Value& v : m.values)
    if (is_agg(v)) {
      pending.push_back(v.id);
      std::set<int> seen;
      agg_deps(m, v.id, deps[v.id], seen);
    }
  std::set<int> done;
  while (!pending.empty()) {
    Kernel kd{Kernel::Kind::Traverse, Group::Dst, {}}, ks{Kernel::Kind::Traverse, Group::Src, {}};
    std::vector<int> rest;
    for (int a : pending) {
      bool ready = std::all_of(deps[a].begin(), deps[a].end(), [&](int d) { return done.count(d) > 0; });
      if (!ready) {
        rest.push_back(a);
        continue;
      }
      (m.at(a).group == Group::Dst ? kd : ks).values.push_back(a);
    }
    if (rest.size() == pending.size()) SEASTAR_THROW(ValueError, "fuse: cyclic aggregation dependencies");
    for (Kernel* k : {&kd, &ks})
      if (!k->values.empty()) {
        p.kernels.push_back(*k);
        done.insert(k->values.begin(), k->values.end());
      }
    pending = rest;
  }

  // outputs that are not aggregation results are computed by a final per-vertex / per-edge map
  Kernel vmap{Kernel::Kind::VertexMap, Group::None, {}}, emap{Kernel::Kind::EdgeMap, Group::None, {}};
  for (int o : m.outputs) {
    if (is_agg(m.at(o))) continue;
    (m.at(o).space == Space::Edge ? emap : vmap).values.push_back(o);
  }
  if (!vmap.values.empty()) p.kernels.push_back(vmap);
  if (!emap.values.empty()) p.kernels.push_back(emap);

  // plan_materialization: leaves that are bound tensors, aggregation results, outputs
  std::set<int> has_buffer;
  auto add_buffer = [&](Buffer b) {
    if (has_buffer.insert(b.value).second) p.buffers.push_back(std::move(b));
  };
  for (const Value& v : m.values) {
    if (v.op == Op::input_vertex || v.op == Op::input_edge || v.op == Op::param)
      add_buffer({Buffer::Role::Input, v.id, v.name, -1, v.space, numel(v.shape), false});
    if (v.op == Op::grad_output)
      add_buffer({Buffer::Role::GradOutput, v.id, "", static_cast<int>(v.p0), v.space, numel(v.shape), false});
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const Value& v = m.at(m.outputs[i]);
    // an output that is also an input, or is returned twice, still gets a tensor of its own
    p.buffers.push_back({Buffer::Role::Output, v.id, "", static_cast<int>(i), v.space, numel(v.shape), false});
    has_buffer.insert(v.id);
  }
  for (const Value& v : m.values)
    if (is_agg(v)) add_buffer({Buffer::Role::Intermediate, v.id, "", -1, Space::Vertex, numel(v.shape), v.dtype == DType::Int});
  return p;
}

}  // namespace seastar::codegen
