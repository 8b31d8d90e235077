"""The CUDA thread mapping's settings, run through the host emulator (SEASTAR_CUDA_EMULATE=1):
SEASTAR_CUDA_GROUP_THREADS caps the threads per item below a block's width (each lane then holds
more of a value's elements), SEASTAR_CUDA_BLOCK_THREADS sets the threads of a block of such
groups, SEASTAR_CUDA_HUB_BLOCK_THREADS those of a hub-path traversal, SEASTAR_CUDA_VECTOR_ELEMS
how many consecutive elements a lane holds (read and written as one access, from buffers the
runtime aligns, copying a view at an odd offset). The device benchmark sweeps
them (benchmarks/sweep_launch.py), so every setting must compute what the defaults compute:
forward and every gradient of the zoo against plain torch in float64 on graphs with hubs,
isolated vertices, self loops and multi-edges, the hub path taken by most centres; GAT's online
softmax at real widths in float32; the generated source carries the mapping; a bad value is
refused by the variable's name.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
from hub_graphs import gat_inputs, hub_graph
from models import MODELS, check_against_torch

# each changes what the defaults give the zoo's kernels: one lane per item (every lane holds a
# whole value), two lanes in one-warp blocks, the widest blocks with the narrowest hub blocks,
# and hub blocks of 1,024 threads
SETTINGS = {
    "group1": {"SEASTAR_CUDA_GROUP_THREADS": "1"},
    "group2_block32": {"SEASTAR_CUDA_GROUP_THREADS": "2", "SEASTAR_CUDA_BLOCK_THREADS": "32"},
    "block1024_hub64": {"SEASTAR_CUDA_BLOCK_THREADS": "1024", "SEASTAR_CUDA_HUB_BLOCK_THREADS": "64"},
    "hub1024_group4": {"SEASTAR_CUDA_HUB_BLOCK_THREADS": "1024", "SEASTAR_CUDA_GROUP_THREADS": "4"},
}


@pytest.fixture(autouse=True)
def emulate(monkeypatch):
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "2")


def _apply(monkeypatch, setting):
    for name, value in SETTINGS[setting].items():
        monkeypatch.setenv(name, value)


def fresh(fn, tag):
    """A program of its own under the setting: variants are emitted once per program, so a
    program compiled under other settings would keep its kernels."""
    return ss.vertex_program(name=f"mapping_{tag}")(fn)


@pytest.mark.parametrize("graph_name", ["mixed", "typed_mixed"])
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_zoo_under_each_setting_matches_plain_torch(setting, name, graph_name, monkeypatch, graph_factory):
    model = MODELS[name]
    graph = graph_factory(graph_name)
    if model.typed and not graph.has_edge_types:
        pytest.skip("typed model on an untyped graph")
    _apply(monkeypatch, setting)
    check_against_torch(model, graph, program=fresh(model.program.fn, f"{setting}_{name}"))


@pytest.mark.parametrize("setting", ["group1", "hub1024_group4", "block1024_hub64"])
@pytest.mark.parametrize("heads,f", [(4, 16), (1, 64)])
def test_gat_at_real_widths_under_each_setting(setting, heads, f, monkeypatch):
    """Each lane holds 16 to 64 elements of a message with one lane per item, 4 lanes hold a
    head's 16 each; the hub's online-softmax partials are combined over 2 to 256 groups."""
    _apply(monkeypatch, setting)
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    graph = hub_graph()
    check_against_torch(MODELS["gat"], graph, dtype=torch.float32, tol=2e-5, inputs=gat_inputs(graph, heads, f),
                        program=fresh(MODELS["gat"].program.fn, f"wide_{setting}_{heads}x{f}"))


def _wide_inputs(model, graph, dtype, width=64, misalign=False):
    """The model's inputs with every per-vertex feature row `width` wide (GAT: 4 heads of
    width / 4); `misalign`: each such input a view one element into its storage."""
    if model.name == "gat":
        inputs = {k: v.to(dtype) for k, v in gat_inputs(graph, 4, width // 4).items()}
    else:
        g = torch.Generator().manual_seed(1)
        inputs = {k: (torch.randn(graph.num_nodes, width, generator=g, dtype=dtype)
                      if v.dim() == 2 and v.shape[0] == graph.num_nodes else v)
                  for k, v in model.make_inputs(graph, dtype=dtype).items()}
    if misalign:
        for k, v in inputs.items():
            if v.dim() >= 2 and v.shape[0] == graph.num_nodes:
                base = torch.empty(v.numel() + 1, dtype=dtype)
                inputs[k] = base[1:].view(v.shape).copy_(v)
                assert inputs[k].data_ptr() % 16 != 0
    return inputs


# vectors of 2 at one warp per item, of 4 at 16 lanes, and 4 vectors of 4 a lane at 4 lanes
VECTORS = {
    "vector2": {"SEASTAR_CUDA_VECTOR_ELEMS": "2"},
    "vector4_group16": {"SEASTAR_CUDA_VECTOR_ELEMS": "4", "SEASTAR_CUDA_GROUP_THREADS": "16"},
    "vector4_group4": {"SEASTAR_CUDA_VECTOR_ELEMS": "4", "SEASTAR_CUDA_GROUP_THREADS": "4"},
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", ["gcn", "gat", "sage_mean", "gin", "appnp_step", "max_agg", "out_edges"])
@pytest.mark.parametrize("setting", list(VECTORS))
def test_vectors_at_real_widths_match_plain_torch(setting, name, dtype, monkeypatch):
    """Width 64 on a 150-edge hub (the hub path on): forward and every gradient against plain
    torch, the hub's partials combined over the block's groups in the vector layout too."""
    for k, v in VECTORS[setting].items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "16")
    model = MODELS[name]
    graph = hub_graph()
    tol = 1e-10 if dtype == torch.float64 else 2e-5
    check_against_torch(model, graph, dtype=dtype, tol=tol, inputs=_wide_inputs(model, graph, dtype),
                        program=fresh(model.program.fn, f"vec_{setting}_{name}"))


@pytest.mark.parametrize("name", ["gcn", "gat"])
def test_vectors_on_views_at_odd_offsets(name, monkeypatch):
    """Inputs one element into their storage are not 16-byte aligned: the runtime copies them
    before kernels that read vectors, and the gradients still reach the views."""
    monkeypatch.setenv("SEASTAR_CUDA_VECTOR_ELEMS", "4")
    monkeypatch.setenv("SEASTAR_CUDA_GROUP_THREADS", "16")
    model = MODELS[name]
    graph = hub_graph()
    check_against_torch(model, graph, dtype=torch.float32, tol=2e-5,
                        inputs=_wide_inputs(model, graph, torch.float32, misalign=True),
                        program=fresh(model.program.fn, f"vec_view_{name}"))


def _kernel_headers(tmp_path, monkeypatch, prog, graph, inputs):
    """The comment line and the launch bounds of every kernel of the program's forward CUDA."""
    monkeypatch.setenv("SEASTAR_DUMP_DIR", str(tmp_path))
    prog(graph, backend="fused", **inputs)
    (cu,) = [p for p in tmp_path.rglob("*.cu") if "forward" in p.name]
    lines = cu.read_text().splitlines()
    return [(a, b) for a, b in zip(lines, lines[1:]) if b.startswith('extern "C" __global__')]


def test_the_source_carries_the_mapping(tmp_path, monkeypatch, graph_factory):
    """GCN at width 64: one warp of 32 lanes per centre by default; capped at 8 lanes in blocks
    of 128, each lane holds 8 elements; hub blocks of 1,024 threads keep 1,536 resident threads
    (one block) in their launch bounds."""
    graph = graph_factory("mixed")
    g = torch.Generator().manual_seed(0)
    inputs = {"h": torch.randn(graph.num_nodes, 64, generator=g), "w": torch.randn(graph.num_edges, 1, generator=g)}
    gcn = MODELS["gcn"].program.fn
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "0")
    default = _kernel_headers(tmp_path / "default", monkeypatch, fresh(gcn, "src_default"), graph, inputs)
    assert any("32 threads per item, 256 per block" in c and "(2 per lane)" in c for c, _ in default)
    monkeypatch.setenv("SEASTAR_CUDA_GROUP_THREADS", "8")
    monkeypatch.setenv("SEASTAR_CUDA_BLOCK_THREADS", "128")
    capped = _kernel_headers(tmp_path / "capped", monkeypatch, fresh(gcn, "src_capped"), graph, inputs)
    assert any("8 threads per item, 128 per block" in c and "(8 per lane)" in c for c, _ in capped)
    assert not any("32 threads per item" in c for c, _ in capped)
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "4")
    monkeypatch.setenv("SEASTAR_CUDA_HUB_BLOCK_THREADS", "1024")
    hub = _kernel_headers(tmp_path / "hub", monkeypatch, fresh(gcn, "src_hub"), graph, inputs)
    assert any("8 threads per item, 1024 per block" in c and "__launch_bounds__(1024, 1)" in k for c, k in hub)
    assert not any("vectors" in c for c, _ in hub)
    monkeypatch.setenv("SEASTAR_CUDA_VECTOR_ELEMS", "4")
    vec = _kernel_headers(tmp_path / "vec", monkeypatch, fresh(gcn, "src_vec"), graph, inputs)
    assert any("(8 per lane, in vectors of 4)" in c for c, _ in vec)
    cu = next(p for p in (tmp_path / "vec").rglob("*.cu") if "forward" in p.name).read_text()
    assert "const int64_t k = (int64_t)(t / 4) * (GT * 4) + lane * 4 + t % 4" in cu
    assert "sx::assume_aligned<16>(args.B[" in cu
    with torch.no_grad():
        ref = MODELS["gcn"].torch_fn(graph, **{k: v.double() for k, v in inputs.items()})
        out = fresh(gcn, "src_hub")(graph, backend="fused", **inputs)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,value,message", [
    ("SEASTAR_CUDA_GROUP_THREADS", "12", "SEASTAR_CUDA_GROUP_THREADS must be a power of two from 1 to 32, got 12"),
    ("SEASTAR_CUDA_GROUP_THREADS", "64", "SEASTAR_CUDA_GROUP_THREADS must be a power of two from 1 to 32, got 64"),
    ("SEASTAR_CUDA_GROUP_THREADS", "many", "SEASTAR_CUDA_GROUP_THREADS must be a power of two.*'many'"),
    ("SEASTAR_CUDA_BLOCK_THREADS", "48", "SEASTAR_CUDA_BLOCK_THREADS must be a multiple of 32 from 32 to 1024, got 48"),
    ("SEASTAR_CUDA_BLOCK_THREADS", "4096", "SEASTAR_CUDA_BLOCK_THREADS must be a multiple of 32.*got 4096"),
    ("SEASTAR_CUDA_BLOCK_THREADS", "-32", "SEASTAR_CUDA_BLOCK_THREADS must be a multiple of 32.*'-32'"),
    ("SEASTAR_CUDA_HUB_BLOCK_THREADS", "32", "SEASTAR_CUDA_HUB_BLOCK_THREADS must be a multiple of 32 from 64"),
    ("SEASTAR_CUDA_HUB_BLOCK_THREADS", "99999999999999999999", "SEASTAR_CUDA_HUB_BLOCK_THREADS must be"),
    ("SEASTAR_CUDA_VECTOR_ELEMS", "8", "SEASTAR_CUDA_VECTOR_ELEMS must be 1, 2 or 4, got 8"),
])
def test_bad_settings_are_refused_by_name(name, value, message, monkeypatch, graph_factory):
    monkeypatch.setenv(name, value)
    model = MODELS["gcn"]
    graph = graph_factory("mixed")
    with pytest.raises(ValueError, match=message):
        fresh(model.program.fn, f"bad_{name}_{value}")(graph, backend="fused", **model.make_inputs(graph))
