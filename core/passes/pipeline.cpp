/** \file The lowering steps in order, with dumps; see pipeline.h. */
#include "core/passes/pipeline.h"

#include "core/passes/passes.h"
#include "core/util/dumps.h"

namespace seastar {

namespace {

void record_vertex_inputs(const ir::Module& m, bool bipartite, std::map<std::string, ir::Group>& out) {
  const std::vector<ir::Group> sides = passes::vertex_sides(m, bipartite);
  for (const ir::Value& v : m.values)
    if (v.op == ir::Op::input_vertex) out[v.name] = sides[v.id];
}

}  // namespace

LoweredProgram lower(const ir::Module& traced, const std::vector<std::string>& wrt_in, const std::string& name,
                     bool bipartite) {
  LoweredProgram p;
  p.name = name;
  p.bipartite = bipartite;
  dumps::write(name, dumps::kTraced, ir::print(traced, "traced"));
  passes::verify(traced);
  std::vector<std::string> wrt = wrt_in;
  if (bipartite) {
    ir::Module split = passes::split_sides(traced);
    passes::verify(split);
    dumps::write(name, dumps::kSplitSides, ir::print(split, "split_sides"));
    for (const std::string& w : wrt_in)
      for (const ir::Value& v : split.values)
        if (v.op == ir::Op::input_vertex && v.name == w + passes::kDstSuffix) wrt.push_back(v.name);
    p.forward = passes::simplify(split);
  } else {
    p.forward = passes::simplify(traced);
  }
  passes::verify(p.forward);
  dumps::write(name, dumps::kForward, ir::print(p.forward, "forward"));

  passes::Gradients g = passes::autodiff(p.forward, wrt);
  std::vector<int> outs;
  for (const std::string& w : wrt) {
    auto it = g.grads.find(w);
    if (it == g.grads.end() || it->second < 0) continue;
    p.wrt.push_back(w);
    outs.push_back(it->second);
  }
  dumps::write(name, dumps::kAutodiff, ir::print(passes::with_outputs(g.module, outs, p.wrt), "autodiff"));
  if (!outs.empty()) {
    p.backward = passes::simplify(passes::with_outputs(g.module, outs, p.wrt));
    passes::verify(p.backward);
    dumps::write(name, dumps::kBackward, ir::print(p.backward, "backward"));
  }
  record_vertex_inputs(p.forward, bipartite, p.vertex_inputs);
  if (!p.wrt.empty()) record_vertex_inputs(p.backward, bipartite, p.vertex_inputs);
  return p;
}

}  // namespace seastar
