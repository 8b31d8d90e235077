"""HeteroConv: one (homogeneous) layer per relation, run on each relation's subgraph, combined."""
from __future__ import annotations

from typing import List, Mapping, Optional

import torch
from torch import nn

from ..derived_graphs import Derivation, derive, register
from ..graph import Graph
from ..graph_ops import derived
from ._utils import check_graph
from .hetero_dict import DICT_AGGRS, check_self_loops, dict_forward, internal_key, is_edge_type

AGGRS = ("sum", "mean", "max", "min", "cat")


def relation_subgraph(graph: Graph, relation: int) -> Graph:
    """The edges of one relation over all of ``graph``'s vertices (node types kept, no edge types),
    built once per (graph, relation) and kept by the graph; inside compiled code derived by the op
    ``seastar::derived_graph`` for whatever graph comes at run time."""
    if torch.compiler.is_compiling():
        kind = graph._kind._replace(has_edge_types=False, num_edge_types=0)
        return derive(graph, "relation_subgraph", int(relation), kind)
    return derived(graph, _relation_subgraph, int(relation))


def _relation_subgraph(graph: Graph, relation: int) -> Graph:
    t = graph.edge_type.long()
    keep = torch.nonzero(t == relation).flatten()
    typed = {}
    if graph.has_node_types:
        typed = dict(node_type=graph.node_type, num_node_types=graph.num_node_types)
    sizes = (graph.num_src, graph.num_dst) if graph.is_bipartite else graph.num_nodes
    return Graph.from_edge_index(graph.edge_index.long()[:, keep], num_nodes=sizes, **typed)


# the same vertices, an edge count that depends on the types
register("relation_subgraph", Derivation(_relation_subgraph, square_of_sources=False, same_edges=False))


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

    Keyed by ``(src, rel, dst)`` edge types instead, it is PyG's ``HeteroConv`` over separate
    node types: ``HeteroConv({("paper", "cites", "paper"): GCNConv(-1, 64), ("author", "writes",
    "paper"): SAGEConv((-1, -1), 64)})`` called as ``conv(x_dict, edge_index_dict, ...)`` (or
    ``conv(hetero_data)``) returns a dict of outputs per destination node type; ``aggr`` may
    also be None (stacked); see ``seastar.nn.hetero_dict``.
    """

    def __init__(self, convs: Mapping, aggr: Optional[str] = "sum"):
        super().__init__()
        if not convs:
            raise ValueError("HeteroConv: needs at least one relation")
        keys = list(convs)
        self.edge_type_keys = all(is_edge_type(k) for k in keys)
        if self.edge_type_keys:  # PyG's HeteroConv over node and edge types
            if aggr not in DICT_AGGRS:
                raise ValueError(f"HeteroConv: aggr must be one of {DICT_AGGRS}, got {aggr!r}")
            check_self_loops(convs)
            self.relations = keys
            self.convs = nn.ModuleDict({internal_key(k): conv for k, conv in convs.items()})
            self.aggr = aggr
            return
        if aggr not in AGGRS:
            raise ValueError(f"HeteroConv: aggr must be one of {AGGRS}, got {aggr!r}")
        for r in convs:
            if isinstance(r, bool) or not isinstance(r, int) or r < 0:
                raise TypeError(f"HeteroConv: keys must be non-negative relation ids (ints) or (src, rel, dst) "
                                f"edge types, got {r!r}")
        self.relations: List = [int(r) for r in convs]
        self.convs = nn.ModuleDict({str(r): conv for r, conv in convs.items()})
        self.aggr = aggr

    def reset_parameters(self) -> None:
        for conv in self.convs.values():
            if hasattr(conv, "reset_parameters"):
                conv.reset_parameters()

    def forward(self, *args, **kwargs):
        """``forward(graph, x)`` over a typed graph (int-keyed layers), or PyG's
        ``forward(x_dict, edge_index_dict, *dicts, **kwargs_dicts) -> out_dict`` (edge-type keys)."""
        if self.edge_type_keys:
            convs = {k: self.convs[internal_key(k)] for k in self.relations}
            return dict_forward(convs, self.aggr, args, kwargs)
        if len(args) != 2 or kwargs:
            raise TypeError("HeteroConv with relation ids takes (graph, x); a layer keyed by (src, rel, dst) edge "
                            "types takes PyG's (x_dict, edge_index_dict, ...)")
        graph, x = args
        check_graph("HeteroConv", graph, x)
        if not graph.has_edge_types:
            raise ValueError("HeteroConv: the graph has no edge types (build it with edge_type=...)")
        bad = [r for r in self.relations if r >= graph.num_edge_types]
        if bad:
            raise ValueError(f"HeteroConv: relation(s) {bad} not in the graph ({graph.num_edge_types} edge types)")
        outs = [self.convs[str(r)](relation_subgraph(graph, r), x) for r in self.relations]
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
        if self.edge_type_keys:
            return f"{self.__class__.__name__}(num_relations={len(self.convs)})"
        inner = ", ".join(f"{r}: {self.convs[str(r)]}" for r in self.relations)
        return f"{self.__class__.__name__}({{{inner}}}, aggr={self.aggr!r})"
