"""Seeded synthetic graphs for tests and benchmarks.

Every generator draws from ``numpy.random.Generator(PCG64(seed))``, so the same arguments
give the same graph on every machine, and is vectorised so that millions of edges take
seconds. Graph generators return a :class:`SyntheticGraph` (plain tensors plus a seastar
``Graph`` in ``.graph``); :func:`planted_typed_classification` returns a
:class:`~seastar.datasets.planetoid.NodeClassificationDataset` with the typed fields set.
Pass ``build_graph=False`` to get tensors only (``.graph`` is then ``None``; call
:meth:`SyntheticGraph.to_graph` later if needed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import torch

from ._common import Dataset, build_graph as _build_graph
from .planetoid import NodeClassificationDataset
from .. import _C
from ..graph import Graph


@dataclass
class SyntheticGraph(Dataset):
    """``edge_index`` int64 ``[2, E]`` (row 0 = source); the typed fields are int64 or None."""

    name: str
    num_nodes: int
    edge_index: torch.Tensor
    node_type: Optional[torch.Tensor] = None
    edge_type: Optional[torch.Tensor] = None
    num_node_types: Optional[int] = None
    num_edge_types: Optional[int] = None
    graph: Any = None

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def to_graph(self):
        """Build a new seastar ``Graph`` from the tensors (typed when types are set)."""
        typed = {}
        if self.node_type is not None:
            typed.update(node_type=self.node_type, num_node_types=self.num_node_types)
        if self.edge_type is not None:
            typed.update(edge_type=self.edge_type, num_edge_types=self.num_edge_types)
        return _build_graph(self.edge_index, self.num_nodes, **typed)


def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _finish(g: SyntheticGraph, build_graph: bool) -> SyntheticGraph:
    if build_graph:
        g.graph = g.to_graph()
    return g


def _check_sizes(num_nodes: int, num_edges: int) -> None:
    if num_nodes <= 0 or num_edges < 0:
        raise ValueError(f"need num_nodes > 0 and num_edges >= 0, got {num_nodes}, {num_edges}")


def uniform_graph(num_nodes: int, num_edges: int, seed: int = 0,
                  build_graph: bool = True) -> SyntheticGraph:
    """Erdos-Renyi style multigraph: both endpoints of every edge uniform over all nodes, so
    self loops and repeated edges occur."""
    _check_sizes(num_nodes, num_edges)
    rng = _rng(seed)
    edge_index = torch.from_numpy(rng.integers(0, num_nodes, size=(2, num_edges), dtype=np.int64))
    return _finish(SyntheticGraph("uniform", num_nodes, edge_index), build_graph)


def power_law_graph(num_nodes: int, avg_degree: float, seed: int = 0, a: float = 0.57,
                    b: float = 0.19, c: float = 0.19, build_graph: bool = True) -> SyntheticGraph:
    """R-MAT graph (Chakrabarti et al. 2004) with ``round(num_nodes * avg_degree)`` edges.

    Each edge descends ``ceil(log2 num_nodes)`` levels of the adjacency matrix, choosing the
    quadrant with probabilities ``a, b, c, 1-a-b-c``; ``a`` > the others concentrates edges on
    a few hub rows and columns, giving heavy-tailed in- and out-degrees. Edges with an endpoint
    ``>= num_nodes`` are rejected and redrawn (folding them would bias the low ids further).
    Ids are then permuted randomly so hubs are not all at id 0. Multi-edges and self loops
    are kept.
    """
    num_edges = int(round(num_nodes * avg_degree))
    _check_sizes(num_nodes, num_edges)
    if min(a, b, c) < 0 or a + b + c > 1:
        raise ValueError(f"need a, b, c >= 0 and a + b + c <= 1, got {a}, {b}, {c}")
    rng = _rng(seed)
    scale = max(1, math.ceil(math.log2(num_nodes)))
    # Quadrant thresholds on 16-bit draws: random bytes are far cheaper than float draws,
    # and 1/65536 resolution is plenty for a generator.
    thresholds = [min(65536, int(round(p * 65536))) for p in (a, a + b, a + b + c)]
    edge_index = torch.empty((2, num_edges), dtype=torch.int64)
    out = edge_index.numpy()
    have, acceptance = 0, 1.0
    while have < num_edges:
        want = num_edges - have
        draw = min(int(want / acceptance * 1.05) + 1024, 1 << 24)
        src, dst = _rmat_block(rng, draw, scale, thresholds)
        if num_nodes < (1 << scale):
            keep = (src < num_nodes) & (dst < num_nodes)
            acceptance = max(float(keep.mean()), 0.01)
            src, dst = src[keep], dst[keep]
        k = min(want, src.size)
        out[0, have:have + k] = src[:k]
        out[1, have:have + k] = dst[:k]
        have += k
    perm = rng.permutation(num_nodes)
    # Relabel in place, row by row, to avoid another pair of E-sized temporaries.
    for row in out:
        np.take(perm, row, out=row)
    return _finish(SyntheticGraph("power_law", num_nodes, edge_index), build_graph)


def _rmat_block(rng: np.random.Generator, m: int, scale: int, thresholds):
    t_a, t_ab, t_abc = thresholds
    # int32 and ~1M-edge chunks keep the per-level passes in cache: about 4x faster.
    dtype = np.int32 if scale <= 31 else np.int64
    src = np.zeros(m, dtype=dtype)
    dst = np.zeros(m, dtype=dtype)
    chunk = 1 << 20
    for lo in range(0, m, chunk):
        s, d = src[lo:lo + chunk], dst[lo:lo + chunk]
        for _ in range(scale):
            # Explicit little-endian so a seed gives the same graph on every host.
            q = np.frombuffer(rng.bytes(2 * s.size), dtype="<u2")
            upper = q >= t_ab  # quadrants c, d: the source bit is set
            # Quadrant index = (q>=t_a)+(q>=t_ab)+(q>=t_abc); its low bit (b or d) is the dst bit.
            right = (q >= t_a) ^ upper ^ (q >= t_abc)
            s <<= 1
            s |= upper
            d <<= 1
            d |= right
    return src, dst


def typed_graph(num_nodes: int, num_edges: int, num_node_types: int, num_edge_types: int,
                seed: int = 0, relation_skew: Optional[Sequence[float]] = None,
                build_graph: bool = True) -> SyntheticGraph:
    """Uniform multigraph with a uniform node type per node and an edge type per edge.

    ``relation_skew`` gives the probability of each edge type (normalised if it does not sum
    to exactly 1), e.g. ``[0.9, 0.05, 0.05]`` to test load balance when one relation dominates;
    by default types are uniform.
    """
    _check_sizes(num_nodes, num_edges)
    if num_node_types <= 0 or num_edge_types <= 0:
        raise ValueError("need at least one node type and one edge type")
    rng = _rng(seed)
    edge_index = rng.integers(0, num_nodes, size=(2, num_edges), dtype=np.int64)
    node_type = rng.integers(0, num_node_types, size=num_nodes, dtype=np.int64)
    if relation_skew is None:
        edge_type = rng.integers(0, num_edge_types, size=num_edges, dtype=np.int64)
    else:
        p = np.asarray(relation_skew, dtype=np.float64)
        if p.shape != (num_edge_types,) or (p < 0).any() or p.sum() <= 0:
            raise ValueError(f"relation_skew must be {num_edge_types} non-negative weights, "
                             f"got {list(relation_skew)}")
        edge_type = rng.choice(num_edge_types, size=num_edges, p=p / p.sum()).astype(np.int64)
    g = SyntheticGraph("typed", num_nodes, torch.from_numpy(edge_index),
                       torch.from_numpy(node_type), torch.from_numpy(edge_type),
                       num_node_types, num_edge_types)
    return _finish(g, build_graph)


def planted_typed_classification(num_nodes: int, num_edges: int, num_node_types: int,
                                 num_edge_types: int, num_classes: int, feature_dim: int,
                                 seed: int = 0, feature_signal: float = 0.15,
                                 train_frac: float = 0.1, val_frac: float = 0.1,
                                 dtype: torch.dtype = torch.float32,
                                 build_graph: bool = True) -> NodeClassificationDataset:
    """Node classification where the label is written in the relation types of in-edges.

    Class ``k`` gets a signature of two relations ``(p, s)`` (distinct per class, so
    ``num_classes <= num_edge_types ** 2``). An in-edge of a class-``k`` node has type ``p``
    with probability 1/2, ``s`` with 1/4, else uniform; sources are uniform. Every node gets
    ``num_edges // num_nodes`` or one more in-edges, so the relation histogram of its in-edges
    identifies its class once that is a handful. Features are uniform noise in [0, 1) (a
    non-zero mean, so per-relation messages can count edges) plus a weak class direction of
    norm ``feature_signal``: a feature-only model stays near chance while a relational GNN
    does far better. Node types are uniform and carry no signal. Masks are a random split
    with ``train_frac`` / ``val_frac`` / rest.
    """
    _check_sizes(num_nodes, num_edges)
    if num_classes < 1 or num_edge_types < 1 or num_classes > num_edge_types ** 2:
        raise ValueError(f"need 1 <= num_classes <= num_edge_types**2, got {num_classes} "
                         f"classes and {num_edge_types} edge types")
    if num_node_types < 1 or feature_dim < 1:
        raise ValueError("need num_node_types >= 1 and feature_dim >= 1")
    rng = _rng(seed)
    n, r = num_nodes, num_edge_types
    y = rng.integers(0, num_classes, size=n, dtype=np.int64)
    node_type = rng.integers(0, num_node_types, size=n, dtype=np.int64)

    # Near-regular in-degree: a node without in-edges would have an unrecoverable label.
    dst = np.concatenate([np.tile(np.arange(n, dtype=np.int64), num_edges // n),
                          rng.choice(n, size=num_edges % n, replace=False)])
    dst = dst[rng.permutation(num_edges)]
    src = rng.integers(0, n, size=num_edges, dtype=np.int64)

    # (k % r, (k // r + k) % r) is injective for k < r*r; the permutation hides the pattern.
    k = np.arange(num_classes)
    rel_perm = rng.permutation(r)
    primary, secondary = rel_perm[k % r], rel_perm[(k // r + k) % r]
    u = rng.random(num_edges)
    edge_type = np.where(u < 0.5, primary[y[dst]],
                         np.where(u < 0.75, secondary[y[dst]],
                                  rng.integers(0, r, size=num_edges))).astype(np.int64)

    centroids = rng.standard_normal((num_classes, feature_dim))
    centroids *= feature_signal / np.linalg.norm(centroids, axis=1, keepdims=True)
    x = rng.random((n, feature_dim)) + centroids[y]

    order = rng.permutation(n)
    n_train, n_val = int(round(train_frac * n)), int(round(val_frac * n))
    masks = []
    for part in (order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]):
        m = torch.zeros(n, dtype=torch.bool)
        m[torch.from_numpy(part)] = True
        masks.append(m)

    edge_index = torch.from_numpy(np.stack([src, dst]))
    node_type_t, edge_type_t = torch.from_numpy(node_type), torch.from_numpy(edge_type)
    graph = None
    if build_graph:
        graph = _build_graph(edge_index, n, node_type=node_type_t, edge_type=edge_type_t,
                             num_node_types=num_node_types, num_edge_types=num_edge_types)
    return NodeClassificationDataset(
        name="planted_typed", graph=graph, x=torch.from_numpy(x).to(dtype),
        y=torch.from_numpy(y), train_mask=masks[0], val_mask=masks[1], test_mask=masks[2],
        num_classes=num_classes, num_features=feature_dim, edge_index=edge_index,
        node_type=node_type_t, edge_type=edge_type_t, num_node_types=num_node_types,
        num_edge_types=num_edge_types)


def synthetic_node_classification(num_nodes: int, avg_degree: float = 20.0, num_classes: int = 10,
                                  num_features: int = 100, seed: int = 0, homophily: float = 0.8,
                                  feature_noise: float = 1.0, train_fraction: float = 0.6,
                                  val_fraction: float = 0.2,
                                  dtype: torch.dtype = torch.float32) -> NodeClassificationDataset:
    """A node-classification dataset large enough to need mini-batches, built in C++.

    The graph is a degree-corrected stochastic block model (``seastar._C.sbm_node_classification``:
    heavy-tailed degrees, an edge joins two vertices of the same class with probability
    ``homophily``); features are a class mean plus Gaussian noise of scale ``feature_noise``
    (class means ~ N(0, 1) per feature), so both the features and the neighbourhood carry the label.
    Masks split the vertices at random into train / val / test fractions. Deterministic for a seed.
    """
    if num_features < 1:
        raise ValueError(f"num_features must be >= 1, got {num_features}")
    if not (0 < train_fraction and 0 <= val_fraction and train_fraction + val_fraction < 1):
        raise ValueError(f"train_fraction + val_fraction must be in (0, 1), got {train_fraction} + {val_fraction}")
    cgraph, y = _C.sbm_node_classification(int(num_nodes), float(avg_degree), int(num_classes), float(homophily),
                                           int(seed))
    gen = torch.Generator().manual_seed(int(seed))
    means = torch.randn(num_classes, num_features, generator=gen, dtype=dtype)
    x = torch.randn(num_nodes, num_features, generator=gen, dtype=dtype).mul_(feature_noise)
    x.add_(means[y])
    order = torch.randperm(num_nodes, generator=gen)
    n_train, n_val = int(train_fraction * num_nodes), int(val_fraction * num_nodes)
    masks = []
    for lo, hi in ((0, n_train), (n_train, n_train + n_val), (n_train + n_val, num_nodes)):
        m = torch.zeros(num_nodes, dtype=torch.bool)
        m[order[lo:hi]] = True
        masks.append(m)
    graph = Graph(cgraph)
    return NodeClassificationDataset(name="synthetic", graph=graph, x=x, y=y, train_mask=masks[0],
                                     val_mask=masks[1], test_mask=masks[2], num_classes=int(num_classes),
                                     num_features=int(num_features), edge_index=graph.edge_index)
