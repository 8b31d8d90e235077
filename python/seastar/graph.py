"""The graph users hold: an immutable edge list with in-edge (CSC) and out-edge (CSR) indices.

A thin Python face over the C++ ``seastar._C.Graph``: validation, index construction and the
per-device index caches all live in C++.
"""
from __future__ import annotations

from typing import Optional

import torch

from . import _C


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
    """

    __slots__ = ("_g",)

    def __init__(self, cgraph: "_C.Graph"):
        self._g = cgraph

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes=None, node_type=None, edge_type=None,
                        num_node_types: Optional[int] = None, num_edge_types: Optional[int] = None) -> "Graph":
        """PyTorch Geometric convention: ``edge_index`` is [2, E], row 0 the sources.

        ``num_nodes``: the vertex count (default 1 + the largest id), or a pair
        ``(num_src, num_dst)`` for a bipartite graph (PyG's ``size``)."""
        edge_index = _as_index_tensor(edge_index, "edge_index")
        if isinstance(num_nodes, (tuple, list)):
            if len(num_nodes) != 2:
                raise ValueError(f"num_nodes of a bipartite graph is (num_src, num_dst), got {tuple(num_nodes)}")
            if node_type is not None:
                raise NotImplementedError("node types on a bipartite graph are not supported (edge types are)")
            return cls(_C.Graph.bipartite(edge_index, int(num_nodes[0]), int(num_nodes[1]),
                                          _as_index_tensor(edge_type, "edge_type"),
                                          -1 if num_edge_types is None else int(num_edge_types)))
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
    @property
    def num_nodes(self) -> int:
        """The vertex count; a bipartite graph has two (``num_src``, ``num_dst``) and raises."""
        return self._g.num_nodes

    @property
    def num_src(self) -> int:
        """Sources: the rows of tensors read as ``e.src.x`` (``num_nodes`` on a square graph)."""
        return self._g.num_src

    @property
    def num_dst(self) -> int:
        """Destinations: the rows of ``v.x`` and of the outputs (``num_nodes`` on a square graph)."""
        return self._g.num_dst

    @property
    def is_bipartite(self) -> bool:
        return self._g.is_bipartite

    @property
    def num_edges(self) -> int:
        return self._g.num_edges

    @property
    def num_node_types(self) -> int:
        return self._g.num_node_types

    @property
    def num_edge_types(self) -> int:
        return self._g.num_edge_types

    @property
    def has_node_types(self) -> bool:
        return self._g.has_node_types

    @property
    def has_edge_types(self) -> bool:
        return self._g.has_edge_types

    @property
    def edge_index(self) -> torch.Tensor:
        return self._g.edge_index()

    @property
    def node_type(self) -> Optional[torch.Tensor]:
        return self._g.tensors("cpu").get("node_type")

    @property
    def edge_type(self) -> Optional[torch.Tensor]:
        return self._g.tensors("cpu").get("edge_type")

    def in_degrees(self) -> torch.Tensor:
        return self._g.in_degrees()

    def out_degrees(self) -> torch.Tensor:
        return self._g.out_degrees()

    @property
    def index_dtype(self) -> torch.dtype:
        return torch.int32 if self._g.index_dtype() == "int32" else torch.int64

    # -- derived graphs --------------------------------------------------------------------
    def add_self_loops(self, loop_type: int = 0) -> "Graph":
        """A new graph with one self loop per vertex appended (edge ids E .. E+N-1)."""
        return Graph(self._g.add_self_loops(loop_type))

    def remove_self_loops(self):
        """A new graph without self loops, and the ids of the kept edges (to index edge features)."""
        g, kept = self._g.remove_self_loops()
        return Graph(g), kept

    # -- devices ---------------------------------------------------------------------------
    def tensors(self, device="cpu") -> dict:
        """Index tensors (CSC, CSR, COO, types) on ``device``, built once per device and cached."""
        return self._g.tensors(str(torch.device(device)))

    def to(self, device) -> "Graph":
        """Prepares the index tensors on ``device``; the graph itself serves every device."""
        self.tensors(device)
        return self

    # -- pickling: the edge list and the types; the indices are rebuilt (O(N + E)) ------------
    def __reduce__(self):
        sizes = (self.num_src, self.num_dst) if self.is_bipartite else self.num_nodes
        return (_rebuild, (self.edge_index, sizes, self.node_type, self.edge_type,
                           self.num_node_types if self.has_node_types else None,
                           self.num_edge_types if self.has_edge_types else None))

    def __repr__(self) -> str:
        if self.is_bipartite:
            typed = f", edge_types={self.num_edge_types}" if self.has_edge_types else ""
            return f"Graph(num_src={self.num_src}, num_dst={self.num_dst}, num_edges={self.num_edges}{typed})"
        typed = ""
        if self.has_node_types or self.has_edge_types:
            typed = f", node_types={self.num_node_types}, edge_types={self.num_edge_types}"
        return f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{typed})"


def _rebuild(edge_index, sizes, node_type, edge_type, num_node_types, num_edge_types) -> Graph:
    return Graph.from_edge_index(edge_index, sizes, node_type=node_type, edge_type=edge_type,
                                 num_node_types=num_node_types, num_edge_types=num_edge_types)
