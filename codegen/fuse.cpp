/** \file fuse: the traversal kernels of a module; see plan.h. */
#include "codegen/plan.h"

#include <algorithm>
#include <map>
#include <set>

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

bool is_reduction(const Value& v) { return op_info(v.op).kind == OpKind::Aggregate || is_row_reduction(v); }

namespace {

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

std::vector<Kernel> fuse(const Module& m, const std::vector<Group>& sides, bool bipartite) {
  std::vector<Kernel> kernels;
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
      kernels.push_back(k);
      done.insert(in_kernel.begin(), in_kernel.end());
      std::vector<int> rest;
      for (int a : pending)
        if (!in_kernel.count(a)) rest.push_back(a);
      pending = rest;
    }
    if (!progress) SEASTAR_THROW(ValueError, "fuse: cyclic reduction dependencies");
  }

  return kernels;
}

}  // namespace seastar::codegen
