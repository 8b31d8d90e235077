/** \file
 * The front half of the lowering pipeline, as a list of named steps:
 *   traced -> verify -> simplify -> autodiff -> simplify(backward)
 * With SEASTAR_DUMP_DIR set, the IR after each step is written there as <name>.<step>.gir.
 */
#pragma once

#include <string>
#include <vector>

#include "core/ir/ir.h"

namespace seastar {

struct LoweredProgram {
  std::string name;
  ir::Module forward;   ///< simplified forward program
  ir::Module backward;  ///< outputs: the gradients of `wrt`, in order (recomputes forward values it needs)
  std::vector<std::string> wrt;  ///< inputs that have a non-zero gradient
};

/// Runs the steps above. `wrt`: the names of inputs whose gradients are wanted (inputs that
/// do not reach an output are dropped from LoweredProgram::wrt).
LoweredProgram lower(const ir::Module& traced, const std::vector<std::string>& wrt, const std::string& name);

/// Writes `text` to $SEASTAR_DUMP_DIR/<name>.<step> when the variable is set (no-op otherwise).
void dump_stage(const std::string& name, const std::string& step, const std::string& text);

}  // namespace seastar
