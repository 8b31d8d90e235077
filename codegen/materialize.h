/** \file
 * materialize_vertex_values: which vertex expressions a traversal reads at the neighbour are
 * worth computing once per vertex into a buffer, instead of once per edge where they are read.
 *
 * A vertex expression X read through the far endpoint of an edge (GCN's `norm * h` at the
 * source, after simplify's hoist) is recomputed per edge by default: each edge then makes one
 * random read per vertex tensor X reads, and repeats X's arithmetic. Stored, it costs one pass
 * over the vertices (stream the operands, write X) and one random read of X per edge. The cost
 * model (cache lines; a random line costs kRandomLine, a streamed one kStreamLine; an
 * elementwise op per element kFlop; kAssumedDegree edges per vertex, since the plan is made
 * once per program, before any graph is seen) keeps X in the edge loop unless storing it is
 * cheaper. Only expressions of bound tensors qualify (no aggregation results: they are complete
 * only after their own traversal).
 */
#pragma once

#include <vector>

#include "core/ir/ir.h"

namespace seastar::codegen {

/// The ids of the Vertex values of `m` to store before the traversals run, in id order.
std::vector<int> materialize_vertex_values(const ir::Module& m);

}  // namespace seastar::codegen
