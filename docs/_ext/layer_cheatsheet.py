"""The cheatsheet of ``seastar.nn``: every layer against the inputs and options it supports, found
by calling it, not by a hand-kept list. Each cell is one small call of the layer (on the
reference backend, so the build compiles no kernel); a call that raises is a cell without a tick.
"""
from __future__ import annotations

import inspect

import torch

N, E, F_IN, F_OUT, R, T = 8, 24, 4, 3, 2, 2


def _graphs():
    import seastar as ss

    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, N, (2, E), generator=g)
    typed = ss.Graph.from_edge_index(ei, num_nodes=N, edge_type=torch.randint(0, R, (E,), generator=g),
                                     num_edge_types=R, node_type=torch.randint(0, T, (N,), generator=g),
                                     num_node_types=T)
    bip_ei = torch.stack([torch.randint(0, N, (E,), generator=g), torch.randint(0, 5, (E,), generator=g)])
    block = ss.Graph.from_edge_index(bip_ei, num_nodes=(N, 5))
    typed_block = ss.Graph.from_edge_index(bip_ei, num_nodes=(N, 5), edge_type=torch.randint(0, R, (E,), generator=g),
                                           num_edge_types=R)
    return ss.Graph.from_edge_index(ei, num_nodes=N), typed, (block, typed_block), ei, bip_ei


def _layers():
    import seastar.nn as snn

    return {  # name: (factory(in_channels), how it is called on a graph)
        "GCNConv": lambda f: snn.GCNConv(f, F_OUT),
        "GATConv": lambda f: snn.GATConv(f, F_OUT, heads=2),
        "GATv2Conv": lambda f: snn.GATv2Conv(f, F_OUT, heads=2),
        "TransformerConv": lambda f: snn.TransformerConv(f, F_OUT, heads=2),
        "SAGEConv": lambda f: snn.SAGEConv(f, F_OUT),
        "GINConv": lambda f: snn.GINConv(torch.nn.Linear(f if isinstance(f, int) else f[0], F_OUT)),
        "GINEConv": lambda f: _WithEdgeFeatures(snn.GINEConv(torch.nn.Linear(f if isinstance(f, int) else f[0], F_OUT)),
                                                F_IN),
        "GraphConv": lambda f: snn.GraphConv(f, F_OUT),
        "ResGatedGraphConv": lambda f: snn.ResGatedGraphConv(f, F_OUT),
        "AGNNConv": lambda f: snn.AGNNConv(),
        "EdgeConv": lambda f: snn.EdgeConv(torch.nn.Sequential(torch.nn.Linear(2 * (f if isinstance(f, int) else f[0]), 8),
                                                               torch.nn.ReLU(), torch.nn.Linear(8, F_OUT))),
        "GMMConv": lambda f: _WithEdgeFeatures(snn.GMMConv(f, F_OUT, dim=2, kernel_size=3), 2),
        "FiLMConv": lambda f: snn.FiLMConv(f, F_OUT),
        "APPNP": lambda f: snn.APPNP(K=2, alpha=0.1),
        "RGCNConv": lambda f: snn.RGCNConv(f, F_OUT, R),
        "HGTConv": lambda f: snn.HGTConv(f, F_OUT, T, R, heads=1),
        "HeteroConv": lambda f: snn.HeteroConv({0: snn.GCNConv(f, F_OUT), 1: snn.SAGEConv(f, F_OUT)}),
    }


def _probes(graph, typed, block, ei, bip_ei):
    x = torch.randn(N, F_IN)
    typed_layer = ("RGCNConv", "HGTConv", "HeteroConv")

    def on(layer_name, g):
        return typed if layer_name in typed_layer else g

    et = typed.edge_type
    return {  # column: (what it means, call(name, factory) that raises where unsupported)
        "`conv(graph, x)`": ("Seastar's call: the graph first",
                             lambda n, make: make(F_IN)(on(n, graph), x)),
        "`conv(x, edge_index)`": ("PyG's call",
                                  lambda n, make: make(F_IN)(x, ei, et) if n == "RGCNConv" else make(F_IN)(x, ei)),
        "edge weights": ("`edge_weight=` per edge",
                         lambda n, make: make(F_IN)(on(n, graph), x, edge_weight=torch.rand(E))),
        "edge features": ("`edge_dim=` and `edge_attr=`",
                          lambda n, make: _edge_features(n, graph, x)),
        "bipartite pairs": ("PyG's `(x_src, x_dst)` with `(in_src, in_dst)` channels",
                            lambda n, make: _pair(n, make, bip_ei)),
        "sampled blocks": ("a bipartite `seastar.Graph` (a `NeighborLoader` block; typed for the typed layers)",
                           lambda n, make: _block(n, make, block, x)),
        "typed graphs": ("relations and node types of one graph",
                         lambda n, make: _typed(n, make, typed, x)),
        "lazy `in_channels`": ("`-1`: the width is taken at the first call (n/a: a layer without `in_channels`)",
                               lambda n, make: make(-1)(on(n, graph), x)),
    }


class _WithEdgeFeatures(torch.nn.Module):
    """A layer that reads edge features on every call (GINEConv, GMMConv), given random ones of
    `width`."""

    def __init__(self, layer, width: int):
        super().__init__()
        self.layer, self.width = layer, width

    def forward(self, *args):
        return self.layer(*args, edge_attr=torch.randn(E, self.width))


def _edge_features(name, graph, x):
    import seastar.nn as snn

    makers = {"GATConv": lambda: snn.GATConv(F_IN, F_OUT, edge_dim=2),
              "GATv2Conv": lambda: snn.GATv2Conv(F_IN, F_OUT, edge_dim=2),
              "TransformerConv": lambda: snn.TransformerConv(F_IN, F_OUT, edge_dim=2),
              "GINEConv": lambda: snn.GINEConv(torch.nn.Linear(F_IN, F_OUT), edge_dim=2),
              "ResGatedGraphConv": lambda: snn.ResGatedGraphConv(F_IN, F_OUT, edge_dim=2),
              "GMMConv": lambda: snn.GMMConv(F_IN, F_OUT, dim=2, kernel_size=3)}
    if name not in makers:
        raise TypeError("no edge features")
    layer = snn.set_backend(makers[name](), "reference")
    return layer(graph, x, edge_attr=torch.randn(E, 2))


def _pair(name, make, bip_ei):
    x_src, x_dst = torch.randn(N, F_IN), torch.randn(5, F_IN)
    if name == "RGCNConv":
        return make((F_IN, F_IN))((x_src, x_dst), bip_ei, torch.randint(0, R, (E,)))
    return make((F_IN, F_IN))((x_src, x_dst), bip_ei)


def _block(name, make, blocks, x):
    plain, typed = blocks
    return make(F_IN)(typed if name in ("RGCNConv", "HGTConv", "HeteroConv") else plain, x)


def _typed(name, make, typed, x):
    if name not in ("RGCNConv", "HGTConv", "HeteroConv"):
        raise TypeError("homogeneous")
    return make(F_IN)(typed, x)


def cheatsheet() -> str:
    import seastar.nn as snn

    graph, typed, block, ei, bip_ei = _graphs()
    probes = _probes(graph, typed, block, ei, bip_ei)
    rows = []
    for name, make in _layers().items():
        cells = []
        takes_width = "in_channels" in inspect.signature(getattr(snn, name).__init__).parameters
        for column, (_, call) in probes.items():
            if column.startswith("lazy") and not takes_width:
                cells.append("n/a")
                continue
            def made(f, make=make):
                layer = make(f)
                snn.set_backend(layer, "reference")
                return layer
            try:
                torch.manual_seed(0)
                out = call(name, made)
                ok = isinstance(out, (torch.Tensor, dict, tuple))
            except Exception:  # noqa: BLE001 - a layer that refuses the input does not support it
                ok = False
            cells.append("✓" if ok else "")
        rows.append(f"| `{name}` | " + " | ".join(cells) + " |")
    head = "| layer | " + " | ".join(probes) + " |"
    legend = "\n".join(f"- **{column}**: {what}" for column, (what, _) in probes.items())
    return "\n".join([head, "| --- |" + " :-: |" * len(probes), *rows, "", legend]) + "\n"
