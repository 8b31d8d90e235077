/** \file
 * The C++ (OpenMP) emitter: a FusedPlan -> one translation unit with an entry point
 *   extern "C" void seastar_entry(const int64_t* sizes, void* const* graph, void* const* buffers)
 * sizes = {N, E}; graph = {in_ptr, in_nbr, in_eid, in_order, out_ptr, out_nbr, out_eid,
 * out_order, src, dst, node_type, edge_type} (index type I); buffers in FusedPlan::buffers order.
 * Traversal kernels are destination- (or source-) parallel with hubs scheduled first; feature
 * loops are contiguous; temporaries are named after their value ids, so output is deterministic.
 * The value visitor is shared with the CUDA emitter (emitter_base.h); cpu_emitter.cpp holds the
 * hooks: the OpenMP kernel skeletons and this entry point.
 */
#pragma once

#include <string>

#include "codegen/fuse.h"

namespace seastar::codegen {

struct EmitOptions {
  std::string float_type = "float";     ///< "float" or "double"
  std::string index_type = "int32_t";   ///< "int32_t" or "int64_t"
  std::string name = "program";
};

std::string emit_cpu(const FusedPlan& plan, const EmitOptions& options);

}  // namespace seastar::codegen
