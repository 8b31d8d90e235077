/** \file The typing rules of GIR (dtype, space and feature shape of each value); see typing.h. */
#include "core/ir/typing.h"

#include <algorithm>

#include "core/util/errors.h"

namespace seastar::ir {

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  const size_t r = std::max(a.size(), b.size());
  Shape s(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    s[i] = da == 1 ? db : da;
  }
  *out = std::move(s);
  return true;
}

namespace {

Space combine(Space a, Space b, const char* op) {
  if (a == Space::Param) return b;
  if (b == Space::Param || a == b) return a;
  SEASTAR_THROW(ValueError, "cannot combine a ", to_string(a), " value with a ", to_string(b), " value in '", op,
                "': read the vertex value through an edge endpoint (e.src / e.dst / v) first");
}

Shape broadcast(const Shape& a, const Shape& b, const char* op) {
  Shape out;
  if (!broadcast_shapes(a, b, &out))
    SEASTAR_THROW(ValueError, "shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast in '", op, "'");
  return out;
}

void need_float(const Value& x, const char* op) {
  if (x.dtype != DType::Float)
    SEASTAR_THROW(ValueError, "'", op, "' needs a floating-point operand, got an integer value (%", x.id,
                  "): types and ids are only for indexing and comparison");
}

/// The type, space and shape of a structural op (OpKind::Other): each has its own rule.
void infer_structural(const Module& m, Value& v) {
  const OpInfo& info = op_info(v.op);
  auto in = [&](int i) -> const Value& { return m.at(v.inputs[i]); };
  switch (v.op) {
    case Op::fsum: case Op::fmean: case Op::fmax:
      need_float(in(0), info.name);
      if (in(0).shape.empty()) SEASTAR_THROW(ValueError, "'", info.name, "' needs a value with a feature axis, got a scalar");
      v.dtype = DType::Float, v.space = in(0).space;
      v.shape.assign(in(0).shape.begin(), in(0).shape.end() - 1);
      return;
    case Op::unsqueeze:
      v.dtype = in(0).dtype, v.space = in(0).space, v.shape = in(0).shape;
      v.shape.push_back(1);
      return;
    case Op::sum_to: case Op::expand: {
      need_float(in(0), info.name);
      const Shape& big = v.op == Op::sum_to ? in(0).shape : v.attr_shape;
      const Shape& small = v.op == Op::sum_to ? v.attr_shape : in(0).shape;
      if (broadcast(big, small, info.name) != big)
        SEASTAR_THROW(ValueError, "'", info.name, "' cannot map ", shape_str(in(0).shape), " to ", shape_str(v.attr_shape));
      v.dtype = DType::Float, v.space = in(0).space, v.shape = v.attr_shape;
      return;
    }
    case Op::matvec: case Op::matvec_t: {
      const Value &x = in(0), &w = in(1);
      need_float(x, info.name);
      need_float(w, info.name);
      if (w.shape.size() != 2)
        SEASTAR_THROW(ValueError, "the matrix of '@' must be 2-D (a Param [in, out] or P[type] of a [types, in, out] "
                      "table), got shape ", shape_str(w.shape));
      if (x.shape.empty()) SEASTAR_THROW(ValueError, "'@' needs a vector on the left, got a scalar");
      int64_t k = v.op == Op::matvec ? w.shape[0] : w.shape[1], n = v.op == Op::matvec ? w.shape[1] : w.shape[0];
      if (x.shape.back() != k)
        SEASTAR_THROW(ValueError, "shapes ", shape_str(x.shape), " @ ", shape_str(w.shape), " do not match: ",
                      x.shape.back(), " != ", k);
      v.dtype = DType::Float, v.space = combine(x.space, w.space, info.name);
      v.shape = x.shape;
      v.shape.back() = n;
      return;
    }
    case Op::outer: {
      const Value &x = in(0), &g = in(1);
      if (x.shape.empty() || g.shape.empty() ||
          !std::equal(x.shape.begin(), x.shape.end() - 1, g.shape.begin(), g.shape.end() - 1))
        SEASTAR_THROW(ValueError, "'outer' needs vectors with equal leading axes, got ", shape_str(x.shape), " and ",
                      shape_str(g.shape));
      v.dtype = DType::Float, v.space = combine(x.space, g.space, info.name);
      v.shape = {x.shape.back(), g.shape.back()};
      return;
    }
    case Op::type_index: {
      const Value &p = in(0), &t = in(1);
      if (p.space != Space::Param || p.shape.empty())
        SEASTAR_THROW(ValueError, "only a Param table [types, ...] can be indexed by a type, got a ",
                      to_string(p.space), " value of shape ", shape_str(p.shape));
      if (t.dtype != DType::Int) SEASTAR_THROW(ValueError, "a table is indexed by e.type / v.type, not by a float value");
      v.dtype = p.dtype, v.space = t.space;
      v.shape.assign(p.shape.begin() + 1, p.shape.end());
      return;
    }
    case Op::sum_rows:
      if (in(0).space == Space::Param) SEASTAR_THROW(ValueError, "sum_rows of a Param value");
      v.dtype = DType::Float, v.space = Space::Param, v.shape = in(0).shape;
      return;
    case Op::sum_rows_typed:
      if (in(0).space == Space::Param || in(1).dtype != DType::Int || in(1).space != in(0).space)
        SEASTAR_THROW(ValueError, "sum_rows_typed needs rows and a type of the same space");
      v.dtype = DType::Float, v.space = Space::Param;
      v.shape = in(0).shape;
      v.shape.insert(v.shape.begin(), static_cast<int64_t>(v.p0));
      return;
    case Op::softmax:
      if (in(0).space != Space::Edge)
        SEASTAR_THROW(ValueError, "softmax normalises an Edge value over a vertex's edges, got a ",
                      to_string(in(0).space), " value");
      if (v.group == Group::None) SEASTAR_THROW(ValueError, "softmax needs a group (src or dst)");
      need_float(in(0), info.name);
      v.dtype = DType::Float, v.space = Space::Edge, v.shape = in(0).shape;
      return;
#define SEASTAR_CASES_Leaf 1
#define SEASTAR_CASES_Unary 1
#define SEASTAR_CASES_Binary 1
#define SEASTAR_CASES_Gather 1
#define SEASTAR_CASES_Aggregate 1
#define SEASTAR_CASES_Other 0
#include "core/ir/op_cases.inc"
      break;  // typed by kind above
  }
  SEASTAR_THROW(NotImplementedError, "no shape rule for '", info.name, "'");
}

}  // namespace

void infer_value(const Module& m, Value& v) {
  const OpInfo& info = op_info(v.op);
  if (static_cast<int>(v.inputs.size()) != info.arity)
    SEASTAR_THROW(ValueError, "'", info.name, "' takes ", info.arity, " inputs, got ", v.inputs.size());
  for (int in : v.inputs)
    if (in < 0 || in >= v.id) SEASTAR_THROW(ValueError, "'", info.name, "' uses %", in, " before it is defined");
  auto in = [&](int i) -> const Value& { return m.at(v.inputs[i]); };

  switch (info.kind) {
    case OpKind::Leaf:
      return;  // leaves are typed by whoever creates them
    case OpKind::Gather:
      if (in(0).space != Space::Vertex)
        SEASTAR_THROW(ValueError, "gather reads a Vertex value, got a ", to_string(in(0).space), " value");
      if (v.group == Group::None) SEASTAR_THROW(ValueError, "gather needs an endpoint (src or dst)");
      v.space = Space::Edge, v.dtype = in(0).dtype, v.shape = in(0).shape;
      return;
    case OpKind::Unary:
      if (v.op == Op::cast) {
        v.dtype = DType::Float;
      } else {
        need_float(in(0), info.name);
        v.dtype = DType::Float;
      }
      v.space = in(0).space, v.shape = in(0).shape;
      return;
    case OpKind::Binary:
      if (v.op == Op::eq) {
        if (in(0).dtype != in(1).dtype) SEASTAR_THROW(ValueError, "'eq' compares values of one dtype");
      } else {
        need_float(in(0), info.name);
        need_float(in(1), info.name);
      }
      v.dtype = DType::Float;
      v.space = combine(in(0).space, in(1).space, info.name);
      v.shape = broadcast(in(0).shape, in(1).shape, info.name);
      return;
    case OpKind::Aggregate:
      if (in(0).space != Space::Edge)
        SEASTAR_THROW(ValueError, "'", info.name, "' aggregates an Edge value, got a ", to_string(in(0).space),
                      " value");
      if (v.group == Group::None) SEASTAR_THROW(ValueError, "'", info.name, "' needs a group (src or dst)");
      need_float(in(0), info.name);
      v.space = Space::Vertex, v.shape = in(0).shape;
      v.dtype = (v.op == Op::agg_argmax || v.op == Op::agg_argmin) ? DType::Int : DType::Float;
      if (v.op == Op::agg_softmax_sum) {
        need_float(in(1), info.name);
        combine(in(0).space, in(1).space, info.name);
        v.shape = broadcast(in(0).shape, in(1).shape, info.name);
      }
      return;
    case OpKind::Other:
      infer_structural(m, v);
      return;
  }
}

}  // namespace seastar::ir
