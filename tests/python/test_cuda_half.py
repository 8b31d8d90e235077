"""float16 and bfloat16 on the CUDA kernels, run through the host emulator (SEASTAR_CUDA_EMULATE=1):
16-bit tensors are the kernels' storage, read into float32 and stored back rounded to nearest
even, so every sum, softmax and product accumulates in float32. Checked against plain torch in
float32 on the same (rounded) inputs, to the precision of the stored result; max/min gradients
against torch in the 16-bit type itself, whose ties are those of the stored values. The
conversions themselves against torch's, bit for bit, over every float16 and many float32 values.
On the CPU without the emulator, 16-bit inputs are refused with the reason. tests/gpu/ checks
the seastar.nn layers on a GPU against PyG in float32.
"""
from __future__ import annotations

import pytest
import torch

import seastar as ss
from models import MODELS

HALF = [torch.float16, torch.bfloat16]
# relative to the result's largest magnitude: a few units of the 16-bit type's last place (the
# stored output rounds once; the inputs' rounding is shared with the reference)
TOL = {torch.float16: 4e-3, torch.bfloat16: 3e-2}


@pytest.fixture
def emulate(monkeypatch):
    monkeypatch.setenv("SEASTAR_CUDA_EMULATE", "1")


def _close(got, want, dtype, what):
    scale = max(want.abs().max().item(), 1e-30)
    err = (got.float() - want.float()).abs().max().item()
    assert err <= TOL[dtype] * scale, f"{what}: max error {err:.3g} over a scale of {scale:.3g} ({dtype})"


@pytest.mark.parametrize("dtype", HALF, ids=["f16", "bf16"])
@pytest.mark.parametrize("name", ["gcn", "gat", "sage_mean", "gin", "appnp_step", "rgcn", "out_edges", "reuse_agg"])
def test_half_storage_matches_float32_torch(name, dtype, emulate, graph_factory):
    model = MODELS[name]
    graph = graph_factory("typed_mixed" if model.typed else "mixed")
    base = model.make_inputs(graph, seed=1, dtype=torch.float32)
    inputs = {k: v.to(dtype).requires_grad_() for k, v in base.items()}
    out = model.program(graph, backend="fused", **inputs)
    assert out.dtype == dtype
    ref_inputs = {k: v.to(dtype).float().requires_grad_() for k, v in base.items()}
    ref = model.torch_fn(graph, **ref_inputs)
    _close(out, ref, dtype, "forward")
    weight = torch.randn(ref.shape, generator=torch.Generator().manual_seed(3))
    got = torch.autograd.grad((out.float() * weight).sum(), list(inputs.values()), allow_unused=True)
    exp = torch.autograd.grad((ref * weight).sum(), list(ref_inputs.values()), allow_unused=True)
    for k, g, e in zip(inputs, got, exp):
        if e is None:
            continue
        assert g is not None and g.dtype == dtype, k
        _close(g, e, dtype, f"d/d{k}")


@pytest.mark.parametrize("dtype", HALF, ids=["f16", "bf16"])
@pytest.mark.parametrize("name", ["max_agg", "min_agg"])
def test_half_extremes_split_ties_of_the_stored_values(name, dtype, emulate, graph_factory):
    """Messages that differ in float32 but round to one 16-bit value are tied: as torch in that type."""
    model = MODELS[name]
    graph = graph_factory("hub")
    base = model.make_inputs(graph, seed=2, dtype=torch.float32)
    inputs = {k: v.to(dtype).requires_grad_() for k, v in base.items()}
    out = model.program(graph, backend="fused", **inputs)
    ref_inputs = {k: v.to(dtype).requires_grad_() for k, v in base.items()}
    ref = model.torch_fn(graph, **ref_inputs)  # the messages (products of 16-bit values) round once, as ours
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    gout = torch.randn(ref.shape, generator=torch.Generator().manual_seed(4)).to(dtype)
    got = torch.autograd.grad(out, list(inputs.values()), gout)
    exp = torch.autograd.grad(ref, list(ref_inputs.values()), gout)
    for k, g, e in zip(inputs, got, exp):
        _close(g, e, dtype, f"d/d{k}")


def test_half_gat_wide_with_hub_path(emulate, monkeypatch):
    """4 heads x 16 in float16 with the hub path (groups' partials combined in float32)."""
    monkeypatch.setenv("SEASTAR_CUDA_HUB_DEGREE", "4")
    graph = ss.Graph.from_edge_index(torch.stack([torch.randint(0, 40, (300,), generator=torch.Generator().manual_seed(0)),
                                                  torch.cat([torch.zeros(100, dtype=torch.long),
                                                             torch.randint(0, 40, (200,),
                                                                           generator=torch.Generator().manual_seed(1))])]),
                                     num_nodes=44)
    g = torch.Generator().manual_seed(5)
    base = {"h": torch.randn(44, 4, 16, generator=g), "el": torch.randn(44, 4, 1, generator=g),
            "er": torch.randn(44, 4, 1, generator=g)}
    prog = ss.vertex_program(name="half_hub_gat")(MODELS["gat"].program.fn)
    out = prog(graph, backend="fused", **{k: v.half() for k, v in base.items()})
    _close(out, MODELS["gat"].torch_fn(graph, **{k: v.half().float() for k, v in base.items()}), torch.float16, "gat")


def test_16_bit_inputs_on_the_cpu_are_refused_with_the_reason(monkeypatch, graph_factory):
    monkeypatch.delenv("SEASTAR_CUDA_EMULATE", raising=False)
    graph = graph_factory("mixed")
    model = MODELS["gcn"]
    inputs = {k: v.half() for k, v in model.make_inputs(graph).items()}
    with pytest.raises(NotImplementedError, match="run in the CUDA kernels .float32 accumulation.*pass float32"):
        model.program(graph, backend="fused", **inputs)
    # the default backend falls back to the reference (torch) on the CPU
    out = model.program(graph, **inputs)
    assert out.dtype == torch.float16


def _scaled(c):
    @ss.vertex_program(name=f"half_scale_{str(c).replace('.', '_')}")
    def scale(v):
        return v.x * c

    return scale


@pytest.mark.parametrize("dtype", HALF, ids=["f16", "bf16"])
def test_conversions_round_as_torch(dtype, emulate):
    """Every float16 / bfloat16 bit pattern read and stored back unchanged (NaNs stay NaN), and
    every one of them scaled in float32 and stored rounded exactly as torch rounds the same
    float32 products: subnormal results, halfway cases, overflow to infinity."""
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    graph = ss.Graph.from_edge_index(torch.zeros(2, 0, dtype=torch.long), num_nodes=len(every))
    nan = torch.isnan(every.float())
    for c in (1.0, 0.3, 3.0, 1e-3):
        out = _scaled(c)(graph, backend="fused", x=every)
        want = (every.float() * torch.tensor(c, dtype=torch.float32)).to(dtype)
        same = (out.view(torch.int16) == want.view(torch.int16)) | (nan & torch.isnan(out.float()))
        assert bool(same.all()), (f"x * {c}: {int((~same).sum())} of 65536 {dtype} values rounded unlike torch, "
                                  f"e.g. {every[~same][:3].tolist()} -> {out[~same][:3].tolist()}, "
                                  f"torch {want[~same][:3].tolist()}")
