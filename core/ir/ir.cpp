/** \file The op table, the Module and the printer. */
#include "core/ir/ir.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/util/errors.h"

namespace seastar::ir {

static const OpInfo kOps[] = {
#define SEASTAR_OP(name, kind, arity, expr) {#name, OpKind::kind, arity, expr},
#include "core/ir/ops.def"
#undef SEASTAR_OP
};

const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }

bool op_from_name(const std::string& name, Op* out) {
  for (size_t i = 0; i < sizeof(kOps) / sizeof(kOps[0]); ++i) {
    if (name == kOps[i].name) {
      *out = static_cast<Op>(i);
      return true;
    }
  }
  return false;
}

const char* to_string(DType d) { return d == DType::Float ? "f" : "i64"; }
const char* to_string(Space s) {
  switch (s) {
    case Space::Vertex: return "Vertex";
    case Space::Edge: return "Edge";
    case Space::Param: return "Param";
  }
  return "?";
}
const char* to_string(Group g) {
  switch (g) {
    case Group::None: return "none";
    case Group::Src: return "src";
    case Group::Dst: return "dst";
  }
  return "?";
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string Loc::str() const {
  if (file.empty()) return "<unknown location>";
  return line > 0 ? file + ":" + std::to_string(line) : file;  // C++ programs have a name, no line
}

int Module::add(Value v) {
  v.id = size();
  values.push_back(std::move(v));
  return values.back().id;
}

namespace {
std::string num(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  // the shortest form that reads back to the same double: 0.2, not 0.20000000000000001
  for (int prec = 1; prec <= 17; ++prec) {
    std::ostringstream os;
    os << std::setprecision(prec) << x;
    if (std::stod(os.str()) == x) return os.str();
  }
  std::ostringstream os;
  os << std::setprecision(17) << x;
  return os.str();
}

// Which scalar attributes an op prints; the rest are zero and would only add noise.
int printed_params(Op op) {
  switch (op) {
    case Op::constant: case Op::leaky_relu: case Op::elu: case Op::pow: case Op::step:
    case Op::elu_grad: case Op::grad_output: case Op::sum_rows_typed:
      return 1;
    case Op::clamp: case Op::inside:
      return 2;
    default:
      return 0;
  }
}
}  // namespace

std::string print_value(const Value& v) {
  std::ostringstream os;
  os << "%" << v.id << " = " << op_info(v.op).name;
  if (v.group != Group::None) os << "." << to_string(v.group);
  if (!v.name.empty()) os << " \"" << v.name << "\"";
  for (size_t i = 0; i < v.inputs.size(); ++i) os << (i ? ", %" : " %") << v.inputs[i];
  int np = printed_params(v.op);
  if (np >= 1) os << " {" << num(v.p0) << (np == 2 ? ", " + num(v.p1) : "") << "}";
  if (v.op == Op::sum_to || v.op == Op::expand) os << " to " << shape_str(v.attr_shape);
  os << " : " << to_string(v.space) << " " << to_string(v.dtype) << shape_str(v.shape);
  return os.str();
}

std::string print(const Module& m, const std::string& title) {
  std::ostringstream os;
  os << title << " {\n";
  for (const Value& v : m.values) os << "  " << print_value(v) << "\n";
  os << "  return";
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    os << (i ? ", %" : " %") << m.outputs[i];
    if (i < m.output_names.size() && !m.output_names[i].empty()) os << " as \"" << m.output_names[i] << "\"";
  }
  os << "\n}\n";
  return os.str();
}

}  // namespace seastar::ir
