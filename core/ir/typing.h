/** \file
 * The typing rules of GIR in one place (core/ir/typing.cpp):
 *   spaces: Param is neutral; Vertex and Edge never mix (gather converts); an aggregation turns
 *   Edge into Vertex; sum_rows turns Vertex/Edge into Param.
 *   shapes: elementwise ops broadcast like numpy over the feature axes (right-aligned).
 */
#pragma once

#include "core/ir/ir.h"

namespace seastar::ir {

/// Fills v.dtype, v.space and v.shape from v's inputs (already in m). Throws ValueError
/// naming the op and the rule it breaks.
void infer_value(const Module& m, Value& v);

/// numpy broadcasting of two feature shapes (right-aligned); false when they do not broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

}  // namespace seastar::ir
