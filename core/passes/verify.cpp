/** \file verify: structural invariants every pass must keep (ids, order, arity, typing). */
#include "core/passes/passes.h"
#include "core/util/errors.h"

namespace seastar::passes {
using namespace ir;

void verify(const Module& m) {
  for (int i = 0; i < m.size(); ++i) {
    const Value& v = m.at(i);
    if (v.id != i) SEASTAR_THROW(ValueError, "verify: value at position ", i, " has id ", v.id);
    Value check = v;
    try {
      infer_value(m, check);
    } catch (const Error& e) {
      SEASTAR_THROW(ValueError, "verify: ", print_value(v), ": ", e.what());
    }
    if (op_info(v.op).kind != OpKind::Leaf &&
        (check.dtype != v.dtype || check.space != v.space || check.shape != v.shape))
      SEASTAR_THROW(ValueError, "verify: ", print_value(v), " disagrees with its inferred type ", to_string(check.space),
                    " ", to_string(check.dtype), shape_str(check.shape));
    if ((v.op == Op::input_vertex || v.op == Op::input_edge || v.op == Op::param) && v.name.empty())
      SEASTAR_THROW(ValueError, "verify: ", print_value(v), " has no name");
  }
  if (m.outputs.empty()) SEASTAR_THROW(ValueError, "verify: the program has no outputs");
  for (int o : m.outputs) {
    if (o < 0 || o >= m.size()) SEASTAR_THROW(ValueError, "verify: output %", o, " does not exist");
  }
}

}  // namespace seastar::passes
