"""The skeleton of the layers on one (homogeneous) graph: a call, in any convention the layers
accept (``_inputs.py``), reduced to its features and structure; the program's output given back
in the caller's shape. A PyG-style layer is then its parameters, its program and the dense work
around it:

    class NeighbourMean(HomogeneousLayer):
        def __init__(self, in_channels, out_channels, backend=None):
            super().__init__(backend)
            self.in_channels, self.out_channels = in_channels, out_channels
            self.lin = Linear(in_channels, out_channels)

        @float32_inside
        def forward(self, x, edge_index=None, size=None):
            call = self.read_call(x, edge_index, size)    # (graph, x), (x, edge_index), adj_t, Data, pairs
            s = call.structure()                          # checked against the features' rows
            h = s.out(neighbour_mean(s.graph, backend=self.backend, h=s.src(call.x_src)))
            return call.output(self.lin(h))               # [B, N, F] in, [B, N, F] out
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

import torch
from torch import nn

from ..graph import Graph
from ._inputs import Batch, normalise_call, resolve, split_features
from ._structure import Structure, plain_edge_index
from ._utils import dense


class LayerCall(NamedTuple):
    """One call of a layer: its features, the structure as given, its other inputs by name."""

    layer: str  # the layer's name, for messages
    x_src: Optional[torch.Tensor]
    x_dst: Optional[torch.Tensor]  # None: no destination features (PyG's (x_src, None))
    pair: bool  # the features came as a pair (x_src, x_dst), or as a block's rows
    edge_index: object  # a seastar.Graph, an edge_index [2, E] or a sparse adj_t
    size: Optional[tuple]  # PyG's (num_src, num_dst)
    extra: Dict[str, object]  # the layer's other per-call inputs (edge_weight=...), a Data object's if given
    batch: Optional[Batch]  # [B, N, F] features of one graph, folded to [N, B, F]
    dst_rows_first: bool = False  # x_dst is x_src's first rows (a block's one tensor, or one graph's x)

    @property
    def on_block(self) -> bool:
        """Whether the graph is a sampled block (a bipartite ``seastar.Graph``)."""
        return isinstance(self.edge_index, Graph) and self.edge_index.is_bipartite

    def structure(self, flow: str = "source_to_target") -> Structure:
        """The structure of the call, its vertex counts checked against the features' rows."""
        return resolve(self.layer, self.x_src, self.x_dst, self.edge_index, self.size, flow)

    def src_dst(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(x_src, x_dst)`` for a layer that reads [N, F] rows at both ends of an edge:
        ``x_dst`` is ``x_src`` where the call gave the destinations no rows of their own."""
        if self.x_src is None or self.x_src.dim() != 2:
            raise ValueError(f"{self.layer}: x (or x_src) must be a [N, F] tensor")
        return self.x_src, self.x_src if self.x_dst is None else self.x_dst

    def output(self, out: torch.Tensor) -> torch.Tensor:
        """A result with the destinations' rows first, in the shape the features came in."""
        return out if self.batch is None else self.batch.unfold(out)


def read_call(layer: str, x, edge_index, size=None, *, pairs: bool = True, batches: bool = True,
              dense_rows: bool = False, sources_in_place=None, **extra) -> LayerCall:
    """The call ``layer(x, edge_index, ...)`` in any accepted convention, reduced.

    ``pairs=False`` refuses PyG's bipartite ``(x_src, x_dst)`` with PyG's message (a block's
    features are a pair either way: the layer decides what it does on blocks). ``batches``:
    [B, N, F] features of one graph are folded (not on a block, whose rows are its sources).
    ``dense_rows``: sparse features are made dense. ``sources_in_place(x_src)``: whether the
    layer reads a global-source block's feature table in place (``normalise_call``)."""
    x, edge_index, extra, dst_rows_first = normalise_call(layer, x, edge_index, sources_in_place=sources_in_place,
                                                          **extra)
    edge_index, size = plain_edge_index(layer, edge_index, size)  # PyG's EdgeIndex carries its sizes
    dst_rows_first = dst_rows_first or isinstance(x, torch.Tensor)
    on_block = isinstance(edge_index, Graph) and edge_index.is_bipartite
    x_src, x_dst, pair = split_features(layer, x, bipartite_ok=pairs or on_block)
    if dense_rows:
        x_src = None if x_src is None else dense(x_src)
        x_dst = None if x_dst is None else dense(x_dst)
    batch = None
    if batches and not on_block:
        x_src, batch = Batch.fold(x_src)
        if batch is not None and x_dst is not None:
            x_dst = Batch.fold(x_dst)[0]
    dst_rows_first = dst_rows_first and batch is None
    return LayerCall(layer, x_src, x_dst, pair, edge_index, size, extra, batch, dst_rows_first)


class HomogeneousLayer(nn.Module):
    """Base of the layers on one graph: ``backend`` ("auto", "fused", "reference" or None, the
    program's default), ``read_call`` and PyG's ``repr``, ``Name(in_channels, out_channels)``."""

    def __init__(self, backend: Optional[str] = None):
        super().__init__()
        self.backend = backend

    def read_call(self, x, edge_index, size=None, **options) -> LayerCall:
        """``read_call`` with this layer's name (see the function)."""
        return read_call(type(self).__name__, x, edge_index, size, **options)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
