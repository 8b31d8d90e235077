/** \file
 * The C++ (OpenMP) emitter: a FusedPlan -> one translation unit with an entry point
 *   extern "C" void seastar_entry(const int64_t* sizes, void* const* graph, void* const* buffers)
 * sizes, graph (index type I) and buffers as codegen/launch_layout.h lays them out.
 * Traversal kernels are destination- (or source-) parallel with hubs scheduled first; feature
 * loops are contiguous; temporaries are named after their value ids, so output is deterministic.
 * The value visitor is shared with the CUDA emitter (emitter_base.h); cpu_emitter.cpp holds the
 * hooks: the OpenMP kernel skeletons and this entry point.
 */
#pragma once

#include <string>

#include "codegen/plan.h"
#include "codegen/launch_layout.h"

namespace seastar::codegen {

using launch::EmitOptions;

std::string emit_cpu(const FusedPlan& plan, const EmitOptions& options);

}  // namespace seastar::codegen
