/** \file The Builder and the user-level handles; see builder.h. */
#include "core/frontend/builder.h"

#include <cmath>

#include "core/passes/passes.h"
#include "core/util/errors.h"

namespace seastar {
using namespace ir;

const Value& Var::value() const {
  if (!b_) SEASTAR_THROW(ValueError, "use of an undefined traced value");
  return b_->module().at(id_);
}

Builder::Builder(std::map<std::string, TensorSig> bindings, GraphSig graph)
    : bindings_(std::move(bindings)), graph_(graph) {}

void Builder::fail(const std::string& message) const { throw TraceError(loc_.str() + ": " + message); }

const TensorSig& Builder::binding(const std::string& name, const char* used_as) {
  auto it = bindings_.find(name);
  if (it == bindings_.end()) {
    std::string known;
    for (auto& kv : bindings_) known += (known.empty() ? "" : ", ") + kv.first;
    fail("'" + name + "' is not bound: pass it by name when calling the program (bound: " +
         (known.empty() ? "nothing" : known) + ")");
  }
  auto [pos, inserted] = used_as_.emplace(name, used_as);
  if (!inserted && pos->second != used_as)
    fail("'" + name + "' is used both as a " + pos->second + " tensor and as a " + used_as + " tensor");
  const std::vector<int64_t>& shape = it->second.shape;
  if (std::string(used_as) != "param" && shape.empty())
    fail("'" + name + "' is used as a " + used_as + " tensor but is a scalar (0-d) tensor");
  // an empty feature axis (say [N, 0], or a weight [R, 16, 0]) leaves nothing to compute; the
  // row count of a vertex or edge tensor may be 0 (an empty graph)
  for (size_t i = std::string(used_as) == "param" ? 0 : 1; i < shape.size(); ++i)
    if (shape[i] == 0) {
      std::string dims;
      for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      fail("'" + name + "' has an empty axis: shape [" + dims + "]; a " + used_as +
           " tensor needs at least one element per " + (std::string(used_as) == "param" ? "axis" : "row"));
    }
  return it->second;
}

Var Builder::append(Value v, Group elist) {
  v.loc = loc_;
  v.id = m_.size();
  try {
    ir::infer_value(m_, v);
  } catch (const Error& e) {
    fail(e.what());
  }
  // Leaves are unique per name and kind: reusing them keeps printed IR small and stable.
  if (op_info(v.op).kind == OpKind::Leaf) {
    for (const Value& u : m_.values)
      if (u.op == v.op && u.name == v.name && u.group == v.group && u.p0 == v.p0 && u.shape == v.shape &&
          u.dtype == v.dtype)
        return Var(this, u.id, elist);
  }
  return Var(this, m_.add(std::move(v)), elist);
}

namespace {
Value leaf(Op op, DType dtype, Space space, Shape shape, std::string name = "", Group group = Group::None) {
  Value v;
  v.op = op, v.dtype = dtype, v.space = space, v.shape = std::move(shape), v.name = std::move(name), v.group = group;
  return v;
}
}  // namespace

Var Builder::vertex_input(const std::string& name) {
  const auto& sig = binding(name, "vertex");
  return append(leaf(Op::input_vertex, DType::Float, Space::Vertex, Shape(sig.shape.begin() + 1, sig.shape.end()), name),
                Group::None);
}

Var Builder::edge_input(const std::string& name, Group elist) {
  const auto& sig = binding(name, "edge");
  return append(leaf(Op::input_edge, DType::Float, Space::Edge, Shape(sig.shape.begin() + 1, sig.shape.end()), name),
                elist);
}

Var Builder::param(const std::string& name) {
  const auto& sig = binding(name, "param");
  return append(leaf(Op::param, DType::Float, Space::Param, sig.shape, name), Group::None);
}

Var Builder::constant(double value) {
  Value v = leaf(Op::constant, DType::Float, Space::Param, {});
  v.p0 = value;
  return append(std::move(v), Group::None);
}

Var Builder::edge_id(Group elist) { return append(leaf(Op::edge_id, DType::Int, Space::Edge, {}), elist); }

Var Builder::edge_type(Group elist) {
  if (!graph_.has_edge_types) fail("e.type is used but the graph has no edge types (build it with edge_type=...)");
  return append(leaf(Op::edge_type, DType::Int, Space::Edge, {}), elist);
}

Var Builder::node_type() {
  if (!graph_.has_node_types) fail("a node type is used but the graph has no node types (build it with node_type=...)");
  return append(leaf(Op::node_type, DType::Int, Space::Vertex, {}), Group::None);
}

Var Builder::degree(Group group) {
  return append(leaf(Op::degree, DType::Float, Space::Vertex, {}, "", group), Group::None);
}

Var Builder::gather(const Var& x, Group endpoint, Group elist) {
  Value v;
  v.op = Op::gather, v.inputs = {x.id()}, v.group = endpoint;
  return append(std::move(v), elist);
}

// A Vertex value used with an Edge value means "the centre vertex's value": for in-edges
// the centre is each edge's destination, for out-edges its source.
Var Builder::to_edge(const Var& x, Group elist) {
  if (x.value().space != Space::Vertex) return x;
  return gather(x, elist, elist);
}

Var Builder::unary(Op op, const Var& x, double p0, double p1) {
  Value v;
  v.op = op, v.inputs = {x.id()}, v.p0 = p0, v.p1 = p1;
  return append(std::move(v), x.elist());
}

Var Builder::elementwise(Op op, const std::vector<Var>& inputs, const std::vector<double>& params) {
  const OpInfo& info = op_info(op);
  std::string signature = std::string(info.name) + "(" + (info.arity == 2 ? "a, b" : "x");
  for (const OpParam& p : info.params)
    signature += ", " + p.name + (p.has_default ? "=" + print_number(p.default_value) : "");
  signature += ")";
  if (!info.is_public || (info.kind != OpKind::Unary && info.kind != OpKind::Binary))
    fail(std::string("'") + info.name + "' is not a public elementwise op");
  if (static_cast<int>(inputs.size()) != info.arity)
    fail(signature + " takes " + std::to_string(info.arity) + " values, got " + std::to_string(inputs.size()));
  if (params.size() > info.params.size())
    fail(signature + " takes " + std::to_string(info.params.size()) + " parameters, got " +
         std::to_string(params.size()));
  double p[2] = {0, 0};
  for (size_t i = 0; i < info.params.size(); ++i) {
    if (i < params.size()) {
      p[i] = params[i];
    } else if (info.params[i].has_default) {
      p[i] = info.params[i].default_value;
    } else {
      fail(signature + " needs '" + info.params[i].name + "'");
    }
    if (std::isnan(p[i])) fail(signature + ": '" + info.params[i].name + "' is NaN");
  }
  if (op == Op::clamp && !(p[0] <= p[1]))
    fail("clamp needs min <= max, got " + print_number(p[0]) + " > " + print_number(p[1]));
  if (op == Op::softplus && p[0] == 0) fail("softplus needs beta != 0");
  if (info.kind == OpKind::Binary) return binary(op, inputs[0], inputs[1]);
  return unary(op, inputs[0], p[0], p[1]);
}

Var Builder::binary(Op op, const Var& a0, const Var& b0) {
  if (a0.builder() != this || b0.builder() != this) fail("values from two different traces are combined");
  Group ea = a0.elist(), eb = b0.elist();
  if (ea != Group::None && eb != Group::None && ea != eb)
    fail("values of v.in_edges() and v.out_edges() are combined: the two lists pair different edges");
  Group elist = ea != Group::None ? ea : eb;
  Var a = a0, b = b0;
  if (elist != Group::None) {
    a = to_edge(a0, elist);
    b = to_edge(b0, elist);
  }
  Value v;
  v.op = op, v.inputs = {a.id(), b.id()};
  return append(std::move(v), elist);
}

Var Builder::reduce_features(Op op, const Var& x) {
  Value v;
  v.op = op, v.inputs = {x.id()};
  return append(std::move(v), x.elist());
}

Var Builder::unsqueeze(const Var& x) {
  Value v;
  v.op = Op::unsqueeze, v.inputs = {x.id()};
  return append(std::move(v), x.elist());
}

Var Builder::matmul(const Var& x0, const Var& w0) {
  Group elist = x0.elist() != Group::None ? x0.elist() : w0.elist();
  Var x = x0, w = w0;
  if (elist != Group::None) {
    x = to_edge(x0, elist);
    w = to_edge(w0, elist);
  }
  Value v;
  v.op = Op::matvec, v.inputs = {x.id(), w.id()};
  return append(std::move(v), elist);
}

Var Builder::type_index(const Var& table, const Var& type) {
  const Value& t = type.value();
  if (t.dtype != DType::Int) fail("a typed parameter must be indexed by e.type, v.type or e.src.type");
  int64_t count = t.op == Op::edge_type ? graph_.num_edge_types : graph_.num_node_types;
  const Value& p = table.value();
  if (t.op == Op::edge_type || t.op == Op::node_type || (t.op == Op::gather)) {
    if (!p.shape.empty() && p.shape[0] != count)
      fail("the table has " + std::to_string(p.shape[0]) + " rows but the graph has " + std::to_string(count) +
           (t.op == Op::edge_type ? " edge types" : " node types"));
  }
  Value v;
  v.op = Op::type_index, v.inputs = {table.id(), type.id()};
  return append(std::move(v), type.elist());
}

Var Builder::aggregate(Op op, const Var& x, Ties ties) {
  if (x.value().space != Space::Edge || x.elist() == Group::None)
    fail(std::string("'") + op_info(op).name + "' needs values of an edge list, e.g. "
         "[f(e) for e in v.in_edges()]; got a " + to_string(x.value().space) + " value");
  if (ties != Ties::even && op != Op::agg_max && op != Op::agg_min)
    fail(std::string("'") + op_info(op).name + "' has no tie rule to choose (only max and min do)");
  Value v;
  v.op = op, v.inputs = {x.id()}, v.group = x.elist(), v.p0 = static_cast<double>(ties);
  return append(std::move(v), Group::None);
}

Var Builder::softmax(const Var& x) {
  if (x.value().space != Space::Edge || x.elist() == Group::None)
    fail(std::string("softmax normalises values of an edge list, e.g. [score(e) for e in v.in_edges()]; got a ") +
         to_string(x.value().space) + " value");
  Value v;
  v.op = Op::softmax, v.inputs = {x.id()}, v.group = x.elist();
  return append(std::move(v), x.elist());
}

Module Builder::finish(const std::vector<Var>& outputs, const std::vector<std::string>& names) {
  if (outputs.empty()) fail("the vertex program returns nothing");
  Module m = m_;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Value& v = outputs[i].value();
    if (v.space == Space::Param)
      fail("output " + std::to_string(i) + " does not depend on the graph (a Param/constant value)");
    if (v.dtype != DType::Float) fail("output " + std::to_string(i) + " is an integer value (a type or id)");
    m.outputs.push_back(v.id);
    m.output_names.push_back(i < names.size() ? names[i] : "");
  }
  return m;
}

// ---- user-level handles ----------------------------------------------------------------

Var Endpoint::operator[](const std::string& name) const {
  return b_->gather(b_->vertex_input(name), endpoint_, elist_);
}

Var Endpoint::type() const { return b_->gather(b_->node_type(), endpoint_, elist_); }

namespace {
Var scalar(const Var& like, double x) { return like.builder()->constant(x); }
}  // namespace

Var operator+(const Var& a, const Var& b) { return a.builder()->binary(Op::add, a, b); }
Var operator-(const Var& a, const Var& b) { return a.builder()->binary(Op::sub, a, b); }
Var operator*(const Var& a, const Var& b) { return a.builder()->binary(Op::mul, a, b); }
Var operator/(const Var& a, const Var& b) { return a.builder()->binary(Op::div, a, b); }
Var operator-(const Var& a) { return a.builder()->unary(Op::neg, a); }
Var operator+(const Var& a, double b) { return a + scalar(a, b); }
Var operator-(const Var& a, double b) { return a - scalar(a, b); }
Var operator*(const Var& a, double b) { return a * scalar(a, b); }
Var operator/(const Var& a, double b) { return a / scalar(a, b); }
Var operator+(double a, const Var& b) { return scalar(b, a) + b; }
Var operator-(double a, const Var& b) { return scalar(b, a) - b; }
Var operator*(double a, const Var& b) { return scalar(b, a) * b; }
Var operator/(double a, const Var& b) { return scalar(b, a) / b; }

Var feature_sum(const Var& x) { return x.builder()->reduce_features(Op::fsum, x); }
Var feature_mean(const Var& x) { return x.builder()->reduce_features(Op::fmean, x); }
Var feature_max(const Var& x) { return x.builder()->reduce_features(Op::fmax, x); }
Var matmul(const Var& x, const Var& w) { return x.builder()->matmul(x, w); }

Var sum(const Var& x) { return x.builder()->aggregate(Op::agg_sum, x); }
Var mean(const Var& x) { return x.builder()->aggregate(Op::agg_mean, x); }
Var max(const Var& x, Ties ties) { return x.builder()->aggregate(Op::agg_max, x, ties); }
Var min(const Var& x, Ties ties) { return x.builder()->aggregate(Op::agg_min, x, ties); }
Var softmax(const Var& x) { return x.builder()->softmax(x); }
Var sum(const EdgeList& l, const EdgeFn& f) { return sum(f(l.edge())); }
Var mean(const EdgeList& l, const EdgeFn& f) { return mean(f(l.edge())); }
Var max(const EdgeList& l, const EdgeFn& f, Ties ties) { return max(f(l.edge()), ties); }
Var min(const EdgeList& l, const EdgeFn& f, Ties ties) { return min(f(l.edge()), ties); }
Var softmax(const EdgeList& l, const EdgeFn& f) { return softmax(f(l.edge())); }

}  // namespace seastar
