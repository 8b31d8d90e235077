"""HGTConv (PyG's metadata form) and HeteroConv (keyed by edge types) against PyG's: same and
different input widths, lazy widths, missing node and edge types, sparse adjacencies, HeteroData
objects, every aggregation of HeteroConv with edge-level keyword dicts."""
import pytest

pytest.importorskip("torch_geometric", reason="PyTorch Geometric is not installed "
                                              "(pip install -r tests/compat/requirements.txt)")

import torch
import torch_geometric.nn as pnn
from torch_geometric.data import HeteroData
from torch_geometric.utils import to_torch_csr_tensor

import seastar.nn as snn
from pyg_compare import DT, assert_same, features, randomise, seeded


def hetero_data():
    """author (4) <-> paper (6) with duplicate edges and a paper without in-edges, paper -> paper
    with self loops, and an institution type (3) that only sends."""
    g = torch.Generator().manual_seed(7)
    data = HeteroData()
    data["author"].x = features(4, 6, seed=1)
    data["paper"].x = features(6, 8, seed=2)
    data["institution"].x = features(3, 8, seed=3)
    writes = torch.tensor([[0, 0, 1, 2, 3, 3, 1, 0], [0, 1, 1, 2, 3, 4, 1, 0]])
    data["author", "writes", "paper"].edge_index = writes
    data["paper", "written_by", "author"].edge_index = writes.flip(0)
    cites = torch.randint(0, 6, (2, 12), generator=g)
    cites[:, :2] = torch.tensor([[2, 4], [2, 4]])
    data["paper", "cites", "paper"].edge_index = cites
    data["institution", "employs", "author"].edge_index = torch.tensor([[0, 1, 1, 2], [0, 0, 2, 3]])
    return data


def hgt(in_channels, out=8, heads=2, data=None):
    data = data or hetero_data()
    md = data.metadata()
    return (seeded(lambda: snn.HGTConv(in_channels, out, md, heads=heads)).to(DT),
            randomise(seeded(lambda: pnn.HGTConv(in_channels, out, md, heads=heads)).to(DT)))


def dict_call(layer, *xs):
    """xs: the node features then the edge indices, in hetero_data()'s key order."""
    data = hetero_data()
    nt, et = data.node_types, data.edge_types
    return layer(dict(zip(nt, xs[:len(nt)])), dict(zip(et, xs[len(nt):])))


def dict_inputs(data=None):
    data = data or hetero_data()
    return [data[t].x for t in data.node_types] + [data[t].edge_index for t in data.edge_types]


@pytest.mark.parametrize("in_channels", [-1, "dict"], ids=["lazy", "per_type"])
@pytest.mark.parametrize("heads", [1, 2])
def test_hgt(in_channels, heads):
    data = hetero_data()
    if in_channels == "dict":
        in_channels = {t: data[t].x.shape[1] for t in data.node_types}
    ours, theirs = hgt(in_channels, heads=heads)
    theirs(data.x_dict, data.edge_index_dict)  # materialise PyG's lazy weights
    randomise(theirs)
    out, _ = assert_same(ours, theirs, dict_inputs(), call=dict_call)
    assert set(out) == {"author", "paper"}  # institution is no edge type's destination
    assert str(ours) == str(theirs) == "HGTConv(-1, 8, heads=%d)" % heads


def test_hgt_same_width_has_the_gated_residual():
    data = hetero_data()
    data["author"].x = features(4, 8, seed=1)
    ours, theirs = hgt(8, data=data)
    assert_same(ours, theirs, dict_inputs(data), call=dict_call)


def test_hgt_sparse_adjacency_and_hetero_data():
    data = hetero_data()
    ours, theirs = hgt(-1)
    theirs(data.x_dict, data.edge_index_dict)
    ours.load_state_dict(theirs.state_dict())
    adj = {et: to_torch_csr_tensor(ei.flip(0), size=(data[et[-1]].num_nodes, data[et[0]].num_nodes))
           for et, ei in data.edge_index_dict.items()}
    for got, ref in ((ours(data.x_dict, adj), theirs(data.x_dict, adj)),
                     (ours(data), theirs(data.x_dict, data.edge_index_dict))):
        assert set(got) == set(ref)
        for k in ref:
            torch.testing.assert_close(got[k], ref[k], rtol=1e-10, atol=1e-10)


def test_hgt_missing_types():
    """Node types of the metadata absent from x_dict and edge types absent from the inputs."""
    data = hetero_data()
    md = (data.node_types + ["venue"], data.edge_types + [("venue", "hosts", "paper")])
    ours = seeded(lambda: snn.HGTConv(-1, 8, md, heads=2)).to(DT)
    theirs = seeded(lambda: pnn.HGTConv(-1, 8, md, heads=2)).to(DT)
    x = dict(data.x_dict)
    edges = {k: v for k, v in data.edge_index_dict.items() if k[1] != "cites"}
    ref = theirs(x, edges)
    ours(x, edges)
    ours.load_state_dict(theirs.state_dict())
    got = ours(x, edges)
    assert set(got) == set(ref)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-10, atol=1e-10)


def hetero_convs(m, aggr):
    return m.HeteroConv({
        ("paper", "cites", "paper"): m.GCNConv(-1, 8),
        ("author", "writes", "paper"): m.SAGEConv((-1, -1), 8),
        ("paper", "written_by", "author"): m.GATConv((-1, -1), 8, edge_dim=3, add_self_loops=False),
        ("institution", "employs", "author"): m.SAGEConv((-1, -1), 8, aggr="max"),
    }, aggr=aggr)


@pytest.mark.parametrize("aggr", ["sum", "mean", "max", "min", "cat", None])
def test_hetero_conv(aggr):
    data = hetero_data()
    data["paper", "written_by", "author"].edge_attr = features(8, 3, seed=9)
    data["paper", "cites", "paper"].edge_weight = torch.rand(12, dtype=DT) + 0.1
    theirs = seeded(lambda: hetero_convs(pnn, aggr)).to(DT)
    ours = seeded(lambda: hetero_convs(snn, aggr)).to(DT)
    args = (data.x_dict, data.edge_index_dict, data.edge_attr_dict)
    kwargs = dict(edge_weight_dict=data.edge_weight_dict)
    theirs(*args, **kwargs)
    randomise(theirs)
    ours(*args, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    ref, got = theirs(*args, **kwargs), ours(*args, **kwargs)
    assert set(got) == set(ref) and str(ours) == str(theirs) == "HeteroConv(num_relations=4)"
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], rtol=1e-10, atol=1e-10)
    loss_ref = sum((v * (i + 1)).sum() for i, v in enumerate(ref.values()))
    loss_got = sum((v * (i + 1)).sum() for i, v in enumerate(got.values()))
    g_ref = torch.autograd.grad(loss_ref, list(theirs.parameters()))
    g_got = torch.autograd.grad(loss_got, list(ours.parameters()))
    for (name, _), a, b in zip(ours.named_parameters(), g_got, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=lambda m: f"gradient of {name}: {m}")


def test_hetero_conv_errors():
    with pytest.raises(ValueError, match="incorrect message passing"):
        snn.HeteroConv({("a", "to", "b"): snn.GATConv(4, 4)})
    conv = snn.HeteroConv({("a", "to", "a"): snn.GCNConv(4, 4)})
    with pytest.raises(ValueError, match="need to end with '_dict'"):
        conv({"a": torch.randn(3, 4)}, {("a", "to", "a"): torch.tensor([[0], [1]])}, edge_weight={})
