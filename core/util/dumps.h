/** \file
 * Every file SEASTAR_DUMP_DIR receives, in pipeline order, in this one list: with the variable
 * set, each step of lowering writes what it produced as `<program>.<file>` (the program's name
 * made a safe file stem, core/util/file_names.h). Nothing is written when it is unset.
 *
 *   front half, core/passes/pipeline.cpp (per traced signature):
 *     0-traced.gir          the tracer's module
 *     0-split-sides.gir     bipartite graphs: vertex inputs split into source and destination reads
 *     1-forward.gir         verified and simplified
 *     2-autodiff.gir        the forward program with the gradients of `wrt` as outputs
 *     3-backward.gir        the gradients alone, simplified
 *   back half, kernels/fused_program.cpp:
 *     4-fused-forward.gir   codegen::plan's kernels (partitions, stored values, epilogues)
 *     5-fused-backward.gir
 *     <direction>.<variant>.cpp   per variant (f32_i32, f64_i64, ...) as it is first compiled:
 *     <direction>.<variant>.cu    the emitted C++ (or the CUDA emulator's unit) and the CUDA
 */
#pragma once

#include <string>

namespace seastar::dumps {

inline constexpr const char* kTraced = "0-traced.gir";
inline constexpr const char* kSplitSides = "0-split-sides.gir";
inline constexpr const char* kForward = "1-forward.gir";
inline constexpr const char* kAutodiff = "2-autodiff.gir";
inline constexpr const char* kBackward = "3-backward.gir";
inline constexpr const char* kFusedForward = "4-fused-forward.gir";
inline constexpr const char* kFusedBackward = "5-fused-backward.gir";

/// "forward.f32_i32.cpp": the generated source of one direction and variant; `extension`
/// ".cpp" (C++, or the CUDA emulator's unit) or ".cu".
inline std::string source_file(const std::string& direction, const std::string& variant, const char* extension) {
  return direction + "." + variant + extension;
}

/// Writes `text` to $SEASTAR_DUMP_DIR/<program>.<file> when the variable is set (no-op otherwise);
/// a file that cannot be written is a warning, never an error.
void write(const std::string& program, const std::string& file, const std::string& text);

}  // namespace seastar::dumps
