"""edge_softmax: per-edge scores normalised over each destination vertex's in-edges."""
from __future__ import annotations

from typing import Optional

import torch

from .. import ops as ss
from ..graph import Graph
from ..program import vertex_program
from ._utils import check_graph


@vertex_program(name="edge_softmax")
def _edge_softmax(v):
    return ss.softmax(e.s for e in v.in_edges())


def edge_softmax(graph: Graph, scores: torch.Tensor, backend: Optional[str] = None) -> torch.Tensor:
    r"""``out_e = exp(s_e) / sum_{e' into dst(e)} exp(s_e')``, per trailing feature element.

    ``scores`` is ``[E]`` or ``[E, ...]`` (e.g. ``[E, heads, 1]``); the result has the same
    shape and is differentiable. Max-subtracted, so large scores stay finite. The output itself
    is edge-sized (the caller asked for it); use the softmax inside a program (as GATConv does)
    to avoid materialising it.
    """
    check_graph("edge_softmax", graph)
    if scores.shape[0] != graph.num_edges:
        raise ValueError(f"edge_softmax: scores has {scores.shape[0]} rows but the graph has {graph.num_edges} edges")
    flat = scores.dim() == 1
    s = scores.unsqueeze(-1) if flat else scores
    out = _edge_softmax(graph, backend=backend, s=s)
    return out.squeeze(-1) if flat else out
