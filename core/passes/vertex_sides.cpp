/** \file
 * vertex_sides: which vertex set each Vertex value's rows index on a bipartite graph.
 *   an aggregation or degree over in-edges (group dst) has destination rows, over out-edges
 *   source rows; gather.G(x) reads x at endpoint G, so x has side G; elementwise ops (and
 *   type_index) share one side with their Vertex operands; a value nothing constrains is
 *   read at the centre of an in-edge program, a destination.
 * On a square graph both sets are the same vertices and every value is given Dst.
 */
#include <numeric>

#include "core/passes/passes.h"
#include "core/util/errors.h"

namespace seastar::passes {
using namespace ir;

namespace {

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(int a, int b) { parent[find(a)] = find(b); }
};

bool fixes_side(const Value& v) { return op_info(v.op).kind == OpKind::Aggregate || v.op == Op::degree; }

}  // namespace

std::vector<Group> vertex_sides(const Module& m, bool bipartite) {
  std::vector<Group> side(m.size(), Group::None);
  if (!bipartite) {
    for (const Value& v : m.values)
      if (v.space == Space::Vertex) side[v.id] = Group::Dst;
    return side;
  }
  UnionFind uf(m.size());
  for (const Value& v : m.values) {
    if (v.space != Space::Vertex || fixes_side(v)) continue;
    for (int in : v.inputs)
      if (m.at(in).space == Space::Vertex) uf.unite(in, v.id);
  }
  // the first constraint on each class, and the value that imposed it (for the message)
  std::vector<Group> cls(m.size(), Group::None);
  std::vector<int> why(m.size(), -1);
  auto constrain = [&](int id, Group g, int by) {
    int r = uf.find(id);
    if (cls[r] == Group::None) {
      cls[r] = g, why[r] = by;
    } else if (cls[r] != g) {
      const Value& a = m.at(by);
      const Value& b = m.at(why[r]);
      SEASTAR_THROW(ValueError, "on a bipartite graph, vertex value %", id,
                    " would need both source rows and destination rows (", print_value(a), " at ", a.loc.str(),
                    " vs ", print_value(b), " at ", b.loc.str(),
                    "): a destination aggregation cannot be read at the sources; use a square graph");
    }
  };
  for (const Value& v : m.values) {
    if (v.space == Space::Vertex && fixes_side(v)) constrain(v.id, v.group, v.id);
    if (v.op == Op::gather) constrain(v.inputs[0], v.group, v.id);
  }
  for (const Value& v : m.values)
    if (v.space == Space::Vertex) {
      Group g = cls[uf.find(v.id)];
      side[v.id] = g == Group::None ? Group::Dst : g;
    }
  return side;
}

}  // namespace seastar::passes
