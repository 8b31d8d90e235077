"""Functions usable inside vertex programs: math, aggregations and softmax over edge lists.

Aggregations take what a comprehension over ``v.in_edges()`` builds (a list or generator of
one traced edge value) or the edge value itself. ``softmax`` returns a list again, so it can
be zipped with the edge list: ``sum(a * e.src.h for a, e in zip(ss.softmax(s), v.in_edges()))``.
"""
from __future__ import annotations

import inspect

from . import _C
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


TIE_RULES = ("even", "pyg", "first")
"""How max and min share the gradient among tied edges (in the order of seastar::Ties):
``"even"`` (g / k to each of the k tied edges, as ``torch.amax`` and ``torch.scatter_reduce``
from a start that does not tie), ``"pyg"`` (PyG's scatter: it starts from zeros with
``include_self=False``, and torch then counts that start as one more tie where the extreme is
exactly 0, so each tied edge gets g / (k + 1) there and g / k elsewhere), ``"first"`` (all of it
to the tied edge with the smallest id, like ``torch.max(dim)``'s one index)."""


def _extreme(op: str, fn: str):
    def extreme(items, ties: str = "even"):
        if ties not in TIE_RULES:
            raise ValueError(f"seastar.{fn}: ties must be one of {TIE_RULES}, got {ties!r}")
        x = _edge_value(items, fn)
        return x._t.call("aggregate", op, x._v, TIE_RULES.index(ties))
    extreme.__name__ = fn
    extreme.__doc__ = (f"{fn} over the centre vertex's edges of the list; 0 for a vertex without edges. "
                       f"``ties`` is the gradient's rule at ties (``seastar.ops.TIE_RULES``).")
    return extreme


sum = _aggregate("agg_sum", "sum")  # noqa: A001 - mirrors Python's sum on purpose
mean = _aggregate("agg_mean", "mean")
max = _extreme("agg_max", "max")  # noqa: A001
min = _extreme("agg_min", "min")  # noqa: A001


def softmax(scores):
    """Softmax of per-edge scores over each centre vertex's edges (max-subtracted, so finite).

    Returns a one-element list when given a list or generator, the traced value otherwise."""
    as_list = not isinstance(scores, Value)
    x = _edge_value(scores, "softmax")
    y = x._t.call("softmax", x._v)
    return [y] if as_list else y


def _elementwise(row: dict):
    """``seastar.<op>`` for a public elementwise row of the op table (core/ir/ops.def): its
    values first, then its parameters by position or name, the row's defaults filling the rest
    (the builder checks them again and names the user's line on an error)."""
    op, arity = row["name"], row["arity"]
    params = [(name, default) for name, default in row["params"]]
    names = [n for n, _ in params]
    values = ["x"] if arity == 1 else ["a", "b"]

    def fn(*args, **kwargs):
        if len(args) < arity:
            raise TypeError(f"seastar.{op}{signature} takes {arity} value{'s' if arity > 1 else ''}")
        xs, given = args[:arity], list(args[arity:])
        if len(given) > len(names):
            raise TypeError(f"seastar.{op}{signature} takes at most {len(names)} parameters, got {len(given)}")
        for k in kwargs:
            if k not in names:
                raise TypeError(f"seastar.{op}{signature} got an unexpected argument '{k}'")
            if names.index(k) < len(given):
                raise TypeError(f"seastar.{op}{signature} got '{k}' twice")
        for name, default in params[len(given):]:
            if name in kwargs:
                given.append(kwargs[name])
            elif default is not None:
                given.append(default)
            else:
                raise TypeError(f"seastar.{op}{signature} needs '{name}'")
        traced = [x for x in xs if isinstance(x, Value)]
        if not traced:
            _traced(xs[0], op)
        t = traced[0]._t
        return t.call("elementwise", op, [t.lift(x)._v for x in xs], [float(p) for p in given])

    P = inspect.Parameter
    sig = inspect.Signature([P(v, P.POSITIONAL_ONLY) for v in values] +
                            [P(n, P.POSITIONAL_OR_KEYWORD, default=P.empty if d is None else d) for n, d in params])
    signature = str(sig)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = row["doc"]
    fn.__signature__ = sig
    return fn


ELEMENTWISE = [row["name"] for row in _C.op_table() if row["public"] and row["kind"] in ("Unary", "Binary")]
"""The public elementwise functions, one per public row of core/ir/ops.def."""
globals().update({row["name"]: _elementwise(row) for row in _C.op_table() if row["name"] in ELEMENTWISE})

_table_pow = pow  # noqa: F821 - defined by the table just above


def pow(x, exponent: float):  # noqa: A001
    """x ** exponent (an exponent of 0.5 becomes sqrt, as with the ** operator)."""
    if not isinstance(x, Value):
        return _table_pow(x, exponent)  # raises the table function's error
    return x ** exponent


def dot(a, b):
    """Sum over the last feature axis of a * b."""
    return (a * b).sum(-1)


__all__ = ["sum", "mean", "max", "min", "softmax", "dot"] + ELEMENTWISE
