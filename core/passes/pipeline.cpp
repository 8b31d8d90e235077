/** \file The lowering steps in order, with dumps; see pipeline.h. */
#include "core/passes/pipeline.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/passes/passes.h"
#include "core/util/file_names.h"
#include "core/util/log.h"

namespace seastar {

void dump_stage(const std::string& name, const std::string& step, const std::string& text) {
  const char* dir = std::getenv("SEASTAR_DUMP_DIR");
  if (!dir || !*dir) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // the program name is the user's: made a file name, it stays inside the folder
  const std::string path = std::string(dir) + "/" + util::file_stem(name) + "." + step;
  std::ofstream out(path);
  out << text;
  if (!out) {
    log::warn("SEASTAR_DUMP_DIR: could not write " + path + (ec ? " (" + ec.message() + ")" : ""));
    return;
  }
  log::debug("dumped " + path);
}

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
  dump_stage(name, "0-traced.gir", ir::print(traced, "traced"));
  passes::verify(traced);
  std::vector<std::string> wrt = wrt_in;
  if (bipartite) {
    ir::Module split = passes::split_sides(traced);
    passes::verify(split);
    dump_stage(name, "0-split-sides.gir", ir::print(split, "split_sides"));
    for (const std::string& w : wrt_in)
      for (const ir::Value& v : split.values)
        if (v.op == ir::Op::input_vertex && v.name == w + passes::kDstSuffix) wrt.push_back(v.name);
    p.forward = passes::simplify(split);
  } else {
    p.forward = passes::simplify(traced);
  }
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
  record_vertex_inputs(p.forward, bipartite, p.vertex_inputs);
  if (!p.wrt.empty()) record_vertex_inputs(p.backward, bipartite, p.vertex_inputs);
  return p;
}

}  // namespace seastar
