"""The calling conventions of the relational layers (R-GCN): a typed ``seastar.Graph``, or PyG's
``(x, edge_index, edge_type)`` / ``(x, adj_t)`` with the relation of each edge as the sparse
adjacency's value; ``x`` a tensor, a bipartite pair ``(x_src, x_dst)``, or featureless (None or
an index tensor, as PyG's ``RGCNConv`` takes them)."""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from ..derived_graphs import typed_square as derived_square
from ..graph import Graph
from ._inputs import normalise_call
from ._structure import (from_sparse, is_sparse_tensor_like, is_torch_sparse, plain_edge_index, typed_graph_of_edge_index,
                         typed_square)


class TypedCall(NamedTuple):
    graph: Graph            # typed, square: max(num_src, num_dst) vertices
    x_src: torch.Tensor     # float features [num_src, F] or int64 indices [num_src]
    x_dst: torch.Tensor
    num_src: int
    num_dst: int
    dtype: torch.dtype      # the float type to compute in


def typed_call(layer: str, x, edge_index, edge_type: Optional[torch.Tensor], num_relations: int,
               in_channels: int, device, param_dtype: torch.dtype = torch.float32) -> TypedCall:
    x, edge_index, extra = normalise_call(layer, x, edge_index, edge_type=edge_type)[:3]
    edge_type = extra["edge_type"]
    edge_index, carried = plain_edge_index(layer, edge_index)  # PyG's EdgeIndex: checked against the features below
    pair = isinstance(x, (tuple, list))
    if pair:
        if len(x) != 2:
            raise ValueError(f"{layer}: bipartite features are a pair (x_src, x_dst), got {len(x)} items")
        x_src, x_dst = x
        if x_dst is None:
            raise ValueError(f"{layer}: x_dst (the destinations' features or indices) is required: the output has "
                             f"one row per destination")
    else:
        x_src = x_dst = x
    if x_src is None:  # featureless: vertex i is row i of the weights
        x_src = torch.arange(in_channels, device=device)
        if not pair:
            x_dst = x_src
    for t, what in ((x_src, "x_src"), (x_dst, "x_dst")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{layer}: {what} must be a tensor (features or int64 indices), got {type(t).__name__}")
    floats = [t.dtype for t in (x_src, x_dst) if t.is_floating_point()]
    dtype = floats[0] if floats else param_dtype
    ns, nd = x_src.shape[0], x_dst.shape[0]
    for dim, (have, want) in enumerate(zip((ns, nd), carried or (None, None))):
        if want is not None and have != want:
            raise ValueError(f"{layer}: the features give {ns} sources and {nd} destinations but the EdgeIndex's "
                             f"sparse size is {tuple(carried)} (dimension {dim})")
    if isinstance(edge_index, Graph) and edge_index.is_bipartite:  # a sampled block, say
        graph = edge_index
        gs, gd = graph.num_src, graph.num_dst
        if not pair:  # one tensor of the sources' rows: the destinations are the first num_dst of them
            if ns != gs:
                raise ValueError(f"{layer}: x has {ns} rows but the bipartite graph has {gs} sources")
            x_dst, nd = x_src[:gd], min(ns, gd)
        if (ns, nd) != (gs, gd):
            raise ValueError(f"{layer}: the features give {ns} sources and {nd} destinations but the graph has "
                             f"{gs} sources and {gd} destinations")
        if not graph.has_edge_types:
            raise ValueError(f"{layer}: the bipartite graph has no edge types; build it with edge_type=... or sample "
                             f"it from a typed graph")
        if torch.compiler.is_compiling():  # derived per call by an op: compiled code serves every block
            if graph.num_edge_types != num_relations:
                raise ValueError(f"{layer}: the graph has {graph.num_edge_types} edge types but the layer has "
                                 f"{num_relations} relations")
            return TypedCall(derived_square(graph, num_relations), x_src, x_dst, ns, nd, dtype)
        return TypedCall(typed_square(graph.edge_index, graph.edge_type, gs, gd, num_relations, layer),
                         x_src, x_dst, ns, nd, dtype)
    if isinstance(edge_index, Graph):
        graph = edge_index
        if ns != graph.num_nodes or nd != graph.num_nodes:
            raise ValueError(f"{layer}: x has {ns if ns != graph.num_nodes else nd} rows but the graph has "
                             f"{graph.num_nodes} vertices")
        return TypedCall(graph, x_src, x_dst, ns, nd, dtype)
    if is_torch_sparse(edge_index) or is_sparse_tensor_like(edge_index):
        s = from_sparse(edge_index)
        if (s.num_src, s.num_dst) != (ns, nd):
            raise ValueError(f"{layer}: the features give {ns} sources and {nd} destinations but the adjacency is "
                             f"[{s.num_dst}, {s.num_src}] (adj_t: destinations x sources)")
        if edge_type is None:
            if s.values is None:
                raise ValueError(f"{layer}: the sparse adjacency has no values; its values (or edge_type) must give "
                                 f"each edge's relation")
            edge_type = s.values
        edge_index = s.edge_index
    elif not isinstance(edge_index, torch.Tensor):
        raise TypeError(f"{layer}: expected 'edge_index' as a [2, E] integer tensor, a sparse adjacency or a "
                        f"seastar.Graph; got {type(edge_index).__name__}")
    if edge_type is None:
        raise ValueError(f"{layer}: edge_type [E] (each edge's relation) is required with an edge_index")
    if torch.compiler.is_compiling():  # built and checked by an op at run time: no graph break on the ids
        graph = typed_graph_of_edge_index(edge_index, edge_type, ns, nd, num_relations, layer)
        return TypedCall(graph, x_src, x_dst, ns, nd, dtype)
    graph = typed_square(edge_index, edge_type, ns, nd, num_relations, layer)
    return TypedCall(graph, x_src, x_dst, ns, nd, dtype)
