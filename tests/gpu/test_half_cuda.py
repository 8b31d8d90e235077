"""float16 and bfloat16 on a GPU: seastar.nn layers in 16-bit against PyG's layers in float32 on
the same (rounded) inputs and weights, within half-precision tolerance. Skipped without a GPU
or PyG; run by tests/gpu/run.sh."""
from __future__ import annotations

import pytest
import torch

import seastar as ss
import seastar.nn as snn

pyg = pytest.importorskip("torch_geometric.nn")
pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    pytest.mark.skipif(not getattr(ss._C, "cuda_built", False), reason="Seastar was built without the CUDA backend"),
]
TOL = {torch.float16: 5e-3, torch.bfloat16: 4e-2}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("layer", ["GCNConv", "GATConv", "SAGEConv", "GINConv"])
def test_16_bit_layers_match_pyg_in_float32(layer, dtype):
    torch.manual_seed(0)
    n, e, f = 3000, 40000, 64
    dst = torch.cat([torch.randint(0, n, (e - 2000,)), torch.zeros(2000, dtype=torch.long)])  # a hub
    ei = torch.stack([torch.randint(0, n, (e,)), dst]).cuda()
    x = torch.randn(n, f, device="cuda").to(dtype)
    make = {"GCNConv": lambda m: m.GCNConv(f, f), "GATConv": lambda m: m.GATConv(f, f // 4, heads=4),
            "SAGEConv": lambda m: m.SAGEConv(f, f),
            "GINConv": lambda m: m.GINConv(torch.nn.Linear(f, f))}[layer]
    theirs = make(pyg).cuda()
    ours = make(snn).cuda()
    ours.load_state_dict(theirs.state_dict())
    with torch.no_grad():  # the same 16-bit weights on both sides
        for p in theirs.parameters():
            p.copy_(p.to(dtype).float())
    ours.load_state_dict(theirs.state_dict())
    ours = ours.to(dtype)
    want = theirs(x.float(), ei)
    got = ours(x, ei)
    assert got.dtype == dtype
    err = (got.float() - want).abs().max().item()
    assert err <= TOL[dtype] * want.abs().max().item(), f"{layer} {dtype}: max error {err}"
