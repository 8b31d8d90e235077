"""Graphs and inputs for the tests of the CUDA traversals' hub path (test_cuda_hub_split.py,
test_cuda_mapping_settings.py): one large hub beside the usual small vertices."""
from __future__ import annotations

import torch

import seastar as ss


def hub_graph(hub_degree=150, n=60, seed=0, typed=False):
    """A hub with `hub_degree` in-edges (multi-edges and a loop among them), a vertex with one
    edge, isolated vertices and a sprinkle of random edges; `typed`: edge and node types too."""
    g = torch.Generator().manual_seed(seed)
    hub_src = torch.randint(0, n - 5, (hub_degree,), generator=g)
    hub_src[:3] = 0  # a loop, twice more as multi-edges
    rand = torch.randint(0, n - 5, (2, 3 * n), generator=g)
    src = torch.cat([hub_src, rand[0], torch.tensor([7])])
    dst = torch.cat([torch.zeros(hub_degree, dtype=torch.long), rand[1], torch.tensor([n - 5])])
    if not typed:
        return ss.Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n)  # n-4 .. n-1 isolated
    return ss.Graph.from_edge_index(torch.stack([src, dst]), num_nodes=n, num_edge_types=3, num_node_types=2,
                                    edge_type=torch.randint(0, 3, (len(src),), generator=g),
                                    node_type=torch.randint(0, 2, (n,), generator=g))


def gat_inputs(graph, heads, f, seed=None):
    """Float32 inputs of the zoo's GAT program at a real width: `heads` heads of `f` features."""
    g = torch.Generator().manual_seed(heads * f if seed is None else seed)
    return {"h": torch.randn(graph.num_nodes, heads, f, generator=g),
            "el": torch.randn(graph.num_nodes, heads, 1, generator=g),
            "er": torch.randn(graph.num_nodes, heads, 1, generator=g)}
