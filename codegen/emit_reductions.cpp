/** \file The visitor's feature-axis reductions: fsum, fmean and fmax over the last axis, and
 * sum_to (a broadcast's gradient, summed back to its operand's shape). */
#include "codegen/emitter_base.h"

#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

Operand EmitterBase::emit_feature_reduction(const Site& s) {
  const auto& [v, row, name, S, lay, os] = s;  // the value being emitted (EmitterBase::Site)
  const std::string ind = kIndent;
  const Value& x = m_.at(v.inputs[0]);
  Operand px = val(v.inputs[0], row);
  const int64_t L = x.shape.back();
  note_width(v);
  declare(s, Layout::Whole);
  if (px.layout == Layout::Whole) {
    os << ind << "for (int64_t o = 0; o < " << S << "; ++o) {\n"
       << ind << "  T acc = " << (v.op == Op::fmax ? "-INFINITY" : "T(0)") << ";\n"
       << ind << "  for (int64_t j = 0; j < " << L << "; ++j) "
       << (v.op == Op::fmax ? "acc = " + fn("max") + "(acc, " + px.expr + "[o * " + std::to_string(L) + " + j]);\n"
                            : "acc += " + px.expr + "[o * " + std::to_string(L) + " + j];\n")
       << ind << "  " << name << "[o] = acc" << (v.op == Op::fmean ? " / T(" + std::to_string(L) + ")" : "")
       << ";\n" << ind << "}\n";
  } else {
    // a value split across the group: each lane reduces its elements, then the group
    os << ind << "for (int64_t o = 0; o < " << S << "; ++o) " << name << "[o] = "
       << (v.op == Op::fmax ? "-INFINITY" : "T(0)") << ";\n";
    os << ind << loop(Layout::Split, numel(x.shape)) << name << "[k / " << L << "] = "
       << (v.op == Op::fmax ? fn("max") + "(" + name + "[k / " + std::to_string(L) + "], " + px.expr + "[t])"
                            : name + "[k / " + std::to_string(L) + "] + " + px.expr + "[t]")
       << ";\n";
    group_reduce(os, name, S, v.op == Op::fmax ? "Max" : "Sum");
    if (v.op == Op::fmean)
      os << ind << "for (int64_t o = 0; o < " << S << "; ++o) " << name << "[o] = " << name << "[o] / T(" << L
         << ");\n";
  }
  return Operand{name, Layout::Whole};
}

Operand EmitterBase::emit_sum_to(const Site& s) {
  const auto& [v, row, name, S, lay, os] = s;  // the value being emitted (EmitterBase::Site)
  const std::string ind = kIndent;
  const Value& x = m_.at(v.inputs[0]);
  Operand px = val(v.inputs[0], row);
  note_width(v);
  declare(s, Layout::Whole);
  os << ind << "for (int64_t k = 0; k < " << S << "; ++k) " << name << "[k] = T(0);\n";
  if (px.layout == Layout::Whole && x.shape.size() >= 2 && x.shape.back() > 1) {
    // rows by columns: a column sum is a vectorised reduction, a kept last axis a contiguous add
    const int64_t I = x.shape.back(), O = numel(x.shape) / I;
    const bool keeps_last = !v.shape.empty() && v.shape.back() == I;  // right-aligned: the same axis
    os << ind << "for (int64_t k0 = 0; k0 < " << O << "; ++k0) {\n";
    if (keeps_last) {
      const std::string p = simd(Layout::Whole);
      if (!p.empty()) os << ind << "  " << p << "\n";
      os << ind << "  for (int64_t k1 = 0; k1 < " << I << "; ++k1) " << name << "["
         << bcast_index_rows(v.shape, x.shape, "k0", "k1") << "] += " << px.expr << "[k0 * " << I << " + k1];\n";
    } else {
      const Shape x_rows(x.shape.begin(), x.shape.end() - 1);
      const Shape v_rows = v.shape.empty() ? Shape{} : Shape(v.shape.begin(), v.shape.end() - 1);
      const std::string p = simd_sum("acc");
      os << ind << "  T acc = T(0);\n";
      if (!p.empty()) os << ind << "  " << p << "\n";
      os << ind << "  for (int64_t k1 = 0; k1 < " << I << "; ++k1) acc += " << px.expr << "[k0 * " << I
         << " + k1];\n"
         << ind << "  " << name << "[" << (numel(v_rows) == 1 ? std::string("0") : bcast_index(v_rows, x_rows, "k0"))
         << "] += acc;\n";
    }
    os << ind << "}\n";
  } else if (px.layout == Layout::Whole) {
    os << ind << "for (int64_t k = 0; k < " << numel(x.shape) << "; ++k) " << name << "["
       << bcast_index(v.shape, x.shape, "k") << "] += " << px.expr << "[k];\n";
  } else {
    os << ind << loop(Layout::Split, numel(x.shape)) << name << "[" << bcast_index(v.shape, x.shape, "k")
       << "] += " << px.expr << "[t];\n";
    group_reduce(os, name, S, "Sum");
  }
  return Operand{name, Layout::Whole};
}

}  // namespace seastar::codegen
