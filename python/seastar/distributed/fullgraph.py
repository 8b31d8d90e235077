"""Partition-parallel full-graph training: each rank owns one part and runs every layer on its
local bipartite graph (destinations: the owned vertices; sources: owned + halo), after a halo
exchange of the layer's input rows.

    pg = PartitionedGraph(load_partition(dir, rank, world_size))
    model = PartitionParallel(convs, pg, between=lambda i, h: F.relu(h))
    x_src = pg.input_rows(pg.part.node_data["x"])   # layer 1's input: constant, fetched once
    out = model(x_src)                               # [num_owned, C]
    loss = F.cross_entropy(out[train], y[train], reduction="sum") / global_train_count
    loss.backward(); allreduce_gradients(model); opt.step()

The result equals single-process training on the whole graph: a destination's in-edges all live
in its owner's part, so every aggregation sees the same edges and the same source rows. The
only global quantity a layer needs beyond its in-edges is GCN's source degree, received through
the same exchange. Parameters are replicated; the gradient of the global loss is the sum of the
ranks' gradients of their share of it (``allreduce_gradients``).
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..graph import Graph
from ..nn.gcn_conv import GCNConv, weighted_sum
from ..nn.rgcn_conv import RGCNConv
from .halo import HaloExchange
from .partition import Partition


class PartitionedGraph:
    """One rank's part: its local graph and the halo exchange with the other ranks."""

    def __init__(self, part: Partition, group=None):
        self.part = part
        self.group = group
        self.exchange = HaloExchange(part, group)
        self.graph = part.local_graph()
        self._gcn: Dict[torch.dtype, tuple] = {}

    def input_rows(self, x_owned: torch.Tensor) -> torch.Tensor:
        """``x_owned`` with the halo's rows appended (no gradient: for constant inputs)."""
        with torch.no_grad():
            return torch.cat([x_owned, self.exchange.fetch(x_owned)])

    def gcn_graph(self, dtype: torch.dtype):
        """The local graph of GCN's propagation and its weights [E', 1]: the in-edges without
        self loops plus one loop per owned vertex (PyG's ``add_remaining_self_loops`` without
        edge weights), ``w = d_src^-1/2 d_dst^-1/2`` with ``d`` the global in-degree in that
        graph; the halo's degrees come from their owners."""
        if dtype not in self._gcn:
            n_own = self.part.num_owned
            src, dst = self.part.edge_index
            keep = src != dst  # a loop's source is an owned vertex: same local id as its destination
            loops = torch.arange(n_own)
            src, dst = torch.cat([src[keep], loops]), torch.cat([dst[keep], loops])
            deg_owned = torch.bincount(dst, minlength=n_own).to(torch.float64)
            deg = torch.cat([deg_owned, self.exchange.fetch(deg_owned.unsqueeze(1)).view(-1)])
            dinv = deg.pow(-0.5)
            w = (dinv[src] * dinv[dst]).unsqueeze(-1)
            g = Graph.from_edge_index(torch.stack([src, dst]), num_nodes=(n_own + self.part.num_halo, n_own))
            self._gcn[torch.float64] = (g, w)
            self._gcn[dtype] = (g, w.to(dtype))
        return self._gcn[dtype]

    def layer(self, conv: nn.Module, x_src: torch.Tensor) -> torch.Tensor:
        """One layer on the local graph: ``x_src`` [owned + halo, F] -> [owned, F']."""
        if isinstance(conv, GCNConv):
            if not conv.normalize or not conv.add_self_loops or conv.improved or conv.flow != "source_to_target":
                raise NotImplementedError("partition-parallel GCNConv supports the default normalisation only")
            g, w = self.gcn_graph(x_src.dtype)
            out = weighted_sum(g, backend=conv.backend, h=conv.lin(x_src), w=w.to(x_src.device))
            return out + conv.bias if conv.bias is not None else out
        if isinstance(conv, RGCNConv):  # takes a bipartite graph as PyG's (x_src, x_dst), edge_index, edge_type
            return conv((x_src, x_src[:self.part.num_owned]), self.part.edge_index, self.part.edge_type)
        return conv(self.graph, x_src)  # bipartite: the first num_owned sources are the destinations

    def all_sum(self, *values: float) -> list:
        """Sums numbers over the ranks (losses, correct counts)."""
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, group=self.group)
        return t.tolist()


class PartitionParallel(nn.Module):
    """``convs`` run layer by layer on a PartitionedGraph; ``between(i, h)`` (an activation,
    dropout) after every layer but the last. The first layer reads the owned + halo input rows
    (``PartitionedGraph.input_rows``); later layers exchange their input's halo rows."""

    def __init__(self, convs: Sequence[nn.Module], pg: PartitionedGraph,
                 between: Optional[Callable[[int, torch.Tensor], torch.Tensor]] = None):
        super().__init__()
        self.convs = nn.ModuleList(convs)
        self.pg = pg
        self.between = between

    def forward(self, x_src: torch.Tensor) -> torch.Tensor:
        pg = self.pg
        expected = pg.part.num_owned + pg.part.num_halo
        if x_src.shape[0] != expected:
            raise ValueError(f"the first layer reads owned + halo rows ({expected}), got {x_src.shape[0]}: "
                             f"pass PartitionedGraph.input_rows(x_owned)")
        h = x_src
        for i, conv in enumerate(self.convs):
            if i:
                h = pg.exchange(h)
            h = pg.layer(conv, h)
            if self.between is not None and i + 1 < len(self.convs):
                h = self.between(i, h)
        return h


def allreduce_gradients(module: nn.Module, group=None) -> None:
    """Sums every parameter's gradient over the ranks, in one flat buffer (one collective).
    A parameter without a gradient on this rank contributes zeros."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        return
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    dist.all_reduce(flat, group=group)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n


def broadcast_parameters(module: nn.Module, src: int = 0, group=None) -> None:
    """Every rank starts from rank ``src``'s parameters."""
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t, src, group=group)
