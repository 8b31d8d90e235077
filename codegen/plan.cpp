/** \file plan: the back half of lowering, step by step, each followed by its dump (the files
 * are listed in core/util/dumps.h); see plan.h.
 *
 *   1-lower-softmax -> 2-simplify -> 3-fuse -> 4-materialize -> 5-place-outputs
 *     -> 6-save-edge-values (+ buffers)
 *     here, once per program and direction;
 *   7-emit -> 8-compile
 *     runtime/engine/kernel_variant.cpp, once per variant (float type, index type, host or GPU) on its
 *     first call: each variant is different code, and emitting all of them with the plan would
 *     compile code no call uses. */
#include "codegen/plan.h"
#include "codegen/materialize.h"
#include "codegen/save_edge_values.h"
#include "core/passes/passes.h"
#include "core/util/dumps.h"

namespace seastar::codegen {
using namespace ir;

std::string plan_text(const FusedPlan& p) {
  std::string s = ir::print(p.module, "fused");
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    s += "kernel " + std::to_string(k) + (p.kernels[k].precompute ? " (stored vertex values):" : ":");
    for (int v : p.kernels[k].values) s += " %" + std::to_string(v);
    if (!p.kernels[k].epilogue.empty()) s += ", then per centre:";
    for (int v : p.kernels[k].epilogue) s += " %" + std::to_string(v);
    if (!p.kernels[k].saves.empty()) s += "; stores per edge:";
    for (const Kernel::EdgeSave& e : p.kernels[k].saves)
      s += " %" + std::to_string(e.value) + " (pass " + std::to_string(e.pass) + (e.by_slot ? ", in edge order" : "") + ")";
    s += "\n";
  }
  static const char* const kRole[] = {"input", "grad_output", "intermediate", "output"};
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer& buf = p.buffers[b];
    s += "buffer " + std::to_string(b) + ": " + kRole[static_cast<int>(buf.role)] + " %" + std::to_string(buf.value);
    if (!buf.name.empty()) s += " \"" + buf.name + "\"";
    s += buf.rows == Space::Edge ? ", per edge" : buf.rows == Space::Param ? ", one row"
         : !p.bipartite ? ", per vertex" : buf.side == Group::Src ? ", per source" : ", per destination";
    s += " x " + std::to_string(buf.numel) + (buf.is_int ? " int64" : "") + "\n";
  }
  return s;
}

bool reads_out_edges(const FusedPlan& p) {
  for (const Kernel& k : p.kernels)
    if (k.kind == Kernel::Kind::Traverse && k.group == Group::Src) return true;
  for (const Value& v : p.module.values)
    if (v.op == Op::degree && v.group == Group::Src) return true;
  return false;
}

FusedPlan plan(const Module& input, bool bipartite, const PlanDumps& to) {
  const bool dumping = !to.program.empty() && dumps::enabled();
  auto dump_module = [&](const char* step, const Module& m) {
    if (dumping) dumps::write(to.program, dumps::plan_step(to.backward, step), ir::print(m, step));
  };
  auto dump_plan = [&](const std::string& file, const FusedPlan& p) {
    if (dumping) dumps::write(to.program, file, plan_text(p));
  };
  FusedPlan p;
  p.bipartite = bipartite;
  p.module = lower_softmax(input);                                     // lower_softmax.cpp
  dump_module("1-lower-softmax", p.module);
  p.module = passes::simplify(p.module);                               // core/passes/simplify.cpp
  dump_module("2-simplify", p.module);
  const std::vector<Group> sides = passes::vertex_sides(p.module, bipartite);
  p.kernels = fuse(p.module, sides, bipartite);                        // fuse.cpp
  dump_plan(dumps::plan_step(to.backward, "3-fuse"), p);
  const std::vector<int> stored = materialize_vertex_values(p.module);  // materialize.cpp
  const std::vector<Kernel> first = precompute_kernels(stored, sides);
  p.kernels.insert(p.kernels.begin(), first.begin(), first.end());
  dump_plan(dumps::plan_step(to.backward, "4-materialize"), p);
  place_outputs(p, sides);                                             // place_outputs.cpp
  dump_plan(dumps::plan_step(to.backward, "5-place-outputs"), p);
  std::vector<int> buffered = stored;
  for (int e : save_edge_values(p.module, p.kernels)) buffered.push_back(e);  // save_edge_values.cpp
  dump_plan(dumps::plan_step(to.backward, "6-save-edge-values"), p);
  p.buffers = plan_buffers(p.module, buffered, sides);                 // plan_buffers.cpp
  dump_plan(to.backward ? dumps::kFusedBackward : dumps::kFusedForward, p);
  return p;
}

}  // namespace seastar::codegen
