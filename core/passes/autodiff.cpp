/** \file
 * autodiff: reverse mode over GIR from one gradient table (the switch in `backprop`).
 * The rules that give Seastar its shape:
 *   gather.G(x)        -> dx = agg_sum.G(g)             an in-edge read becomes an out-edge sum
 *   agg_sum.G(x)       -> dx = gather.G(g)
 *   agg_mean.G(x)      -> dx = gather.G(g / max(deg.G, 1))
 *   agg_max.G(x) = y   -> dx = gather.G(g / agg_sum.G(hit)) * hit,  hit = (x == gather.G(y))   ties share g
 *                         (Ties::pyg: g / (agg_sum.G(hit) + (y == 0)), PyG's scatter rule;
 *                          Ties::first: gather.G(g) * (edge_id == gather.G(agg_argmax.G(x))))
 *   fmax(x) = y        -> dx = expand(g / fsum(hit)) * hit,  hit = (x == expand(y))   ties share g
 *   maximum(a, b)      -> da = g * p,  db = g * (1 - p),  p = step(a - b) + 0.5 * (a == b)
 *   softmax.G(s) = y   -> ds = y * (g - gather.G(agg_sum.G(y * g)))
 *   x @ W              -> dx = g @ W^T,  dW = sum_rows(outer(x, g))  (or per type for W[t])
 * Broadcasting is undone with sum_to; a Param used by every row gets sum_rows.
 * Ties follow torch: an aggregation max/min over edges (torch.scatter_reduce amax/amin, PyG's
 * max aggregation), a feature-axis max (torch.amax) and maximum/minimum (torch.maximum) split
 * the gradient evenly among the tied elements.
 */
#include <set>

#include "core/passes/passes.h"
#include "core/util/errors.h"

namespace seastar::passes {
using namespace ir;

namespace {

class Differentiator {
 public:
  explicit Differentiator(Module m) : m_(std::move(m)) {}

  Gradients run(const std::vector<std::string>& wrt) {
    const int n_fwd = m_.size();
    std::set<std::string> names(wrt.begin(), wrt.end());
    // needs[i]: value i depends on a requested leaf, so its gradient is worth computing
    std::vector<char> needs(n_fwd, 0);
    for (int i = 0; i < n_fwd; ++i) {
      const Value& v = m_.at(i);
      if ((v.op == Op::input_vertex || v.op == Op::input_edge || v.op == Op::param) && names.count(v.name)) needs[i] = 1;
      for (int in : v.inputs) needs[i] |= needs[in];
    }
    adj_.assign(n_fwd, -1);
    Gradients out;
    for (size_t k = 0; k < m_.outputs.size(); ++k) {
      const Value& o = m_.at(m_.outputs[k]);
      Value g;
      g.op = Op::grad_output, g.p0 = static_cast<double>(k), g.dtype = DType::Float, g.space = o.space,
      g.shape = o.shape, g.name = k < m_.output_names.size() ? m_.output_names[k] : "";
      g.loc = o.loc;
      int gid = m_.add(g);
      out.grad_outputs.push_back(gid);
      if (needs[m_.outputs[k]]) accumulate(m_.outputs[k], gid);
    }
    for (int i = n_fwd - 1; i >= 0; --i) {
      if (adj_[i] < 0 || op_info(m_.at(i).op).kind == OpKind::Leaf) continue;
      loc_ = m_.at(i).loc;
      backprop(i, needs);
    }
    for (const std::string& name : wrt) {
      int g = -1;
      for (int i = 0; i < n_fwd; ++i) {
        const Value& v = m_.at(i);
        if ((v.op == Op::input_vertex || v.op == Op::input_edge || v.op == Op::param) && v.name == name && adj_[i] >= 0)
          g = g < 0 ? adj_[i] : emit(Op::add, {g, adj_[i]});
      }
      out.grads[name] = g;
    }
    out.module = std::move(m_);
    return out;
  }

 private:
  int emit(Op op, std::vector<int> inputs, Group group = Group::None, double p0 = 0, double p1 = 0,
           Shape attr_shape = {}) {
    Value v;
    v.op = op, v.inputs = std::move(inputs), v.group = group, v.p0 = p0, v.p1 = p1, v.attr_shape = std::move(attr_shape);
    v.id = m_.size();
    v.loc = loc_;
    infer_value(m_, v);
    return m_.add(std::move(v));
  }
  int constant(double x) {
    Value v;
    v.op = Op::constant, v.p0 = x, v.dtype = DType::Float, v.space = Space::Param;
    return m_.add(v);
  }
  int mul(int a, int b) { return emit(Op::mul, {a, b}); }

  /// g has the type of a value computed from x; returns g reduced to x's shape and space.
  int reduce_to(int g, int x) {
    // copies, not references: emit() may reallocate the value list
    const Space space = m_.at(x).space;
    const Shape shape = m_.at(x).shape;
    if (space == Space::Param && m_.at(g).space != Space::Param) g = emit(Op::sum_rows, {g});
    if (m_.at(g).shape != shape) g = emit(Op::sum_to, {g}, Group::None, 0, 0, shape);
    return g;
  }

  void accumulate(int x, int g) {
    g = reduce_to(g, x);
    adj_[x] = adj_[x] < 0 ? g : emit(Op::add, {adj_[x], g});
  }

  void backprop(int i, const std::vector<char>& needs) {
    const Value v = m_.at(i);  // copy: emit() grows the vector
    const int g = adj_[i];
    auto in = [&](int k) { return v.inputs[k]; };
    auto want = [&](int k) { return needs[v.inputs[k]] != 0; };
    switch (v.op) {
      case Op::gather:
        if (want(0)) accumulate(in(0), emit(Op::agg_sum, {g}, v.group));
        return;
      case Op::agg_sum:
        if (want(0)) accumulate(in(0), emit(Op::gather, {g}, v.group));
        return;
      case Op::agg_mean:
        if (want(0)) {
          int deg = emit(Op::maximum, {emit_degree(v.group), constant(1)});
          accumulate(in(0), emit(Op::gather, {emit(Op::div, {g, deg})}, v.group));
        }
        return;
      case Op::agg_max: case Op::agg_min:
        if (!want(0)) return;
        if (static_cast<Ties>(v.p0) == Ties::first) {  // one edge per (vertex, feature): the smallest id
          int arg = emit(v.op == Op::agg_max ? Op::agg_argmax : Op::agg_argmin, {in(0)}, v.group);
          int hit = emit(Op::eq, {emit_edge_id(), emit(Op::gather, {arg}, v.group)});
          accumulate(in(0), mul(emit(Op::gather, {g}, v.group), hit));
        } else {
          // torch.scatter_reduce's amax/amin rule: the k edges that attain the extreme share g
          // evenly (g / k each, per feature element). k counts at least 1 where the centre has
          // edges; the max(k, 1) keeps an edgeless centre's share finite, since it is never read
          int hit = emit(Op::eq, {in(0), emit(Op::gather, {i}, v.group)});
          int ties = emit(Op::agg_sum, {hit}, v.group);
          if (static_cast<Ties>(v.p0) == Ties::pyg) ties = emit(Op::add, {ties, emit(Op::eq, {i, constant(0)})});
          ties = emit(Op::maximum, {ties, constant(1)});
          accumulate(in(0), mul(emit(Op::gather, {emit(Op::div, {g, ties})}, v.group), hit));
        }
        return;
      case Op::softmax:
        if (want(0)) {
          int s = emit(Op::agg_sum, {mul(i, g)}, v.group);
          accumulate(in(0), mul(i, emit(Op::sub, {g, emit(Op::gather, {s}, v.group)})));
        }
        return;
      case Op::add:
        if (want(0)) accumulate(in(0), g);
        if (want(1)) accumulate(in(1), g);
        return;
      case Op::sub:
        if (want(0)) accumulate(in(0), g);
        if (want(1)) accumulate(in(1), emit(Op::neg, {g}));
        return;
      case Op::mul:
        if (want(0)) accumulate(in(0), mul(g, in(1)));
        if (want(1)) accumulate(in(1), mul(g, in(0)));
        return;
      case Op::div:
        if (want(0)) accumulate(in(0), emit(Op::div, {g, in(1)}));
        if (want(1)) accumulate(in(1), emit(Op::neg, {emit(Op::div, {mul(g, i), in(1)})}));
        return;
      case Op::keep_pos:  // b (a degree) is piecewise constant
        if (want(0)) accumulate(in(0), emit(Op::keep_pos, {g, in(1)}));
        return;
      case Op::maximum: case Op::minimum: {
        // torch.maximum's rule: the larger (smaller) operand takes the gradient, a tie splits it
        // evenly (0.5 each), so the two operands' shares always add up to g
        int diff = v.op == Op::maximum ? emit(Op::sub, {in(0), in(1)}) : emit(Op::sub, {in(1), in(0)});
        int first = emit(Op::step, {diff}, Group::None, 0);
        int half_tie = mul(emit(Op::eq, {in(0), in(1)}), constant(0.5));
        int pick = emit(Op::add, {first, half_tie});
        if (want(0)) accumulate(in(0), mul(g, pick));
        if (want(1)) accumulate(in(1), mul(g, emit(Op::sub, {constant(1), pick})));
        return;
      }
      case Op::eq: case Op::step: case Op::elu_grad: case Op::inside: case Op::cast: case Op::sign:
      case Op::agg_argmax: case Op::agg_argmin:
        return;  // piecewise constant: zero gradient
      case Op::neg: accumulate(in(0), emit(Op::neg, {g})); return;
      case Op::exp: accumulate(in(0), mul(g, i)); return;
      case Op::log: accumulate(in(0), emit(Op::div, {g, in(0)})); return;
      case Op::sqrt: accumulate(in(0), emit(Op::div, {mul(g, constant(0.5)), i})); return;
      case Op::rsqrt: accumulate(in(0), mul(mul(g, constant(-0.5)), mul(i, mul(i, i)))); return;
      case Op::abs: accumulate(in(0), mul(g, emit(Op::sign, {in(0)}))); return;
      case Op::relu: accumulate(in(0), mul(g, emit(Op::step, {in(0)}, Group::None, 0))); return;
      case Op::leaky_relu: accumulate(in(0), mul(g, emit(Op::step, {in(0)}, Group::None, v.p0))); return;
      case Op::elu: accumulate(in(0), mul(g, emit(Op::elu_grad, {in(0)}, Group::None, v.p0))); return;
      case Op::sigmoid: accumulate(in(0), mul(g, mul(i, emit(Op::sub, {constant(1), i})))); return;
      case Op::tanh: accumulate(in(0), mul(g, emit(Op::sub, {constant(1), mul(i, i)}))); return;
      case Op::pow:
        accumulate(in(0), mul(g, mul(constant(v.p0), emit(Op::pow, {in(0)}, Group::None, v.p0 - 1))));
        return;
      case Op::clamp: accumulate(in(0), mul(g, emit(Op::inside, {in(0)}, Group::None, v.p0, v.p1))); return;
      case Op::softplus: {
        // torch's rule: 1 where beta * x > threshold (the op is x there), sigmoid(beta * x) elsewhere
        int bx = mul(in(0), constant(v.p0));
        int above = emit(Op::step, {emit(Op::sub, {bx, constant(v.p1)})}, Group::None, 0);
        int below = mul(emit(Op::sub, {constant(1), above}), emit(Op::sigmoid, {bx}));
        accumulate(in(0), mul(g, emit(Op::add, {above, below})));
        return;
      }
      case Op::log1p: accumulate(in(0), emit(Op::div, {g, emit(Op::add, {constant(1), in(0)})})); return;
      case Op::expm1: accumulate(in(0), mul(g, emit(Op::exp, {in(0)}))); return;
      case Op::silu: {  // s + x s (1 - s), s = sigmoid(x)
        int s = emit(Op::sigmoid, {in(0)});
        accumulate(in(0), mul(g, mul(s, emit(Op::add, {constant(1), mul(in(0), emit(Op::sub, {constant(1), s}))}))));
        return;
      }
      case Op::fsum: case Op::fmean: {
        const Shape xs = m_.at(in(0)).shape;  // a copy: emit() may reallocate
        int gx = emit(Op::expand, {emit(Op::unsqueeze, {g})}, Group::None, 0, 0, xs);
        if (v.op == Op::fmean) gx = emit(Op::div, {gx, constant(static_cast<double>(xs.back()))});
        accumulate(in(0), gx);
        return;
      }
      case Op::fmax: {
        // torch.amax's rule: the k elements equal to the max share g evenly (g / k each), so a
        // max over a broadcast row gives the broadcast value g, not k * g
        const Shape xs = m_.at(in(0)).shape;  // a copy: emit() may reallocate
        int hit = emit(Op::eq, {in(0), emit(Op::expand, {emit(Op::unsqueeze, {i})}, Group::None, 0, 0, xs)});
        int share = emit(Op::div, {g, emit(Op::fsum, {hit})});
        accumulate(in(0), mul(emit(Op::expand, {emit(Op::unsqueeze, {share})}, Group::None, 0, 0, xs), hit));
        return;
      }
      case Op::unsqueeze: accumulate(in(0), emit(Op::fsum, {g})); return;
      case Op::sum_to: accumulate(in(0), emit(Op::expand, {g}, Group::None, 0, 0, m_.at(in(0)).shape)); return;
      case Op::expand: accumulate(in(0), emit(Op::sum_to, {g}, Group::None, 0, 0, m_.at(in(0)).shape)); return;
      case Op::matvec:
        if (want(0)) accumulate(in(0), emit(Op::matvec_t, {g, in(1)}));
        if (want(1)) accumulate(in(1), emit(Op::outer, {in(0), g}));
        return;
      case Op::type_index:
        if (want(0)) {
          const Value& p = m_.at(in(0));
          accumulate(in(0), emit(Op::sum_rows_typed, {g, in(1)}, Group::None, static_cast<double>(p.shape[0])));
        }
        return;
      case Op::input_vertex: case Op::input_edge: case Op::param: case Op::grad_output: case Op::constant:
      case Op::edge_id: case Op::edge_type: case Op::node_type: case Op::degree:
        return;  // leaves: their adjoints are the result
      case Op::matvec_t: case Op::outer: case Op::sum_rows: case Op::sum_rows_typed: case Op::agg_softmax_sum:
        break;  // made by autodiff or by codegen after it: a second derivative
    }
    SEASTAR_THROW(NotImplementedError, loc_.str(), ": no gradient rule for '", op_info(v.op).name,
                  "' (second-order or internal op)");
  }

  int emit_degree(Group group) {
    Value v;
    v.op = Op::degree, v.group = group, v.dtype = DType::Float, v.space = Space::Vertex;
    return m_.add(v);
  }
  int emit_edge_id() {
    Value v;
    v.op = Op::edge_id, v.dtype = DType::Int, v.space = Space::Edge;
    return m_.add(v);
  }

  Module m_;
  std::vector<int> adj_;
  Loc loc_;
};

}  // namespace

Gradients autodiff(const Module& m, const std::vector<std::string>& wrt) { return Differentiator(m).run(wrt); }

}  // namespace seastar::passes
