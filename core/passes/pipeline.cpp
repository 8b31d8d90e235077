/** \file The lowering steps in order, with dumps; see pipeline.h. */
#include "core/passes/pipeline.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/passes/passes.h"
#include "core/util/log.h"

namespace seastar {

void dump_stage(const std::string& name, const std::string& step, const std::string& text) {
  const char* dir = std::getenv("SEASTAR_DUMP_DIR");
  if (!dir || !*dir) return;
  std::filesystem::create_directories(dir);
  std::string path = std::string(dir) + "/" + name + "." + step;
  std::ofstream(path) << text;
  log::debug("dumped " + path);
}

LoweredProgram lower(const ir::Module& traced, const std::vector<std::string>& wrt, const std::string& name) {
  LoweredProgram p;
  p.name = name;
  dump_stage(name, "0-traced.gir", ir::print(traced, "traced"));
  passes::verify(traced);
  p.forward = passes::simplify(traced);
  passes::verify(p.forward);
  dump_stage(name, "1-forward.gir", ir::print(p.forward, "forward"));

  passes::Gradients g = passes::autodiff(p.forward, wrt);
  std::vector<int> outs;
  for (const std::string& w : wrt) {
    auto it = g.grads.find(w);
    if (it == g.grads.end() || it->second < 0) continue;
    p.wrt.push_back(w);
    outs.push_back(it->second);
  }
  dump_stage(name, "2-autodiff.gir", ir::print(passes::with_outputs(g.module, outs, p.wrt), "autodiff"));
  if (!outs.empty()) {
    p.backward = passes::simplify(passes::with_outputs(g.module, outs, p.wrt));
    passes::verify(p.backward);
    dump_stage(name, "3-backward.gir", ir::print(p.backward, "backward"));
  }
  return p;
}

}  // namespace seastar
