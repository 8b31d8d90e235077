"""``seastar.reorder_graph`` (python/seastar/reorder.py): on every tricky graph, programs on the
reordered graph, with their inputs mapped in and results mapped back, equal the same programs on
the original graph (float64; forward exactly for in-edge sums when the edges go in destination or
their original order, which keeps each vertex's in-edge order; otherwise and for gradients to 1e-12), for each vertex and edge order; the orders are what they say (destination
order makes the CSC edge ids the identity); types move with their vertices and edges; bad
arguments are refused by name."""
from __future__ import annotations

import pytest
import torch

import seastar as ss

NODE_CHOICES = [None, "degree", "random"]
EDGE_CHOICES = ["dst", "src", None]


@ss.vertex_program
def weighted_sum(v):
    return sum(e.src.h * e.w for e in v.in_edges())


@ss.vertex_program
def attention(v):
    alpha = ss.softmax([ss.leaky_relu(e.src.el + v.er + e.w, 0.2) for e in v.in_edges()])
    return sum(a * e.src.h for a, e in zip(alpha, v.in_edges()))


@ss.vertex_program
def typed_sum(v, W, W0):
    return sum(e.src.h @ W[e.type] * e.w for e in v.in_edges()) + v.h @ W0[v.type]


def _nodes(choice, graph):
    if choice == "random":
        return torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(3))
    return choice


def _inputs(graph, seed=0):
    gen = torch.Generator().manual_seed(seed)
    n, e = graph.num_nodes, graph.num_edges
    return dict(h=torch.randn(n, 5, dtype=torch.float64, generator=gen),
                w=torch.randn(e, 1, dtype=torch.float64, generator=gen),
                el=torch.randn(n, 1, dtype=torch.float64, generator=gen),
                er=torch.randn(n, 1, dtype=torch.float64, generator=gen))


def _run(program, graph, tensors, map_in=None, map_out=None):
    leaves = {k: t.clone().requires_grad_(True) for k, t in tensors.items()}
    args = {k: map_in[k](t) for k, t in leaves.items()} if map_in else dict(leaves)
    out = program(graph, **args)
    out = map_out(out) if map_out else out
    out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape))
    return out.detach(), {k: t.grad for k, t in leaves.items()}


@pytest.mark.parametrize("edges", EDGE_CHOICES)
@pytest.mark.parametrize("nodes", NODE_CHOICES)
def test_results_mapped_back_equal_the_original_graphs(tricky_graph, nodes, edges):
    g = tricky_graph.graph
    r = ss.reorder_graph(g, nodes=_nodes(nodes, g), edges=edges)
    t = _inputs(g)
    map_in = {"h": r.vertices, "el": r.vertices, "er": r.vertices, "w": r.edges}
    for program, names in ((weighted_sum, ("h", "w")), (attention, ("h", "el", "er", "w"))):
        tensors = {k: t[k] for k in names}
        want, want_grads = _run(program, g, tensors)
        got, got_grads = _run(program, r.graph, tensors, map_in, r.original_vertices)
        if program is weighted_sum and edges != "src":  # each vertex adds its in-edges in the same order
            assert torch.equal(got, want), (tricky_graph.name, nodes, edges)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        for k in names:
            torch.testing.assert_close(got_grads[k], want_grads[k], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("nodes", NODE_CHOICES)
def test_typed_programs_and_types_move_with_their_vertices_and_edges(typed_graph, nodes):
    g = typed_graph.graph
    r = g.reorder(nodes=_nodes(nodes, g))
    ids = r.node_ids if r.node_ids is not None else torch.arange(g.num_nodes)
    assert torch.equal(r.graph.node_type.long(), g.node_type.long()[ids])
    for edges, slot in (("dst", "in_eid"), ("src", "out_eid")):  # by vertex, then type: the index's own order
        assert torch.equal(g.reorder(nodes=_nodes(nodes, g), edges=edges).graph.tensors()[slot].long(),
                           torch.arange(g.num_edges)), edges
    assert torch.equal(r.graph.edge_type.long(), g.edge_type.long()[r.edge_ids])
    assert (r.graph.num_node_types, r.graph.num_edge_types) == (g.num_node_types, g.num_edge_types)
    gen = torch.Generator().manual_seed(1)
    W = torch.randn(g.num_edge_types, 5, 3, dtype=torch.float64, generator=gen)
    W0 = torch.randn(g.num_node_types, 5, 3, dtype=torch.float64, generator=gen)
    t = {k: v for k, v in _inputs(g).items() if k in ("h", "w")}
    want, want_grads = _run(lambda graph, **a: typed_sum(graph, W=W, W0=W0, **a), g, t)
    got, got_grads = _run(lambda graph, **a: typed_sum(graph, W=W, W0=W0, **a), r.graph, t,
                          {"h": r.vertices, "w": r.edges}, r.original_vertices)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for k in t:
        torch.testing.assert_close(got_grads[k], want_grads[k], rtol=1e-12, atol=1e-12)


def test_orders_are_what_they_say(graph_factory):
    g = graph_factory("mixed")
    E, N = g.num_edges, g.num_nodes
    by_dst = g.reorder(edges="dst")
    assert torch.equal(by_dst.graph.tensors()["in_eid"].long(), torch.arange(E))  # in-edge reads stream
    assert by_dst.node_ids is None and torch.equal(by_dst.graph.edge_index, g.edge_index[:, by_dst.edge_ids])
    by_src = g.reorder(edges="src")
    assert torch.equal(by_src.graph.tensors()["out_eid"].long(), torch.arange(E))
    kept = g.reorder(edges=None)
    assert torch.equal(kept.edge_ids, torch.arange(E)) and torch.equal(kept.graph.edge_index, g.edge_index)
    hubs = g.reorder(nodes="degree", edges=None)
    deg = hubs.graph.in_degrees().long()
    assert torch.all(deg[:-1] >= deg[1:]) and sorted(hubs.node_ids.tolist()) == list(range(N))
    t = torch.randn(E, 3)
    assert torch.equal(by_dst.original_edges(by_dst.edges(t)), t)
    x = torch.randn(N, 2)
    assert torch.equal(hubs.original_vertices(hubs.vertices(x)), x)


def _check_destination_order(g):
    """``edges="dst"`` alone takes the in-edge index's slots instead of sorting: the same as a
    stable sort by (destination, edge type), and ``edge_ids`` is the caller's own tensor."""
    ei = g.edge_index.long()
    key = ei[1] * g.num_edge_types + g.edge_type.long() if g.has_edge_types else ei[1]
    want = torch.argsort(key, stable=True)
    r = g.reorder(edges="dst")
    assert torch.equal(r.edge_ids, want)
    assert torch.equal(r.graph.edge_index, ei[:, want])
    if g.has_edge_types:
        assert torch.equal(r.graph.edge_type.long(), g.edge_type.long()[want])
    r.edge_ids.fill_(0)  # not the graph's own in-edge ids
    assert torch.equal(g.tensors()["in_eid"].long(), want)


def test_destination_order_is_a_stable_sort_by_destination(tricky_graph):
    _check_destination_order(tricky_graph.graph)


def test_destination_order_is_a_stable_sort_by_destination_then_type(typed_graph):
    _check_destination_order(typed_graph.graph)


def test_bipartite_edges_only(graph_factory):
    ei = torch.tensor([[0, 3, 1, 2, 3, 0], [1, 0, 1, 0, 2, 2]])
    g = ss.Graph.from_edge_index(ei, num_nodes=(4, 3))
    r = g.reorder(edges="dst")
    assert r.graph.is_bipartite and (r.graph.num_src, r.graph.num_dst) == (4, 3)
    assert torch.equal(r.graph.edge_index, ei[:, torch.tensor([1, 3, 0, 2, 4, 5])])
    with pytest.raises(ValueError, match="bipartite"):
        g.reorder(nodes="degree")


def test_bad_arguments_are_refused_by_name(graph_factory):
    g = graph_factory("mixed")
    N = g.num_nodes
    with pytest.raises(ValueError, match="edges='csc'"):
        g.reorder(edges="csc")
    with pytest.raises(ValueError, match="nodes='rcm'"):
        g.reorder(nodes="rcm")
    with pytest.raises(ValueError, match="not a permutation"):
        g.reorder(nodes=torch.zeros(N, dtype=torch.long))
    with pytest.raises(ValueError, match="not a permutation"):
        g.reorder(nodes=torch.arange(N) + 1)
    with pytest.raises(ValueError, match="permutation of the"):
        g.reorder(nodes=torch.arange(N - 1))
    with pytest.raises(ValueError, match="permutation of the"):
        g.reorder(nodes=torch.arange(N, dtype=torch.float32))
    with pytest.raises(TypeError, match="seastar.Graph"):
        ss.reorder_graph(g.edge_index)
    r = g.reorder()
    with pytest.raises(ValueError, match=f"{g.num_edges} rows"):
        r.edges(torch.zeros(g.num_edges + 1))
    with pytest.raises(ValueError, match=f"{N} rows"):
        r.vertices(torch.zeros(N - 1, 2))
