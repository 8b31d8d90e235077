/** \file The visitor's reductions over a traversal's edges: the accumulators of every
 * aggregation (sum, mean, max, min, argmax, argmin and the online softmax) and the per-block
 * partial sums of a parameter gradient (sum_rows, sum_rows_typed). */
#include "codegen/emitter_base.h"

#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

void EmitterBase::emit_row_reduction(int a, std::ostringstream& update, std::ostringstream& fin, Traversal& t) {
  // parameter gradient: a private partial sum per block of centres, summed in block order by
  // the kernel's skeleton; `pp<a>` points at this block's partial sums
  const Value& av = m_.at(a);
  const int64_t S = numel(av.shape);
  const Value& x = m_.at(av.inputs[0]);
  const bool edge = x.space == Space::Edge;
  const std::string row = edge ? "e" : "c";
  std::string slot_ptr = "pp" + std::to_string(a);
  if (av.op == Op::sum_rows_typed)
    slot_ptr += " + " + val(av.inputs[1], row).expr + "[0] * " + std::to_string(numel(x.shape));
  std::ostringstream& os = edge ? update : fin;
  const std::string ind = edge ? "        " : "      ";
  // a term of the centre's own, added once per centre (each statement below is one block)
  const std::string guard = edge ? "" : centre_row_guard();
  // the block's partial sums are memory, read and written per row (an L1/L2-resident slot)
  const std::string partial = "partial sums %" + std::to_string(a);
  const int64_t row_bytes = numel(x.shape) * float_bytes();
  note_traffic(edge ? TrafficTerm::Per::Edge : TrafficTerm::Per::Vertex, partial, -1, row_bytes, false, false);
  note_traffic(edge ? TrafficTerm::Per::Edge : TrafficTerm::Per::Vertex, partial, -1, row_bytes, true, false);
  t.rows.push_back({a, S, t.partial_elems});
  t.partial_elems += S;
  if (x.op == Op::outer && layout_of(x) == Layout::Whole) {
    // an outer product (a weight gradient) is added to the partial sums as it is formed, not
    // built in a temporary first: one pass over the [K, N] slot instead of three
    const Operand pu = val(x.inputs[0], row), pg = val(x.inputs[1], row);
    if (pu.layout == Layout::Whole && pg.layout == Layout::Whole) {
      const int64_t K = m_.at(x.inputs[0]).shape.back(), Nn = m_.at(x.inputs[1]).shape.back();
      const int64_t L = numel(m_.at(x.inputs[0]).shape) / K;
      note_width(x);
      os << ind << guard << "{ T* p = " << slot_ptr << ";\n"
         << ind << "  for (int64_t l = 0; l < " << L << "; ++l)\n"
         << ind << "    " << shared_loop("i", K) << "{\n"
         << ind << "      const T xi = " << pu.expr << "[l * " << K << " + i];\n";
      const std::string pragma = simd(Layout::Whole);
      if (!pragma.empty()) os << ind << "      " << pragma << "\n";
      os << ind << "      for (int64_t j = 0; j < " << Nn << "; ++j) p[i * " << Nn << " + j] += xi * " << pg.expr
         << "[l * " << Nn << " + j];\n"
         << ind << "    }\n" << ind << "}\n";
      return;
    }
  }
  Operand px = val(av.inputs[0], row);
  note_width(x);
  os << ind << guard << "{ T* p = " << slot_ptr << "; const auto y = " << px.expr << "; "
     << (px.layout == Layout::Split ? loop(px.layout, numel(x.shape)) : shared_loop("k", numel(x.shape)))
     << "p[k] += y[" << slot(px.layout) << "]; }\n";
}

Operand EmitterBase::emit_aggregation(int a, std::ostringstream& init, std::ostringstream& update,
                                      std::ostringstream& fin) {
  const Value& av = m_.at(a);
  const int64_t S = numel(av.shape);
  const std::string acc = "acc" + std::to_string(a);
  Operand x = val(av.inputs[0], "e");
  const Layout L = accumulator_layout(av);
  note_width(av);
  const std::string D = std::to_string(extent(L, S));
  const std::string H = loop(L, S), s = slot(L);
  // the aggregated value at the current element (agg_softmax_sum reads its scores per statistic)
  const std::string X = av.op == Op::agg_softmax_sum ? "" : at(x, m_.at(av.inputs[0]).shape, av.shape);
  const std::string A = acc + "[" + s + "]";
  auto pragma = [&](std::ostringstream& os, const std::string& ind) {
    const std::string p = simd(L);
    if (!p.empty()) os << ind << p << "\n";
  };
  pass_accumulators_.push_back({av.op, acc, L, S, extent(L, S), "", "", "", 0});
  switch (av.op) {
    case Op::agg_sum: case Op::agg_mean:
      init << "      T " << acc << "[" << D << "];\n      " << H << A << " = T(0);\n";
      pragma(update, "        ");
      update << "        " << H << A << " += " << X << ";\n";
      // a division, not a product with 1 / deg: the quotient torch and the reference compute,
      // so a mean that cancels exactly (x - mean(x) = 0 at a kink of abs or relu) does here too
      if (av.op == Op::agg_mean)
        fin << "      { const T deg = T(" << fn("max") << "<int64_t>(end - beg, 1)); " << H << A
            << " /= deg; }\n";
      break;
    case Op::agg_max: case Op::agg_min: {
      const char* cmp = av.op == Op::agg_max ? ">" : "<";
      init << "      T " << acc << "[" << D << "];\n      " << H << A << " = "
           << (av.op == Op::agg_max ? "-INFINITY" : "INFINITY") << ";\n";
      update << "        " << H << "if (" << X << " " << cmp << " " << A << ") " << A << " = " << X << ";\n";
      fin << "      if (end == beg) " << H << A << " = T(0);\n";
      break;
    }
    case Op::agg_softmax_sum: {
      // online softmax: running max m, running normaliser z and running weighted sum, each
      // rescaled by exp(m_old - m_new) when the max grows, so one pass over the edges suffices.
      // The statistics (one per score) are whole in every lane; the weighted sum may be split.
      const Value &sv = m_.at(av.inputs[0]), &fv = m_.at(av.inputs[1]);
      const int64_t Ss = numel(sv.shape);
      if (x.layout == Layout::Split) x = whole_view(body_, "s" + std::to_string(a), x, Ss);
      const Operand f = val(av.inputs[1], "e");
      const std::string id = std::to_string(a), mx = "mx" + id, zz = "zz" + id;
      const std::string is = bcast_index(sv.shape, av.shape, "k");
      const std::string F = at(f, fv.shape, av.shape), xs = x.expr + "[q]";
      PassAccumulator& pa = pass_accumulators_.back();
      pa.mx = mx;
      pa.zz = zz;
      pa.stats = Ss;
      pa.stat_index = is;
      init << "      T " << mx << "[" << Ss << "], " << zz << "[" << Ss << "], " << acc << "[" << D << "];\n"
           << "      for (int64_t q = 0; q < " << Ss << "; ++q) { " << mx << "[q] = -INFINITY; " << zz
           << "[q] = T(0); }\n"
           << "      " << H << A << " = T(0);\n";
      update << "        {\n          T sc[" << Ss << "], w[" << Ss << "];\n"
             << "          for (int64_t q = 0; q < " << Ss << "; ++q) {\n"
             << "            const T mn = " << xs << " > " << mx << "[q] ? " << xs << " : " << mx << "[q];\n"
             << "            sc[q] = " << fn("exp") << "(" << mx << "[q] - mn);\n"
             << "            w[q] = " << fn("exp") << "(" << xs << " - mn);\n"
             << "            " << zz << "[q] = " << zz << "[q] * sc[q] + w[q];\n"
             << "            " << mx << "[q] = mn;\n          }\n";
      update << "          " << H << A << " = " << A << " * sc[" << is << "] + w[" << is << "] * " << F
             << ";\n        }\n";
      fin << "      " << H << A << " = end > beg ? " << A << " / " << zz << "[" << is << "] : T(0);\n";
      break;
    }
    case Op::agg_argmax: case Op::agg_argmin: {
      const char* cmp = av.op == Op::agg_argmax ? ">" : "<";
      const std::string best = "best" + std::to_string(a), B = best + "[" + s + "]";
      pass_accumulators_.back().best = best;
      init << "      T " << best << "[" << D << "];\n      int64_t " << acc << "[" << D << "];\n"
           << "      " << H << "{ " << B << " = " << (av.op == Op::agg_argmax ? "-INFINITY" : "INFINITY") << "; " << A
           << " = -1; }\n";
      update << "        " << H << "if (" << A << " < 0 || " << X << " " << cmp << " " << B << " || (" << X
             << " == " << B << " && e < " << A << ")) { " << B << " = " << X << "; " << A << " = e; }\n";
      break;
    }
#define SEASTAR_CASES_Leaf 1
#define SEASTAR_CASES_Unary 1
#define SEASTAR_CASES_Binary 1
#define SEASTAR_CASES_Gather 1
#define SEASTAR_CASES_Aggregate 0
#define SEASTAR_CASES_Other 1
#include "core/ir/op_cases.inc"
      SEASTAR_THROW(NotImplementedError, "no fused rule for aggregation '", op_info(av.op).name, "'");
  }
  return Operand{acc, L};
}

}  // namespace seastar::codegen
