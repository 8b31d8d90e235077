"""What compiled code reads of a graph besides its sizes, as ``torch.library`` ops.

* ``seastar::graph_tensor_of(name, graph, kind) -> Tensor``: the edge list, types, degrees or
  in-edge index of a graph given as its tensors (``seastar.graph_inputs``);
* ``seastar::graph_tensor(ref) -> Tensor``: a tensor derived from one graph (``derived``),
  computed once outside the compiled code (compiled code that reads one is specialised to that
  graph, which it holds as a "value" opaque type, ``graph_inputs.GraphConstant``).

Below ``seastar.graph``, which reads its tensors and derived values through these inside compiled
code; graphs are made here with the class ``graph_inputs.graph_class()``.
"""
from __future__ import annotations

import itertools
import weakref
from typing import TYPE_CHECKING, Any, List, NamedTuple

import torch

from .direct_ops import custom_op
from .graph_inputs import GraphConstant, GraphKind, GraphTensors, graph_class, kind_ints, own_tensor, resolve

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph

_ref_ids = itertools.count()
_REFS: "weakref.WeakValueDictionary[int, TensorRef]" = weakref.WeakValueDictionary()

try:
    from torch._opaque_base import OpaqueBase
    from torch._library.opaque_object import MemberType, register_opaque_type
except ImportError:  # pragma: no cover - torch without opaque types: eager only
    OpaqueBase, register_opaque_type = object, None


class TensorRef(OpaqueBase):
    """A tensor derived from a graph, as compiled code holds it: ``graph_tensor(ref)`` reads it."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor
        self.id = next(_ref_ids)
        _REFS[self.id] = self

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorRef) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("seastar.TensorRef", self.id))

    def __fx_repr__(self):
        return f"tensor_ref_by_id({self.id})", {"tensor_ref_by_id": tensor_ref_by_id}

    def __repr__(self) -> str:
        return f"TensorRef({self.id}, {tuple(self.tensor.shape)}, {self.tensor.dtype})"


def tensor_ref_by_id(i: int) -> TensorRef:
    return _REFS[i]


class GraphRefs(NamedTuple):
    """A graph inside a derived value, as compiled code holds it: its tensors' refs and kind."""

    tensors: GraphTensors
    kind: GraphKind
    const: GraphConstant  # what derived() reads of the graph


def to_refs(value: Any) -> Any:
    """``value`` with every tensor (in tuples, named tuples, lists and dicts) replaced by a
    TensorRef, and every graph by its GraphRefs."""
    if isinstance(value, torch.Tensor):
        return TensorRef(value.detach())
    if isinstance(value, graph_class()):
        return GraphRefs(to_refs(value._in), value._kind, value._const)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(to_refs(v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(to_refs(v) for v in value)
    if isinstance(value, dict):
        return {k: to_refs(v) for k, v in value.items()}
    return value


def _from_refs(value: Any) -> Any:
    """The inverse of to_refs inside compiled code: each TensorRef becomes a graph_tensor op."""
    if isinstance(value, TensorRef):
        return graph_tensor(value)
    if isinstance(value, GraphRefs):
        t = value.tensors
        src = _from_refs(t.src_rows)
        dst = src if t.dst_rows is t.src_rows else _from_refs(t.dst_rows)
        view = graph_class()._view(GraphTensors(_from_refs(t.handle), src, dst, _from_refs(t.edge_rows)), value.kind)
        view._const = value.const  # a graph of one graph: compiled code is specialised to both
        return view
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*[_from_refs(v) for v in value])
    if isinstance(value, tuple):
        return tuple(_from_refs(v) for v in value)
    if isinstance(value, list):
        return [_from_refs(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_refs(v) for k, v in value.items()}
    return value


# -- the opaque types -----------------------------------------------------------------------------------
def _register() -> None:
    if register_opaque_type is None:
        return
    # run on the real graph at trace time: its result is a constant of the compiled code
    register_opaque_type(GraphConstant, typ="value", members={"_derive_traced": MemberType.USE_REAL})
    register_opaque_type(TensorRef, typ="value")


_register()  # before the ops: their schemas name the opaque types

COMPILED_VIEW = ("is derived from a graph that compiled code takes as an argument of torch.export, or made "
                 "inside compiled code; this layer option needs the real graph there: export it with the "
                 "graph bound (torch.export.export(seastar.nn.WithGraph(model, graph), (x, ...)))")


def _constants(value: Any) -> Any:
    """``derived``'s arguments as constants of the compiled code: a graph as its GraphConstant
    (``GraphConstant._derive_traced`` hands ``fn`` the graph), a symbolic size (a graph seen with
    other sizes before) as its value: the value is the graph's alone, and the compiled code is
    specialised to the graph anyway."""
    if isinstance(value, graph_class()):
        if value._const is None:
            raise NotImplementedError(f"the graph {COMPILED_VIEW}")
        return value._const
    if isinstance(value, torch.SymInt):
        return int(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_constants(v) for v in value))
    if isinstance(value, tuple):
        return tuple(_constants(v) for v in value)
    return value


def derived(graph: "Graph", fn, *args) -> Any:
    """``graph.derive(fn, *args)``, also inside torch.compile / torch.export: there ``fn`` runs at
    trace time on the real graph and its tensors become ``graph_tensor`` ops (constants of the
    compiled code, read again on each run; compiled code is then specialised to the graph).
    ``args`` must be constants (ints, strings, dtypes, ...)."""
    if torch.compiler.is_compiling():
        if graph._const is None:
            raise NotImplementedError(f"{getattr(fn, '__name__', fn)}: the graph {COMPILED_VIEW}")
        return _from_refs(graph._const._derive_traced(fn, *_constants(args)))
    return graph.derive(fn, *args)


@custom_op("seastar::graph_tensor")
def graph_tensor(ref: TensorRef) -> torch.Tensor:
    # a copy: compiled code owns its outputs and may reuse their memory
    return ref.tensor.clone()


@graph_tensor.register_fake
def _graph_tensor_fake(ref):
    t = ref.tensor
    return torch.empty(tuple(t.shape), dtype=t.dtype, device=t.device)


# -- a graph's own tensors, for a graph given as its tensors ----------------------------------------
_OWN = ("edge_index", "node_type", "edge_type", "in_degrees", "out_degrees", "in_src", "in_eid")


def graph_tensor_of(graph: "Graph", name: str):
    """``graph.edge_index`` (node_type, edge_type, in_degrees, out_degrees; in_src and in_eid, the
    source and the edge id of each slot of the in-edge index) inside compiled code: the graph's
    own tensor when its form carries it, else the op (None for types it lacks)."""
    if name not in _OWN:
        raise ValueError(f"unknown graph tensor {name!r}")
    if (name == "node_type" and not graph.has_node_types) or (name == "edge_type" and not graph.has_edge_types):
        return None
    own = getattr(graph._in, name, None)
    if own is not None:
        return own
    return graph_tensor_of_op(name, graph._in.op_args(), kind_ints(graph))


@custom_op("seastar::graph_tensor_of")
def graph_tensor_of_op(name: str, graph: List[torch.Tensor], kind: List[int]) -> torch.Tensor:
    t = own_tensor(resolve(graph, kind), name)
    return t.to(torch.int64, copy=True)  # a copy: compiled code owns its outputs


@graph_tensor_of_op.register_fake
def _graph_tensor_of_fake(name, graph, kind):
    _, src, dst, edges = graph[:4]
    ne = edges.shape[0]
    shape = {"edge_index": (2, ne), "node_type": (src.shape[0],), "edge_type": (ne,),
             "in_degrees": (dst.shape[0],), "out_degrees": (src.shape[0],), "in_src": (ne,), "in_eid": (ne,)}[name]
    return src.new_empty(shape, dtype=torch.int64)
