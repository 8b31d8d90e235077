"""Tests of seastar.nn: shapes and gradient flow, every layer against an independent plain-torch
implementation of its math (float64, forward and backward), eval-mode determinism, the per-graph
GCN normalisation cache and a smoke run of examples/train.py."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import seastar as ss
import seastar.nn as snn

from conftest import fused_available

REPO = Path(__file__).resolve().parents[2]
TOL = dict(rtol=1e-10, atol=1e-10)
DT = torch.float64


# ---------------------------------------------------------------- graphs and plain-torch math


def awkward_graph():
    """8 vertices: 6 and 7 isolated, vertex 5 has only out-edges, a self loop (3->3) and
    multi-edges (0->1 twice, 2->4 three times)."""
    src = [0, 0, 1, 2, 2, 2, 2, 3, 3, 4, 5, 5, 1]
    dst = [1, 1, 2, 0, 4, 4, 4, 3, 1, 3, 0, 4, 0]
    return torch.tensor([src, dst]), 8


def random_graph(n, e, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (2, e), generator=gen), n


def make(ei, n):
    return ss.Graph.from_edge_index(ei, num_nodes=n)


def scatter_sum(x, index, n):
    return x.new_zeros((n,) + x.shape[1:]).index_add(0, index, x)


def scatter_max(x, index, n):
    """Max per group, 0 for an empty group (PyG's convention)."""
    out = x.new_zeros((n,) + x.shape[1:])
    idx = index.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    return out.scatter_reduce(0, idx, x, reduce="amax", include_self=False)


def segment_softmax(s, index, n):
    m = scatter_max(s.detach(), index, n)  # the shift does not change the value
    ex = torch.exp(s - m[index])
    return ex / scatter_sum(ex, index, n)[index]


def with_loops(ei, n, remove_existing=False):
    if remove_existing:
        ei = ei[:, ei[0] != ei[1]]
    loop = torch.arange(n)
    return torch.cat([ei, torch.stack([loop, loop])], 1)


def gcn_weights(ei, n):
    deg = torch.bincount(ei[1], minlength=n).to(DT)
    dinv = torch.where(deg > 0, deg.pow(-0.5), torch.zeros_like(deg))
    return dinv[ei[0]] * dinv[ei[1]]


def ref_gcn(ei, n, x, layer, add_self_loops=True, normalize=True):
    """Self loops as PyG's add_remaining_self_loops: exactly one per vertex (existing ones kept)."""
    h = x @ layer.lin.weight.t()
    if normalize:
        ei = with_loops(ei, n, remove_existing=True) if add_self_loops else ei
        out = scatter_sum(h[ei[0]] * gcn_weights(ei, n)[:, None], ei[1], n)
    else:
        out = scatter_sum(h[ei[0]], ei[1], n)
    return out if layer.bias is None else out + layer.bias


def ref_gat(ei, n, x, layer, mask=None):
    H, C = layer.heads, layer.out_channels
    if layer.add_self_loops:
        ei = with_loops(ei, n, remove_existing=True)
    src, dst = ei
    h = (x @ layer.lin.weight.t()).view(n, H, C)
    el = (h * layer.att_src).sum(-1)  # [N, H]
    er = (h * layer.att_dst).sum(-1)
    s = F.leaky_relu(el[src] + er[dst], layer.negative_slope)  # [E, H]
    alpha = segment_softmax(s, dst, n)
    if mask is not None:
        alpha = alpha * mask
    out = scatter_sum(alpha[..., None] * h[src], dst, n)
    out = out.reshape(n, H * C) if layer.concat else out.mean(1)
    return out if layer.bias is None else out + layer.bias


def ref_sage(ei, n, x, layer):
    src, dst = ei
    if layer.aggr == "mean":
        deg = torch.bincount(dst, minlength=n).clamp(min=1).to(DT)
        agg = scatter_sum(x[src], dst, n) / deg[:, None]
    else:
        agg = scatter_max(x[src], dst, n)
    out = agg @ layer.lin_l.weight.t()
    if layer.lin_l.bias is not None:
        out = out + layer.lin_l.bias
    if layer.lin_r is not None:
        out = out + x @ layer.lin_r.weight.t()
    if layer.normalize:
        out = out / out.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    return out


def ref_gin(ei, n, x, layer):
    return layer.nn((1 + layer.eps) * x + scatter_sum(x[ei[0]], ei[1], n))


def ref_appnp(ei, n, x, K, alpha):
    ei = with_loops(ei, n, remove_existing=True)
    w = gcn_weights(ei, n)[:, None]
    h = x
    for _ in range(K):
        h = (1 - alpha) * scatter_sum(w * h[ei[0]], ei[1], n) + alpha * x
    return h


# ---------------------------------------------------------------- layer factory


def mlp(a, b, c):
    return torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(), torch.nn.Linear(b, c))


F_IN = 5
CASES = {
    "gcn": (lambda: snn.GCNConv(F_IN, 4), ref_gcn, 4),
    "gcn_nobias_noloops": (lambda: snn.GCNConv(F_IN, 4, bias=False, add_self_loops=False),
                           lambda ei, n, x, l: ref_gcn(ei, n, x, l, add_self_loops=False), 4),
    "gcn_unnormalized": (lambda: snn.GCNConv(F_IN, 4, normalize=False),
                         lambda ei, n, x, l: ref_gcn(ei, n, x, l, normalize=False), 4),
    "gat": (lambda: snn.GATConv(F_IN, 3, heads=2), ref_gat, 6),
    "gat_mean_heads": (lambda: snn.GATConv(F_IN, 3, heads=4, concat=False, negative_slope=0.1), ref_gat, 3),
    "gat_no_loops": (lambda: snn.GATConv(F_IN, 3, heads=2, add_self_loops=False, bias=False), ref_gat, 6),
    "sage_mean": (lambda: snn.SAGEConv(F_IN, 4), ref_sage, 4),
    "sage_mean_narrow": (lambda: snn.SAGEConv(F_IN, 2, normalize=True), ref_sage, 2),
    "sage_mean_wide": (lambda: snn.SAGEConv(F_IN, 8, root_weight=False), ref_sage, 8),
    "sage_max": (lambda: snn.SAGEConv(F_IN, 4, aggr="max", bias=False), ref_sage, 4),
    "gin": (lambda: snn.GINConv(mlp(F_IN, 6, 4)), ref_gin, 4),
    "gin_train_eps": (lambda: snn.GINConv(mlp(F_IN, 6, 4), eps=0.3, train_eps=True), ref_gin, 4),
    "gin_fixed_eps": (lambda: snn.GINConv(mlp(F_IN, 6, 4), eps=-0.4), ref_gin, 4),
    "appnp": (lambda: snn.APPNP(K=4, alpha=0.15), lambda ei, n, x, l: ref_appnp(ei, n, x, 4, 0.15), F_IN),
}
GRAPHS = {"awkward": awkward_graph(), "random": random_graph(11, 40, seed=3)}


# Every layer's programs are forced onto each backend, so a silent fallback of the fused path to
# the reference executor cannot hide a gap; "fused" is skipped where this build has no fused backend.
BACKENDS = ["reference", "fused"]


def build(case, seed=0, backend=None):
    if backend == "fused" and not fused_available():
        pytest.skip("no fused backend in this build")
    torch.manual_seed(seed)
    layer = snn.set_backend(CASES[case][0]().to(DT), backend)
    with torch.no_grad():
        if hasattr(layer, "eps") and isinstance(layer.eps, torch.nn.Parameter):
            layer.eps.fill_(0.3)
        # biases start at zero: random ones make a bias added to the wrong tensor (or added in
        # place into one a backward reads) show in the output and the gradients
        for name, p in layer.named_parameters():
            if name.split(".")[-1] == "bias":
                p.normal_()
    return layer


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_shape_and_gradient_flow(case, backend):
    ei, n = awkward_graph()
    layer = build(case, backend=backend)
    x = torch.randn(n, F_IN, dtype=DT, requires_grad=True)
    out = layer(make(ei, n), x)
    assert out.shape == (n, CASES[case][2])
    assert out.dtype == DT
    (out * torch.randn_like(out)).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for name, p in layer.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_plain_torch(case, graph, backend):
    ei, n = GRAPHS[graph]
    layer = build(case, backend=backend).eval()
    ref_fn = CASES[case][1]
    torch.manual_seed(1)
    x = torch.randn(n, F_IN, dtype=DT)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    out = layer(make(ei, n), xa)
    params = [p for p in layer.parameters()]
    gout = torch.randn_like(out)
    got = torch.autograd.grad(out, [xa] + params, gout)
    expect_out = ref_fn(ei, n, xb, layer)
    expect = torch.autograd.grad(expect_out, [xb] + params, gout)
    torch.testing.assert_close(out, expect_out, **TOL)
    for name, g, e in zip(["x"] + [k for k, _ in layer.named_parameters()], got, expect):
        torch.testing.assert_close(g, e, **TOL, msg=lambda m: f"gradient of {name}: {m}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_plain_torch_on_tricky_graphs(case, tricky_graph, backend):
    """The shared hazard graphs of conftest.py (no edges, hubs, typed graphs whose types the
    layers ignore), forward and backward."""
    g = tricky_graph.graph
    ei, n = g.edge_index.long(), g.num_nodes
    layer = build(case, backend=backend).eval()
    torch.manual_seed(2)
    xa = torch.randn(n, F_IN, dtype=DT, requires_grad=True)
    xb = xa.detach().clone().requires_grad_()
    out = layer(g, xa)
    expect = CASES[case][1](ei, n, xb, layer)
    torch.testing.assert_close(out, expect, **TOL)
    gout = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, xa, gout)[0], torch.autograd.grad(expect, xb, gout)[0], **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gat_attention_dropout_is_a_mask_on_alpha(backend, monkeypatch):
    """Training-mode GAT multiplies alpha by one per-edge mask [E, H, 1] (incl. self loops)."""
    if backend == "fused" and not fused_available():
        pytest.skip("no fused backend in this build")
    import seastar.nn.gat_conv as gat_mod
    ei, n = awkward_graph()
    p = 0.4
    e_loops = with_loops(ei, n, remove_existing=True).shape[1]
    torch.manual_seed(7)
    mask = (torch.rand(e_loops, 2, 1) >= p).to(DT) / (1 - p)
    seen = []

    def fixed_mask(shape, prob, like):
        seen.append((tuple(shape), prob))
        return mask
    monkeypatch.setattr(gat_mod, "dropout_mask", fixed_mask)
    layer = snn.GATConv(F_IN, 3, heads=2, dropout=p, backend=backend).to(DT).train()
    x = torch.randn(n, F_IN, dtype=DT)
    out = layer(make(ei, n), x)
    assert seen == [((e_loops, 2, 1), p)]
    torch.testing.assert_close(out, ref_gat(ei, n, x, layer, mask=mask[..., 0]), **TOL)
    assert not torch.allclose(out, layer.eval()(make(ei, n), x))
    assert len(seen) == 1  # no mask in eval mode


@pytest.mark.parametrize("backend", BACKENDS)
def test_appnp_edge_dropout_masks_each_step_over_the_graph_with_loops(backend, monkeypatch):
    """Training-mode APPNP drops edges of A_hat, self loops included (they are edges there even
    though the undropped propagation adds them per vertex): one mask [E', 1] per step."""
    if backend == "fused" and not fused_available():
        pytest.skip("no fused backend in this build")
    import seastar.nn.appnp as appnp_mod
    ei, n = awkward_graph()
    K, alpha, p = 3, 0.1, 0.3
    eil = with_loops(ei, n, remove_existing=True)
    torch.manual_seed(3)
    masks = [(torch.rand(eil.shape[1], 1) >= p).to(DT) / (1 - p) for _ in range(K)]
    it = iter(masks)
    monkeypatch.setattr(appnp_mod, "dropout_mask", lambda shape, prob, like: next(it))
    layer = snn.APPNP(K=K, alpha=alpha, dropout=p, backend=backend).train()
    xa = torch.randn(n, F_IN, dtype=DT, requires_grad=True)
    xb = xa.detach().clone().requires_grad_()
    out = layer(make(ei, n), xa)
    w = gcn_weights(eil, n)[:, None]
    h = xb
    for m in masks:
        h = (1 - alpha) * scatter_sum(w * m * h[eil[0]], eil[1], n) + alpha * xb
    torch.testing.assert_close(out, h, **TOL)
    gout = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, xa, gout)[0], torch.autograd.grad(h, xb, gout)[0], **TOL)


def test_dropout_mask_statistics():
    from seastar.nn._utils import dropout_mask
    torch.manual_seed(0)
    like = torch.empty(0, dtype=DT)
    m = dropout_mask((200_000, 2), 0.6, like)
    assert m.dtype == DT and m.shape == (200_000, 2)
    assert set(m.unique().tolist()) == {0.0, 1 / 0.4}
    assert abs((m == 0).double().mean().item() - 0.6) < 0.01
    assert abs(m.mean().item() - 1.0) < 0.02
    assert torch.equal(dropout_mask((3,), 1.0, like), torch.zeros(3, dtype=DT))


@pytest.mark.parametrize("case", ["gat_dropout", "appnp_dropout"])
def test_eval_mode_is_deterministic(case):
    ei, n = random_graph(30, 120, seed=5)
    g = make(ei, n)
    layer = (snn.GATConv(F_IN, 4, heads=2, dropout=0.5) if case == "gat_dropout"
             else snn.APPNP(K=3, alpha=0.1, dropout=0.5)).to(DT)
    x = torch.randn(n, F_IN, dtype=DT)
    layer.eval()
    a, b = layer(g, x), layer(g, x)
    assert torch.equal(a, b)
    layer.train()
    torch.manual_seed(0)
    c = layer(g, x)
    torch.manual_seed(1)
    d = layer(g, x)
    assert not torch.equal(c, d)  # dropout is live in training mode


@pytest.mark.parametrize("f_in,f_out,x_grad,first", [(4, 4, False, True), (4, 4, True, False), (3, 5, True, True),
                                                      (9, 4, False, False), (6, 4, False, True), (6, 4, True, False)])
def test_gcn_propagates_whichever_side_of_the_weight_is_cheaper(f_in, f_out, x_grad, first, monkeypatch):
    """A (x W) = (A x) W: GCNConv propagates the side with fewer rows to move forward and
    backward (x needs no backward propagation without a gradient); both orders match plain torch
    in the output and every gradient."""
    import seastar.nn.gcn_conv as gcn_mod
    ei, n = awkward_graph()
    layer = snn.GCNConv(f_in, f_out).to(DT)
    assert gcn_mod.propagate_first(torch.zeros(n, f_in, dtype=DT, requires_grad=x_grad), layer.lin.weight,
                                   None) is first
    seen = []
    real = gcn_mod.propagate
    monkeypatch.setattr(gcn_mod, "propagate", lambda s, h, w, b: seen.append(h.shape[-1]) or real(s, h, w, b))
    xa = torch.randn(n, f_in, dtype=DT, requires_grad=x_grad)
    xb = xa.detach().clone().requires_grad_(x_grad)
    out = layer(make(ei, n), xa)
    assert seen == [f_in if first else f_out]
    want = ref_gcn(ei, n, xb, layer)
    torch.testing.assert_close(out, want, **TOL)
    gout = torch.randn_like(out)
    wrt_a = [layer.lin.weight, layer.bias] + ([xa] if x_grad else [])
    got = torch.autograd.grad(out, wrt_a, gout)
    wrt_b = [layer.lin.weight, layer.bias] + ([xb] if x_grad else [])
    for g, w in zip(got, torch.autograd.grad(want, wrt_b, gout)):
        torch.testing.assert_close(g, w, **TOL)


def test_gcn_cache_is_per_graph():
    n = 10
    ei1, _ = random_graph(n, 30, seed=1)
    ei2, _ = random_graph(n, 30, seed=2)
    g1, g2 = make(ei1, n), make(ei2, n)
    assert (g1.num_nodes, g1.num_edges) == (g2.num_nodes, g2.num_edges)
    layer = snn.GCNConv(F_IN, 3).to(DT).eval()
    x = torch.randn(n, F_IN, dtype=DT)
    o1 = layer(g1, x)
    o2 = layer(g2, x)
    assert not torch.allclose(o1, o2)
    torch.testing.assert_close(o1, ref_gcn(ei1, n, x, layer), **TOL)
    torch.testing.assert_close(o2, ref_gcn(ei2, n, x, layer), **TOL)
    assert torch.equal(layer(g1, x), o1)  # the first graph's entry is still right
    # the same edges in a new Graph object give the same answer
    torch.testing.assert_close(layer(make(ei1, n), x), o1, **TOL)


def test_layers_survive_deepcopy_after_use():
    ei, n = awkward_graph()
    g = make(ei, n)
    x = torch.randn(n, F_IN, dtype=DT)
    for case in ("gcn", "gat", "appnp"):
        layer = build(case).eval()
        out = layer(g, x)
        clone = copy.deepcopy(layer)
        torch.testing.assert_close(clone(g, x), out, **TOL)


@pytest.mark.parametrize("case", ["gcn", "gat", "sage_mean", "sage_max", "gin"])
def test_sparse_features_match_dense(case):
    ei, n = awkward_graph()
    layer = build(case).eval()
    x = torch.randn(n, F_IN, dtype=DT) * (torch.rand(n, F_IN) < 0.4)
    w_dense = torch.randn(n, CASES[case][2], dtype=DT)
    out_d = layer(make(ei, n), x)
    out_s = layer(make(ei, n), x.to_sparse_coo())
    torch.testing.assert_close(out_s, out_d, **TOL)
    (out_s * w_dense).sum().backward()  # gradients flow to the weights from a sparse input


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(), (3,), (2, 1)])
def test_edge_softmax(shape, backend):
    if backend == "fused" and not fused_available():
        pytest.skip("no fused backend in this build")
    ei, n = awkward_graph()
    g = make(ei, n)
    s = (torch.randn((ei.shape[1],) + shape, dtype=DT) * 5).requires_grad_()
    out = snn.edge_softmax(g, s, backend=backend)
    assert out.shape == s.shape
    s2 = s.detach().clone().requires_grad_()
    expect = segment_softmax(s2, ei[1], n)
    torch.testing.assert_close(out, expect, **TOL)
    gout = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, s, gout)[0], torch.autograd.grad(expect, s2, gout)[0], **TOL)
    # sums to one over every vertex with in-edges
    sums = scatter_sum(out.detach(), ei[1], n)
    has_in = torch.bincount(ei[1], minlength=n) > 0
    torch.testing.assert_close(sums[has_in], torch.ones_like(sums[has_in]), **TOL)


def test_edge_softmax_large_scores_stay_finite():
    ei, n = awkward_graph()
    out = snn.edge_softmax(make(ei, n), torch.full((ei.shape[1],), 1000.0, dtype=DT))
    assert torch.isfinite(out).all()


def test_errors_name_the_problem():
    ei, n = awkward_graph()
    g = make(ei, n)
    with pytest.raises(TypeError, match="graph first"):
        snn.GCNConv(F_IN, 2)(torch.randn(n, F_IN), g)
    with pytest.raises(ValueError, match="rows"):
        snn.GCNConv(F_IN, 2)(g, torch.randn(n + 1, F_IN))
    with pytest.raises(ValueError, match="aggr"):
        snn.SAGEConv(F_IN, 2, aggr="median")
    with pytest.raises(ValueError, match="edges"):
        snn.edge_softmax(g, torch.randn(ei.shape[1] + 1))


def test_pyg_parameter_names():
    assert set(dict(snn.GCNConv(3, 2).named_parameters())) == {"lin.weight", "bias"}
    assert set(dict(snn.GATConv(3, 2, heads=2).named_parameters())) == {"lin.weight", "att_src", "att_dst", "bias"}
    assert set(dict(snn.SAGEConv(3, 2).named_parameters())) == {"lin_l.weight", "lin_l.bias", "lin_r.weight"}
    assert "eps" in dict(snn.GINConv(mlp(3, 4, 2)).named_buffers())
    assert "eps" in dict(snn.GINConv(mlp(3, 4, 2), train_eps=True).named_parameters())


def test_set_backend_reference():
    ei, n = awkward_graph()
    model = torch.nn.ModuleList([snn.GCNConv(F_IN, 4), snn.GATConv(4, 2)]).to(DT)
    snn.set_backend(model, "reference")
    assert all(m.backend == "reference" for m in model)
    x = torch.randn(n, F_IN, dtype=DT)
    model[1](make(ei, n), model[0](make(ei, n), x))


# ---------------------------------------------------------------- the example script


@pytest.mark.parametrize("model", ["gcn", "gat"])
def test_train_script_smoke(model, tmp_path):
    out = tmp_path / "result.json"
    cmd = [sys.executable, str(REPO / "examples" / "train.py"), "--model", model, "--dataset", "cora",
           "--epochs", "3", "--threads", "1", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("epoch ") >= 3
    result = json.loads(out.read_text())
    for key in ("test_acc", "best_val_acc", "best_epoch", "first_epoch_ms", "mean_epoch_ms", "total_s", "args"):
        assert key in result, key
    assert 0.0 <= result["test_acc"] <= 1.0
    assert result["args"]["model"] == model and result["args"]["epochs"] == 3


def _autograd_nodes(t: torch.Tensor):
    seen, stack = set(), [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(fn for fn, _ in node.next_functions)
    return {type(n).__name__ for n in seen}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["gcn", "gat", "gat_mean_heads"])
def test_the_bias_adds_in_place_only_where_no_view_makes_autograd_copy(case, backend):
    """The bias goes into a fresh output in place; into a view it would wrap the base in
    CopySlices, whose backward allocates two tensors of the output's size."""
    ei, n = awkward_graph()
    layer = build(case, backend=backend)
    x = torch.randn(n, F_IN, dtype=DT, requires_grad=True)
    out = layer(make(ei, n), x)
    nodes = _autograd_nodes(out)
    assert "CopySlices" not in nodes and "AsStridedBackward0" not in nodes, nodes


def test_add_bias_leaves_views_and_leaves_alone():
    from seastar.nn._utils import add_bias
    base = torch.randn(4, 6)
    fresh = base * 2
    assert add_bias(fresh, torch.ones(6)) is fresh  # in place
    view = fresh.view(4, 2, 3)
    got = add_bias(view, torch.ones(3))
    assert got._base is None and torch.equal(got, fresh.view(4, 2, 3) + 1)
    leaf = torch.randn(4, 6, requires_grad=True)
    assert add_bias(leaf, torch.ones(6)) is not leaf
    assert add_bias(fresh, None) is fresh
