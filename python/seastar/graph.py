"""The graph users hold: an immutable edge list with in-edge (CSC) and out-edge (CSR) indices.

A thin Python face over the C++ ``seastar._C.Graph``: validation, index construction and the
per-device index caches all live in C++.

For ``torch.compile`` and ``torch.export`` a graph is an input of the compiled code: what they
read of it are tensors whose shapes are its sizes and a handle the ops find it by
(``seastar.graph_inputs``), so one compiled program serves every graph of a kind (every block a
loader yields) without recompiling. Inside compiled code the sizes and tensors below are read
from that form (symbolic sizes); a graph made there (``Graph._view``) has no C++ graph of its own.
Values derived from the graph alone (self-loop graphs, normalisations, per-relation groupings)
are computed by ``derive`` once per graph; compiled code derives them per call with ops
(``seastar.derived_graphs``), or, for the values no op derives yet, specialises to the graph
(``seastar.graph_ops.derived``).
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import torch
from torch.utils._python_dispatch import _disable_current_modes

from . import _C, graph_inputs, graph_ops
from .reorder import reorder_graph


def _as_index_tensor(x, what: str) -> Optional[torch.Tensor]:
    if x is None:
        return None
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    return x


class Graph:
    """A directed (multi)graph; edge ``i`` goes from ``edge_index[0, i]`` to ``edge_index[1, i]``.

    Vertex programs aggregate over a vertex's in-edges (``v.in_edges()``) or out-edges.
    Optional ``node_type`` [N] and ``edge_type`` [E] make it heterogeneous (``e.type``, ``v.type``).

    A *bipartite* graph (``num_nodes=(num_src, num_dst)``) has two vertex sets: sources
    ``0 .. num_src-1`` and destinations ``0 .. num_dst-1``. In a vertex program on it, ``e.src.x``
    reads a ``[num_src, ...]`` tensor, ``v.x`` and ``e.dst.x`` a ``[num_dst, ...]`` tensor, and the
    outputs have ``num_dst`` rows. A tensor read both at sources and at the centre has ``num_src``
    rows, of which the first ``num_dst`` are the destinations (a sampled block, as DGL's blocks).
    A block made by ``with_global_sources`` instead reads its sources from a whole feature table.
    """

    # _in / _kind: the graph as compiled code reads it (seastar.graph_inputs); _const: the graph
    # as a constant, for the derived values compiled code specialises to (graph_ops.derived)
    __slots__ = ("_g", "_derived", "_local", "_in", "_kind", "_const", "__weakref__")

    def __init__(self, cgraph: "_C.Graph"):
        self._g = cgraph
        self._derived = {}  # derive(): (function, args) -> value, for this graph's lifetime
        self._local = None  # with_global_sources: (the block with local ids, their global ids)
        self._const = None
        if cgraph is not None:
            graph_inputs.make(self)
            self._const = graph_inputs.GraphConstant(self)

    @classmethod
    def _view(cls, tensors: "graph_inputs.GraphTensors", kind: "graph_inputs.GraphKind") -> "Graph":
        """A graph inside compiled code, made of its tensors alone (an argument torch.export
        unflattened, or a graph an op derived): sizes, kind and tensors, no C++ graph."""
        g = cls(None)
        g._in, g._kind = tensors, kind
        return g

    # -- identity: uid, for caches and for the ops to find a graph by ---------------------------
    @property
    def uid(self) -> int:
        """A process-unique id, never reused (two faces of one C++ graph share it); -1 inside
        compiled code, where a graph is its tensors (and caches keyed by uid are not used)."""
        if torch.compiler.is_compiling():
            return -1
        return self._g.uid

    def __eq__(self, other) -> bool:
        if not isinstance(other, Graph):
            return False
        if self._g is None or other._g is None:
            return self is other
        return other._g.uid == self._g.uid

    def __hash__(self) -> int:
        return hash(("seastar.Graph", self._g.uid)) if self._g is not None else id(self)

    # -- values derived from the graph alone ---------------------------------------------------
    def derive(self, fn: Callable[..., Any], *args) -> Any:
        """``fn(self, *args)``, computed once and kept on the graph (``args``: hashable constants).

        Under ``torch.compile`` / ``torch.export`` call ``seastar.graph_ops.derived(graph, fn,
        *args)`` instead: it runs ``fn`` here, at trace time, and hands the compiled code the
        result's tensors through an op."""
        key = (fn, args)
        hit = self._derived.get(key)
        if hit is None:
            hit = self._derived[key] = [fn(self, *args), None]  # [value, its traced form]
        return hit[0]

    def _derive_traced(self, fn: Callable[..., Any], *args) -> Any:
        """``derive``'s value with each tensor replaced by a ``graph_ops.TensorRef`` (and each
        graph by its refs); torch.compile runs this with the real graph at trace time (through
        ``GraphConstant``, an opaque value type)."""
        with _disable_current_modes(), torch.no_grad():  # real tensors, not export's fake or traced ones
            self.derive(fn, *args)
            hit = self._derived[(fn, args)]
            if hit[1] is None:
                hit[1] = graph_ops.to_refs(hit[0])
        return hit[1]

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes=None, node_type=None, edge_type=None,
                        num_node_types: Optional[int] = None, num_edge_types: Optional[int] = None) -> "Graph":
        """PyTorch Geometric convention: ``edge_index`` is [2, E], row 0 the sources.

        ``num_nodes``: the vertex count (default 1 + the largest id), or a pair
        ``(num_src, num_dst)`` for a bipartite graph (PyG's ``size``). A bipartite graph's
        ``node_type`` has one entry per source, and destination ``i`` has the type of source ``i``
        (a sampled block's destinations are its first sources), so it needs ``num_dst <= num_src``."""
        edge_index = _as_index_tensor(edge_index, "edge_index")
        if isinstance(num_nodes, (tuple, list)):
            if len(num_nodes) != 2:
                raise ValueError(f"num_nodes of a bipartite graph is (num_src, num_dst), got {tuple(num_nodes)}")
            return cls(_C.Graph.bipartite(edge_index, int(num_nodes[0]), int(num_nodes[1]),
                                          _as_index_tensor(edge_type, "edge_type"),
                                          -1 if num_edge_types is None else int(num_edge_types),
                                          _as_index_tensor(node_type, "node_type"),
                                          -1 if num_node_types is None else int(num_node_types)))
        return cls(_C.Graph.from_edge_index(
            edge_index, num_nodes, _as_index_tensor(node_type, "node_type"), _as_index_tensor(edge_type, "edge_type"),
            -1 if num_node_types is None else int(num_node_types),
            -1 if num_edge_types is None else int(num_edge_types)))

    @classmethod
    def from_coo(cls, src, dst, num_nodes: Optional[int] = None, **types) -> "Graph":
        src, dst = _as_index_tensor(src, "src"), _as_index_tensor(dst, "dst")
        if src.shape != dst.shape:
            raise ValueError(f"src and dst differ in shape: {tuple(src.shape)} vs {tuple(dst.shape)}")
        return cls.from_edge_index(torch.stack([src.reshape(-1), dst.reshape(-1)]), num_nodes, **types)

    # -- sizes and types -------------------------------------------------------------------
    # Inside compiled code, read from the graph's tensors (symbolic sizes) and kind (constants).
    @property
    def num_nodes(self) -> int:
        """The vertex count; a bipartite graph has two (``num_src``, ``num_dst``) and raises."""
        if torch.compiler.is_compiling():
            if self._kind.bipartite:
                raise ValueError("a bipartite graph has num_src and num_dst sources and destinations, not num_nodes")
            return self._in.src_rows.shape[0]
        return self._g.num_nodes  # a bipartite graph raises, naming both counts

    @property
    def num_src(self) -> int:
        """The number of sources, the rows of tensors read as ``e.src.x`` (``num_nodes`` on a square
        graph)."""
        if torch.compiler.is_compiling():
            return self._in.src_rows.shape[0]
        return self._g.num_src

    @property
    def num_dst(self) -> int:
        """The number of destinations, the rows of ``v.x`` and of the outputs (``num_nodes`` on a
        square graph)."""
        if torch.compiler.is_compiling():
            return self._in.dst_rows.shape[0]
        return self._g.num_dst

    @property
    def is_bipartite(self) -> bool:
        return self._kind.bipartite

    @property
    def num_edges(self) -> int:
        if torch.compiler.is_compiling():
            return self._in.edge_rows.shape[0]
        return self._g.num_edges

    @property
    def num_node_types(self) -> int:
        return self._kind.num_node_types

    @property
    def num_edge_types(self) -> int:
        return self._kind.num_edge_types

    @property
    def has_node_types(self) -> bool:
        return self._kind.has_node_types

    @property
    def has_edge_types(self) -> bool:
        return self._kind.has_edge_types

    # the tensors below are read through derived() so that compiled code can read them too
    @property
    def edge_index(self) -> torch.Tensor:
        return tensor_of(self, "edge_index")

    @property
    def node_type(self) -> Optional[torch.Tensor]:
        return tensor_of(self, "node_type")

    @property
    def edge_type(self) -> Optional[torch.Tensor]:
        return tensor_of(self, "edge_type")

    def in_degrees(self) -> torch.Tensor:
        return tensor_of(self, "in_degrees")

    def out_degrees(self) -> torch.Tensor:
        return tensor_of(self, "out_degrees")

    @property
    def index_dtype(self) -> torch.dtype:
        if torch.compiler.is_compiling():
            return torch.int64
        return torch.int32 if self._g.index_dtype() == "int32" else torch.int64

    # -- derived graphs --------------------------------------------------------------------
    def add_self_loops(self, loop_type: int = 0) -> "Graph":
        """A new graph with one self loop per vertex appended (edge ids E .. E+N-1)."""
        return Graph(self._g.add_self_loops(loop_type))

    def reorder(self, nodes=None, edges="dst"):
        """``seastar.reorder_graph(self, nodes, edges)``: this graph renumbered for locality, with
        the original ids to map tensors in and results back (``seastar/reorder.py``)."""
        return reorder_graph(self, nodes, edges)

    def remove_self_loops(self):
        """A new graph without self loops, and the ids of the kept edges (to index edge features)."""
        g, kept = self._g.remove_self_loops()
        return Graph(g), kept

    def with_global_sources(self, source_ids, num_src: int) -> "Graph":
        """This bipartite block with source ``j`` read as row ``source_ids[j]`` of a table of
        ``num_src`` rows: a mini-batch's input block then reads the whole feature tensor in
        place (``NeighborLoader(x_in_place=True)``) and nothing of its sources is gathered.

        Its destination ``i`` is no longer source ``i`` (it is ``source_ids[i]``), so layers
        are given the destinations' rows as the second of ``(x_src, x_dst)``; self-loop helpers
        and a program reading one tensor at both sides raise, and ``local_block`` gives back
        the block with local ids. Needs a bipartite graph without node types."""
        ids = torch.as_tensor(source_ids).view(-1).to(torch.long)
        g = Graph(self._g.with_global_sources(ids, int(num_src)))
        g._local = (self, ids)
        return g

    @property
    def sources_global(self) -> bool:
        """True for a block from ``with_global_sources``: its sources are rows of a whole table."""
        return self._is_sources_global()

    def _is_sources_global(self) -> bool:
        return self._local is not None

    @property
    def local_block(self) -> Optional["Graph"]:
        """For a ``with_global_sources`` block, the same block with local source ids; else None."""
        return None if self._local is None else self._local[0]

    @property
    def source_ids(self) -> Optional[torch.Tensor]:
        """For a ``with_global_sources`` block, the global id of each local source (its first
        ``num_dst`` are the destinations'); else None."""
        return None if self._local is None else self._local[1]

    # -- devices ---------------------------------------------------------------------------
    def tensors(self, device="cpu") -> dict:
        """Index tensors (CSC, CSR, COO, types) on ``device``, built once per device and cached."""
        return self._g.tensors(str(torch.device(device)))

    def to(self, device) -> "Graph":
        """Prepares the in-edge index on ``device`` (the COO arrays, which only edge kernels
        read, and the out-edge index, which only backward passes into sources read, on first
        use); the graph itself serves every device."""
        self._g.tensors(str(torch.device(device)), coo=False, out=False)
        if self._local is not None:  # the layers that gather their sources run on it
            self._local[0].to(device)
        return self

    def dynamic_shapes(self) -> list:
        """This graph's entry in ``torch.export.export(..., dynamic_shapes=...)`` when it is an
        argument: its sizes symbolic, so the exported program takes any graph of its kind."""
        return graph_inputs.dynamic_shapes(self)

    # -- pickling: the edge list and the types; the indices are rebuilt (O(N + E)) ------------
    def __reduce__(self):
        if self._local is not None:
            return (_rebuild_global, (self._local[0], self._local[1], self.num_src))
        sizes = (self.num_src, self.num_dst) if self.is_bipartite else self.num_nodes
        return (_rebuild, (self.edge_index, sizes, self.node_type, self.edge_type,
                           self.num_node_types if self.has_node_types else None,
                           self.num_edge_types if self.has_edge_types else None))

    def __repr__(self) -> str:
        if self.is_bipartite:
            typed = f", node_types={self.num_node_types}" if self.has_node_types else ""
            typed += f", edge_types={self.num_edge_types}" if self.has_edge_types else ""
            return f"Graph(num_src={self.num_src}, num_dst={self.num_dst}, num_edges={self.num_edges}{typed})"
        typed = ""
        if self.has_node_types or self.has_edge_types:
            typed = f", node_types={self.num_node_types}, edge_types={self.num_edge_types}"
        return f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{typed})"


def tensor_of(graph: Graph, name: str) -> Optional[torch.Tensor]:
    """``graph.edge_index`` (``node_type``, ``edge_type``, ``in_degrees``, ``out_degrees``) by name;
    inside compiled code read from the graph's tensors, or by the op ``seastar::graph_tensor_of``."""
    if torch.compiler.is_compiling():
        return graph_ops.graph_tensor_of(graph, name)
    return graph_inputs.own_tensor(graph, name)


def _rebuild_global(local: Graph, source_ids: torch.Tensor, num_src: int) -> Graph:
    return local.with_global_sources(source_ids, num_src)


def _rebuild(edge_index, sizes, node_type, edge_type, num_node_types, num_edge_types) -> Graph:
    return Graph.from_edge_index(edge_index, sizes, node_type=node_type, edge_type=edge_type,
                                 num_node_types=num_node_types, num_edge_types=num_edge_types)


graph_inputs.register_graph_class(Graph)
# torch.export.save keeps a program's example inputs, graphs among them; loading them back only
# builds graphs from tensors (checked by the constructor), so torch.load may do it by default
torch.serialization.add_safe_globals([_rebuild, _rebuild_global])
