/** \file The visitor's leaves: constants, edge ids and types, node types, degrees, typed-table rows. */
#include "codegen/emitter_base.h"

#include "core/util/errors.h"

namespace seastar::codegen {
using namespace ir;

Operand EmitterBase::emit_leaf(const Site& s) {
  const auto& [v, row, name, S, lay, os] = s;  // the value being emitted (EmitterBase::Site)
  const std::string ind = kIndent;
  if (v.op == Op::constant) {
    os << ind << "const T " << name << "[1] = {T(" << lit(v.p0) << ")};\n";
  } else if (v.op == Op::edge_id) {
    reads_edge_id_ = reads_edge_id_ || kind_ == Kernel::Kind::Traverse;
    os << ind << "const int64_t " << name << "[1] = {e};\n";
  } else if (v.op == Op::edge_type) {
    reads_edge_id_ = reads_edge_id_ || kind_ == Kernel::Kind::Traverse;
    note_traffic(TrafficTerm::Per::Edge, "graph edge_type", -1, index_bytes(), false, kind_ == Kernel::Kind::Traverse);
    os << ind << "const int64_t " << name << "[1] = {(int64_t)((const I*)" << graph_array(launch::kEdgeType) << ")[e]};\n";
  } else if (v.op == Op::node_type) {
    note_traffic(per_of(row), "graph node_type", -1, index_bytes(), false, row != "c");
    os << ind << "const int64_t " << name << "[1] = {(int64_t)((const I*)" << graph_array(launch::kNodeType) << ")[" << row << "]};\n";
  } else if (v.op == Op::degree) {
    const int ptr = launch::edge_index_base(v.group == Group::Src);
    // a traversal's own centre offsets are read by its skeleton already
    if (!(kind_ == Kernel::Kind::Traverse && row == "c" && v.group == group_))
      note_traffic(per_of(row), v.group == Group::Src ? "graph out_ptr" : "graph in_ptr", -1, 2 * index_bytes(), false,
                   row != "c");
    os << ind << "const T " << name << "[1] = {T(((const I*)" << graph_array(ptr) << ")[" << row
       << " + 1] - ((const I*)" << graph_array(ptr) << ")[" << row << "])};\n";
  } else {
    SEASTAR_THROW(NotImplementedError, "emit_leaf: '", op_info(v.op).name, "' is not a leaf (", v.loc.str(), ")");
  }
  return Operand{name, Layout::Whole};
}

Operand EmitterBase::emit_type_index(const Site& s) {
  const auto& [v, row, name, S, lay, os] = s;  // the value being emitted (EmitterBase::Site)
  const std::string ind = kIndent;
  std::string table = val(v.inputs[0], "").expr, t = val(v.inputs[1], row).expr;
  os << ind << "const auto " << name << " = " << table << " + " << t << "[0] * " << S << ";\n";
  return Operand{name, Layout::Whole};
}

}  // namespace seastar::codegen
