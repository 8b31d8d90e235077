/** \file
 * The front half of the lowering pipeline, as a list of named steps:
 *   traced -> verify -> [split_sides, bipartite graphs] -> simplify -> autodiff -> simplify(backward)
 * With SEASTAR_DUMP_DIR set, the IR after each step is written there (core/util/dumps.h lists
 * every dump file of the whole pipeline).
 */
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/ir/ir.h"

namespace seastar {

struct LoweredProgram {
  std::string name;
  ir::Module forward;   ///< simplified forward program
  ir::Module backward;  ///< outputs: the gradients of `wrt`, in order (recomputes forward values it needs)
  std::vector<std::string> wrt;  ///< inputs that have a non-zero gradient
  /// Lowered for a bipartite graph: vertex inputs may be read at sources (num_src rows) or at
  /// destinations (num_dst rows), and `x@dst` inputs are the first num_dst rows of `x`.
  bool bipartite = false;
  /// The side of every vertex input of the forward and backward programs (Dst when square).
  std::map<std::string, ir::Group> vertex_inputs;
};

/// Runs the steps above. `wrt`: the names of inputs whose gradients are wanted (inputs that
/// do not reach an output are dropped from LoweredProgram::wrt).
/// `bipartite`: lower for bipartite graphs (kernels sized by num_src and num_dst).
LoweredProgram lower(const ir::Module& traced, const std::vector<std::string>& wrt, const std::string& name,
                     bool bipartite = false);

}  // namespace seastar
