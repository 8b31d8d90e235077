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
 * The cost model (codegen/cost_model.h; the same units as materialize.h's) charges a later site
 * what recomputing the value costs there: its elementwise ops (transcendental ones more), its
 * feature reductions and products, and the rows it reads at the neighbour or at the edge; a
 * stored value read there is not recomputed. Storing costs a row of the value per edge, written
 * once and read at each later site. Candidates are taken latest first, so that storing a value
 * (a softmax's weight) spares later sites the values it was made of (its score), which are then
 * only stored if some other site still recomputes them. A value only its own traversal reads is
 * stored in that traversal's edge order (the slot j of its CSC or CSR), so its writes and reads
 * are sequential; one that another kernel reads is stored at the edge ids, which every kernel
 * knows. A module output is never a candidate: it
 * has its own buffer and kernel. The plan is made once per program, before any graph is seen, so
 * the model counts per edge and assumes nothing about the graph.
 */
#pragma once

#include <vector>

#include "codegen/plan.h"

namespace seastar::codegen {

/// Fills Kernel::saves of `kernels` (the fused, materialized and placed kernels of `m`): each
/// stored edge value at the first kernel and pass that computes it. Returns the stored values.
std::vector<int> save_edge_values(const ir::Module& m, std::vector<Kernel>& kernels);

}  // namespace seastar::codegen
