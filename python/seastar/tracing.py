"""The Python tracer: proxy objects that record a vertex program into GIR.

Every proxy holds a handle of the C++ ``Builder`` (``seastar._C``), which checks spaces, dtypes
and shapes as each op is recorded; this module only adds Python syntax (operators, attribute
access, iteration over edge lists) and tells the builder which user line is executing, so an
error names the user's file and line. No graph data is touched while tracing.
"""
from __future__ import annotations

import builtins
import contextlib
import inspect
import os
import sys
import threading
from typing import Any

import torch

from . import _C

TraceError = _C.TraceError
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# frames in torch (e.g. torch.nn.functional dispatching to __torch_function__) are not the user's
_SKIP_DIRS = (_PKG_DIR, os.path.dirname(os.path.abspath(torch.__file__)))
_trace_lock = threading.RLock()


def _user_location():
    """The innermost frame outside the seastar package: the user's line being traced."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_SKIP_DIRS):
        f = f.f_back
    if f is None:
        return "<unknown>", 0
    return f.f_code.co_filename, f.f_lineno


class UnknownLength(_C.TraceError, TypeError):
    """``len()`` of an edge list: a TraceError that is also a TypeError, which is how Python's
    ``list()``, ``tuple()`` and unpacking learn that an iterable has no length hint (they then
    iterate instead of failing)."""


class Tracer:
    """One trace: the C++ builder plus location bookkeeping."""

    def __init__(self, builder: "_C.Builder"):
        self.builder = builder

    def call(self, method: str, *args):
        self.builder.set_loc(*_user_location())
        return Value(self, getattr(self.builder, method)(*args))

    def fail(self, message: str):
        self.builder.set_loc(*_user_location())
        self.builder.fail(message)

    def lift(self, x) -> "Value":
        if isinstance(x, Value):
            if x._t is not self:
                self.fail("a value from another trace is used here")
            return x
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            kind = type(x).__name__
            hint = " (pass tensors by name when calling the program)" if kind in ("Tensor", "Parameter") else ""
            self.fail(f"cannot use a {kind} inside a vertex program{hint}")
        return self.call("constant", float(x))


def _binary(op: str, reverse: bool = False):
    def method(self, other):
        o = self._t.lift(other)
        a, b = (o, self) if reverse else (self, o)
        return self._t.call("binary", op, a._v, b._v)
    return method


def _unary(op: str):
    def method(self):
        return self._t.call("unary", op, self._v)
    return method


class Value:
    """A traced value: a per-vertex, per-edge or parameter tensor that does not exist yet."""

    __slots__ = ("_t", "_v")

    def __init__(self, tracer: Tracer, var: "_C.Var"):
        self._t = tracer
        self._v = var

    # elementwise arithmetic with numpy broadcasting over the feature axes
    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __truediv__, __rtruediv__ = _binary("div"), _binary("div", True)
    __neg__ = _unary("neg")
    __abs__ = _unary("abs")

    def __pos__(self):
        return self

    def __pow__(self, exponent):
        if isinstance(exponent, Value) or not isinstance(exponent, (int, float)):
            self._t.fail("only a constant exponent is supported: x ** 2.0")
        if exponent == 0.5:
            return self._t.call("unary", "sqrt", self._v)
        return self._t.call("unary", "pow", self._v, float(exponent), 0.0)

    def __matmul__(self, w):
        return self._t.call("matmul", self._v, self._t.lift(w)._v)

    def __getitem__(self, index):
        """``W[e.type]``: the row of a typed parameter table selected by a type."""
        if not isinstance(index, Value):
            self._t.fail("a traced value can only be indexed by a type (W[e.type], W[v.type]); "
                         "slice tensors before binding them")
        return self._t.call("type_index", self._v, index._v)

    # feature-axis reductions: x.sum(-1) makes dot products
    def _reduce(self, op: str, dim: int, keepdim: bool):
        rank = len(self.shape)
        if dim not in (-1, rank - 1):
            self._t.fail(f"{op[1:]}() over the feature axes reduces the last axis only (dim=-1), got dim={dim}")
        r = self._t.call("reduce_features", op, self._v)
        return r.unsqueeze(-1) if keepdim else r

    def sum(self, dim: int = -1, keepdim: bool = False):
        return self._reduce("fsum", dim, keepdim)

    def mean(self, dim: int = -1, keepdim: bool = False):
        return self._reduce("fmean", dim, keepdim)

    def max(self, dim: int = -1, keepdim: bool = False):
        return self._reduce("fmax", dim, keepdim)

    def unsqueeze(self, dim: int = -1):
        if dim not in (-1, len(self.shape)):
            self._t.fail("unsqueeze appends a feature axis only (dim=-1)")
        return self._t.call("unsqueeze", self._v)

    # introspection (shapes are known while tracing)
    @property
    def shape(self):
        return tuple(self._v.shape)

    @property
    def space(self) -> str:
        return self._v.space

    def __repr__(self):
        return f"<seastar traced {self._v.space} value %{self._v.id} shape={self.shape}>"

    # Python control flow would depend on data that does not exist while tracing.
    def __bool__(self):
        self._t.fail("data-dependent Python control flow (if/while/and/or on a traced value) is not supported; "
                     "use seastar.maximum/minimum/clamp or relu-style ops")

    def __len__(self):
        self._t.fail("len() of a traced value is unknown while tracing; use v.in_degree / v.out_degree")

    def __iter__(self):
        self._t.fail("a traced value is not iterable; iterate over v.in_edges() instead")

    def __index__(self):
        self._t.fail("a traced value cannot be used as a Python index or int")

    __int__ = __float__ = __index__

    def __eq__(self, other):  # noqa: D105 - would silently become Python's identity otherwise
        self._t.fail("comparisons of traced values are not supported (they would need data)")

    __lt__ = __le__ = __gt__ = __ge__ = __ne__ = __eq__
    __hash__ = object.__hash__

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, Value):
                name = getattr(func, "__name__", str(func))
                module = (getattr(func, "__module__", None) or "torch").replace("torch._C._nn", "torch.nn.functional")
                a._t.fail(f"{module}.{name} is not supported inside a vertex program; use the seastar "
                          f"function of the same name (seastar.{name}) or compute it outside the program")
        return NotImplemented


class Endpoint:
    """``e.src`` / ``e.dst``: attribute access reads a vertex tensor at that endpoint."""

    __slots__ = ("_t", "_endpoint", "_elist")

    def __init__(self, tracer: Tracer, endpoint: str, elist: str):
        self._t, self._endpoint, self._elist = tracer, endpoint, elist

    def __getattr__(self, name: str) -> Value:
        if name.startswith("__"):
            raise AttributeError(name)
        x = self._t.call("vertex_input", name)
        return self._t.call("gather", x._v, self._endpoint, self._elist)

    @property
    def type(self) -> Value:
        x = self._t.call("node_type")
        return self._t.call("gather", x._v, self._endpoint, self._elist)


class Edge:
    """The symbolic edge of an edge list: ``e.src``, ``e.dst``, ``e.type``, ``e.id``, ``e.<feature>``."""

    __slots__ = ("_t", "_elist")

    def __init__(self, tracer: Tracer, elist: str):
        self._t, self._elist = tracer, elist

    @property
    def src(self) -> Endpoint:
        return Endpoint(self._t, "src", self._elist)

    @property
    def dst(self) -> Endpoint:
        return Endpoint(self._t, "dst", self._elist)

    @property
    def nbr(self) -> Endpoint:
        """The other endpoint: the source of an in-edge, the destination of an out-edge."""
        return self.src if self._elist == "dst" else self.dst

    @property
    def type(self) -> Value:
        return self._t.call("edge_type", self._elist)

    @property
    def id(self) -> Value:
        return self._t.call("edge_id", self._elist)

    def __getattr__(self, name: str) -> Value:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._t.call("edge_input", name, self._elist)


class EdgeList:
    """``v.in_edges()`` / ``v.out_edges()``: iterating yields one symbolic edge standing for all."""

    __slots__ = ("_t", "_elist")

    def __init__(self, tracer: Tracer, elist: str):
        self._t, self._elist = tracer, elist

    def __iter__(self):
        yield Edge(self._t, self._elist)

    def __len__(self):
        try:
            self._t.fail("len() of an edge list is unknown while tracing; use v.in_degree / v.out_degree")
        except _C.TraceError as e:
            raise UnknownLength(str(e)) from None


class NeighbourList(EdgeList):
    """``v.in_nbrs()`` / ``v.out_nbrs()``: iterating yields the neighbour endpoint."""

    def __iter__(self):
        yield Edge(self._t, self._elist).nbr


class Vertex:
    """The centre vertex ``v``: ``v.<feature>``, its edge lists, type and degrees."""

    __slots__ = ("_t",)

    def __init__(self, tracer: Tracer):
        self._t = tracer

    def in_edges(self) -> EdgeList:
        return EdgeList(self._t, "dst")

    def out_edges(self) -> EdgeList:
        return EdgeList(self._t, "src")

    def in_nbrs(self) -> NeighbourList:
        return NeighbourList(self._t, "dst")

    def out_nbrs(self) -> NeighbourList:
        return NeighbourList(self._t, "src")

    @property
    def type(self) -> Value:
        return self._t.call("node_type")

    @property
    def in_degree(self) -> Value:
        return self._t.call("degree", "dst")

    @property
    def out_degree(self) -> Value:
        return self._t.call("degree", "src")

    def __getattr__(self, name: str) -> Value:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._t.call("vertex_input", name)


# ---- builtins: sum/max/min of an edge list aggregate while tracing ----------------------

_builtin_sum, _builtin_max, _builtin_min = builtins.sum, builtins.max, builtins.min


def edge_value_of(items) -> Any:
    """The single traced Edge value of a list/generator over an edge list, else None."""
    if isinstance(items, Value):
        return items if items._v.elist != "none" else None
    if isinstance(items, (list, tuple)) and len(items) == 1 and isinstance(items[0], Value) \
            and items[0]._v.elist != "none":
        return items[0]
    return None


def _make_builtin(op: str, original):
    def patched(*args, **kwargs):
        if len(args) >= 1 and not isinstance(args[0], (int, float, str)):
            items = args[0]
            if not isinstance(items, (list, tuple, Value)) and hasattr(items, "__iter__"):
                items = list(items)
            x = edge_value_of(items)
            if x is not None and not kwargs and (len(args) == 1 or (op == "agg_sum" and args[1] == 0)):
                return x._t.call("aggregate", op, x._v)
            args = (items,) + args[1:]
        return original(*args, **kwargs)
    patched.__name__ = original.__name__
    return patched


@contextlib.contextmanager
def return_location(fn, into: list):
    """Records in ``into`` where ``fn`` returns ([file, line]): a returned value that is not
    traced is only seen after the frame is gone, so a profile hook (this thread, this trace
    only, chained to any profiler already set) notes the line of the ``return``."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        yield
        return
    previous = sys.getprofile()

    def hook(frame, event, arg):
        if event == "return" and frame.f_code is code:
            into[:] = [code.co_filename, frame.f_lineno]
        if previous is not None:
            previous(frame, event, arg)
    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(previous)


@contextlib.contextmanager
def patched_builtins():
    """Makes Python's sum/max/min aggregate edge lists for the duration of a trace."""
    with _trace_lock:
        saved = builtins.sum, builtins.max, builtins.min
        builtins.sum = _make_builtin("agg_sum", _builtin_sum)
        builtins.max = _make_builtin("agg_max", _builtin_max)
        builtins.min = _make_builtin("agg_min", _builtin_min)
        try:
            yield
        finally:
            builtins.sum, builtins.max, builtins.min = saved
