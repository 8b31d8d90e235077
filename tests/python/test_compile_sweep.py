"""Every ``seastar.nn`` layer option under ``torch.compile(fullgraph=True)``, called Seastar's way,
``conv(graph, x)``, and PyG's, ``conv(x, edge_index, ...)``, on three graphs of other sizes.

``fullgraph=True`` makes any graph break an error. Each option is compiled once (``dynamic=None``)
and run on the three graphs; outputs and the gradients of the input and of every parameter equal
an eager copy in float64. The graph is an input of the compiled code and every per-graph value
is computed by an op or traced on the graph's tensors (distinct (source, relation) pairs,
node-type groups and per-relation subgraphs included), so every option compiles at most twice
over the three graphs: torch's static compile, then its dynamic one.
"""
from __future__ import annotations

import copy

import pytest
import torch

import seastar as ss
import seastar.nn as snn

DT = torch.float64
TOL = dict(rtol=1e-10, atol=1e-10)
F_IN, R, T = 4, 3, 2
SIZES = ((30, 110), (41, 170), (36, 140))


def _graphs():
    gen = torch.Generator().manual_seed(5)
    out = []
    for n, e in SIZES:
        ei = torch.randint(0, n, (2, e), generator=gen)
        ei[:, :3] = torch.arange(3).repeat(2, 1)  # a few self loops
        et = torch.randint(0, R, (e,), generator=gen)
        nt = torch.randint(0, T, (n,), generator=gen)
        graph = ss.Graph.from_edge_index(ei, num_nodes=n, edge_type=et, num_edge_types=R, node_type=nt,
                                         num_node_types=T)
        extra = dict(edge_weight=torch.rand(e, dtype=DT, generator=gen) + 0.1,
                     edge_attr=torch.randn(e, 2, dtype=DT, generator=gen))
        out.append((graph, ei, et, torch.randn(n, F_IN, dtype=DT, generator=gen), extra))
    return out


# name -> (constructor, PyG-style extra arguments by name)
OPTIONS = {
    "gcn": (lambda: snn.GCNConv(F_IN, 3), ()),
    "gcn_improved_weighted": (lambda: snn.GCNConv(F_IN, 3, improved=True), ("edge_weight",)),
    "gcn_no_loops": (lambda: snn.GCNConv(F_IN, 3, add_self_loops=False), ()),
    "gcn_no_norm": (lambda: snn.GCNConv(F_IN, 3, normalize=False), ()),
    "gat": (lambda: snn.GATConv(F_IN, 3, heads=2), ()),
    "gat_mean_no_loops": (lambda: snn.GATConv(F_IN, 3, heads=2, concat=False, add_self_loops=False), ()),
    "gat_edge_dim": (lambda: snn.GATConv(F_IN, 3, heads=2, edge_dim=2, add_self_loops=False), ("edge_attr",)),
    "gat_edge_dim_loops": (lambda: snn.GATConv(F_IN, 3, heads=2, edge_dim=2, fill_value="mean"), ("edge_attr",)),
    "sage_mean": (lambda: snn.SAGEConv(F_IN, 3), ()),
    "sage_max_normalize": (lambda: snn.SAGEConv(F_IN, 3, aggr="max", normalize=True), ()),
    "sage_multi": (lambda: snn.SAGEConv(F_IN, 3, aggr=["mean", "max", "sum"]), ()),
    "sage_project": (lambda: snn.SAGEConv(F_IN, 3, project=True, root_weight=False), ()),
    "gin": (lambda: snn.GINConv(torch.nn.Linear(F_IN, 3), train_eps=True), ()),
    "graph_conv_weighted": (lambda: snn.GraphConv(F_IN, 3), ("edge_weight",)),
    "graph_conv_max": (lambda: snn.GraphConv(F_IN, 6, aggr="max"), ()),
    "appnp": (lambda: snn.APPNP(K=2, alpha=0.1), ()),
    "appnp_weighted": (lambda: snn.APPNP(K=2, alpha=0.1), ("edge_weight",)),
    "rgcn_mean": (lambda: snn.RGCNConv(F_IN, 3, R, aggr="mean"), ("edge_type",)),
    "rgcn_per_edge": (lambda: snn.RGCNConv(F_IN, 3, R, mode="per_edge"), ("edge_type",)),
    "rgcn_basis": (lambda: snn.RGCNConv(F_IN, 3, R, num_bases=2, mode="per_basis"), ("edge_type",)),
    "rgcn_blocks": (lambda: snn.RGCNConv(F_IN, 4, R, num_blocks=2, mode="per_edge"), ("edge_type",)),
    "rgcn_per_pair": (lambda: snn.RGCNConv(F_IN, 3, R, mode="per_pair"), ("edge_type",)),
    "rgcn_per_run": (lambda: snn.RGCNConv(F_IN, 3, R, mode="per_run"), ("edge_type",)),
    "rgcn_per_run_mean": (lambda: snn.RGCNConv(F_IN, 3, R, aggr="mean", mode="per_run"), ("edge_type",)),
    "hgt": (lambda: snn.HGTConv(F_IN, F_IN, num_node_types=T, num_edge_types=R, heads=2), None),
    "hgt_per_edge": (lambda: snn.HGTConv(F_IN, 4, num_node_types=T, num_edge_types=R, heads=2, mode="per_edge"),
                     None),
    "hetero": (lambda: snn.HeteroConv({0: snn.GCNConv(F_IN, 3), 1: snn.SAGEConv(F_IN, 3), 2: snn.GATConv(F_IN, 3)}),
               None),
}


def _run(model, call, x):
    model.zero_grad()
    x = x.clone().requires_grad_()
    out = call(model, x)
    w = torch.linspace(-1.0, 1.0, out.numel(), dtype=DT).view_as(out)
    (out * w).sum().backward()
    grads = {n.removeprefix("_orig_mod."): p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.detach(), x.grad, grads


@pytest.mark.parametrize("style", ["graph", "edge_index"])
@pytest.mark.parametrize("name", list(OPTIONS))
def test_every_option_compiles_fullgraph_and_equals_eager(name, style):
    make, pyg_args = OPTIONS[name]
    if style == "edge_index" and pyg_args is None:
        pytest.skip(f"{name} takes typed graphs only")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch.manual_seed(0)
    eager = make().to(DT)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    for graph, ei, et, x, extra in _graphs():
        if style == "graph":
            def call(m, x, graph=graph):
                return m(graph, x)
        else:
            kwargs = {"edge_type": et, **extra}
            args = [kwargs[a] for a in pyg_args]

            def call(m, x, ei=ei, args=args):
                return m(x, ei, *args)
        got, want = _run(compiled, call, x), _run(eager, call, x)
        torch.testing.assert_close(got[0], want[0], **TOL)
        torch.testing.assert_close(got[1], want[1], **TOL)
        assert got[2].keys() == want[2].keys()
        for k in want[2]:
            torch.testing.assert_close(got[2][k], want[2][k], **TOL, msg=k)
    assert not torch._dynamo.utils.counters["graph_break"]
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert frames <= 2, f"{frames} compiles"
