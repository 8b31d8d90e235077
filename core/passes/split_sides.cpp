/** \file
 * split_sides (bipartite graphs only, before autodiff): gives every Vertex value one side.
 *   A bound vertex tensor read both at sources (e.src.x) and at destinations (v.x, e.dst.x)
 *   becomes two inputs: `x` (num_src rows) and `x@dst` (num_dst rows, which the runtime binds
 *   to the first num_dst rows of x: a sampled block's destinations are its first sources).
 *   Vertex expressions over such inputs are duplicated per side; values whose side is fixed
 *   (aggregations, degrees) are kept once and must only be read on their own side.
 * Torch's autograd adds the two gradients through the slice, so the backward program needs
 * nothing special.
 */
#include <functional>
#include <map>
#include <set>

#include "core/passes/passes.h"
#include "core/util/errors.h"

namespace seastar::passes {
using namespace ir;

namespace {

bool fixes_side(const Value& v) { return op_info(v.op).kind == OpKind::Aggregate || v.op == Op::degree; }

}  // namespace

const char* const kDstSuffix = "@dst";

Module split_sides(const Module& m) {
  // the side a value has by how it is made (None: free, it takes the side it is read at)
  std::vector<Group> made(m.size(), Group::None);
  for (const Value& v : m.values) {
    if (v.space != Space::Vertex) continue;
    if (fixes_side(v)) {
      made[v.id] = v.group;
      continue;
    }
    for (int in : v.inputs) {
      if (m.at(in).space != Space::Vertex || made[in] == Group::None) continue;
      if (made[v.id] != Group::None && made[v.id] != made[in])
        SEASTAR_THROW(ValueError, "on a bipartite graph, ", print_value(v), " at ", v.loc.str(),
                      " combines a value over sources with one over destinations; use a square graph");
      made[v.id] = made[in];
    }
  }

  Module out;
  std::vector<int> remap(m.size(), -1);
  std::map<std::pair<int, Group>, int> copies;
  std::function<int(int, Group)> at_side = [&](int id, Group side) -> int {
    const Value& v = m.at(id);
    if (v.space != Space::Vertex) return remap[id];
    if (made[id] != Group::None) {
      if (made[id] != side)
        SEASTAR_THROW(ValueError, "on a bipartite graph, ", print_value(v), " at ", v.loc.str(), " has ",
                      made[id] == Group::Dst ? "destination" : "source", " rows but is read at the ",
                      side == Group::Dst ? "destinations" : "sources",
                      "; a program that reads an aggregation at the other endpoint needs a square graph");
      return remap[id];
    }
    auto key = std::make_pair(id, side);
    if (auto it = copies.find(key); it != copies.end()) return it->second;
    Value c = v;
    if (v.op == Op::input_vertex && side == Group::Dst) c.name = v.name + kDstSuffix;
    for (int& in : c.inputs) in = at_side(in, side);
    return copies[key] = out.add(std::move(c));
  };
  for (const Value& v : m.values) {
    if (v.space == Space::Vertex && made[v.id] == Group::None) continue;  // built where it is read
    Value c = v;
    for (int& in : c.inputs) {
      if (m.at(in).space != Space::Vertex) {
        in = remap[in];
      } else if (v.op == Op::gather) {
        in = at_side(in, v.group);
      } else if (v.space == Space::Vertex) {
        in = at_side(in, made[v.id]);
      } else {  // a reduction over every row (sum_rows): the rows the value has
        in = at_side(in, made[in] == Group::None ? Group::Dst : made[in]);
      }
    }
    remap[v.id] = out.add(std::move(c));
  }
  for (int o : m.outputs) {
    const Value& v = m.at(o);
    out.outputs.push_back(v.space == Space::Vertex && made[o] == Group::None ? at_side(o, Group::Dst) : remap[o]);
  }
  out.output_names = m.output_names;

  // an input read only at destinations keeps its own name (the caller binds num_dst rows)
  std::set<std::string> at_src;
  for (const Value& v : out.values)
    if (v.op == Op::input_vertex && v.name.find(kDstSuffix) == std::string::npos) at_src.insert(v.name);
  for (Value& v : out.values) {
    if (v.op != Op::input_vertex) continue;
    const size_t at = v.name.rfind(kDstSuffix);
    if (at != std::string::npos && !at_src.count(v.name.substr(0, at))) v.name = v.name.substr(0, at);
  }
  return out;
}

}  // namespace seastar::passes
