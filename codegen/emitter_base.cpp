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

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
  return s;
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
  // an aggregation result, a vertex expression stored by a precompute kernel or an edge value
  // stored by the pass that first computes it is read back from the (first) buffer it was stored to
  std::set<int> stored;
  for (const Kernel& k : p.kernels) {
    if (k.precompute) stored.insert(k.values.begin(), k.values.end());
    for (const Kernel::EdgeSave& e : k.saves) {  // an edge value stored where first computed
      stored.insert(e.value);
      if (e.by_slot) by_slot_.insert(e.value);
    }
  }
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
  const char* type = buf.is_int ? "int64_t" : o_.storage_type.empty() || buf.compute_type ? "T" : "S";
  std::string base = std::string("((") + type + "*)" + buffer_array(b) + ")";
  if (buf.rows == Space::Param) return base;
  return "(" + base + " + " + row + " * " + std::to_string(buf.numel) + ")";
}

std::string EmitterBase::buffer_read_ptr(int b, const std::string& row) const {
  if (p_.buffers[b].is_int || p_.buffers[b].compute_type || o_.storage_type.empty()) return buffer_ptr(b, row);
  return "sx::cvt_ptr<S, T>(" + buffer_ptr(b, row) + ")";
}

std::string EmitterBase::endpoint_row(Group endpoint) const {
  if (kind_ == Kernel::Kind::EdgeMap) return endpoint == Group::Src ? "s" : "d";
  return endpoint == group_ ? "c" : "n";
}

TrafficTerm::Per EmitterBase::per_of(const std::string& row) const {
  if (row.empty()) return TrafficTerm::Per::Launch;
  return row == "c" ? TrafficTerm::Per::Vertex : TrafficTerm::Per::Edge;
}

std::string EmitterBase::buffer_label(int b) const {
  const Buffer& buf = p_.buffers[b];
  switch (buf.role) {
    case Buffer::Role::Input: return "input \"" + buf.name + "\"";
    case Buffer::Role::GradOutput: return "grad_output " + std::to_string(buf.index);
    case Buffer::Role::Output: return "output " + std::to_string(buf.index);
    case Buffer::Role::Intermediate: break;
  }
  return "intermediate %" + std::to_string(buf.value);
}

void EmitterBase::note_traffic(TrafficTerm::Per per, const std::string& what, int buffer, int64_t bytes, bool write,
                               bool gathered) {
  for (const TrafficTerm& t : traffic_)  // one row read twice in a pass (two values of one buffer) moves once
    if (t.what == what && t.per == per && t.write == write && t.pass == pass_) return;
  traffic_.push_back({what, buffer, per, write, gathered, bytes, pass_});
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
  traffic_.clear();
  pass_ = 0;
  reads_edge_id_ = reads_nbr_ = false;
  if (k.kind == Kernel::Kind::EdgeMap) {  // the skeleton reads both endpoints of every edge
    note_traffic(TrafficTerm::Per::Edge, "graph src", -1, index_bytes(), false, false);
    note_traffic(TrafficTerm::Per::Edge, "graph dst", -1, index_bytes(), false, false);
  }
  if (k.precompute) computing_.insert(k.values.begin(), k.values.end());
  saves_ = k.saves;
  saving_.clear();
  if (k.kind == Kernel::Kind::EdgeMap)
    for (const Kernel::EdgeSave& e : k.saves) saving_.insert(e.value);
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
  if (!k.saves.empty()) out << "; stores per edge";
  for (const Kernel::EdgeSave& e : k.saves) out << " %" << e.value;
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
  if (kind_ == Kernel::Kind::Traverse && row == "n") reads_nbr_ = true;
  auto rb = computing_.count(id) || saving_.count(id) ? read_.end() : read_.find(id);
  if (rb != read_.end() && by_slot_.count(id)) {  // a stored edge value in the traversal's edge order
    note_traffic(per_of(row), buffer_label(rb->second), rb->second, numel(v.shape) * storage_bytes(), false, false);
    return memo_[key] = Operand{buffer_read_ptr(rb->second, kEdgeSlot), Layout::Whole};
  }
  if (rb != read_.end()) {
    if (kind_ == Kernel::Kind::Traverse && (row == "n" || row == "e"))
      (row == "n" ? random_rows_.nbr : random_rows_.edge).push_back({rb->second, numel(v.shape)});
    const Buffer& buf = p_.buffers[rb->second];
    const bool through_eid = kind_ == Kernel::Kind::Traverse && row == "e";
    reads_edge_id_ = reads_edge_id_ || through_eid;
    note_traffic(per_of(row), buffer_label(rb->second), rb->second, buf.numel * (buf.is_int ? 8 : storage_bytes()),
                 false, row == "n" || row == "s" || row == "d" || through_eid);
    return memo_[key] = Operand{buffer_read_ptr(rb->second, row), Layout::Whole};
  }

  const Site site{v, row, "v" + std::to_string(id) + (row.empty() ? "" : "_" + row), numel(v.shape), layout_of(v),
                  stream_for(row)};
  const Operand out = compute(site);
  memo_[key] = out;
  // an edge value this pass stores for later passes and kernels (save_edge_values.h)
  if (saving_.count(id)) store(site.os, id, out, by_slot_.count(id) ? kEdgeSlot : row, site.S);
  return out;
}

Operand EmitterBase::compute(const Site& site) {
  const Value& v = site.v;
  const std::string& row = site.row;
  switch (v.op) {
    case Op::constant: case Op::edge_id: case Op::edge_type: case Op::node_type: case Op::degree:
      return emit_leaf(site);
    case Op::type_index:
      return emit_type_index(site);
    case Op::gather:
      return val(v.inputs[0], endpoint_row(v.group));
    case Op::unsqueeze:
      return val(v.inputs[0], row);
    case Op::fsum: case Op::fmean: case Op::fmax:
      return emit_feature_reduction(site);
    case Op::sum_to:
      return emit_sum_to(site);
    case Op::expand:
      return emit_expand(site);
    case Op::matvec: case Op::matvec_t:
      return emit_matvec(site);
    case Op::outer:
      return emit_outer(site);
#define SEASTAR_CASES_Leaf 0
#define SEASTAR_CASES_Unary 1
#define SEASTAR_CASES_Binary 1
#define SEASTAR_CASES_Gather 0
#define SEASTAR_CASES_Aggregate 0
#define SEASTAR_CASES_Other 0
#include "core/ir/op_cases.inc"
      return emit_elementwise(site);
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
  for (int b : write_[value]) {
    os << "      " << store_stmt(buffer_ptr(b, row), src, S) << "\n";
    note_traffic(per_of(row), buffer_label(b), b, S * (p_.buffers[b].is_int ? 8 : storage_bytes()), true, false);
  }
}

void EmitterBase::reduction(int a, std::ostringstream& init, std::ostringstream& update, std::ostringstream& fin,
                            Traversal& t) {
  if (is_row_reduction(m_.at(a))) {
    emit_row_reduction(a, update, fin, t);
    return;
  }
  const Operand acc = emit_aggregation(a, init, update, fin);
  if (!unstored_.count(a)) store(fin, a, acc, "c", numel(m_.at(a).shape));
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
  const bool slot_rows = std::any_of(k.saves.begin(), k.saves.end(), [](const Kernel::EdgeSave& e) { return e.by_slot; });
  // the skeleton, per centre: its slot in the degree order and its two offsets
  const std::string index = k.group == Group::Src ? "graph out_" : "graph in_";
  note_traffic(TrafficTerm::Per::Vertex, index + "order", -1, index_bytes(), false, false);
  note_traffic(TrafficTerm::Per::Vertex, index + "ptr", -1, 2 * index_bytes(), false, false);
  for (int pass = 0; pass <= last_pass; ++pass) {
    pass_ = pass;
    reads_edge_id_ = reads_nbr_ = false;
    saving_.clear();
    for (const Kernel::EdgeSave& e : saves_)
      if (e.pass == pass) saving_.insert(e.value);
    // edge-level values live inside one pass's edge loop; centre values stay in scope
    for (auto it = memo_.begin(); it != memo_.end();)
      it = (it->first.second == "e" || it->first.second == "n") ? memo_.erase(it) : std::next(it);
    pre_.str("");
    body_.str("");
    random_rows_ = {};
    std::ostringstream init, update, fin;
    pass_accumulators_.clear();
    for (size_t i = 0; i < k.values.size(); ++i)
      if (k.pass[i] == pass) reduction(k.values[i], init, update, fin, t);
    // per edge of this pass: the neighbour and the original edge id, when the pass uses them
    if (reads_nbr_) note_traffic(TrafficTerm::Per::Edge, index + "nbr", -1, index_bytes(), false, false);
    if (reads_edge_id_) note_traffic(TrafficTerm::Per::Edge, index + "eid", -1, index_bytes(), false, false);
    if (pass > 0) pass_barrier(passes);
    passes << "      // pass " << pass << "\n" << pre_.str() << init.str()
           << "      for (int64_t " << edge_loop_bounds() << "; ++j) {\n"
           << "        const int64_t n = nbr[j], e = eid[j]" << (slot_rows ? std::string(", ") + kEdgeSlot + " = j" : "")
           << ";\n        (void)n;" << (slot_rows ? std::string(" (void)") + kEdgeSlot + ";" : "") << "\n"
           << prefetch(random_rows_) << indent(body_.str()) << update.str() << "      }\n";
    after_edge_loop(passes);
    passes << once_per_centre(fin.str());
  }
  saving_.clear();
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
    passes << "      // epilogue\n" << once_per_centre(pre_.str() + fin.str());
  }
  t.passes = passes.str();
  return t;
}

}  // namespace seastar::codegen
