"""The hazards of a sampled block (a bipartite graph whose destinations are its first sources),
shared by the tests of layers on blocks: (name, edge_index, num_src, num_dst)."""
from __future__ import annotations

import torch


def hazard_blocks():
    g = torch.Generator().manual_seed(5)
    cases = []
    ns, nd = 11, 4
    ei = torch.stack([torch.randint(0, ns, (30,), generator=g), torch.randint(0, nd, (30,), generator=g)])
    cases.append(("random", ei, ns, nd))
    # destination 3 has no in-edge; destination 0 has repeated neighbours (sampling with replacement)
    ei = torch.tensor([[5, 5, 5, 6, 7, 0, 1, 8, 9, 10], [0, 0, 0, 0, 1, 1, 2, 2, 2, 2]])
    cases.append(("isolated_and_repeated", ei, 11, 4))
    # one destination receives every edge of a hub source, plus self-loops at destinations
    ei = torch.tensor([[9] * 12 + [0, 1, 2] + [3, 4], [1] * 12 + [0, 1, 2] + [0, 2]])
    cases.append(("hub", ei, 10, 3))
    cases.append(("no_edges", torch.zeros(2, 0, dtype=torch.long), 6, 3))
    cases.append(("square_sizes", torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), 4, 4))
    return cases
