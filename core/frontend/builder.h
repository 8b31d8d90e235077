/** \file
 * The tracer's back end, shared by the C++ and Python front ends: a Builder appends GIR
 * values with eager shape and space checks (errors name the user's line), and the user-level
 * handles (Vertex, EdgeList, Edge, Endpoint, Var) are how a vertex program reaches its
 * neighbourhood. The Python proxies are thin wrappers over these same objects.
 *
 * Example (C++):
 *   Var gcn(Vertex& v) {
 *     return sum(v.in_edges(), [](Edge e) { return e.src()["h"] * e["w"]; });
 *   }
 */
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/ir.h"

namespace seastar {

using Ties = ir::Ties;  ///< max's and min's gradient rule at tied edges: seastar::max(x, Ties::pyg)

/// What the tracer knows of a tensor bound by name: its full shape (rows included).
struct TensorSig {
  TensorSig() = default;
  TensorSig(std::vector<int64_t> s) : shape(std::move(s)) {}  // NOLINT: implicit by design
  TensorSig(std::initializer_list<int64_t> s) : shape(s) {}
  std::vector<int64_t> shape;
};

/// What the tracer knows of the graph it traces for.
struct GraphSig {
  bool has_node_types = false;
  bool has_edge_types = false;
  int64_t num_node_types = 0;
  int64_t num_edge_types = 0;
};

class Builder;

/// A traced value. Edge values remember which edge list they came from (`elist`: Dst for
/// v.in_edges(), Src for v.out_edges()) so that mixing two lists is caught at the user's line.
class Var {
 public:
  Var() = default;
  Var(Builder* b, int id, ir::Group elist = ir::Group::None) : b_(b), id_(id), elist_(elist) {}
  int id() const { return id_; }
  Builder* builder() const { return b_; }
  ir::Group elist() const { return elist_; }
  const ir::Value& value() const;
  bool defined() const { return b_ != nullptr; }

 private:
  Builder* b_ = nullptr;
  int id_ = -1;
  ir::Group elist_ = ir::Group::None;
};

class Builder {
 public:
  Builder(std::map<std::string, TensorSig> bindings, GraphSig graph);

  /// The user's file and line for the values appended next (set by each front end).
  void set_loc(ir::Loc loc) { loc_ = std::move(loc); }
  const ir::Loc& loc() const { return loc_; }
  [[noreturn]] void fail(const std::string& message) const;  ///< TraceError at loc()

  // leaves
  Var vertex_input(const std::string& name);
  Var edge_input(const std::string& name, ir::Group elist);
  Var param(const std::string& name);
  Var constant(double value);
  Var edge_id(ir::Group elist);
  Var edge_type(ir::Group elist);
  Var node_type();
  Var degree(ir::Group group);

  // structure
  Var gather(const Var& vertex_value, ir::Group endpoint, ir::Group elist);
  Var unary(ir::Op op, const Var& x, double p0 = 0, double p1 = 0);
  Var binary(ir::Op op, const Var& a, const Var& b);  ///< inserts gathers for Vertex x Edge
  /// A public elementwise op of ops.def by its row: `params` fill its parameters in order, the
  /// row's defaults the rest; a wrong count or an invalid value fails naming the op's signature.
  Var elementwise(ir::Op op, const std::vector<Var>& inputs, const std::vector<double>& params);
  Var reduce_features(ir::Op op, const Var& x);       ///< fsum / fmean / fmax over the last axis
  Var unsqueeze(const Var& x);
  Var matmul(const Var& x, const Var& w);             ///< x @ W (W a Param or a typed Param row)
  Var type_index(const Var& table, const Var& type);  ///< P[type]
  /// Over the value's own edge list; `ties` is max's and min's gradient rule at ties (ops.def).
  Var aggregate(ir::Op op, const Var& edge_value, Ties ties = Ties::even);
  Var softmax(const Var& edge_value);

  /// Ends the trace: checks outputs (Vertex or Edge values) and returns the module.
  ir::Module finish(const std::vector<Var>& outputs, const std::vector<std::string>& names = {});
  const ir::Module& module() const { return m_; }
  const GraphSig& graph() const { return graph_; }

 private:
  const TensorSig& binding(const std::string& name, const char* used_as);
  Var append(ir::Value v, ir::Group elist);
  Var to_edge(const Var& x, ir::Group elist);

  std::map<std::string, TensorSig> bindings_;
  std::map<std::string, std::string> used_as_;  // name -> "vertex" | "edge" | "param"
  GraphSig graph_;
  ir::Module m_;
  ir::Loc loc_;
};

// ---- the user-level model -------------------------------------------------------------

class Edge;

/// One endpoint (source or destination) of the edges of a list.
class Endpoint {
 public:
  Endpoint(Builder* b, ir::Group endpoint, ir::Group elist) : b_(b), endpoint_(endpoint), elist_(elist) {}
  Var operator[](const std::string& name) const;  ///< a vertex feature read at this endpoint
  Var type() const;                               ///< the endpoint's node type

 private:
  Builder* b_;
  ir::Group endpoint_, elist_;
};

/// The symbolic edge of a list: stands for every edge of the centre vertex at once.
class Edge {
 public:
  Edge(Builder* b, ir::Group elist) : b_(b), elist_(elist) {}
  Endpoint src() const { return Endpoint(b_, ir::Group::Src, elist_); }
  Endpoint dst() const { return Endpoint(b_, ir::Group::Dst, elist_); }
  /// The neighbour: the source of an in-edge, the destination of an out-edge.
  Endpoint nbr() const { return elist_ == ir::Group::Dst ? src() : dst(); }
  Var operator[](const std::string& name) const { return b_->edge_input(name, elist_); }  ///< edge feature
  Var type() const { return b_->edge_type(elist_); }
  Var id() const { return b_->edge_id(elist_); }
  ir::Group elist() const { return elist_; }

 private:
  Builder* b_;
  ir::Group elist_;
};

/// v.in_edges() or v.out_edges().
class EdgeList {
 public:
  EdgeList(Builder* b, ir::Group elist) : b_(b), elist_(elist) {}
  Edge edge() const { return Edge(b_, elist_); }
  ir::Group group() const { return elist_; }
  Var degree() const { return b_->degree(elist_); }

 private:
  Builder* b_;
  ir::Group elist_;
};

/// The centre vertex.
class Vertex {
 public:
  explicit Vertex(Builder* b) : b_(b) {}
  Var operator[](const std::string& name) const { return b_->vertex_input(name); }
  Var param(const std::string& name) const { return b_->param(name); }
  Var type() const { return b_->node_type(); }
  EdgeList in_edges() const { return EdgeList(b_, ir::Group::Dst); }
  EdgeList out_edges() const { return EdgeList(b_, ir::Group::Src); }
  Var in_degree() const { return b_->degree(ir::Group::Dst); }
  Var out_degree() const { return b_->degree(ir::Group::Src); }
  Var constant(double x) const { return b_->constant(x); }
  Builder* builder() const { return b_; }

 private:
  Builder* b_;
};

// operators and math (Var with Var or with a scalar)
Var operator+(const Var& a, const Var& b);
Var operator-(const Var& a, const Var& b);
Var operator*(const Var& a, const Var& b);
Var operator/(const Var& a, const Var& b);
Var operator-(const Var& a);
Var operator+(const Var& a, double b);
Var operator-(const Var& a, double b);
Var operator*(const Var& a, double b);
Var operator/(const Var& a, double b);
Var operator+(double a, const Var& b);
Var operator-(double a, const Var& b);
Var operator*(double a, const Var& b);
Var operator/(double a, const Var& b);

// seastar::exp(x), seastar::leaky_relu(x, 0.2), seastar::maximum(a, b), ...: a function for every
// public elementwise op of core/ir/ops.def, its parameters checked against the op's row
#define SEASTAR_FN_Public_Unary(name)                            \
  template <class... P>                                          \
  Var name(const Var& x, P... params) {                          \
    return x.builder()->elementwise(ir::Op::name, {x}, {static_cast<double>(params)...}); \
  }
#define SEASTAR_FN_Public_Binary(name) \
  inline Var name(const Var& a, const Var& b) { return a.builder()->elementwise(ir::Op::name, {a, b}, {}); }
#define SEASTAR_FN_Internal_Leaf(name)
#define SEASTAR_FN_Internal_Unary(name)
#define SEASTAR_FN_Internal_Binary(name)
#define SEASTAR_FN_Internal_Gather(name)
#define SEASTAR_FN_Internal_Aggregate(name)
#define SEASTAR_FN_Internal_Other(name)
#define SEASTAR_OP(name, kind, arity, expr, params, surface, ...) SEASTAR_FN_##surface##_##kind(name)
#include "core/ir/ops.def"
#undef SEASTAR_OP
#undef SEASTAR_FN_Public_Unary
#undef SEASTAR_FN_Public_Binary
#undef SEASTAR_FN_Internal_Leaf
#undef SEASTAR_FN_Internal_Unary
#undef SEASTAR_FN_Internal_Binary
#undef SEASTAR_FN_Internal_Gather
#undef SEASTAR_FN_Internal_Aggregate
#undef SEASTAR_FN_Internal_Other
Var feature_sum(const Var& x);   ///< over the last feature axis (dot products: feature_sum(a * b))
Var feature_mean(const Var& x);
Var feature_max(const Var& x);
Var matmul(const Var& x, const Var& w);

// aggregations of an Edge value over its list
Var sum(const Var& edge_value);
Var mean(const Var& edge_value);
Var max(const Var& edge_value, Ties ties = Ties::even);
Var min(const Var& edge_value, Ties ties = Ties::even);
Var softmax(const Var& edge_value);
// ... or of a function of the edge
using EdgeFn = std::function<Var(const Edge&)>;
Var sum(const EdgeList& edges, const EdgeFn& fn);
Var mean(const EdgeList& edges, const EdgeFn& fn);
Var max(const EdgeList& edges, const EdgeFn& fn, Ties ties = Ties::even);
Var min(const EdgeList& edges, const EdgeFn& fn, Ties ties = Ties::even);
Var softmax(const EdgeList& edges, const EdgeFn& fn);

}  // namespace seastar
