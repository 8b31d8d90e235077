"""Vertices grouped by node type, and the typed linear over them (``HGTConv``'s K, Q, V and A).

``typed_linear`` is one dense GEMM per node type on the vertices sorted by type.

* Eagerly the grouping (the sort, its inverse, the sizes) is computed once per graph and kept by
  it (``graph_ops.derived``), the sizes as Python ints.
* Inside compiled code it is traced on the graph's node types for whatever graph comes at run
  time, with the sizes as a tensor.

Either way the GEMMs, biases included, are one op, ``seastar::sorted_segment_matmul``, that takes
the sizes as a tensor and gathers the rows by type itself.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Union

import torch

from ..graph import Graph, tensor_of
from ..graph_ops import derived
from ._row_ops import sorted_segment_matmul


class NodeTypeGroups(NamedTuple):
    """Vertices sorted by node type: ``perm`` (sorted order), ``inv`` (its inverse), ``counts``
    (Python ints; inside compiled code a tensor)."""

    perm: Optional[torch.Tensor]
    inv: Optional[torch.Tensor]
    counts: Union[List[int], torch.Tensor]


def node_type_groups(graph: Graph, num_node_types: int, layer: str,
                     side: str = "src") -> NodeTypeGroups:
    """The graph's vertices grouped by node type: a square graph's vertices, a bipartite graph's
    sources (``side="src"``) or destinations (``side="dst"``, the first ``num_dst`` sources)."""
    if torch.compiler.is_compiling():  # traced on the graph's tensors: compiled code serves every graph
        return _node_type_groups(graph, num_node_types, layer, side)
    return derived(graph, _node_type_groups, num_node_types, layer, side)


def _node_type_groups(graph: Graph, num_node_types: int, layer: str, side: str) -> NodeTypeGroups:
    n = graph.num_src if side == "src" else graph.num_dst
    if not graph.has_node_types:
        return NodeTypeGroups(None, None, [n] + [0] * (num_node_types - 1))
    if graph.num_node_types != num_node_types:
        raise ValueError(f"{layer}: the graph has {graph.num_node_types} node types but the layer has "
                         f"{num_node_types}")
    t = tensor_of(graph, "node_type")[:n].long()
    perm = torch.argsort(t, stable=True)
    inv = torch.empty_like(perm).scatter_(0, perm, torch.arange(n))
    if torch.compiler.is_compiling():
        # sizes as data (index_add_, whose size is the type count, not bincount's, which the values set)
        counts = torch.zeros(num_node_types, dtype=torch.int64).index_add_(0, t, torch.ones_like(t))
        return NodeTypeGroups(perm, inv, counts)
    counts = torch.bincount(t, minlength=num_node_types).tolist()
    if max(counts, default=0) == n:  # a single type in use: no permutation needed
        return NodeTypeGroups(None, None, counts)
    return NodeTypeGroups(perm, inv, counts)


def typed_linear(x: torch.Tensor, groups: NodeTypeGroups, weight: torch.Tensor,
                 bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x_i @ weight[t_i] + bias[t_i]`` per vertex type ``t_i``: one dense GEMM per node type
    (``weight`` [T, in, out], ``bias`` [T, out])."""
    if groups.perm is None:
        t = max(range(len(groups.counts)), key=lambda i: groups.counts[i])
        out = x @ weight[t]
        return out if bias is None else out + bias[t]
    counts = groups.counts if isinstance(groups.counts, torch.Tensor) else torch.tensor(groups.counts)
    # the op writes each type's product, its bias added, in place: no per-type pieces to concatenate;
    # and keeps x for backward, not a sorted copy of it
    return sorted_segment_matmul(x, groups.perm.to(x.device), groups.inv.to(x.device), counts, weight, bias)
