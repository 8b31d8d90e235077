"""The CUDA traversals' hub path, run through the host emulator (SEASTAR_CUDA_EMULATE=1): a
centre with at least SEASTAR_CUDA_HUB_DEGREE edges is taken by a whole block, whose groups walk
equal slices of its edges and combine their sums, extremes and online-softmax partials in group
order after each pass. The test graphs' hubs are small, so the tests lower the degree until most
centres take the hub path (and many slices are empty). Forward and every gradient against plain
torch in float64; the generated source shows which kernels have the path.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
from models import MODELS, check_against_torch


@pytest.fixture(autouse=True)
def emulate(monkeypatch):
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "2")


def fresh(model, tag):
    """The model's program under a new name: variants compiled by other tests (without the hub
    path) are kept per program, so each test here compiles its own."""
    return ss.vertex_program(name=f"hub_{tag}_{model.name}")(model.program.fn)


def _hub_graph(hub_degree=150, n=60, seed=0):
    """A hub with `hub_degree` in-edges (multi-edges and a loop among them), a vertex with one
    edge, isolated vertices and a sprinkle of random edges."""
    g = torch.Generator().manual_seed(seed)
    hub_src = torch.randint(0, n - 5, (hub_degree,), generator=g)
    hub_src[:3] = 0  # a loop, twice more as multi-edges
    rand = torch.randint(0, n - 5, (2, 3 * n), generator=g)
    src = torch.cat([hub_src, rand[0], torch.tensor([7])])
    dst = torch.cat([torch.zeros(hub_degree, dtype=torch.long), rand[1], torch.tensor([n - 5])])
    return ss.Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n)  # n-4 .. n-1 isolated


@pytest.mark.parametrize("graph_name", ["hub", "mixed", "typed_mixed"])
@pytest.mark.parametrize("name", list(MODELS))
def test_hub_path_matches_plain_torch(name, graph_name, graph_factory):
    model = MODELS[name]
    graph = graph_factory(graph_name)
    if model.typed and not graph.has_edge_types:
        pytest.skip("typed model on an untyped graph")
    # one name for every graph: the same source, compiled once
    check_against_torch(model, graph, program=fresh(model, "zoo"))


@pytest.mark.parametrize("heads,f", [(4, 16), (1, 64), (8, 1)])
def test_hub_path_gat_widths_on_a_large_hub(heads, f, monkeypatch):
    """Online-softmax partials of 8 .. 64 groups combined; float32 as on a GPU."""
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    graph = _hub_graph()
    g = torch.Generator().manual_seed(heads * f)
    inputs = {"h": torch.randn(graph.num_nodes, heads, f, generator=g),
              "el": torch.randn(graph.num_nodes, heads, 1, generator=g),
              "er": torch.randn(graph.num_nodes, heads, 1, generator=g)}
    check_against_torch(MODELS["gat"], graph, dtype=torch.float32, tol=2e-5, inputs=inputs,
                        program=fresh(MODELS["gat"], f"wide{heads}x{f}"))


@pytest.mark.parametrize("name", ["gcn", "sage_mean", "gin", "max_agg", "min_agg", "out_edges"])
def test_hub_path_sums_and_extremes_on_a_large_hub(name, monkeypatch):
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    model = MODELS[name]
    check_against_torch(model, _hub_graph(), program=fresh(model, "large"))


def test_hub_path_softmax_of_huge_logits_is_finite_and_deterministic(monkeypatch):
    """Scores of +-1e4: the partials' maxima differ by far more than exp can bridge, so the
    combine must rescale by exactly 1 at the largest and underflow to 0 elsewhere."""
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    graph = _hub_graph()
    g = torch.Generator().manual_seed(2)
    inputs = {"h": torch.randn(graph.num_nodes, 4, 16, generator=g),
              "el": torch.sign(torch.randn(graph.num_nodes, 4, 1, generator=g)) * 1e4,
              "er": torch.sign(torch.randn(graph.num_nodes, 4, 1, generator=g)) * 1e4}
    prog = fresh(MODELS["gat"], "wide4x16")  # the program of the test above
    runs = []
    for _ in range(2):
        t = {k: v.clone().requires_grad_() for k, v in inputs.items()}
        out = prog(graph, backend="fused", **t)
        runs.append((out,) + torch.autograd.grad(out.sum(), list(t.values())))
    assert all(torch.isfinite(x).all() for x in runs[0])
    for a, b in zip(*runs):
        assert torch.equal(a, b)
    ref = MODELS["gat"].torch_fn(graph, **{k: v.double() for k, v in inputs.items()})
    torch.testing.assert_close(runs[0][0].double(), ref, rtol=1e-5, atol=1e-5)


def _kernels(tmp_path, monkeypatch, prog, graph, **inputs):
    monkeypatch.setenv("SEASTAR_DUMP_DIR", str(tmp_path))
    out = prog(graph, backend="fused", **{k: v.requires_grad_() for k, v in inputs.items()})
    out.sum().backward()
    src = {d: (tmp_path / f"{prog.name}.{d}.f64_i32.cu").read_text() for d in ("forward", "backward")}
    # the kernels' text, by name
    return {d: {part.split(")", 1)[1].split("(", 1)[0].strip(): part for part in s.split("__launch_bounds__")[1:]}
            for d, s in src.items()}


def test_which_kernels_take_the_hub_path(tmp_path, monkeypatch, graph_factory):
    """Traversals of sums, extremes and softmax get it (a 512-thread block, a hub counter);
    one with parameter-gradient partial sums (GIN's eps) keeps a group per centre, as does every
    kernel with SEASTAR_CUDA_HUB_DEGREE=0."""
    graph = graph_factory("hub")
    model = MODELS["gin"]
    inputs = model.make_inputs(graph, dtype=torch.float64)
    kernels = _kernels(tmp_path, monkeypatch, fresh(model, "which"), graph, **inputs)
    fwd = kernels["forward"]
    assert any("sx::hub_count" in k and k.startswith("(512, ") for k in fwd.values())
    bwd = kernels["backward"]
    rows = [k for k in bwd.values() if "i += NB" in k]  # the loop over a block's share of centres
    assert rows and all("constexpr bool hub = false" in k for k in rows)
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "0")
    off = _kernels(tmp_path / "off", monkeypatch, fresh(model, "off"), graph, **inputs)
    assert not any("sx::hub_count" in k for d in off.values() for k in d.values())


def test_bad_hub_degree_is_refused(monkeypatch, graph_factory):
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "lots")
    graph = graph_factory("hub")
    model = MODELS["gcn"]
    with pytest.raises(ValueError, match="SEASTAR_CUDA_HUB_DEGREE must be a non-negative integer.*'lots'"):
        fresh(model, "bad")(graph, backend="fused", **model.make_inputs(graph))
