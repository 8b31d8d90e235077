/** \file
 * The GIR passes, one file each with a single entry function:
 *   verify          structural checks (operand order, arity, spaces, dtypes, shapes)
 *   simplify        constant folding, algebraic identities, CSE, dead-code elimination
 *   autodiff        reverse mode: appends the backward program to a module
 *   split_sides     bipartite graphs: one side (sources or destinations) per vertex value
 * and the analysis vertex_sides (the side of every Vertex value).
 */
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/ir/ir.h"
#include "core/ir/typing.h"

namespace seastar::passes {

/// Throws ValueError naming the value and the rule it breaks.
void verify(const ir::Module& m);

/// Returns an equivalent module with constants folded, identities applied, common
/// subexpressions merged and values that reach no output removed.
ir::Module simplify(const ir::Module& m);

/// The result of autodiff: the forward module extended with backward values.
struct Gradients {
  ir::Module module;  ///< forward values, grad_output leaves, then the backward values
  /// For each requested input name: the value holding its gradient, or -1 where the
  /// gradient is identically zero (the input does not reach any output).
  std::map<std::string, int> grads;
  std::vector<int> grad_outputs;  ///< the grad_output leaf of each forward output
};

/// Reverse-mode differentiation of `m`'s outputs with respect to the named leaves
/// (vertex/edge inputs and params). Throws NotImplementedError for ops without a rule.
Gradients autodiff(const ir::Module& m, const std::vector<std::string>& wrt);

/// The suffix of the destination-side copy of a vertex input read at both endpoints.
extern const char* const kDstSuffix;

/// Bipartite graphs: splits each vertex input read at both sources and destinations into `x`
/// and `x@dst`, duplicating vertex expressions per side. Throws ValueError (naming the user's
/// line) for a program that reads an aggregation at the other endpoint.
ir::Module split_sides(const ir::Module& m);

/// For each value, Group::Src or Group::Dst when it is a Vertex value (whose rows are sources or
/// destinations), Group::None otherwise. Not bipartite: every Vertex value is Dst.
std::vector<ir::Group> vertex_sides(const ir::Module& m, bool bipartite);

/// Module with `outputs` as its outputs (the backward program of a Gradients, say).
ir::Module with_outputs(const ir::Module& m, const std::vector<int>& outputs, const std::vector<std::string>& names);

}  // namespace seastar::passes
