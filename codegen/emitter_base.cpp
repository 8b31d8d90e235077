/** \file The value visitor shared by the C++ and CUDA emitters; see emitter_base.h. */
#include "codegen/emitter_base.h"

#include <algorithm>
#include <limits>
#include <set>

#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

std::string bcast_index(const Shape& a, const Shape& o, const std::string& k) {
  if (a == o) return k;
  if (numel(a) == 1) return "0";
  std::string expr;
  int64_t ostride = 1, astride = 1;
  const size_t r = o.size(), off = r - a.size();
  for (size_t i = r; i-- > 0;) {
    int64_t od = o[i];
    int64_t ad = i >= off ? a[i - off] : 1;
    if (ad != 1) {
      std::string term = "((" + k + " / " + std::to_string(ostride) + ") % " + std::to_string(od) + ") * " +
                         std::to_string(astride);
      expr += (expr.empty() ? "" : " + ") + term;
      astride *= ad;
    }
    ostride *= od;
  }
  return expr.empty() ? "0" : "(" + expr + ")";
}

std::string bcast_index_rows(const Shape& a, const Shape& o, const std::string& row, const std::string& col) {
  const int64_t I = o.back();
  if (a == o) return "(" + row + " * " + std::to_string(I) + " + " + col + ")";
  if (numel(a) == 1) return "0";
  const Shape o_rows(o.begin(), o.end() - 1);
  const int64_t a_last = a.empty() ? 1 : a.back();
  const Shape a_rows = a.empty() ? Shape{} : Shape(a.begin(), a.end() - 1);
  std::string r = numel(a_rows) == 1 ? "0" : bcast_index(a_rows, o_rows, row);
  if (a_last == 1) return r;
  return "(" + r + " * " + std::to_string(a_last) + " + " + col + ")";
}

std::string EmitterBase::lit(double x) {
  std::ostringstream os;
  os.precision(17);
  if (x == std::numeric_limits<double>::infinity()) return "INFINITY";
  if (x == -std::numeric_limits<double>::infinity()) return "(-INFINITY)";
  os << x;
  std::string s = os.str();
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string EmitterBase::indent(const std::string& s) {
  std::string out;
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = s.find('\n', start);
    out += "  " + s.substr(start, nl - start + 1);
    start = nl + 1;
  }
  return out;
}

EmitterBase::EmitterBase(const FusedPlan& p, const EmitOptions& o) : p_(p), m_(p.module), o_(o) {
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer& buf = p.buffers[b];
    bool readable = buf.role == Buffer::Role::Input || buf.role == Buffer::Role::GradOutput;
    if (readable && !read_.count(buf.value)) read_[buf.value] = static_cast<int>(b);
    if (!readable) write_[buf.value].push_back(static_cast<int>(b));
  }
  // an aggregation result, or a vertex expression stored by a precompute kernel, is read back
  // from the (first) buffer it was stored to
  std::set<int> stored;
  for (const Kernel& k : p.kernels)
    if (k.precompute) stored.insert(k.values.begin(), k.values.end());
  for (auto& [v, bs] : write_)
    if (!read_.count(v) &&
        (op_info(m_.at(v).op).kind == OpKind::Aggregate || is_row_reduction(m_.at(v)) || stored.count(v)))
      read_[v] = bs.front();
}

// ---- default hooks (no split layouts in C++) ---------------------------------------------------

std::string EmitterBase::split_loop(int64_t) const {
  SEASTAR_THROW(NotImplementedError, "this emitter has no split layouts");
}
int64_t EmitterBase::split_extent(int64_t) const {
  SEASTAR_THROW(NotImplementedError, "this emitter has no split layouts");
}
Operand EmitterBase::whole_view(std::ostringstream&, const std::string&, const Operand&, int64_t) {
  SEASTAR_THROW(NotImplementedError, "this emitter has no split layouts");
}
void EmitterBase::group_reduce(std::ostringstream&, const std::string&, int64_t, const char*) {
  SEASTAR_THROW(NotImplementedError, "this emitter has no thread groups");
}
std::string EmitterBase::store_stmt(const std::string& ptr, const Operand& src, int64_t S) const {
  return "{ auto* o = " + ptr + "; " + loop(Layout::Whole, S) + "o[k] = " + src.expr + "[k]; }";
}

// ---- helpers -----------------------------------------------------------------------------------

std::string EmitterBase::loop(Layout layout, int64_t S) const {
  if (layout == Layout::Split) return split_loop(S);
  return "for (int64_t k = 0; k < " + std::to_string(S) + "; ++k) ";
}

int64_t EmitterBase::extent(Layout layout, int64_t S) const {
  return layout == Layout::Split ? split_extent(S) : S;
}

std::string EmitterBase::at(const Operand& o, const Shape& shape, const Shape& out) const {
  if (o.layout == Layout::Split) {
    if (numel(shape) != numel(out))
      SEASTAR_THROW(ValueError, "emitter: a split operand of ", numel(shape), " elements read for ", numel(out));
    return o.expr + "[t]";
  }
  return o.expr + "[" + bcast_index(shape, out, "k") + "]";
}

std::string EmitterBase::buffer_ptr(int b, const std::string& row) const {
  const Buffer& buf = p_.buffers[b];
  std::string base = std::string("((") + (buf.is_int ? "int64_t" : "T") + "*)" + buffer_array(b) + ")";
  if (buf.rows == Space::Param) return base;
  return "(" + base + " + " + row + " * " + std::to_string(buf.numel) + ")";
}

std::string EmitterBase::endpoint_row(Group endpoint) const {
  if (kind_ == Kernel::Kind::EdgeMap) return endpoint == Group::Src ? "s" : "d";
  return endpoint == group_ ? "c" : "n";
}

std::ostringstream& EmitterBase::stream_for(const std::string& row) {
  if (kind_ == Kernel::Kind::EdgeMap) return body_;
  if (kind_ == Kernel::Kind::VertexMap || kind_ == Kernel::Kind::ParamMap) return pre_;
  return (row == "c" || row.empty()) ? pre_ : body_;
}

void EmitterBase::begin_kernel(const Kernel& k) {
  kind_ = k.kind;
  group_ = k.group;
  computing_.clear();
  if (k.precompute) computing_.insert(k.values.begin(), k.values.end());
  memo_.clear();
  pre_.str("");
  body_.str("");
}

std::string EmitterBase::kernel_comment(int index, const Kernel& k) const {
  std::ostringstream out;
  out << "// kernel " << index << ": ";
  if (k.kind == Kernel::Kind::Traverse) {
    out << (k.group == Group::Dst ? "in-edges (CSC), destination-parallel" : "out-edges (CSR), source-parallel");
  } else {
    out << (k.kind == Kernel::Kind::VertexMap
                ? (k.precompute ? "per-vertex values later kernels read" : "per-vertex outputs")
                : k.kind == Kernel::Kind::EdgeMap ? "per-edge outputs" : "parameter outputs");
  }
  out << "; computes";
  for (int v : k.values) out << " %" << v;
  if (!k.epilogue.empty()) out << ", then per centre";
  for (int v : k.epilogue) out << " %" << v;
  out << "\n";
  return out.str();
}

// ---- the visitor -------------------------------------------------------------------------------

Operand EmitterBase::val(int id, const std::string& row_in) {
  const Value& v = m_.at(id);
  const std::string row = v.space == Space::Param ? "" : (v.space == Space::Edge ? "e" : row_in);
  auto key = std::make_pair(id, row);
  auto hit = memo_.find(key);
  if (hit != memo_.end()) return hit->second;
  auto rb = computing_.count(id) ? read_.end() : read_.find(id);
  if (rb != read_.end()) {
    if (row == "n" && kind_ == Kernel::Kind::Traverse) nbr_rows_.push_back({rb->second, numel(v.shape)});
    return memo_[key] = Operand{buffer_ptr(rb->second, row), Layout::Whole};
  }

  const Site site{v, row, "v" + std::to_string(id) + (row.empty() ? "" : "_" + row), numel(v.shape), layout_of(v),
                  stream_for(row)};
  switch (v.op) {
    case Op::constant: case Op::edge_id: case Op::edge_type: case Op::node_type: case Op::degree:
      return memo_[key] = emit_leaf(site);
    case Op::type_index:
      return memo_[key] = emit_type_index(site);
    case Op::gather:
      return memo_[key] = val(v.inputs[0], endpoint_row(v.group));
    case Op::unsqueeze:
      return memo_[key] = val(v.inputs[0], row);
    case Op::fsum: case Op::fmean: case Op::fmax:
      return memo_[key] = emit_feature_reduction(site);
    case Op::sum_to:
      return memo_[key] = emit_sum_to(site);
    case Op::expand:
      return memo_[key] = emit_expand(site);
    case Op::matvec: case Op::matvec_t:
      return memo_[key] = emit_matvec(site);
    case Op::outer:
      return memo_[key] = emit_outer(site);
#define SEASTAR_CASES_Leaf 0
#define SEASTAR_CASES_Unary 1
#define SEASTAR_CASES_Binary 1
#define SEASTAR_CASES_Gather 0
#define SEASTAR_CASES_Aggregate 0
#define SEASTAR_CASES_Other 0
#include "core/ir/op_cases.inc"
      return memo_[key] = emit_elementwise(site);
    // bound buffers, computed by the traversal or by their own kernels: never an expression here
    case Op::input_vertex: case Op::input_edge: case Op::param: case Op::grad_output:
    case Op::sum_rows: case Op::sum_rows_typed: case Op::softmax:
#define SEASTAR_CASES_Leaf 0
#define SEASTAR_CASES_Unary 0
#define SEASTAR_CASES_Binary 0
#define SEASTAR_CASES_Gather 0
#define SEASTAR_CASES_Aggregate 1
#define SEASTAR_CASES_Other 0
#include "core/ir/op_cases.inc"
      break;
  }
  SEASTAR_THROW(NotImplementedError, "the emitter cannot compute '", op_info(v.op).name, "' here (", v.loc.str(), ")");
}

void EmitterBase::declare(const Site& s, Layout l) {
  s.os << kIndent << ctype(s.v) << " " << s.name << "[" << extent(l, s.S) << "];\n";
}

void EmitterBase::simd_pragma(std::ostringstream& os, Layout l, const std::string& at_indent) const {
  const std::string p = simd(l);
  if (!p.empty()) os << at_indent << p << "\n";
}

void EmitterBase::store(std::ostringstream& os, int value, const Operand& src, const std::string& row, int64_t S) {
  note_width(m_.at(value));
  for (int b : write_[value]) os << "      " << store_stmt(buffer_ptr(b, row), src, S) << "\n";
}

void EmitterBase::reduction(int a, std::ostringstream& init, std::ostringstream& update, std::ostringstream& fin,
                            Traversal& t) {
  const Value& av = m_.at(a);
  const int64_t S = numel(av.shape);
  const std::string acc = "acc" + std::to_string(a);
  if (is_row_reduction(av)) {
    // parameter gradient: a private partial sum per block of centres, summed in block order by
    // the kernel's skeleton; `pp<a>` points at this block's partial sums
    const Value& x = m_.at(av.inputs[0]);
    const bool edge = x.space == Space::Edge;
    const std::string row = edge ? "e" : "c";
    std::string slot_ptr = "pp" + std::to_string(a);
    if (av.op == Op::sum_rows_typed)
      slot_ptr += " + " + val(av.inputs[1], row).expr + "[0] * " + std::to_string(numel(x.shape));
    std::ostringstream& os = edge ? update : fin;
    const std::string ind = edge ? "        " : "      ";
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
        os << ind << "{ T* p = " << slot_ptr << ";\n"
           << ind << "  for (int64_t l = 0; l < " << L << "; ++l)\n"
           << ind << "    for (int64_t i = 0; i < " << K << "; ++i) {\n"
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
    os << ind << "{ T* p = " << slot_ptr << "; const T* y = " << px.expr << "; "
       << loop(px.layout, numel(x.shape)) << "p[k] += y[" << slot(px.layout) << "]; }\n";
    return;
  }
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
  switch (av.op) {
    case Op::agg_sum: case Op::agg_mean:
      init << "      T " << acc << "[" << D << "];\n      " << H << A << " = T(0);\n";
      pragma(update, "        ");
      update << "        " << H << A << " += " << X << ";\n";
      if (av.op == Op::agg_mean)
        fin << "      { const T inv = T(1) / T(" << fn("max") << "<int64_t>(end - beg, 1)); " << H << A
            << " *= inv; }\n";
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
  if (!unstored_.count(a)) store(fin, a, Operand{acc, L}, "c", S);
}

EmitterBase::Traversal EmitterBase::traversal(const Kernel& k) {
  Traversal t;
  std::ostringstream passes;
  unstored_.clear();
  if (epilogue_reads_accumulators())
    for (int a : k.epilogue_only)
      if (accumulator_layout(m_.at(a)) == Layout::Whole) unstored_.insert(a);
  int last_pass = 0;
  for (int ps : k.pass) last_pass = std::max(last_pass, ps);
  for (int pass = 0; pass <= last_pass; ++pass) {
    // edge-level values live inside one pass's edge loop; centre values stay in scope
    for (auto it = memo_.begin(); it != memo_.end();)
      it = (it->first.second == "e" || it->first.second == "n") ? memo_.erase(it) : std::next(it);
    pre_.str("");
    body_.str("");
    nbr_rows_.clear();
    std::ostringstream init, update, fin;
    for (size_t i = 0; i < k.values.size(); ++i)
      if (k.pass[i] == pass) reduction(k.values[i], init, update, fin, t);
    if (pass > 0) pass_barrier(passes);
    passes << "      // pass " << pass << "\n" << pre_.str() << init.str()
           << "      for (int64_t j = beg; j < end; ++j) {\n"
           << "        const int64_t n = nbr[j], e = eid[j];\n        (void)n;\n"
           << prefetch(nbr_rows_) << indent(body_.str()) << update.str() << "      }\n" << fin.str();
  }
  if (!k.epilogue.empty()) {
    // the vertex outputs of the centre, from the results just stored for it
    for (auto it = memo_.begin(); it != memo_.end();)
      it = (it->first.second == "e" || it->first.second == "n") ? memo_.erase(it) : std::next(it);
    pre_.str("");
    body_.str("");
    std::ostringstream fin;
    for (int a : unstored_) memo_[std::make_pair(a, std::string("c"))] = Operand{"acc" + std::to_string(a), Layout::Whole};
    for (int o : k.epilogue) store(fin, o, val(o, "c"), "c", numel(m_.at(o).shape));
    pass_barrier(passes);
    passes << "      // epilogue\n" << pre_.str() << fin.str();
  }
  t.passes = passes.str();
  return t;
}

}  // namespace seastar::codegen
