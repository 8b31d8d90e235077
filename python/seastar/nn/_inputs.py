"""The calling conventions every ``seastar.nn`` layer accepts, reduced to one form.

* Seastar's: ``layer(graph, x, ...)`` with a ``seastar.Graph`` first; on a bipartite graph (a
  sampled block) one ``x`` of ``num_src`` rows serves both sides, its first ``num_dst`` rows
  being the destinations, or ``x`` is a pair. On a block whose sources are global ids
  (``Graph.with_global_sources``: ``x`` is the whole feature table) the destinations' rows are
  ``x[source_ids[:num_dst]]``; a layer that can aggregate the table in place says so
  (``sources_in_place``), every other one gets the block with local ids and the gathered rows.
* PyTorch Geometric's: ``layer(x, edge_index, ...)`` with ``edge_index`` a [2, E] integer tensor,
  a sparse ``adj_t`` (``torch.sparse`` or a ``SparseTensor``), ``x`` a tensor or a
  ``(x_src, x_dst)`` pair for bipartite message passing (``x_dst`` may be None), ``size=
  (num_src, num_dst)``.
* A ``Data``-like object (duck-typed: ``x`` and ``edge_index`` or ``adj_t`` attributes, plus
  ``edge_weight`` / ``edge_attr`` / ``edge_type`` when the layer takes them): ``layer(data)``.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

import torch

from .. import _C
from ..graph import Graph
from ._structure import Structure, structure


class Call(NamedTuple):
    x: object               # a tensor, a (x_src, x_dst) pair, or None (featureless R-GCN)
    edge_index: object      # Graph, [2, E] tensor, sparse adj_t
    extra: Dict[str, object]
    dst_rows_first: bool = False  # x is (x_src, x_dst) with x_dst the first rows of x_src itself


def is_data_like(obj) -> bool:
    return (not isinstance(obj, (torch.Tensor, tuple, list, dict, Graph)) and obj is not None
            and (hasattr(obj, "edge_index") or hasattr(obj, "adj_t")))


def normalise_call(layer: str, x, edge_index, sources_in_place=None, **extra) -> Call:
    """``(x, edge_index, extra)`` from any of the conventions; ``extra`` holds the layer's other
    per-call inputs (``edge_weight=...``), filled from a ``Data`` object's attributes of the
    same name when the caller passed one. ``sources_in_place(x_src)``: whether the layer reads
    the sources of a global-source block in place (default: no)."""
    if isinstance(x, Graph):  # Seastar's order: (graph, x)
        graph, x = x, edge_index
        if graph.sources_global:
            return Call(*_global_sources(layer, graph, x, sources_in_place), extra)
        if getattr(graph, "is_bipartite", False) and isinstance(x, torch.Tensor):
            # one tensor for a sampled block (DGL's convention): its rows are the sources, and
            # the first num_dst of them are the destinations
            return Call((x, x[:graph.num_dst]), graph, extra, True)
        return Call(x, graph, extra)
    if is_data_like(x) and edge_index is None:
        data = x
        ei = getattr(data, "adj_t", None)
        if ei is None:
            ei = getattr(data, "edge_index", None)
        for k, v in extra.items():
            if v is None:
                extra[k] = getattr(data, k, None)
        return Call(getattr(data, "x", None), ei, extra)
    if isinstance(edge_index, Graph):
        raise TypeError(f"{layer}.forward takes the graph first: forward(graph, x), or PyG's forward(x, edge_index); "
                        f"got {type(x).__name__} as the graph")
    if edge_index is None:
        raise TypeError(f"{layer}.forward takes (graph, x), (x, edge_index) or a Data object; "
                        f"no graph or edge_index was given")
    return Call(x, edge_index, extra)


def _global_sources(layer: str, graph: Graph, x, in_place) -> Tuple[object, Graph]:
    """``(x, graph)`` for a block whose sources are rows of a whole table: ``x`` becomes the
    pair ``(x_src, x_dst)``, and unless the layer reads ``x_src`` in place, the block with local
    ids and ``x_src``'s rows for it (through autograd when ``x_src`` needs its gradient)."""
    if torch.compiler.is_compiling():
        raise NotImplementedError(f"{layer}: a block with global source ids (NeighborLoader(x_in_place=True)) is not "
                                  f"supported inside torch.compile / torch.export: use the block with local ids "
                                  f"(block.local_block) and x[block.source_ids]")
    if isinstance(x, (tuple, list)) and len(x) == 2:
        x_src, x_dst = x
    elif isinstance(x, torch.Tensor):
        x_src, x_dst = x, None
    else:
        raise TypeError(f"{layer}: a block with global source ids takes the feature table x (or a pair "
                        f"(x, x_dst)), got {type(x).__name__}")
    if not isinstance(x_src, torch.Tensor) or x_src.dim() not in (1, 2) or x_src.shape[0] != graph.num_src:
        raise ValueError(f"{layer}: this block's sources are global vertex ids, so x must be the whole feature "
                         f"table of {graph.num_src} rows (1 or 2 dimensions); got "
                         f"{tuple(x_src.shape) if isinstance(x_src, torch.Tensor) else type(x_src).__name__}")
    ids = graph.source_ids.to(x_src.device)
    if x_dst is None and isinstance(x, torch.Tensor):
        x_dst = x_src.index_select(0, ids[:graph.num_dst])
    if in_place is not None and in_place(x_src):
        return (x_src, x_dst), graph
    # rows without a gradient are copied by the loader's own gather (prefetched rows, no GIL)
    rows = x_src.index_select(0, ids) if x_src.requires_grad else _C.gather_rows(x_src, ids)
    return (rows, x_dst), graph.local_block


def check_rows(layer: str, t: Optional[torch.Tensor], expected: Optional[int], what: str) -> None:
    if t is not None and expected is not None and t.shape[0] != expected:
        raise ValueError(f"{layer}: {what} has {t.shape[0]} rows but the graph has {expected} "
                         f"{'source' if 'src' in what or what == 'x' else 'destination'} vertices")


OptTensor = Optional[torch.Tensor]


def split_features(layer: str, x, bipartite_ok: bool = True) -> Tuple[OptTensor, OptTensor, bool]:
    """``(x_src, x_dst, is_pair)``; a single tensor is both."""
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            raise ValueError(f"{layer}: bipartite features are a pair (x_src, x_dst), got {len(x)} items")
        if not bipartite_ok:
            raise ValueError(f"'{layer}' received a tuple of node features as input while this layer does not "
                             f"support bipartite message passing. Please try other layers such as 'SAGEConv' or "
                             f"'GraphConv' instead")
        return x[0], x[1], True
    if x is not None and not isinstance(x, torch.Tensor):
        raise TypeError(f"{layer}: x must be a tensor or a pair (x_src, x_dst), got {type(x).__name__}")
    return x, x, False


def _as_column(w: torch.Tensor, num_edges: int, layer: str) -> torch.Tensor:
    if w.dim() == 2 and w.shape[1] == 1:
        w = w.view(-1)
    if w.dim() != 1 or w.shape[0] != num_edges:
        raise ValueError(f"{layer}: edge_weight must be [E] = [{num_edges}] (one weight per edge), "
                         f"got {tuple(w.shape)}")
    return w


def edge_weights(s: Structure, edge_weight: Optional[torch.Tensor], layer: str) -> Optional[torch.Tensor]:
    """The call's per-edge weights [E]: ``edge_weight``, or a sparse adjacency's values."""
    if edge_weight is not None:
        if not isinstance(edge_weight, torch.Tensor):
            raise TypeError(f"{layer}: edge_weight must be a tensor, got {type(edge_weight).__name__}")
        return _as_column(edge_weight, s.num_edges, layer)
    if s.values is not None:
        return _as_column(s.values, s.num_edges, layer)
    return None


def resolve(layer: str, x_src, x_dst, edge_index, size=None, flow: str = "source_to_target") -> Structure:
    """The structure for these features: vertex counts from ``size``, else from the features
    (``x_dst`` None: as many destinations as sources, as PyG), checked against each other and
    against a sparse adjacency's or a graph's own sizes."""
    ns = None if x_src is None else x_src.shape[0]  # not int(): a symbolic size stays symbolic
    nd = None if x_dst is None else x_dst.shape[0]
    if size is not None:
        if len(size) != 2:
            raise ValueError(f"{layer}: size must be (num_src, num_dst), got {size!r}")
        s0, s1 = (None if v is None else int(v) for v in size)
        for have, want, dim in ((ns, s0, 0), (nd, s1, 1)):
            if have is not None and want is not None and have != want:
                raise ValueError(f"{layer}: encountered tensor with size {have} in dimension 0, but expected size "
                                 f"{want} (size[{dim}])")
        ns = s0 if s0 is not None else ns
        nd = s1 if s1 is not None else nd
    if isinstance(edge_index, torch.Tensor) and edge_index.layout == torch.strided and nd is None:
        nd = ns
    return structure(layer, edge_index, ns, nd, flow)


class Batch(NamedTuple):
    """A static graph with a batch axis: ``x`` [*B, N, F] moved to [N, *B, F] (the leading axes
    become feature axes of each vertex, which vertex programs broadcast over), and back."""

    lead: Tuple[int, ...]

    @staticmethod
    def fold(x: torch.Tensor):
        if not isinstance(x, torch.Tensor) or x.dim() <= 2 or x.is_sparse:
            return x, None
        return x.movedim(-2, 0), Batch(tuple(x.shape[:-2]))

    def unfold(self, out: torch.Tensor) -> torch.Tensor:
        return out.movedim(0, -2)
