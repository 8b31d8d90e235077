/** \file plan_buffers: the buffers the launcher passes to the kernels; see plan.h. */
#include "codegen/plan.h"

#include <set>

namespace seastar::codegen {
using namespace ir;

std::vector<Buffer> plan_buffers(const Module& m, const std::vector<int>& stored, const std::vector<Group>& sides) {
  std::vector<Buffer> buffers;
  // leaves that are bound tensors, the outputs, aggregation results, stored vertex and edge values
  auto side_of = [&](const Value& v) { return v.space == Space::Vertex ? sides[v.id] : Group::Dst; };
  std::set<int> has_buffer;
  auto add_buffer = [&](Buffer b) {
    if (has_buffer.insert(b.value).second) buffers.push_back(std::move(b));
  };
  for (const Value& v : m.values) {
    if (v.op == Op::input_vertex || v.op == Op::input_edge || v.op == Op::param)
      add_buffer({Buffer::Role::Input, v.id, v.name, -1, v.space, numel(v.shape), false, side_of(v)});
    if (v.op == Op::grad_output)
      add_buffer(
          {Buffer::Role::GradOutput, v.id, "", static_cast<int>(v.p0), v.space, numel(v.shape), false, side_of(v)});
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const Value& v = m.at(m.outputs[i]);
    // an output that is also an input, or is returned twice, still gets a tensor of its own
    buffers.push_back(
        {Buffer::Role::Output, v.id, "", static_cast<int>(i), v.space, numel(v.shape), false, side_of(v)});
    has_buffer.insert(v.id);
  }
  for (const Value& v : m.values)
    if (is_reduction(v))
      add_buffer({Buffer::Role::Intermediate, v.id, "", -1, v.space, numel(v.shape), v.dtype == DType::Int,
                  side_of(v)});
  for (int x : stored) {
    const Value& v = m.at(x);
    add_buffer({Buffer::Role::Intermediate, x, "", -1, v.space, numel(v.shape), v.dtype == DType::Int, side_of(v),
                v.space == Space::Edge});
  }
  return buffers;
}

}  // namespace seastar::codegen
