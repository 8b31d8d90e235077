/** \file plan: the back half of lowering, step by step; see fuse.h. */
#include "codegen/fuse.h"
#include "codegen/materialize.h"
#include "core/passes/passes.h"

namespace seastar::codegen {
using namespace ir;

FusedPlan plan(const Module& input, bool bipartite) {
  FusedPlan p;
  p.bipartite = bipartite;
  p.module = passes::simplify(lower_softmax(input));                 // lower_softmax.cpp
  const std::vector<Group> sides = passes::vertex_sides(p.module, bipartite);
  p.kernels = fuse(p.module, sides, bipartite);                       // fuse.cpp
  const std::vector<int> stored = materialize_vertex_values(p.module);  // materialize.cpp
  const std::vector<Kernel> first = precompute_kernels(stored, sides);
  p.kernels.insert(p.kernels.begin(), first.begin(), first.end());
  place_outputs(p, sides);                                            // place_outputs.cpp
  p.buffers = plan_buffers(p.module, stored, sides);                  // plan_buffers.cpp
  return p;
}

}  // namespace seastar::codegen
