"""The fused CUDA path on a GPU: the correctness suite of tests/python/test_fused.py on CUDA
tensors, plus what only a GPU shows (wide features mapped to whole blocks, hubs of thousands of
edges, torch's current stream, a second device, bitwise determinism with dynamic scheduling).

Every model of tests/python/models.py runs through generated CUDA kernels (backend="fused") on
every tricky graph; forward and every gradient must match the plain-torch version (on the CPU,
in float64) to 1e-10 in float64 and 1e-5 in float32. Skipped as a whole without a GPU or a
CUDA build of Seastar; run by tests/gpu/run.sh.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
import seastar.nn as snn
from models import MODELS

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.skipif(not getattr(ss._C, "cuda_built", False), reason="Seastar was built without the CUDA backend"),
]

DEV = "cuda"


def _compare(model, graph, dtype, rtol, atol, seed=0, frozen=()):
    cpu = model.make_inputs(graph, seed=seed, dtype=dtype, ties=True)
    inputs = {k: t.to(DEV).requires_grad_(k not in frozen) for k, t in cpu.items()}
    out = model.program(graph, backend="fused", **inputs)
    assert out.device.type == "cuda"
    ref_inputs = {k: t.detach().to(torch.float64).requires_grad_(k not in frozen) for k, t in cpu.items()}
    ref = model.torch_fn(graph, **ref_inputs)
    torch.testing.assert_close(out.cpu().to(torch.float64), ref, rtol=rtol, atol=atol)
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(seed + 7), dtype=torch.float64)
    wanted = [k for k, t in inputs.items() if t.requires_grad]
    got = torch.autograd.grad((out * weight.to(DEV, dtype)).sum(), [inputs[k] for k in wanted], allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), [ref_inputs[k] for k in wanted], allow_unused=True)
    for k, g, e in zip(wanted, got, exp):
        g = torch.zeros_like(inputs[k]) if g is None else g
        e = torch.zeros_like(ref_inputs[k]) if e is None else e
        assert g.device.type == "cuda"
        torch.testing.assert_close(g.cpu().to(torch.float64), e, rtol=rtol, atol=atol, msg=lambda m: f"d/d{k}: {m}")


@pytest.mark.parametrize("model", list(MODELS.values()), ids=list(MODELS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_fused_cuda_matches_plain_torch(model, tricky_graph, dtype):
    """Every input gets its gradient, parameters used inside programs included (block partial sums)."""
    if model.typed and not tricky_graph.graph.has_edge_types:
        pytest.skip("typed model on an untyped graph")
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    _compare(model, tricky_graph.graph, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("model", ["rgcn", "gin", "node_typed"])
def test_frozen_parameters(model, typed_graph):
    """The same programs without parameter gradients (no partial-sum kernels)."""
    m = MODELS[model]
    _compare(m, typed_graph.graph, torch.float64, rtol=1e-10, atol=1e-10, frozen=tuple(m.program.param_names))


def _power_law(n=3000, hub_in=2500, seed=0):
    """Random edges plus vertex 0 receiving `hub_in` edges and sending 300: one block-sized hub."""
    g = torch.Generator().manual_seed(seed)
    e = 8 * n
    src, dst = torch.randint(0, n, (e,), generator=g), torch.randint(0, n, (e,), generator=g)
    hub_src = torch.randint(1, n, (hub_in,), generator=g)
    out_dst = torch.randint(1, n, (300,), generator=g)
    src = torch.cat([src, hub_src, torch.zeros(300, dtype=torch.long)])
    dst = torch.cat([dst, torch.zeros(hub_in, dtype=torch.long), out_dst])
    return ss.Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n)


def _gat_inputs(n, heads, f, dtype=torch.float64, seed=0, device=DEV):
    g = torch.Generator().manual_seed(seed)
    return {"h": torch.randn(n, heads, f, generator=g, dtype=dtype).to(device).requires_grad_(),
            "el": torch.randn(n, heads, 1, generator=g, dtype=dtype).to(device).requires_grad_(),
            "er": torch.randn(n, heads, 1, generator=g, dtype=dtype).to(device).requires_grad_()}


def _check_gat(graph, inputs, rtol=1e-10, atol=1e-10):
    out = MODELS["gat"].program(graph, backend="fused", **inputs)
    cpu = {k: t.detach().cpu().to(torch.float64).requires_grad_() for k, t in inputs.items()}
    ref = MODELS["gat"].torch_fn(graph, **cpu)
    torch.testing.assert_close(out.detach().cpu().to(torch.float64), ref, rtol=rtol, atol=atol)
    g1 = torch.autograd.grad(out.square().sum(), list(inputs.values()))
    g2 = torch.autograd.grad(ref.square().sum(), list(cpu.values()))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a.cpu().to(torch.float64), b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("f", [1, 7, 32, 64, 256])
@pytest.mark.parametrize("heads", [1, 8])
def test_gat_widths_and_heads(graph_factory, f, heads):
    """Every thread mapping: a lane per vertex, sub-warp groups, a warp, a block per vertex."""
    graph = graph_factory("hub")
    _check_gat(graph, _gat_inputs(graph.num_nodes, heads, f))


@pytest.mark.parametrize("f,heads", [(8, 8), (64, 4), (300, 1)])
def test_gat_big_hub(f, heads):
    graph = _power_law()
    _check_gat(graph, _gat_inputs(graph.num_nodes, heads, f), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("f", [1, 7, 64, 256, 1024, 1500])
def test_gcn_widths(graph_factory, f):
    graph = _power_law(n=1500, hub_in=1200) if f >= 256 else graph_factory("mixed")
    g = torch.Generator().manual_seed(1)
    h = torch.randn(graph.num_nodes, f, generator=g, dtype=torch.float64)
    w = torch.randn(graph.num_edges, 1, generator=g, dtype=torch.float64)
    hd, wd = h.to(DEV).requires_grad_(), w.to(DEV).requires_grad_()
    out = MODELS["gcn"].program(graph, backend="fused", h=hd, w=wd)
    h.requires_grad_(), w.requires_grad_()
    ref = MODELS["gcn"].torch_fn(graph, h=h, w=w)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-10, atol=1e-10)
    got = torch.autograd.grad(out.square().sum(), [hd, wd])
    exp = torch.autograd.grad(ref.square().sum(), [h, w])
    for a, b in zip(got, exp):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-9, atol=1e-9)


def test_gradcheck_fused_cuda(small_graph):
    graph = small_graph.graph
    inputs = _gat_inputs(graph.num_nodes, 2, 3)
    names = list(inputs)
    fn = lambda *ts: MODELS["gat"].program(graph, backend="fused", **dict(zip(names, ts)))  # noqa: E731
    assert torch.autograd.gradcheck(fn, tuple(inputs.values()))
    g = torch.Generator().manual_seed(3)
    h = torch.randn(graph.num_nodes, 3, generator=g, dtype=torch.float64).to(DEV).requires_grad_()
    w = torch.randn(graph.num_edges, 1, generator=g, dtype=torch.float64).to(DEV).requires_grad_()
    assert torch.autograd.gradcheck(lambda h, w: MODELS["gcn"].program(graph, backend="fused", h=h, w=w), (h, w))
    s = torch.randn(graph.num_nodes, 4, generator=g, dtype=torch.float64).to(DEV).requires_grad_()
    ww = MODELS["max_agg"].make_inputs(graph)["w"].to(DEV).requires_grad_()
    assert torch.autograd.gradcheck(lambda h, w: MODELS["max_agg"].program(graph, backend="fused", h=h, w=w), (s, ww))


def test_softmax_finite_for_huge_logits(graph_factory):
    graph = graph_factory("hub")
    inputs = _gat_inputs(graph.num_nodes, 2, 4, dtype=torch.float32)
    with torch.no_grad():
        inputs["el"].copy_(torch.sign(inputs["el"]) * 1e4)
        inputs["er"].copy_(torch.sign(inputs["er"]) * 1e4)
    out = MODELS["gat"].program(graph, backend="fused", **inputs)
    assert torch.isfinite(out).all()
    grads = torch.autograd.grad(out.sum(), list(inputs.values()))
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("f,heads", [(16, 3), (300, 2)])
def test_bitwise_deterministic(f, heads):
    """Dynamic work assignment never changes results: no atomics touch values."""
    graph = _power_law()
    inputs = _gat_inputs(graph.num_nodes, heads, f, dtype=torch.float32)
    runs = []
    for _ in range(3):
        out = MODELS["gat"].program(graph, backend="fused", **inputs)
        runs.append((out,) + torch.autograd.grad(out.sum(), list(inputs.values())))
    for later in runs[1:]:
        for a, b in zip(runs[0], later):
            assert torch.equal(a, b)


def test_cpu_and_cuda_agree(graph_factory):
    graph = graph_factory("mixed")
    cpu_in = _gat_inputs(graph.num_nodes, 2, 5, device="cpu")
    gpu_in = {k: t.detach().to(DEV).requires_grad_() for k, t in cpu_in.items()}
    a = MODELS["gat"].program(graph, backend="fused", **cpu_in)
    b = MODELS["gat"].program(graph, backend="fused", **gpu_in)
    torch.testing.assert_close(b.cpu(), a.detach(), rtol=1e-12, atol=1e-12)


def test_runs_on_the_current_stream(graph_factory):
    graph = graph_factory("hub")
    inputs = _gat_inputs(graph.num_nodes, 2, 16)
    expected = MODELS["gat"].program(graph, backend="fused", **inputs).detach()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)  # keep the side stream busy: a launch on another stream would race
        out = MODELS["gat"].program(graph, backend="fused", **inputs)
        grads = torch.autograd.grad(out.sum(), list(inputs.values()))
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    assert torch.equal(out.detach(), expected)
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
def test_second_device(graph_factory):
    graph = graph_factory("mixed")
    cpu_in = _gat_inputs(graph.num_nodes, 2, 5, device="cpu")
    dev1 = {k: t.detach().to("cuda:1").requires_grad_() for k, t in cpu_in.items()}
    out = MODELS["gat"].program(graph, backend="fused", **dev1)
    assert out.device == torch.device("cuda:1")
    ref = MODELS["gat"].program(graph, backend="reference", **cpu_in)
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-10, atol=1e-10)
    g = torch.autograd.grad(out.sum(), [dev1["h"]])[0]
    assert g.device == torch.device("cuda:1")


def test_device_index_is_not_hard_coded(graph_factory):
    """With another device current, tensors on cuda:0 still run on cuda:0 (and vice versa)."""
    graph = graph_factory("hub")
    inputs = _gat_inputs(graph.num_nodes, 2, 4)
    last = torch.cuda.device_count() - 1
    with torch.cuda.device(last):
        out = MODELS["gat"].program(graph, backend="fused", **inputs)
    assert out.device == inputs["h"].device
    _check_gat(graph, inputs)


def test_mixed_devices_are_a_clear_error(small_graph):
    graph = small_graph.graph
    inputs = _gat_inputs(graph.num_nodes, 1, 2)
    with pytest.raises(ValueError, match="different devices"):
        MODELS["gat"].program(graph, backend="fused", **dict(inputs, h=inputs["h"].detach().cpu()))


# ---- the seastar.nn layers on CUDA against the same layers on the CPU ---------------------------

def _mlp(i, h, o):
    return torch.nn.Sequential(torch.nn.Linear(i, h), torch.nn.ReLU(), torch.nn.Linear(h, o))


LAYERS = {
    "gcn": lambda: snn.GCNConv(6, 4),
    "gat": lambda: snn.GATConv(6, 3, heads=2),
    "gat_wide": lambda: snn.GATConv(6, 64, heads=4),
    "sage_mean": lambda: snn.SAGEConv(6, 4),
    "sage_max": lambda: snn.SAGEConv(6, 4, aggr="max"),
    "gin": lambda: snn.GINConv(_mlp(6, 8, 4), train_eps=True),
    "appnp": lambda: snn.APPNP(K=3, alpha=0.1),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_layers_on_cuda_match_cpu(name, graph_factory):
    torch.manual_seed(0)
    graph = graph_factory("mixed")
    layer = LAYERS[name]().to(torch.float64).eval()
    gpu_layer = __import__("copy").deepcopy(layer).to(DEV)
    x = torch.randn(graph.num_nodes, 6, dtype=torch.float64)
    ref = layer(graph, x.requires_grad_())
    snn.set_backend(gpu_layer, "fused")
    xd = x.detach().to(DEV).requires_grad_()
    out = gpu_layer(graph, xd)
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-10, atol=1e-10)
    ref.square().sum().backward()
    out.square().sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=1e-9, atol=1e-9)
    for (n, p), (_, q) in zip(layer.named_parameters(), gpu_layer.named_parameters()):
        if p.grad is not None:
            torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-9, atol=1e-9, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("model_name", ["gat", "sage_mean", "appnp_step", "out_edges", "reuse_agg"])
def test_bipartite_block_on_cuda(model_name):
    """A sampled block (num_src > num_dst) on the GPU: source-side launches use Args::NS."""
    model = MODELS[model_name]
    gen = torch.Generator().manual_seed(3)
    ns, nd, e = 3000, 700, 20000
    ei = torch.stack([torch.randint(0, ns, (e,), generator=gen), torch.randint(0, nd, (e,), generator=gen)])
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd))
    square = ss.Graph.from_edge_index(ei, num_nodes=ns)
    centre_only = {"gat": {"er"}, "appnp_step": {"h0"}, "out_edges": {"h"}}.get(model_name, set())
    cpu = model.make_inputs(square, seed=1, dtype=torch.float64, ties=True)
    bl = {k: (t[:nd] if k in centre_only else t).to(DEV).requires_grad_() for k, t in cpu.items()}
    out = model.program(block, backend="fused", **bl)
    ref = model.torch_fn(square, **cpu)
    ref = ref if model_name == "out_edges" else ref[:nd]
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-10, atol=1e-10)
    out.sum().backward()
    for k, t in bl.items():
        assert t.grad is not None and torch.isfinite(t.grad).all(), k


@pytest.mark.parametrize("kind", ["mean", "max"])
def test_global_source_block_on_cuda(kind):
    """A block reading a whole CUDA feature table through global source ids (NeighborLoader's
    x_in_place): num_src is the table's rows; equals plain torch on the global edge list."""
    gen = torch.Generator().manual_seed(4)
    rows, ns, nd, e = 5000, 3000, 700, 20000
    ei = torch.stack([torch.randint(0, ns, (e,), generator=gen), torch.randint(0, nd, (e,), generator=gen)])
    ei = ei[:, torch.sort(ei[1], stable=True).indices]
    ids = torch.randperm(rows, generator=gen)[:ns]
    block = ss.Graph.from_edge_index(ei, num_nodes=(ns, nd)).with_global_sources(ids, rows)
    x = torch.randn(rows, 6, generator=gen, dtype=torch.float64)
    conv = snn.SAGEConv(6, 8, aggr=kind).double()
    gpu = __import__("copy").deepcopy(conv).to(DEV)
    out = gpu(block, x.to(DEV))
    src, dst = ids[ei[0]], ei[1]
    agg = torch.zeros(nd, 6, dtype=torch.float64)
    if kind == "mean":
        agg = agg.index_add(0, dst, x[src]) / torch.bincount(dst, minlength=nd).clamp(min=1).unsqueeze(1)
    else:
        agg = agg.scatter_reduce(0, dst.unsqueeze(1).expand(-1, 6), x[src], reduce="amax", include_self=False)
    ref = agg @ conv.lin_l.weight.t() + conv.lin_l.bias + x[ids[:nd]] @ conv.lin_r.weight.t()
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-10, atol=1e-10)
    out.square().sum().backward()
    ref.square().sum().backward()
    for (n, p), (_, q) in zip(conv.named_parameters(), gpu.named_parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-9, atol=1e-9, msg=lambda m: f"{n}: {m}")


@pytest.mark.parametrize("model", list(MODELS.values()), ids=list(MODELS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_hub_path_on_the_device(model, dtype, monkeypatch):
    """Every zoo program with SEASTAR_CUDA_HUB_DEGREE=16 on the power-law graph: most centres
    are hubs, split over blocks that run concurrently (the emulator runs one block at a time)."""
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    graph = _power_law(n=1500, hub_in=1200)
    if model.typed:
        gen = torch.Generator().manual_seed(1)
        ei = graph.edge_index
        graph = ss.Graph.from_edge_index(ei, num_nodes=graph.num_nodes, num_edge_types=3, num_node_types=2,
                                         edge_type=torch.randint(0, 3, (ei.shape[1],), generator=gen),
                                         node_type=torch.randint(0, 2, (graph.num_nodes,), generator=gen))
    fresh = ss.vertex_program(name=f"hub16_{model.name}")(model.program.fn)
    tol = 1e-10 if dtype == torch.float64 else 1e-5
    _compare(model._replace(program=fresh), graph, dtype, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["gcn", "gat", "sage_mean", "gin", "max_agg", "out_edges"])
@pytest.mark.parametrize("setting", [{"SEASTAR_CUDA_VECTOR_ELEMS": "2"},
                                     {"SEASTAR_CUDA_VECTOR_ELEMS": "4", "SEASTAR_CUDA_GROUP_THREADS": "16"}],
                         ids=["vector2", "vector4_group16"])
@pytest.mark.parametrize("misalign", [False, True], ids=["aligned", "view_at_odd_offset"])
def test_vector_accesses_on_the_device(name, setting, misalign, monkeypatch):
    """Width 64 (GAT: 4 heads of 16) with 8- and 16-byte accesses and the hub path, float32:
    a misaligned access would fault here, where the emulator cannot tell; inputs one element
    into their storage must be copied by the runtime first."""
    for k, v in setting.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    model = MODELS[name]
    graph = _power_law(n=1500, hub_in=1200)
    g = torch.Generator().manual_seed(2)
    cpu = {k: (torch.randn(*((graph.num_nodes, 4, 16) if name == "gat" and k == "h" else
                              (graph.num_nodes, 4, 1) if name == "gat" else (graph.num_nodes, 64)), generator=g)
               if t.dim() >= 2 and t.shape[0] == graph.num_nodes else t)
           for k, t in model.make_inputs(graph, dtype=torch.float32).items()}
    inputs = {}
    for k, t in cpu.items():
        d = t.to(DEV)
        if misalign and t.dim() >= 2 and t.shape[0] == graph.num_nodes:
            d = torch.empty(t.numel() + 1, device=DEV)[1:].view(t.shape).copy_(d)
        inputs[k] = d.detach().requires_grad_()
    prog = ss.vertex_program(name=f"vec_{'_'.join(setting.values())}_{name}")(model.program.fn)
    out = prog(graph, backend="fused", **inputs)
    ref_inputs = {k: t.double().requires_grad_() for k, t in cpu.items()}
    ref = model.torch_fn(graph, **ref_inputs)
    torch.testing.assert_close(out.cpu().double(), ref, rtol=2e-5, atol=2e-5)
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    got = torch.autograd.grad((out * weight.to(DEV, torch.float32)).sum(), list(inputs.values()), allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), list(ref_inputs.values()), allow_unused=True)
    for k, a, e in zip(inputs, got, exp):
        a = torch.zeros_like(inputs[k]) if a is None else a
        e = torch.zeros_like(ref_inputs[k]) if e is None else e
        torch.testing.assert_close(a.cpu().double(), e, rtol=2e-5, atol=2e-5, msg=lambda m: f"d/d{k}: {m}")
