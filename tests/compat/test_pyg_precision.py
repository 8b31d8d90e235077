"""float16 / bfloat16: seastar computes in float32 and returns the input's dtype; the result is
PyG's float32 result (on the same rounded inputs and parameters) within half precision."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn

import seastar.nn as snn
from pyg_compare import NUM_NODES, hazard_edges, randomise

F = 6
TOLS = {torch.float16: dict(rtol=5e-3, atol=5e-3), torch.bfloat16: dict(rtol=4e-2, atol=4e-2)}
LAYERS = {
    "gcn": lambda m: m.GCNConv(F, 4),
    "gat": lambda m: m.GATConv(F, 2, heads=2),
    "sage": lambda m: m.SAGEConv(F, 4, aggr="max"),
    "gin": lambda m: m.GINConv(torch.nn.Linear(F, 4), train_eps=True),
    "appnp": lambda m: m.APPNP(K=2, alpha=0.2),
}


@pytest.mark.parametrize("half_params", [False, True], ids=["float32_params", "half_params"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_half_precision(name, dtype, half_params):
    torch.manual_seed(0)
    theirs = randomise(LAYERS[name](pnn))
    ours = LAYERS[name](snn)
    ours.load_state_dict(theirs.state_dict())
    if half_params:
        ours = ours.to(dtype)
        theirs.load_state_dict({k: v.to(dtype).float() for k, v in ours.state_dict().items()})
    x = torch.randn(NUM_NODES, F).to(dtype).requires_grad_()
    out = ours(x, hazard_edges())
    assert out.dtype == dtype
    expect = theirs(x.detach().float(), hazard_edges())
    torch.testing.assert_close(out.float(), expect, **TOLS[dtype])
    out.float().sum().backward()
    assert x.grad is not None and x.grad.dtype == dtype
    for p in ours.parameters():
        assert p.grad is None or p.grad.dtype == p.dtype


def test_rgcn_and_hgt_half_precision():
    ei = hazard_edges()
    t = torch.arange(ei.shape[1]) % 3
    torch.manual_seed(0)
    theirs = randomise(pnn.RGCNConv(F, 4, 3, num_bases=2))
    ours = snn.RGCNConv(F, 4, 3, num_bases=2)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(NUM_NODES, F).half()
    out = ours(x, ei, t)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.float(), theirs(x.float(), ei, t), **TOLS[torch.float16])
    md = (["a", "b"], [("a", "to", "b"), ("b", "to", "a")])
    xd = {"a": torch.randn(5, F).bfloat16(), "b": torch.randn(4, F).bfloat16()}
    ed = {("a", "to", "b"): torch.tensor([[0, 1, 4], [0, 3, 3]]), ("b", "to", "a"): torch.tensor([[0, 2], [1, 1]])}
    theirs = pnn.HGTConv(F, 4, md, heads=2)
    ours = snn.HGTConv(F, 4, md, heads=2)
    ours.load_state_dict(theirs.state_dict())
    got, ref = ours(xd, ed), theirs({k: v.float() for k, v in xd.items()}, ed)
    for k in ref:
        assert got[k].dtype == torch.bfloat16
        torch.testing.assert_close(got[k].float(), ref[k], **TOLS[torch.bfloat16])
