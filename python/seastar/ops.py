"""Functions usable inside vertex programs: math, aggregations and softmax over edge lists.

Aggregations take what a comprehension over ``v.in_edges()`` builds (a list or generator of
one traced edge value) or the edge value itself. ``softmax`` returns a list again, so it can
be zipped with the edge list: ``sum(a * e.src.h for a, e in zip(ss.softmax(s), v.in_edges()))``.
"""
from __future__ import annotations

from .tracing import Value, edge_value_of


def _traced(x, fn: str) -> Value:
    if isinstance(x, Value):
        return x
    raise TypeError(f"seastar.{fn} works on traced values inside a vertex program; got {type(x).__name__}")


def _edge_value(items, fn: str) -> Value:
    if not isinstance(items, (list, tuple, Value)) and hasattr(items, "__iter__"):
        items = list(items)
    x = edge_value_of(items)
    if x is None:
        if isinstance(items, Value):
            items._t.fail(f"seastar.{fn} aggregates the values of an edge list, e.g. "
                          f"seastar.{fn}(e.src.h for e in v.in_edges()); got a {items.space} value")
        raise TypeError(f"seastar.{fn} takes the values of an edge list (a comprehension over v.in_edges())")
    return x


def _aggregate(op: str, fn: str):
    def aggregate(items):
        x = _edge_value(items, fn)
        return x._t.call("aggregate", op, x._v)
    aggregate.__name__ = fn
    aggregate.__doc__ = f"{fn} over the centre vertex's edges of the list; 0 for a vertex without edges."
    return aggregate


sum = _aggregate("agg_sum", "sum")  # noqa: A001 - mirrors Python's sum on purpose
mean = _aggregate("agg_mean", "mean")
max = _aggregate("agg_max", "max")  # noqa: A001
min = _aggregate("agg_min", "min")  # noqa: A001


def softmax(scores):
    """Softmax of per-edge scores over each centre vertex's edges (max-subtracted, so finite).

    Returns a one-element list when given a list or generator, the traced value otherwise."""
    as_list = not isinstance(scores, Value)
    x = _edge_value(scores, "softmax")
    y = x._t.call("softmax", x._v)
    return [y] if as_list else y


def _unary(op: str, doc: str, *defaults):
    def fn(x, *params):
        x = _traced(x, op)
        p = list(params) + list(defaults[len(params):])
        return x._t.call("unary", op, x._v, *(float(v) for v in p))
    fn.__name__ = op
    fn.__doc__ = doc
    return fn


exp = _unary("exp", "e ** x")
log = _unary("log", "natural logarithm")
sqrt = _unary("sqrt", "square root")
rsqrt = _unary("rsqrt", "1 / sqrt(x)")
abs = _unary("abs", "absolute value")  # noqa: A001
relu = _unary("relu", "max(x, 0)")
sigmoid = _unary("sigmoid", "1 / (1 + exp(-x))")
tanh = _unary("tanh", "hyperbolic tangent")


def leaky_relu(x, negative_slope: float = 0.01):
    x = _traced(x, "leaky_relu")
    return x._t.call("unary", "leaky_relu", x._v, float(negative_slope), 0.0)


def elu(x, alpha: float = 1.0):
    x = _traced(x, "elu")
    return x._t.call("unary", "elu", x._v, float(alpha), 0.0)


def pow(x, exponent: float):  # noqa: A001
    return _traced(x, "pow") ** exponent


def clamp(x, min: float, max: float):  # noqa: A002
    x = _traced(x, "clamp")
    if not float(min) <= float(max):
        x._t.fail(f"clamp needs min <= max, got {min} > {max}")
    return x._t.call("unary", "clamp", x._v, float(min), float(max))


def maximum(a, b):
    t = a._t if isinstance(a, Value) else _traced(b, "maximum")._t
    return t.call("binary", "maximum", t.lift(a)._v, t.lift(b)._v)


def minimum(a, b):
    t = a._t if isinstance(a, Value) else _traced(b, "minimum")._t
    return t.call("binary", "minimum", t.lift(a)._v, t.lift(b)._v)


def dot(a, b):
    """Sum over the last feature axis of a * b."""
    return (a * b).sum(-1)
