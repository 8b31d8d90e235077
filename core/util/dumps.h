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
 *   back half, codegen/plan.cpp (the forward module as 4-..., the backward as 5-...):
 *     4-forward.1-lower-softmax.gir    softmax as its max / sum-of-exp / divide passes
 *     4-forward.2-simplify.gir         simplified again (hoisting, reassociation, dead code)
 *     4-forward.3-fuse.gir             the kernels fusion forms
 *     4-forward.4-materialize.gir      with the vertex values stored before the traversals
 *     4-forward.5-place-outputs.gir    with vertex outputs as traversal epilogues
 *     4-forward.6-save-edge-values.gir with the edge values a pass stores for later ones
 *     4-fused-forward.gir              the finished plan (kernels, stored values, epilogues)
 *     5-backward.1-lower-softmax.gir ... 5-fused-backward.gir
 *   7-emit, per variant (f32_i32, f64_i64, ...) on its first call (runtime/engine/kernel_variant.cpp),
 *   before 8-compile:
 *     <direction>.<variant>.cpp   the emitted C++ (or the CUDA emulator's unit)
 *     <direction>.<variant>.cu    the CUDA
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

/// "4-forward.2-simplify.gir": the back half's `step` ("2-simplify", ...) on the forward module
/// (`backward` false) or the backward one.
inline std::string plan_step(bool backward, const char* step) {
  return std::string(backward ? "5-backward." : "4-forward.") + step + ".gir";
}

/// Whether SEASTAR_DUMP_DIR is set: steps skip printing what nothing would write.
bool enabled();

/// "forward.f32_i32.cpp": the generated source of one direction and variant; `extension`
/// ".cpp" (C++, or the CUDA emulator's unit) or ".cu".
inline std::string source_file(const std::string& direction, const std::string& variant, const char* extension) {
  return direction + "." + variant + extension;
}

/// Writes `text` to $SEASTAR_DUMP_DIR/<program>.<file> when the variable is set (no-op otherwise);
/// a file that cannot be written is a warning, never an error.
void write(const std::string& program, const std::string& file, const std::string& text);

}  // namespace seastar::dumps
