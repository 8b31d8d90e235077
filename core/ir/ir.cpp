/** \file The op table, the Module and the printer. */
#include "core/ir/ir.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/util/errors.h"

namespace seastar::ir {

namespace {

// "negative_slope=0.01" or "min,max" -> the parameters, in order
std::vector<OpParam> parse_params(const char* op, const char* spec) {
  std::vector<OpParam> out;
  std::string s(spec);
  for (size_t at = 0; at < s.size();) {
    size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(at, end - at);
    OpParam p;
    const size_t eq = item.find('=');
    p.name = item.substr(0, eq);
    if (eq != std::string::npos) p.has_default = true, p.default_value = std::stod(item.substr(eq + 1));
    out.push_back(p);
    at = end + 1;
  }
  if (out.size() > 2) SEASTAR_THROW(Error, "ops.def: '", op, "' has more than two parameters");
  return out;
}

constexpr bool is_public_surface(const char* s) { return s[0] == 'P'; }

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> ops = {
#define SEASTAR_OP(name, kind, arity, expr, params, surface, ref, doc) \
  {#name, OpKind::kind, arity, #expr, parse_params(#name, params), is_public_surface(#surface), ref, doc},
#include "core/ir/ops.def"
#undef SEASTAR_OP
  };
  return ops;
}

}  // namespace

const OpInfo& op_info(Op op) { return table()[static_cast<size_t>(op)]; }
int num_ops() { return static_cast<int>(table().size()); }

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::Leaf: return "Leaf";
    case OpKind::Unary: return "Unary";
    case OpKind::Binary: return "Binary";
    case OpKind::Gather: return "Gather";
    case OpKind::Aggregate: return "Aggregate";
    case OpKind::Other: return "Other";
  }
  return "?";
}

bool eval_elementwise(Op op, double a, double b, double p0, double p1, double* out) {
  using T = double;
  (void)b, (void)p0, (void)p1;
  switch (op) {
#define SEASTAR_EVAL_Leaf(name, expr) case Op::name: return false;
#define SEASTAR_EVAL_Gather SEASTAR_EVAL_Leaf
#define SEASTAR_EVAL_Aggregate SEASTAR_EVAL_Leaf
#define SEASTAR_EVAL_Other SEASTAR_EVAL_Leaf
#define SEASTAR_EVAL_Unary(name, expr) case Op::name: *out = static_cast<T>(expr); return true;
#define SEASTAR_EVAL_Binary SEASTAR_EVAL_Unary
#define SEASTAR_OP(name, kind, arity, expr, ...) SEASTAR_EVAL_##kind(name, expr)
#include "core/ir/ops.def"
#undef SEASTAR_OP
#undef SEASTAR_EVAL_Leaf
#undef SEASTAR_EVAL_Gather
#undef SEASTAR_EVAL_Aggregate
#undef SEASTAR_EVAL_Other
#undef SEASTAR_EVAL_Unary
#undef SEASTAR_EVAL_Binary
  }
  return false;
}

bool op_from_name(const std::string& name, Op* out) {
  const auto& kOps = table();
  for (size_t i = 0; i < kOps.size(); ++i) {
    if (name == kOps[i].name) {
      *out = static_cast<Op>(i);
      return true;
    }
  }
  return false;
}

std::string print_number(double x) {
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

// An op prints the scalar attributes its row names; the rest are zero and would only add noise.
int printed_params(Op op) { return static_cast<int>(op_info(op).params.size()); }
}  // namespace

std::string print_value(const Value& v) {
  std::ostringstream os;
  os << "%" << v.id << " = " << op_info(v.op).name;
  if (v.group != Group::None) os << "." << to_string(v.group);
  if (!v.name.empty()) os << " \"" << v.name << "\"";
  for (size_t i = 0; i < v.inputs.size(); ++i) os << (i ? ", %" : " %") << v.inputs[i];
  int np = printed_params(v.op);
  if (np >= 1) os << " {" << print_number(v.p0) << (np == 2 ? ", " + print_number(v.p1) : "") << "}";
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
