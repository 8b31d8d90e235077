/** \file The visitor's linear algebra: expand (a broadcast materialised), matvec / matvec_t (a
 * value times a parameter matrix or its transpose) and outer (a matvec's weight gradient). */
#include "codegen/emitter_base.h"

#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

Operand EmitterBase::emit_expand(const Site& s) {
  const auto& [v, row, name, S, lay, os] = s;  // the value being emitted (EmitterBase::Site)
  const std::string ind = kIndent;
  const Value& x = m_.at(v.inputs[0]);
  Operand px = val(v.inputs[0], row);
  note_width(v);
  declare(s, lay);
  os << ind << loop(lay, S) << name << "[" << slot(lay) << "] = " << at(px, x.shape, v.shape) << ";\n";
  return Operand{name, lay};
}

Operand EmitterBase::emit_matvec(const Site& s) {
  const auto& [v, row, name, S, lay, os] = s;  // the value being emitted (EmitterBase::Site)
  const std::string ind = kIndent;
  const Value &x = m_.at(v.inputs[0]), &w = m_.at(v.inputs[1]);
  Operand px = val(v.inputs[0], row), pw = val(v.inputs[1], row);
  if (px.layout == Layout::Split) px = whole_view(os, name + "_x", px, numel(x.shape));
  if (pw.layout == Layout::Split) pw = whole_view(os, name + "_w", pw, numel(w.shape));
  const int64_t K = w.shape[0], Nn = w.shape[1];
  const int64_t in = v.op == Op::matvec ? K : Nn, outn = v.op == Op::matvec ? Nn : K;
  const int64_t L = numel(x.shape) / in;
  note_width(v);
  declare(s, lay);
  if (lay == Layout::Split) {
    // each lane computes its own outputs: a dot product over the input axis
    os << ind << loop(lay, S) << "{\n" << ind << "  const int64_t l = k / " << outn << ", j = k % " << outn
       << ";\n" << ind << "  T acc = T(0);\n";
    if (v.op == Op::matvec) {
      os << ind << "  for (int64_t i = 0; i < " << K << "; ++i) acc += " << px.expr << "[l * " << K << " + i] * "
         << pw.expr << "[i * " << Nn << " + j];\n";
    } else {
      os << ind << "  for (int64_t i = 0; i < " << Nn << "; ++i) acc += " << px.expr << "[l * " << Nn
         << " + i] * " << pw.expr << "[j * " << Nn << " + i];\n";
    }
    os << ind << "  " << name << "[t] = acc;\n" << ind << "}\n";
    return Operand{name, lay};
  }
  os << ind << "for (int64_t l = 0; l < " << L << "; ++l) {\n";
  if (v.op == Op::matvec) {
    os << ind << "  T* y = " << name << " + l * " << outn << ";\n"
       << ind << "  for (int64_t j = 0; j < " << Nn << "; ++j) y[j] = T(0);\n"
       << ind << "  for (int64_t i = 0; i < " << K << "; ++i) {\n"
       << ind << "    const T xi = " << px.expr << "[l * " << K << " + i];\n"
       << ind << "    const auto wr = " << pw.expr << " + i * " << Nn << ";\n";
    simd_pragma(os, Layout::Whole, ind + "    ");
    os << ind << "    for (int64_t j = 0; j < " << Nn << "; ++j) y[j] += xi * wr[j];\n"
       << ind << "  }\n";
  } else {
    // a dot product per output: without the reduction clause the compiler may not reorder the
    // sum, and the loop runs scalar
    os << ind << "  for (int64_t i = 0; i < " << K << "; ++i) {\n"
       << ind << "    T acc = T(0);\n";
    const std::string p = simd_sum("acc");
    if (!p.empty()) os << ind << "    " << p << "\n";
    os << ind << "    for (int64_t j = 0; j < " << Nn << "; ++j) acc += " << px.expr << "[l * " << Nn
       << " + j] * " << pw.expr << "[i * " << Nn << " + j];\n"
       << ind << "    " << name << "[l * " << K << " + i] = acc;\n"
       << ind << "  }\n";
  }
  os << ind << "}\n";
  return Operand{name, lay};
}

Operand EmitterBase::emit_outer(const Site& s) {
  const auto& [v, row, name, S, lay, os] = s;  // the value being emitted (EmitterBase::Site)
  const std::string ind = kIndent;
  const Value &x = m_.at(v.inputs[0]), &g = m_.at(v.inputs[1]);
  Operand px = val(v.inputs[0], row), pg = val(v.inputs[1], row);
  if (px.layout == Layout::Split) px = whole_view(os, name + "_x", px, numel(x.shape));
  if (pg.layout == Layout::Split) pg = whole_view(os, name + "_g", pg, numel(g.shape));
  const int64_t K = x.shape.back(), Nn = g.shape.back(), L = numel(x.shape) / K;
  note_width(v);
  declare(s, lay);
  if (lay == Layout::Split) {
    os << ind << loop(lay, S) << "{\n" << ind << "  const int64_t i = k / " << Nn << ", j = k % " << Nn << ";\n"
       << ind << "  T acc = T(0);\n"
       << ind << "  for (int64_t l = 0; l < " << L << "; ++l) acc += " << px.expr << "[l * " << K << " + i] * "
       << pg.expr << "[l * " << Nn << " + j];\n"
       << ind << "  " << name << "[t] = acc;\n" << ind << "}\n";
    return Operand{name, lay};
  }
  os << ind << "for (int64_t k = 0; k < " << S << "; ++k) " << name << "[k] = T(0);\n"
     << ind << "for (int64_t l = 0; l < " << L << "; ++l)\n"
     << ind << "  for (int64_t i = 0; i < " << K << "; ++i) {\n"
     << ind << "    const T xi = " << px.expr << "[l * " << K << " + i];\n";
  simd_pragma(os, Layout::Whole, ind + "    ");
  os << ind << "    for (int64_t j = 0; j < " << Nn << "; ++j) " << name << "[i * " << Nn << " + j] += xi * "
     << pg.expr << "[l * " << Nn << " + j];\n"
     << ind << "  }\n";
  return Operand{name, lay};
}

}  // namespace seastar::codegen
