"""The CUDA traversals' hub path, run through the host emulator (SEASTAR_CUDA_EMULATE=1): a
centre with at least SEASTAR_CUDA_HUB_DEGREE edges is taken by a whole block, whose groups walk
equal slices of its edges and combine their sums, extremes, (extreme, edge id) pairs and
online-softmax partials in group order after each pass. A traversal with parameter-gradient
partial sums and no accumulator instead cuts its hubs into pieces of equal edges, work items of
different chunks; one with partial sums and accumulators gives its hubs to hub workers, blocks
whose groups split a hub as above, each group with partial sums of its own. The test graphs' hubs are small, so the tests lower the degree until most
centres take the hub path (and many slices are empty). Forward and every gradient against plain
torch in float64, against the hub path off, and bit for bit across runs; the generated source
shows which kernels have the path.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
from hub_graphs import gat_inputs, hub_graph
from models import MODELS, check_against_torch


@pytest.fixture(autouse=True)
def emulate(monkeypatch):
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "2")


def fresh(model, tag):
    """The model's program under a new name: variants compiled by other tests (without the hub
    path) are kept per program, so each test here compiles its own."""
    return ss.vertex_program(name=f"hub_{tag}_{model.name}")(model.program.fn)


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
    graph = hub_graph()
    check_against_torch(MODELS["gat"], graph, dtype=torch.float32, tol=2e-5, inputs=gat_inputs(graph, heads, f),
                        program=fresh(MODELS["gat"], f"wide{heads}x{f}"))


@pytest.mark.parametrize("name", ["gcn", "sage_mean", "gin", "max_agg", "min_agg", "out_edges"])
def test_hub_path_sums_and_extremes_on_a_large_hub(name, monkeypatch):
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    model = MODELS[name]
    check_against_torch(model, hub_graph(), program=fresh(model, "large"))


def test_hub_path_softmax_of_huge_logits_is_finite_and_deterministic(monkeypatch):
    """Scores of +-1e4: the partials' maxima differ by far more than exp can bridge, so the
    combine must rescale by exactly 1 at the largest and underflow to 0 elsewhere."""
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    graph = hub_graph()
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


# ---- parameter gradients: hubs cut into pieces -------------------------------------------------

def _outputs_and_grads(prog, graph, inputs, backend="fused"):
    """The output and the gradient of every input, for a fixed random weighting of the output."""
    t = {k: v.detach().clone().requires_grad_() for k, v in inputs.items()}
    out = prog(graph, backend=backend, **t)
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(3), dtype=out.dtype)
    return (out,) + torch.autograd.grad((out * weight).sum(), list(t.values()))


def _on_off_and_reference(fn, tag, graph, inputs, monkeypatch, hub_degree="4"):
    """Runs program function `fn` with the hub path (twice: bit for bit the same), without it
    and on the reference backend (plain torch), and checks they agree."""
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", hub_degree)
    on = ss.vertex_program(name=f"hub_{tag}_on")(fn)
    runs = [_outputs_and_grads(on, graph, inputs) for _ in range(2)]
    for a, b in zip(*runs):
        assert torch.equal(a, b)
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "0")
    off = _outputs_and_grads(ss.vertex_program(name=f"hub_{tag}_off")(fn), graph, inputs)
    ref = _outputs_and_grads(on, graph, inputs, backend="reference")
    for i, (a, b, r) in enumerate(zip(runs[0], off, ref)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12, msg=lambda m: f"result {i}, off: {m}")
        torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-10, msg=lambda m: f"result {i}, reference: {m}")
    return on


def _typed_graphs(graph_factory):
    return {"hub": hub_graph(typed=True), "mixed": graph_factory("typed_mixed"),
            "multi_edges": graph_factory("typed_multi_edges"), "no_edges": graph_factory("typed_no_edges")}


@pytest.mark.parametrize("graph_name", ["hub", "mixed", "multi_edges", "no_edges"])
@pytest.mark.parametrize("name", ["rgcn", "node_typed"])
def test_hub_pieces_of_parameter_gradients_match_plain_torch(name, graph_name, monkeypatch, graph_factory):
    """R-GCN's and the node-typed program's weight gradients (per-edge outer products into the
    chunks' partial sums, the centre's own term once) with hubs cut into pieces."""
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "4")
    model, graph = MODELS[name], _typed_graphs(graph_factory)[graph_name]
    check_against_torch(model, graph, program=fresh(model, "pieces"))
    inputs = model.make_inputs(graph, dtype=torch.float64, ties=True)
    _on_off_and_reference(model.program.fn, f"pieces_{name}_{graph_name}", graph, inputs, monkeypatch)


def _layer_inputs(graph, kind, F=6, O=4, heads=2, seed=0):
    """Inputs of the seastar.nn programs: R-GCN per edge and per basis, HGT."""
    g = torch.Generator().manual_seed(seed)
    N, E, R = graph.num_nodes, graph.num_edges, graph.num_edge_types

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)
    if kind == "rgcn_typed_mean":
        return {"x": r(N, F), "W": r(R, F, O), "norm": r(E, 1)}
    if kind == "rgcn_typed_add":
        return {"x": r(N, F), "W": r(R, F, O)}
    if kind == "rgcn_basis_mean":  # RGCNConv._basis_forward's shapes
        return {"x": r(N, 1, F), "comp": r(R, 2, 1), "norm": r(E, 1)}
    if kind == "rgcn_basis_add":
        return {"x": r(N, 1, F), "comp": r(R, 2, 1)}
    hd = heads * 3
    S = torch.kron(torch.eye(heads, dtype=torch.float64), torch.ones(3, 1, dtype=torch.float64))
    return {"k": r(N, hd), "q": r(N, hd), "val": r(N, hd), "Watt": r(R, hd, hd), "Wmsg": r(R, hd, hd),
            "mu": r(R, heads), "S": S, "ST": S.t().contiguous()}


@pytest.mark.parametrize("graph_name", ["hub", "mixed"])
@pytest.mark.parametrize("kind", ["rgcn_typed_mean", "rgcn_typed_add", "rgcn_basis_mean", "rgcn_basis_add",
                                  "hgt_typed"])
def test_hub_path_of_typed_layer_programs(kind, graph_name, monkeypatch, graph_factory):
    """The seastar.nn layers' typed programs (RGCNConv per edge and per basis, HGTConv):
    parameter gradients with hubs in pieces, HGT's softmax on the block hub path, and its
    parameter-gradient kernels (which also have accumulators) on hub workers."""
    from seastar.nn import hgt_conv, rgcn_conv
    fn = {"rgcn_typed_mean": rgcn_conv.rgcn_typed_weighted, "rgcn_typed_add": rgcn_conv.rgcn_typed_sum,
          "rgcn_basis_mean": rgcn_conv.rgcn_basis_weighted, "rgcn_basis_add": rgcn_conv.rgcn_basis_sum,
          "hgt_typed": hgt_conv.hgt_typed}[kind].fn
    graph = _typed_graphs(graph_factory)[graph_name]
    _on_off_and_reference(fn, f"layer_{kind}_{graph_name}", graph, _layer_inputs(graph, kind), monkeypatch)


def test_which_kernels_cut_hubs_into_pieces(tmp_path, monkeypatch):
    """R-GCN's weight-gradient kernel takes pieces; its kernels without partial sums take the
    block hub path; with SEASTAR_CUDA_HUB_DEGREE=0 neither."""
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "4")
    graph = hub_graph(typed=True)
    model = MODELS["rgcn"]
    inputs = model.make_inputs(graph, dtype=torch.float64)
    bwd = _kernels(tmp_path, monkeypatch, fresh(model, "which_pieces"), graph, **inputs)["backward"]
    pieces = [k for k in bwd.values() if "q % PM" in k]
    assert len(pieces) == 1 and "if (lead)" in pieces[0] and "i += NB" not in pieces[0]
    assert any("sx::hub_count" in k and k.startswith("(512, ") for k in bwd.values())
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "0")
    off = _kernels(tmp_path / "off", monkeypatch, fresh(model, "which_pieces_off"), graph, **inputs)["backward"]
    assert not any("q % PM" in k or "sx::hub_count" in k for k in off.values())


def _scaled_attention(v, a, b):
    # a parameter in the edge scores (edge terms) and one scaling the centre's softmax sum (a
    # centre term that needs the combined accumulators): both gradients in one traversal
    scores = [ss.leaky_relu(e.src.el * a + v.er, 0.2) for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return b * sum(al * e.src.h for al, e in zip(alpha, v.in_edges()))


@pytest.mark.parametrize("graph_name", ["large_hub", "hub", "mixed"])
def test_hub_workers_add_edge_terms_per_slice_and_centre_terms_once(graph_name, tmp_path, monkeypatch,
                                                                  graph_factory):
    """Partial sums and accumulators in one traversal: hubs go to hub workers, whose groups add
    their slices' edge terms into partial sums of their own and whose first group adds the
    centre's term (``lead``): against plain torch, the hub path off, and bit for bit twice."""
    graph = hub_graph() if graph_name == "large_hub" else graph_factory(graph_name)
    g = torch.Generator().manual_seed(5)
    N = graph.num_nodes

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)
    inputs = {"el": r(N, 1), "er": r(N, 1), "h": r(N, 3), "a": r(1), "b": r(3)}
    _on_off_and_reference(_scaled_attention, f"workers_{graph_name}", graph, inputs, monkeypatch)
    if graph_name == "large_hub":
        monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "4")
        bwd = _kernels(tmp_path, monkeypatch, ss.vertex_program(name="hub_workers_src")(_scaled_attention), graph,
                       **inputs)["backward"]
        workers = [k for k in bwd.values() if "w + HW" in k]
        assert workers and all("if (lead)" in k and "NH + b" in k for k in workers)


# ---- argmax / argmin: (extreme, edge id) pairs combined ------------------------------------------

def _first_ties(v):
    # ties="first" differentiates through the edge id of the extreme (agg_argmax / agg_argmin)
    return ss.max((e.src.h for e in v.in_edges()), ties="first") - ss.min((e.src.k * e.w for e in v.in_edges()),
                                                                          ties="first")


@pytest.mark.parametrize("graph_name", ["large_hub", "hub", "mixed"])
def test_hub_path_argmax_argmin_keep_the_first_edge_of_a_tie(graph_name, monkeypatch, graph_factory):
    """Values in {0, 1, 2}: most of a hub's edges tie, across the groups' slices; the gradient
    goes to the edge of the smallest id, as without the split."""
    graph = hub_graph() if graph_name == "large_hub" else graph_factory(graph_name)
    g = torch.Generator().manual_seed(4)
    N, E = graph.num_nodes, graph.num_edges
    inputs = {k: torch.randint(0, 3, shape, generator=g).double()
              for k, shape in (("h", (N, 3)), ("k", (N, 3)), ("w", (E, 1)))}
    _on_off_and_reference(_first_ties, f"first_ties_{graph_name}", graph, inputs, monkeypatch)


def test_argmax_kernels_take_the_hub_path(tmp_path, monkeypatch):
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "4")
    graph = hub_graph()
    inputs = {"h": torch.randn(graph.num_nodes, 3, dtype=torch.float64),
              "k": torch.randn(graph.num_nodes, 3, dtype=torch.float64),
              "w": torch.randn(graph.num_edges, 1, dtype=torch.float64)}
    prog = ss.vertex_program(name="hub_which_first_ties")(_first_ties)
    bwd = _kernels(tmp_path, monkeypatch, prog, graph, **inputs)["backward"]  # the backward finds the edge ids
    assert any("best" in k and "sx::hub_count" in k and "wi < id" in k for k in bwd.values())
