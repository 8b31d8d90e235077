/** \file lower_softmax, fuse and plan_materialization; see fuse.h. */
#include "codegen/fuse.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "codegen/materialize.h"
#include "core/passes/passes.h"
#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

std::string unsupported_reason(const Module& m) {
  for (const Value& v : m.values)
    if (v.op == Op::fmax && v.space == Space::Param)
      return "a feature max of a parameter";  // no kernel computes Param-space reductions yet
  return "";
}

bool is_row_reduction(const Value& v) { return v.op == Op::sum_rows || v.op == Op::sum_rows_typed; }

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
    passes::infer_value(out, v);
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

namespace {

bool is_agg(const Value& v) { return op_info(v.op).kind == OpKind::Aggregate; }
/// Values a traversal kernel computes and stores: aggregations and reductions over all rows.
bool is_reduction(const Value& v) { return is_agg(v) || is_row_reduction(v); }

/// The reductions a reduction reads (without passing through another reduction), split by
/// where a traversal of `group` reads them: at the centre vertex, or anywhere else.
struct Deps {
  std::set<int> centre, far;
};

void walk_deps(const Module& m, int id, bool centre, Group group, Deps& out, std::set<std::pair<int, bool>>& seen) {
  if (!seen.insert({id, centre}).second) return;
  const Value& v = m.at(id);
  if (is_reduction(v)) {
    // a Param-space total is only complete when every row has been visited
    (centre && v.space == Space::Vertex ? out.centre : out.far).insert(id);
    return;
  }
  for (int in : v.inputs)
    walk_deps(m, in, v.op == Op::gather ? centre && v.group == group : centre, group, out, seen);
}

Deps reduction_deps(const Module& m, int id, Group group) {
  Deps d;
  std::set<std::pair<int, bool>> seen;
  for (int in : m.at(id).inputs) walk_deps(m, in, true, group, d, seen);
  return d;
}

}  // namespace

FusedPlan plan(const Module& input, bool bipartite) {
  FusedPlan p;
  p.module = passes::simplify(lower_softmax(input));
  p.bipartite = bipartite;
  const Module& m = p.module;
  const std::vector<Group> sides = passes::vertex_sides(m, bipartite);
  // a reduction over every row of a Vertex value runs in a traversal of that value's vertex set
  // (on a bipartite graph the two sets differ); one over edges or a square graph's vertices
  // joins any traversal
  auto rows_group = [&](const Value& v) {
    const Value& x = m.at(v.inputs[0]);
    return bipartite && x.space == Space::Vertex ? sides[x.id] : Group::None;
  };

  // fuse: kernels are formed one group at a time. A reduction joins the kernel being formed
  // when every reduction it reads through a *far* endpoint (the neighbour) is complete in an
  // earlier kernel, and every one it reads at the *centre* is complete or in this kernel at an
  // earlier pass: a later pass re-traverses the centre's edges after the earlier pass finished
  // for that centre. A reduction over all rows (a parameter gradient) joins any traversal.
  std::vector<int> pending;
  std::map<std::pair<int, Group>, Deps> deps;
  for (const Value& v : m.values)
    if (is_reduction(v)) pending.push_back(v.id);
  auto deps_of = [&](int a, Group g) -> const Deps& {
    auto key = std::make_pair(a, g);
    auto it = deps.find(key);
    if (it == deps.end()) it = deps.emplace(key, reduction_deps(m, a, g)).first;
    return it->second;
  };
  std::set<int> done;
  while (!pending.empty()) {
    bool progress = false;
    for (Group g : {Group::Dst, Group::Src}) {
      Kernel k{Kernel::Kind::Traverse, g, {}, {}, g};
      std::set<int> in_kernel;
      for (int pass = 0;; ++pass) {
        std::vector<int> added;
        for (int a : pending) {
          const Value& av = m.at(a);
          if (in_kernel.count(a) || (!is_row_reduction(av) && av.group != g)) continue;
          if (is_row_reduction(av) && rows_group(av) != Group::None && rows_group(av) != g) continue;
          const Deps& d = deps_of(a, g);
          bool ok = std::all_of(d.far.begin(), d.far.end(), [&](int x) { return done.count(x) > 0; }) &&
                    std::all_of(d.centre.begin(), d.centre.end(),
                                [&](int x) { return done.count(x) > 0 || in_kernel.count(x) > 0; });
          if (ok) added.push_back(a);
        }
        if (added.empty()) break;
        for (int a : added) {
          k.values.push_back(a);
          k.pass.push_back(pass);
        }
        in_kernel.insert(added.begin(), added.end());
      }
      if (k.values.empty()) continue;
      progress = true;
      p.kernels.push_back(k);
      done.insert(in_kernel.begin(), in_kernel.end());
      std::vector<int> rest;
      for (int a : pending)
        if (!in_kernel.count(a)) rest.push_back(a);
      pending = rest;
    }
    if (!progress) SEASTAR_THROW(ValueError, "fuse: cyclic reduction dependencies");
  }

  // vertex expressions worth storing are computed before every traversal, one kernel per side
  const std::vector<int> stored = materialize_vertex_values(m);
  {
    std::vector<Kernel> first;
    for (Group side : {Group::Dst, Group::Src}) {
      Kernel k{Kernel::Kind::VertexMap, Group::None, {}, {}, side};
      k.precompute = true;
      for (int x : stored)
        if ((sides[x] == Group::Src) == (side == Group::Src)) k.values.push_back(x);
      if (!k.values.empty()) first.push_back(k);
    }
    p.kernels.insert(p.kernels.begin(), first.begin(), first.end());
  }

  // outputs that are not reduction results are computed by a final per-vertex / per-edge /
  // parameter map
  Kernel vmap{Kernel::Kind::VertexMap, Group::None, {}, {}, Group::Dst},
      vmap_src{Kernel::Kind::VertexMap, Group::None, {}, {}, Group::Src},
      emap{Kernel::Kind::EdgeMap, Group::None, {}}, pmap{Kernel::Kind::ParamMap, Group::None, {}};
  // a vertex output that reads only centre values, the latest of them results of one traversal,
  // is computed by that traversal right after its last pass for each centre
  auto epilogue_kernel = [&](int o) -> int {
    int last = -1;
    std::vector<int> stack{o};
    std::set<int> seen;
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (!seen.insert(id).second) continue;
      const Value& v = m.at(id);
      if (is_reduction(v)) {
        if (is_row_reduction(v) || v.space != Space::Vertex) return -1;
        for (size_t k = 0; k < p.kernels.size(); ++k)
          if (std::count(p.kernels[k].values.begin(), p.kernels[k].values.end(), id))
            last = std::max(last, static_cast<int>(k));
        continue;
      }
      if (v.space == Space::Edge || v.op == Op::gather || op_info(v.op).kind == OpKind::Other) return -1;
      stack.insert(stack.end(), v.inputs.begin(), v.inputs.end());
    }
    if (last < 0 || p.kernels[last].kind != Kernel::Kind::Traverse) return -1;
    if (bipartite && p.kernels[last].side != (sides[o] == Group::Src ? Group::Src : Group::Dst)) return -1;
    return last;
  };
  for (int o : m.outputs) {
    const Value& v = m.at(o);
    if (is_reduction(v)) continue;
    if (v.space == Space::Vertex) {
      const int k = epilogue_kernel(o);
      if (k >= 0) {
        p.kernels[k].epilogue.push_back(o);
        continue;
      }
    }
    Kernel& vm = sides[o] == Group::Src ? vmap_src : vmap;
    (v.space == Space::Edge ? emap : v.space == Space::Vertex ? vm : pmap).values.push_back(o);
  }
  // the aggregations of a traversal that nothing but its own epilogue reads
  {
    std::vector<std::vector<int>> users(m.size());
    for (const Value& v : m.values)
      for (int in : v.inputs) users[in].push_back(v.id);
    std::set<int> outs(m.outputs.begin(), m.outputs.end());
    for (Kernel& k : p.kernels) {
      if (k.kind != Kernel::Kind::Traverse || k.epilogue.empty()) continue;
      std::set<int> in_epilogue;  // the values the epilogue computes (not through a reduction)
      std::vector<int> stack(k.epilogue.begin(), k.epilogue.end());
      while (!stack.empty()) {
        const int id = stack.back();
        stack.pop_back();
        if (is_reduction(m.at(id)) || !in_epilogue.insert(id).second) continue;
        stack.insert(stack.end(), m.at(id).inputs.begin(), m.at(id).inputs.end());
      }
      for (int a : k.values) {
        if (is_row_reduction(m.at(a)) || outs.count(a) || users[a].empty()) continue;
        if (std::all_of(users[a].begin(), users[a].end(), [&](int u) { return in_epilogue.count(u) > 0; }))
          k.epilogue_only.push_back(a);
      }
    }
  }
  for (Kernel* k : {&vmap, &vmap_src, &emap, &pmap})
    if (!k->values.empty()) p.kernels.push_back(*k);

  // plan_materialization: leaves that are bound tensors, aggregation results, outputs
  auto side_of = [&](const Value& v) { return v.space == Space::Vertex ? sides[v.id] : Group::Dst; };
  std::set<int> has_buffer;
  auto add_buffer = [&](Buffer b) {
    if (has_buffer.insert(b.value).second) p.buffers.push_back(std::move(b));
  };
  for (const Value& v : m.values) {
    if (v.op == Op::input_vertex || v.op == Op::input_edge || v.op == Op::param)
      add_buffer({Buffer::Role::Input, v.id, v.name, -1, v.space, numel(v.shape), false, side_of(v)});
    if (v.op == Op::grad_output)
      add_buffer(
          {Buffer::Role::GradOutput, v.id, "", static_cast<int>(v.p0), v.space, numel(v.shape), false, side_of(v)});
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const Value& v = m.at(m.outputs[i]);
    // an output that is also an input, or is returned twice, still gets a tensor of its own
    p.buffers.push_back(
        {Buffer::Role::Output, v.id, "", static_cast<int>(i), v.space, numel(v.shape), false, side_of(v)});
    has_buffer.insert(v.id);
  }
  for (const Value& v : m.values)
    if (is_reduction(v))
      add_buffer({Buffer::Role::Intermediate, v.id, "", -1, v.space, numel(v.shape), v.dtype == DType::Int,
                  side_of(v)});
  for (int x : stored) {
    const Value& v = m.at(x);
    add_buffer({Buffer::Role::Intermediate, x, "", -1, v.space, numel(v.shape), v.dtype == DType::Int, side_of(v)});
  }
  return p;
}

}  // namespace seastar::codegen
