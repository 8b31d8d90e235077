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
    """

    __slots__ = ("_g",)

    def __init__(self, cgraph: "_C.Graph"):
        self._g = cgraph

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes: Optional[int] = None, node_type=None, edge_type=None,
                        num_node_types: Optional[int] = None, num_edge_types: Optional[int] = None) -> "Graph":
        """PyTorch Geometric convention: ``edge_index`` is [2, E], row 0 the sources."""
        edge_index = _as_index_tensor(edge_index, "edge_index")
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
        return self._g.num_nodes

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

    def __repr__(self) -> str:
        typed = ""
        if self.has_node_types or self.has_edge_types:
            typed = f", node_types={self.num_node_types}, edge_types={self.num_edge_types}"
        return f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}{typed})"
