/** \file place_outputs: which kernel computes each output (epilogues, maps); see plan.h. */
#include "codegen/plan.h"

#include <algorithm>
#include <set>

namespace seastar::codegen {
using namespace ir;

void place_outputs(FusedPlan& p, const std::vector<Group>& sides) {
  const Module& m = p.module;
  const bool bipartite = p.bipartite;
  // outputs that are not reduction results are computed by a final per-vertex / per-edge /
  // parameter map
  Kernel vmap{Kernel::Kind::VertexMap, Group::None, {}, {}, Group::Dst},
      vmap_src{Kernel::Kind::VertexMap, Group::None, {}, {}, Group::Src},
      emap{Kernel::Kind::EdgeMap, Group::None, {}}, pmap{Kernel::Kind::ParamMap, Group::None, {}};
  // a vertex output that reads only centre values, the latest of them results of one traversal,
  // is computed by that traversal right after its last pass for each centre
  auto epilogue_kernel = [&](int o) -> int {
    int last = -1;
    bool centre_only = true;
    visit_inputs(m, {o}, [&](const Value& v) {
      if (!centre_only) return false;
      if (is_reduction(v)) {
        if (is_row_reduction(v) || v.space != Space::Vertex) centre_only = false;
        for (size_t k = 0; k < p.kernels.size(); ++k)
          if (std::count(p.kernels[k].values.begin(), p.kernels[k].values.end(), v.id))
            last = std::max(last, static_cast<int>(k));
        return false;
      }
      if (v.space == Space::Edge || v.op == Op::gather || op_info(v.op).kind == OpKind::Other) centre_only = false;
      return centre_only;
    });
    if (!centre_only || last < 0 || p.kernels[last].kind != Kernel::Kind::Traverse) return -1;
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
  for (Kernel* k : {&vmap, &vmap_src, &emap, &pmap})
    if (!k->values.empty()) p.kernels.push_back(*k);

  // the aggregations of a traversal that nothing but its own epilogue reads: an emitter may hand
  // the epilogue the accumulator and leave the buffer unwritten, so nothing another kernel
  // computes (a reduction's input, another epilogue, a map) may reach them, not even through a
  // subexpression it shares with this epilogue
  std::vector<std::vector<int>> users(m.size());
  for (const Value& v : m.values)
    for (int in : v.inputs) users[in].push_back(v.id);
  const std::set<int> outs(m.outputs.begin(), m.outputs.end());
  for (size_t ki = 0; ki < p.kernels.size(); ++ki) {
    Kernel& k = p.kernels[ki];
    if (k.kind != Kernel::Kind::Traverse || k.epilogue.empty()) continue;
    std::vector<int> elsewhere;  // what the other computations read
    for (size_t kj = 0; kj < p.kernels.size(); ++kj) {
      const Kernel& o = p.kernels[kj];
      for (int v : o.values) {
        const Value& x = m.at(v);
        if (is_reduction(x)) {
          elsewhere.insert(elsewhere.end(), x.inputs.begin(), x.inputs.end());
        } else {
          elsewhere.push_back(v);
        }
      }
      if (kj != ki) elsewhere.insert(elsewhere.end(), o.epilogue.begin(), o.epilogue.end());
    }
    std::set<int> read_elsewhere;
    visit_inputs(m, elsewhere, [&](const Value& v) {
      if (!is_reduction(v)) return true;
      read_elsewhere.insert(v.id);
      return false;
    });
    for (int a : k.values)
      if (!is_row_reduction(m.at(a)) && !outs.count(a) && !users[a].empty() && !read_elsewhere.count(a))
        k.epilogue_only.push_back(a);
  }
}

}  // namespace seastar::codegen
