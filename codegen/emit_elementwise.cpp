/** \file The visitor's elementwise ops: every unary and binary row of core/ir/ops.def, its scalar
 * expression applied over the broadcast shape. */
#include "codegen/emitter_base.h"

#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

Operand EmitterBase::emit_elementwise(const Site& s) {
  const auto& [v, row, name, S, lay, os] = s;  // the value being emitted (EmitterBase::Site)
  const std::string ind = kIndent;
  const OpInfo& info = op_info(v.op);
  Operand pa = val(v.inputs[0], row);
  Operand pb = info.kind == OpKind::Binary ? val(v.inputs[1], row) : Operand{};
  note_width(v);
  declare(s, lay);
  os << ind << "{\n" << ind << "  const double p0 = " << lit(v.p0) << ", p1 = " << lit(v.p1) << ";\n"
     << ind << "  (void)p0; (void)p1;\n";
  const Shape& sa = m_.at(v.inputs[0]).shape;
  const Shape& sb = info.kind == OpKind::Binary ? m_.at(v.inputs[1]).shape : v.shape;
  const bool whole = lay == Layout::Whole && pa.layout == Layout::Whole &&
                     (info.kind != OpKind::Binary || pb.layout == Layout::Whole);
  if (whole && v.shape.size() >= 2 && v.shape.back() > 1 && (sa != v.shape || sb != v.shape) &&
      !(v.op == Op::eq && !o_.storage_type.empty())) {
    // a broadcast over the last axis: rows by columns, so the inner loop reads each operand
    // contiguously or as one loop-invariant value (a flat index with / and % would gather)
    const int64_t I = v.shape.back(), O = S / I;
    os << ind << "  for (int64_t k0 = 0; k0 < " << O << "; ++k0) {\n";
    simd_pragma(os, lay, ind + "    ");
    os << ind << "    for (int64_t k1 = 0; k1 < " << I << "; ++k1) {\n"
       << ind << "      const auto a = " << pa.expr << "[" << bcast_index_rows(sa, v.shape, "k0", "k1") << "];\n";
    if (info.kind == OpKind::Binary)
      os << ind << "      const auto b = " << pb.expr << "[" << bcast_index_rows(sb, v.shape, "k0", "k1") << "];\n";
    os << ind << "      " << name << "[k0 * " << I << " + k1] = " << scalar_expr(info.c_expr) << ";\n"
       << ind << "    }\n" << ind << "  }\n" << ind << "}\n";
    return Operand{name, lay};
  }
  simd_pragma(os, lay, ind + "  ");
  // with 16-bit storage an equality (a max/min gradient's ties) compares at the stored precision:
  // the extreme was stored rounded, the messages are recomputed in float
  const bool round = v.op == Op::eq && !o_.storage_type.empty();
  auto operand = [&](const std::string& e) { return round ? "sx::round_to<S>(" + e + ")" : e; };
  os << ind << "  " << loop(lay, S) << "{\n"
     << ind << "    const auto a = " << operand(at(pa, sa, v.shape)) << ";\n";
  if (info.kind == OpKind::Binary)
    os << ind << "    const auto b = " << operand(at(pb, sb, v.shape)) << ";\n";
  os << ind << "    " << name << "[" << slot(lay) << "] = " << scalar_expr(info.c_expr) << ";\n"
     << ind << "  }\n" << ind << "}\n";
  return Operand{name, lay};
}

}  // namespace seastar::codegen
