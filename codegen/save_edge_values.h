/** \file
 * save_edge_values: which edge values a direction's kernels compute once, store per edge and
 * read back, instead of computing them again wherever they are read.
 *
 * Every edge value is computed where it is consumed, so a value that several traversal passes
 * or kernels read is computed by each of them: an attention backward's destination traversal
 * recomputes every edge's score for the softmax's max, again for its sum, again for the
 * weighted sums, and its source traversal a fourth time. Stored, the value costs one write per
 * edge where it is first computed and one read per edge at each later site; each later site
 * then skips its arithmetic and the neighbour rows only the value needed.
 *
 * Two steps:
 *   1. An edge output that a traversal pass computes anyway (a per-edge gradient that the same
 *      pass sums onto the sources, a softmax that a pass sums) is stored by that pass, and the
 *      per-edge map place_outputs gave it is dropped once nothing is left in it.
 *   2. The other edge values, by a cost model (codegen/cost_model.h; the units of
 *      materialize.h). A later site is charged what recomputing the value costs there: its
 *      elementwise ops (transcendental ones more), its feature reductions and products, and the
 *      rows it reads at the neighbour or at the edge; a value stored already is read, not
 *      recomputed. Storing costs the value's row per edge, written once (a random write costs
 *      twice a read) and read at each later site. Narrow rows are priced first, and among rows
 *      of one width the latest first, so that a stored consumer (a softmax's weight) spares the
 *      later sites the values it was made of (its score); then every candidate is priced again,
 *      against the others' choice, until the choice settles. A module output is not a
 *      candidate (step 1 places it).
 *
 * A value only its own traversal reads is stored in that traversal's edge order (the slot j of
 * its CSC or CSR), so its writes and reads are sequential; one that another kernel reads is
 * stored at the edge ids, which every kernel knows. The plan is made once per program, before
 * any graph is seen, so the model counts per edge and assumes nothing about the graph.
 */
#pragma once

#include <vector>

#include "codegen/plan.h"

namespace seastar::codegen {

/// Fills Kernel::saves of `kernels` (the fused, materialized and placed kernels of `m`): each
/// stored edge value at the first kernel and pass that computes it, the edge outputs a traversal
/// computes at that traversal (removing an emptied per-edge map). Returns the stored values that
/// need buffers of their own (not the outputs).
std::vector<int> save_edge_values(const ir::Module& m, std::vector<Kernel>& kernels);

}  // namespace seastar::codegen
