"""The torch-facing graph's tensors: ``edge_index`` is built once and shared (layers read it on
every call), and an in-place change to the shared tensor never reaches a later reader."""
import torch

import seastar as ss


def _graph():
    # a self loop, a multi-edge, a hub (0) and an isolated vertex (5)
    ei = torch.tensor([[0, 0, 0, 0, 1, 1, 3], [1, 2, 3, 0, 2, 2, 4]])
    return ei, ss.Graph.from_edge_index(ei, num_nodes=6)


def test_edge_index_is_the_input_built_once():
    ei, g = _graph()
    first = g.edge_index
    assert first.dtype == torch.int64 and torch.equal(first, ei)
    assert g.edge_index.data_ptr() == first.data_ptr()  # shared, not rebuilt per call


def test_an_in_place_change_is_not_seen_by_the_next_reader():
    ei, g = _graph()
    shared = g.edge_index
    shared[0].fill_(5)
    again = g.edge_index
    assert torch.equal(again, ei)
    assert again.data_ptr() != shared.data_ptr()


def test_layers_after_an_in_place_change_match_a_fresh_graph():
    ei, g = _graph()
    conv = ss.nn.SAGEConv(3, 2).double()
    x = torch.randn(6, 3, dtype=torch.float64)
    want = conv(ss.Graph.from_edge_index(ei, num_nodes=6), x)
    g.edge_index.mul_(0)
    torch.testing.assert_close(conv(g, x), want, rtol=0, atol=0)


def test_the_out_edge_index_is_built_only_for_a_pass_that_reads_it():
    """A graph sorts its out-edge index on first use: a layer whose input needs no gradient (a
    first layer) never has it built; a backward into the sources' features builds it once."""
    ei, g = _graph()
    conv = ss.nn.GINConv(torch.nn.Linear(3, 2)).double()
    x = torch.randn(6, 3, dtype=torch.float64)

    def has_out():
        return "out_ptr" in g._g.tensors("cpu", coo=False, out=False)

    conv(g, x).sum().backward()  # gradients for the weights only
    assert not has_out()
    xg = x.clone().requires_grad_(True)
    conv(g, xg).sum().backward()
    assert has_out()
    want = torch.zeros(6, 3, dtype=torch.float64)  # d/dx of sum(lin(x_v + sum_{u->v} x_u))
    ones = conv.nn.weight.sum(0)
    for s, d in ei.t().tolist():
        want[s] += ones
    want += ones
    torch.testing.assert_close(xg.grad, want, rtol=1e-12, atol=1e-12)
