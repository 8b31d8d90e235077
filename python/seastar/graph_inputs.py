"""A ``seastar.Graph`` as compiled code sees it: tensors whose shapes are the graph's sizes.

``torch.compile`` and ``torch.export`` take a graph as an *input* of the compiled code, never as
a constant, so one compiled program serves every graph of a kind (every batch of a loader).
What they read of a graph (``Graph._in``, a ``GraphTensors``):

* ``handle`` [1] int64: the graph's uid, by which the ops find the graph at run time
  (``resolve``); its value is data, not guarded, so another graph does not recompile;
* ``src_rows`` [num_src, 0], ``dst_rows`` [num_dst, 0], ``edge_rows`` [E, 0]: empty tensors whose
  first dimensions are the graph's sizes, so that the sizes are symbolic (a square graph's
  ``src_rows`` is its ``dst_rows``: one size);
* ``edge_index``, ``node_type``, ``edge_type``: only in the form ``torch.utils._pytree`` flattens
  (what ``torch.export`` takes), so that a graph this process does not hold can be rebuilt; the
  ops read them from the graph otherwise (``seastar::graph_tensor_of``).

and its kind (``Graph._kind``, a ``GraphKind`` of constants: bipartite, node and edge types),
which compiled code is specialised to. Graphs derived inside compiled code (self-loop graphs, a
block's typed square graph, edges in relation order) are graphs of the same form made by the op
``seastar::derived_graph`` (``seastar.derived_graphs``).
"""
from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph

# The Graph class, registered by seastar.graph when it is defined (register_graph_class): this
# module sits below it, and rebuilds graphs from the ops' arguments with it.
_GRAPH_CLASS: Optional[type] = None


def graph_class() -> type:
    return _GRAPH_CLASS


class GraphKind(NamedTuple):
    """What compiled code is specialised to: the same for every block a loader yields."""

    bipartite: bool
    has_node_types: bool
    num_node_types: int
    has_edge_types: bool
    num_edge_types: int

    def ints(self) -> List[int]:
        """The kind as the ops' ``kind`` argument."""
        return [int(self.bipartite), int(self.has_node_types), self.num_node_types, int(self.has_edge_types),
                self.num_edge_types]

    @staticmethod
    def of_ints(kind) -> "GraphKind":
        b, hn, nn, he, ne = (int(k) for k in kind)
        return GraphKind(bool(b), bool(hn), nn, bool(he), ne)


class GraphTensors(NamedTuple):
    handle: torch.Tensor
    src_rows: torch.Tensor
    dst_rows: torch.Tensor
    edge_rows: torch.Tensor
    edge_index: Optional[torch.Tensor] = None
    node_type: Optional[torch.Tensor] = None
    edge_type: Optional[torch.Tensor] = None

    def op_args(self) -> List[torch.Tensor]:
        """The ``graph`` argument of the ops: the four size tensors, then the edge list and the
        types when this form carries them."""
        rest = [t for t in (self.edge_index, self.node_type, self.edge_type) if t is not None]
        return [self.handle, self.src_rows, self.dst_rows, self.edge_rows] + rest


def static_int(d) -> int:
    """An int of compiled code as a constant (a feature size, a type count): what a program's
    trace needs, so compiled code is specialised to it. With ``dynamic=True`` torch makes every
    size and int input symbolic, and a dictionary key is how Dynamo turns one into its value
    (with a guard)."""
    if torch.compiler.is_dynamo_compiling():
        return next(iter({d: None}))
    return int(d)


def same_size(a, b) -> bool:
    """``a == b`` for sizes, symbolic or not, without a guard on data (an unbacked size, such as a
    self-loop graph's edge count, equals only itself)."""
    r = a == b
    if isinstance(r, bool):
        return r
    # a symbolic comparison exists only once torch.compile has loaded the symbolic shapes (and
    # sympy); importing them here rather than at the top keeps them out of eager processes
    from torch.fx.experimental.symbolic_shapes import guard_or_false
    return guard_or_false(r)


def kind_ints(graph: "Graph") -> List[int]:
    """``graph._kind.ints()`` as constants (the ops' ``kind`` argument)."""
    return [static_int(k) for k in graph._kind.ints()]


def rows(n: int) -> torch.Tensor:
    """An empty [n, 0] tensor: a size as compiled code reads it."""
    return torch.empty((n, 0), dtype=torch.uint8)


_LIVE: "weakref.WeakValueDictionary[int, Graph]" = weakref.WeakValueDictionary()
_lock = threading.Lock()


def make(graph: "Graph") -> None:
    """Sets ``graph._in`` and ``graph._kind`` from its C++ graph and registers it by uid."""
    g = graph._g
    ns, nd, ne, bip = g.num_src, g.num_dst, g.num_edges, g.is_bipartite
    src = rows(ns)
    graph._in = GraphTensors(torch.tensor([g.uid], dtype=torch.int64), src, rows(nd) if bip else src, rows(ne))
    graph._kind = GraphKind(bool(bip), bool(g.has_node_types), int(g.num_node_types), bool(g.has_edge_types),
                            int(g.num_edge_types))
    if _LIVE.get(g.uid) is None:  # another face of a C++ graph (Graph(graph._g)) shares its uid
        _LIVE[g.uid] = graph


# -- from the ops' arguments back to a graph ----------------------------------------------------
_REBUILT: "OrderedDict[tuple, Graph]" = OrderedDict()  # graphs rebuilt from an edge list, a few kept


def resolve(graph_args: List[torch.Tensor], kind) -> "Graph":
    """The graph the ops were given (``GraphTensors.op_args``): the live graph of that uid when
    its sizes (and edge list, when given) agree, else one rebuilt from the edge list."""
    handle, src_rows, dst_rows, edge_rows = graph_args[:4]
    sizes = (src_rows.shape[0], dst_rows.shape[0], edge_rows.shape[0])
    uid = handle.item()
    g = _LIVE.get(uid)
    if g is not None and len(graph_args) == 4 and (g.num_src, g.num_dst, g.num_edges) == sizes:
        return g  # the common case, first: every op of a compiled step resolves its graph
    kind = GraphKind.of_ints(kind)
    rest = list(graph_args[4:])
    edge_index = rest.pop(0) if rest else None
    node_type = rest.pop(0) if rest and kind.has_node_types else None
    edge_type = rest.pop(0) if rest and kind.has_edge_types else None
    if g is not None and (g.num_src, g.num_dst, g.num_edges) == sizes:
        if edge_index is None or _same_edges(g, edge_index, edge_type):
            return g
    if edge_index is None:
        raise RuntimeError(f"seastar: compiled code was given graph uid {uid} of {sizes[0]} sources, {sizes[1]} "
                           f"destinations and {sizes[2]} edges, which this process does not hold")
    key = (uid,) + sizes + (edge_index.data_ptr(),)
    with _lock:
        hit = _REBUILT.get(key)
        if hit is not None and _same_edges(hit, edge_index, edge_type):
            return hit
    num_nodes = (sizes[0], sizes[1]) if kind.bipartite else sizes[0]
    g = _GRAPH_CLASS.from_edge_index(edge_index.to("cpu", torch.int64), num_nodes=num_nodes,
                                      node_type=node_type, edge_type=edge_type,
                                      num_node_types=kind.num_node_types if kind.has_node_types else None,
                                      num_edge_types=kind.num_edge_types if kind.has_edge_types else None)
    with _lock:
        _REBUILT[key] = g
        while len(_REBUILT) > 8:
            _REBUILT.popitem(last=False)
    return g


def _same_edges(g: "Graph", edge_index: torch.Tensor, edge_type: Optional[torch.Tensor]) -> bool:
    mine = own_tensor(g, "edge_index")
    if mine.data_ptr() != edge_index.data_ptr() and not torch.equal(mine, edge_index.to(mine.device, mine.dtype)):
        return False
    return edge_type is None or torch.equal(own_tensor(g, "edge_type").long(), edge_type.to("cpu", torch.int64))


def own_tensor(graph: "Graph", name: str) -> Optional[torch.Tensor]:
    """A real graph's ``edge_index``, ``node_type``, ``edge_type``, ``in_degrees`` or ``out_degrees``,
    or its in-edge index's ``in_src`` or ``in_eid`` (each slot's source and edge id)."""
    g = graph._g
    if name == "edge_index":
        return g.edge_index()
    if name == "in_degrees":
        return g.in_degrees()
    if name == "out_degrees":
        return g.out_degrees()
    index_name = {"in_src": "in_nbr"}.get(name, name)
    return g.tensors("cpu", coo=False, out=False).get(index_name)  # node_type, edge_type, in_nbr, in_eid


# -- torch.utils._pytree: what torch.export flattens a graph argument into -----------------------
def _flatten(graph: "Graph"):
    t = graph._in
    if graph._g is not None:  # a real graph: its edge list and types travel along
        with _disable_current_modes():  # real tensors, also when torch.export flattens under its fake mode
            t = t._replace(edge_index=own_tensor(graph, "edge_index"),
                           node_type=own_tensor(graph, "node_type") if graph._kind.has_node_types else None,
                           edge_type=own_tensor(graph, "edge_type") if graph._kind.has_edge_types else None)
    present = tuple(f for f in GraphTensors._fields if getattr(t, f) is not None)
    square = t.src_rows is t.dst_rows
    leaves = [getattr(t, f) for f in present if not (square and f == "dst_rows")]
    return leaves, (present, square, tuple(graph._kind))


def _unflatten(leaves, context) -> "Graph":
    present, square, kind = context
    it = iter(leaves)
    fields = {}
    for f in present:
        if square and f == "dst_rows":
            fields[f] = fields["src_rows"]
        else:
            fields[f] = next(it)
    return _GRAPH_CLASS._view(GraphTensors(**fields), GraphKind(*kind))


def _flatten_with_keys(graph: "Graph"):
    leaves, context = _flatten(graph)
    present, square, _ = context
    names = [f for f in present if not (square and f == "dst_rows")]
    return [(pytree.GetAttrKey(n), leaf) for n, leaf in zip(names, leaves)], context


def register_graph_class(graph_cls: type) -> None:
    """Called by seastar.graph once: the class graphs are rebuilt with, and torch.export's
    flattening of a graph argument (torch.utils._pytree)."""
    global _GRAPH_CLASS
    _GRAPH_CLASS = graph_cls
    pytree.register_pytree_node(graph_cls, _flatten, _unflatten, serialized_type_name="seastar.Graph",
                                flatten_with_keys_fn=_flatten_with_keys,
                                to_dumpable_context=_to_dumpable, from_dumpable_context=_from_dumpable)


def dynamic_shapes(graph: "Graph") -> list:
    """The ``dynamic_shapes`` entry of ``graph`` as an argument of ``torch.export.export``: every
    size of it symbolic (``Dim.AUTO``), one entry per tensor it flattens into."""
    auto = torch.export.Dim.AUTO
    leaves, (present, square, _) = _flatten(graph)
    names = [f for f in present if not (square and f == "dst_rows")]
    return [None if n == "handle" else ({1: auto} if n == "edge_index" else {0: auto}) for n in names]


def _to_dumpable(context) -> str:
    """The context as JSON, which torch.export.save writes (tuples come back as lists there)."""
    present, square, kind = context
    return json.dumps([list(present), square, list(kind)])


def _from_dumpable(text: str):
    present, square, kind = json.loads(text)
    return tuple(present), square, tuple(kind)


# -- the graph as a constant: what compiled code specialises to when it needs the real graph -----
try:
    from torch._opaque_base import OpaqueBase
except ImportError:  # pragma: no cover - torch without opaque types: eager only
    OpaqueBase = object


class GraphConstant(OpaqueBase):
    """``graph._const``: a "value" opaque type (registered in ``seastar.graph_ops``), guarded by
    the graph's uid. Only the derived values no op computes yet read it (``graph_ops.derived``);
    compiled code that does is specialised to the graph, as all compiled code once was."""

    def __init__(self, graph: "Graph"):
        self.uid = graph._g.uid
        self._graph = weakref.ref(graph)

    @property
    def graph(self) -> "Graph":
        g = self._graph()
        if g is None:
            g = _LIVE.get(self.uid)
        if g is None:
            raise RuntimeError(f"seastar: compiled code refers to graph uid {self.uid}, which no longer exists")
        return g

    def _derive_traced(self, fn, *args):
        return self.graph._derive_traced(fn, *_graphs(args))

    def __eq__(self, other) -> bool:
        return isinstance(other, GraphConstant) and other.uid == self.uid

    def __hash__(self) -> int:
        return hash(("seastar.GraphConstant", self.uid))

    def __fx_repr__(self):
        return graph_fx_repr(self.graph)


def _graphs(value):
    """The inverse of ``graph_ops._constants``: each GraphConstant in ``value`` as its graph."""
    if isinstance(value, GraphConstant):
        return value.graph
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_graphs(v) for v in value))
    if isinstance(value, tuple):
        return tuple(_graphs(v) for v in value)
    return value


# -- graphs and derived tensors as constants of compiled code ---------------------------------------
_GRAPHS: Dict[int, "Graph"] = {}  # uid -> graph, for graphs that generated code refers to


def graph_by_uid(uid: int) -> "Graph":
    """The graph generated code names by uid (registered when the code was generated)."""
    try:
        return _GRAPHS[uid]
    except KeyError:
        raise RuntimeError(f"seastar: compiled code refers to graph uid {uid}, which this process does not hold "
                           f"(an exported program runs in the process that exported it, with its graph)") from None


def graph_constant_by_uid(uid: int) -> GraphConstant:
    return graph_by_uid(uid)._const


def graph_fx_repr(graph: "Graph"):
    with _lock:
        _GRAPHS[graph.uid] = graph
    return f"graph_constant_by_uid({graph.uid})", {"graph_constant_by_uid": graph_constant_by_uid}
