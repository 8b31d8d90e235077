"""HeteroConv: one (homogeneous) layer per relation, run on each relation's subgraph, combined."""
from __future__ import annotations

from typing import List, Mapping

import torch
from torch import nn

from ..graph import Graph
from ._utils import GraphCache, check_graph, graph_uid

AGGRS = ("sum", "mean", "max", "min", "cat")


def relation_subgraph(cache: GraphCache, graph: Graph, relation: int) -> Graph:
    """The edges of one relation over all of ``graph``'s vertices (node types kept, no edge types),
    built once per (graph, relation) and cached."""
    def make():
        t = graph.edge_type.long()
        keep = torch.nonzero(t == relation).flatten()
        typed = {}
        if graph.has_node_types:
            typed = dict(node_type=graph.node_type, num_node_types=graph.num_node_types)
        return Graph.from_edge_index(graph.edge_index.long()[:, keep], num_nodes=graph.num_nodes, **typed)
    return cache.get(("relation_subgraph", graph_uid(graph), int(relation)), make)


class HeteroConv(nn.Module):
    r"""``out = AGG_{r in convs} convs[r](G_r, x)``: a layer per relation, each run on the subgraph
    ``G_r`` of the edges of relation ``r`` (all vertices kept, node types kept, *untyped* edges,
    so any ``seastar.nn`` layer works on it; an :class:`RGCNConv` or :class:`HGTConv` inside takes
    ``num_relations=1`` / ``num_edge_types=1``). Relations without a layer are ignored. ``aggr``
    combines the per-relation outputs: ``"sum"`` (default), ``"mean"``, ``"max"``, ``"min"``
    (element-wise) or ``"cat"`` (concatenated along features, in the dict's order). Subgraphs
    are built once per graph (cached by graph uid). Like PyG's ``HeteroConv``, but over the
    relations of one typed graph with one shared vertex set: ``HeteroConv({0: GCNConv(16, 32),
    1: SAGEConv(16, 32)})``.

    When to use it: it is the fallback when one typed program cannot express the layer, i.e.
    relations need different layer kinds, widths or aggregations (GAT on one relation, max-SAGE
    on another), normalisation per relation that a layer computes itself (a GCN degree per
    relation, a softmax per relation rather than over all in-edges), or only some relations
    take part. Prefer :class:`RGCNConv` / :class:`HGTConv` when they fit: they run one program
    over all edges, while this runs one per relation (R traversals, R kernel launches, and
    ``R*N*out`` floats of per-relation outputs before they are combined); its per-relation
    programs are untyped, so they run on the fused backend whenever the inner layers do.
    """

    def __init__(self, convs: Mapping[int, nn.Module], aggr: str = "sum"):
        super().__init__()
        if aggr not in AGGRS:
            raise ValueError(f"HeteroConv: aggr must be one of {AGGRS}, got {aggr!r}")
        if not convs:
            raise ValueError("HeteroConv: needs at least one relation")
        for r in convs:
            if isinstance(r, bool) or not isinstance(r, int) or r < 0:
                raise TypeError(f"HeteroConv: relation ids must be non-negative ints, got {r!r}")
        self.relations: List[int] = [int(r) for r in convs]
        self.convs = nn.ModuleDict({str(r): conv for r, conv in convs.items()})
        self.aggr = aggr
        self._graph_cache = GraphCache(32)

    def reset_parameters(self) -> None:
        for conv in self.convs.values():
            if hasattr(conv, "reset_parameters"):
                conv.reset_parameters()

    def forward(self, graph: Graph, x: torch.Tensor) -> torch.Tensor:
        check_graph("HeteroConv", graph, x)
        if not graph.has_edge_types:
            raise ValueError("HeteroConv: the graph has no edge types (build it with edge_type=...)")
        bad = [r for r in self.relations if r >= graph.num_edge_types]
        if bad:
            raise ValueError(f"HeteroConv: relation(s) {bad} not in the graph ({graph.num_edge_types} edge types)")
        outs = [self.convs[str(r)](relation_subgraph(self._graph_cache, graph, r), x) for r in self.relations]
        if len(outs) == 1:
            return outs[0]
        if self.aggr == "cat":
            return torch.cat(outs, dim=-1)
        stacked = torch.stack(outs)
        if self.aggr == "sum":
            return stacked.sum(0)
        if self.aggr == "mean":
            return stacked.mean(0)
        return stacked.amax(0) if self.aggr == "max" else stacked.amin(0)

    def __repr__(self) -> str:
        inner = ", ".join(f"{r}: {self.convs[str(r)]}" for r in self.relations)
        return f"{self.__class__.__name__}({{{inner}}}, aggr={self.aggr!r})"
