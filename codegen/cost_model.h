/** \file
 * The units the planning steps' cost models share (materialize.h, save_edge_values.h): cache
 * lines moved and elementwise ops, per vertex or per edge. */
#pragma once

#include <cstdint>

#include "core/ir/ir.h"

namespace seastar::codegen::cost {

constexpr double kRandomLine = 1.0;      ///< a cache line read at a random neighbour row
constexpr double kStreamLine = 0.25;     ///< a cache line read or written in vertex order
constexpr double kFlop = 1.0 / 64;       ///< one elementwise op on one element
constexpr double kTranscendental = 8.0;  ///< an op that calls a math function (exp, log, tanh) costs this many
constexpr double kAssumedDegree = 4.0;   ///< edges per vertex a per-vertex saving is multiplied by
constexpr int64_t kLineBytes = 64, kElemBytes = 4;  ///< float32, the common case

/// A row of a value's elements (float32) in cache lines.
inline double lines(const ir::Value& v) {
  return static_cast<double>((ir::numel(v.shape) * kElemBytes + kLineBytes - 1) / kLineBytes);
}

}  // namespace seastar::codegen::cost
