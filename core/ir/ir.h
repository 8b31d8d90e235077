/** \file
 * GIR, the graph IR: a typed DAG of Values held in a Module. A Value is small and immutable;
 * a Module only grows, and passes build new Modules. See docs/ARCHITECTURE.md for the rules.
 *
 * Spaces say how many rows a value has when materialised: Vertex (one per vertex), Edge (one
 * per edge), Param (one, shared by every vertex and edge). DESIGN's Src and Dst values are
 * `gather` nodes: a Vertex value read through the edge's source or destination.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace seastar::ir {

enum class Op {
#define SEASTAR_OP(name, ...) name,
#include "core/ir/ops.def"
#undef SEASTAR_OP
};
enum class OpKind { Leaf, Unary, Binary, Gather, Aggregate, Other };

/// One scalar parameter of an op (p0, p1): its name and, if it has one, its default.
struct OpParam {
  std::string name;
  bool has_default = false;
  double default_value = 0;
};

/// A row of core/ir/ops.def.
struct OpInfo {
  const char* name;
  OpKind kind;
  int arity;
  const char* c_expr;          ///< elementwise ops: the scalar expression over a, b, p0, p1 in type T
  std::vector<OpParam> params;  ///< at most two (p0, p1)
  bool is_public;              ///< seastar::name / seastar.name exist
  const char* torch_ref;       ///< elementwise ops: the plain-torch expression of the reference backend
  const char* doc;             ///< public ops: a one-line docstring
};
const OpInfo& op_info(Op op);
bool op_from_name(const std::string& name, Op* out);
int num_ops();
const char* to_string(OpKind k);
/// The shortest decimal form that reads back to the same double (0.2, not 0.20000000000000001).
std::string print_number(double x);

/// ops.def's expression of an elementwise op evaluated in double (constant folding); false for
/// the other kinds.
bool eval_elementwise(Op op, double a, double b, double p0, double p1, double* out);

enum class DType { Float, Int };  ///< Float: the program's float type, chosen per call
enum class Space { Vertex, Edge, Param };
/// The endpoint an edge-level op refers to: gather reads it; an aggregation groups by it.
enum class Group { None, Src, Dst };
/// agg_max / agg_min's p0: how the gradient is shared among tied edges (ops.def, autodiff.cpp)
enum class Ties { even = 0, pyg = 1, first = 2 };

const char* to_string(DType d);
const char* to_string(Space s);
const char* to_string(Group g);

using Shape = std::vector<int64_t>;  ///< feature shape, without the row dimension
std::string shape_str(const Shape& s);
int64_t numel(const Shape& s);

/// Where a value came from in the user's program, for error messages.
struct Loc {
  std::string file;
  int line = 0;
  std::string str() const;
};

struct Value {
  int id = -1;
  Op op = Op::constant;
  DType dtype = DType::Float;
  Space space = Space::Param;
  Shape shape;
  std::vector<int> inputs;
  Group group = Group::None;
  double p0 = 0, p1 = 0;  ///< scalar attributes (constant, slopes, exponents, bounds, counts)
  std::string name;       ///< input, parameter or output name
  Shape attr_shape;       ///< target shape of sum_to / expand
  Loc loc;
};

/// A program: its values in topological order (inputs before users) and its outputs.
struct Module {
  std::vector<Value> values;
  std::vector<int> outputs;
  std::vector<std::string> output_names;

  const Value& at(int id) const { return values.at(static_cast<size_t>(id)); }
  int add(Value v);  ///< appends, assigns the id, returns it
  int size() const { return static_cast<int>(values.size()); }
};

/// Stable text form, e.g. `%3 = gather.src %0 : Edge f[2, 8]`. Golden tests compare it.
std::string print(const Module& m, const std::string& title = "program");
std::string print_value(const Value& v);

}  // namespace seastar::ir
