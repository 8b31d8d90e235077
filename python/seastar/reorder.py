"""Renumbering a graph's vertices and edges for memory locality, once, with the ids to map back.

The CPU kernels walk each vertex's in-edges in CSC order and read a per-edge tensor (an edge
weight, an attention logit) through the edge's original id. When the edge list is in an arbitrary
order, every such read lands on a different cache line and page, and on a large graph that costs
as much as the neighbour's feature row itself. ``edges="dst"`` puts the edges in destination
order (CSC order: by destination, then edge type on a typed graph, ties kept in their original
order), so those reads stream. ``nodes="degree"``
numbers the vertices by in-degree, hubs first, so the most-read rows share the cache.

    r = ss.reorder_graph(graph, nodes="degree", edges="dst")
    x, w = r.vertices(x), r.edges(w)              # once, before training
    out = model(r.graph, x, w)
    out = r.original_vertices(out)                # rows in the original vertex order again

With ``edges="dst"`` (or None) each vertex's in-edges keep their relative order, so an in-edge
aggregation adds in the same order as on the original graph; a vertex's out-edges follow the new
edge order.
``node_ids[i]`` / ``edge_ids[i]`` are the original ids of new vertex / edge ``i`` (DGL's
``NID`` / ``EID``). The mappings are indexing ops, so gradients flow through them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional, Union

import torch

from .graph_inputs import graph_class

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Graph  # seastar.graph sits above: Graph.reorder calls reorder_graph

NODE_ORDERS = ("degree",)
EDGE_ORDERS = ("dst", "src")


def _inverse(perm: torch.Tensor) -> torch.Tensor:
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), dtype=perm.dtype)
    return inv


class Reordered(NamedTuple):
    """A renumbered graph and the original id of each of its vertices and edges."""

    graph: "Graph"
    node_ids: Optional[torch.Tensor]  # [N] original vertex id of each new vertex; None: unchanged
    edge_ids: torch.Tensor            # [E] original edge id of each new edge

    def vertices(self, x: torch.Tensor) -> torch.Tensor:
        """A per-vertex tensor (rows in the original order) in the new vertex order."""
        _check_rows(x, self.graph.num_nodes, "vertices")
        return x if self.node_ids is None else x.index_select(0, self.node_ids.to(x.device))

    def edges(self, t: torch.Tensor) -> torch.Tensor:
        """A per-edge tensor (rows in the original edge order) in the new edge order."""
        _check_rows(t, self.graph.num_edges, "edges")
        return t.index_select(0, self.edge_ids.to(t.device))

    def original_vertices(self, y: torch.Tensor) -> torch.Tensor:
        """A per-vertex result of the new graph with its rows in the original vertex order."""
        _check_rows(y, self.graph.num_nodes, "original_vertices")
        return y if self.node_ids is None else _scatter_rows(y, self.node_ids)

    def original_edges(self, t: torch.Tensor) -> torch.Tensor:
        """A per-edge result of the new graph with its rows in the original edge order."""
        _check_rows(t, self.graph.num_edges, "original_edges")
        return _scatter_rows(t, self.edge_ids)


def _scatter_rows(t: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Row ``i`` of ``t`` to row ``ids[i]``: back to the original order (differentiable in ``t``)."""
    return torch.empty_like(t).index_copy(0, ids.to(t.device), t)


def _check_rows(t, n: int, what: str) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != n:
        shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"Reordered.{what}: expected a tensor with {n} rows, got {shape}")


def _node_order(graph: Graph, nodes: Union[None, str, torch.Tensor]) -> Optional[torch.Tensor]:
    if nodes is None:
        return None
    if graph.is_bipartite:
        raise ValueError("reorder_graph: nodes=... renumbers one vertex set; this graph is bipartite "
                         "(renumber its sources and destinations where the block is made, or pass nodes=None)")
    N = graph.num_nodes
    if isinstance(nodes, str):
        if nodes not in NODE_ORDERS:
            raise ValueError(f"reorder_graph: nodes={nodes!r}; expected one of {NODE_ORDERS}, a permutation "
                             f"tensor or None")
        # hubs first, ties by id: the rows most edges read sit together
        return torch.argsort(graph.in_degrees().long(), descending=True, stable=True)
    perm = torch.as_tensor(nodes)
    if perm.dim() != 1 or perm.numel() != N or perm.dtype.is_floating_point or perm.dtype == torch.bool:
        raise ValueError(f"reorder_graph: nodes must be a 1-D integer permutation of the {N} vertex ids, "
                         f"got {perm.dtype} of shape {tuple(perm.shape)}")
    perm = perm.long().cpu()
    if N and (perm.min() < 0 or perm.max() >= N or torch.bincount(perm, minlength=N).max() != 1):
        raise ValueError(f"reorder_graph: nodes is not a permutation of 0..{N - 1} (an id missing, repeated "
                         f"or out of range)")
    return perm


def destination_ordered(graph: Graph) -> Graph:
    """``graph`` with edge ``j`` = slot ``j`` of its in-edge index (by destination, then edge
    type, ties in id order), copied from that index in O(E); the original id of new edge ``j``
    is the graph's ``in_eid[j]``. ``reorder_graph(graph, edges="dst")`` without the ids."""
    return type(graph)(graph._g.in_edge_order())


def reorder_graph(graph: Graph, nodes: Union[None, str, torch.Tensor] = None,
                  edges: Optional[str] = "dst") -> Reordered:
    """The graph with its vertices renumbered and its edges reordered, and the original ids.

    ``nodes``: None (keep), ``"degree"`` (in-degree descending, hubs first; ties by id) or a
    permutation tensor whose entry ``i`` is the original id of new vertex ``i``. ``edges``:
    ``"dst"`` (by destination, the order the CPU kernels walk in-edges in), ``"src"`` (by
    source, for programs over out-edges) or None (keep); ties keep their original order. Edge
    and vertex types move with their edges and vertices. Done once per graph, on the CPU."""
    if not isinstance(graph, graph_class()):
        raise TypeError(f"reorder_graph: expected a seastar.Graph, got {type(graph).__name__}")
    if graph.sources_global:
        raise ValueError("reorder_graph: a block made by with_global_sources reads a feature table by its "
                         "sources' global ids; reorder the graph it was sampled from instead")
    if edges is not None and edges not in EDGE_ORDERS:
        raise ValueError(f"reorder_graph: edges={edges!r}; expected one of {EDGE_ORDERS} or None")
    node_ids = _node_order(graph, nodes)
    if node_ids is None and edges == "dst":
        # destination order is the in-edge index's own slot order: no sort, no rebuild of it
        edge_ids = graph._g.tensors("cpu", coo=False, out=False)["in_eid"].to(torch.int64, copy=True)
        return Reordered(destination_ordered(graph), None, edge_ids)
    ei = graph.edge_index.long()
    if node_ids is not None:
        ei = _inverse(node_ids)[ei]
    if edges is None:
        edge_ids = torch.arange(ei.shape[1])
    else:
        key = ei[1 if edges == "dst" else 0]
        if graph.has_edge_types:  # the graph's own indices group a vertex's edges by type
            key = key * graph.num_edge_types + graph.edge_type.long()
        edge_ids = torch.argsort(key, stable=True)
        ei = ei[:, edge_ids]
    node_type = graph.node_type if graph.has_node_types else None
    if node_type is not None and node_ids is not None:
        node_type = node_type[node_ids]
    edge_type = graph.edge_type[edge_ids] if graph.has_edge_types else None
    sizes = (graph.num_src, graph.num_dst) if graph.is_bipartite else graph.num_nodes
    new = type(graph).from_edge_index(ei, sizes, node_type=node_type, edge_type=edge_type,
                                      num_node_types=graph.num_node_types if graph.has_node_types else None,
                                      num_edge_types=graph.num_edge_types if graph.has_edge_types else None)
    return Reordered(new, node_ids, edge_ids)
