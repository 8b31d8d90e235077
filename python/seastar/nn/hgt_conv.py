"""HGTConv: the heterogeneous graph transformer layer (Hu et al., WWW 2020) as a vertex program."""
from __future__ import annotations

import functools
import math
from typing import Dict, Optional, Type

import torch
import torch.nn.functional as F
from torch import nn

from .. import ops as ss
from .._dynamo_marks import assume_constant_result
from ..graph import Graph, tensor_of
from ..graph_ops import derived
from ..program import vertex_program
from ._precision import float32_inside
from ._programs import hgt_pairs
from ..derived_graphs import Derivation, derive, register
from ..derived_graphs import typed_square as derived_typed_square
from ._structure import typed_square
from ._utils import check_graph, dense, glorot, zeros
from ._row_ops import gather_rows
from .node_types import node_type_groups, typed_linear
from .relation_pairs import relation_matmul, relation_pairs
from .relations import MODES, cheapest, edge_types, per_edge_cost, per_pair_cost, typical_sizes


@vertex_program(name="hgt_typed")
def hgt_typed(v, Watt, Wmsg, mu, S, ST):
    """Attention and messages with typed block-diagonal matrices, one program over the graph.

    ``k``, ``q``, ``val`` are [N, H*d] (heads flattened into the feature axis); ``Watt`` /
    ``Wmsg`` [R, H*d, H*d] block-diagonal; ``S`` [H*d, H] sums each head's block, ``ST`` [H, H*d]
    spreads a per-head weight over its block; ``mu`` [R, H] already includes 1/sqrt(d)."""
    scores = [((e.src.k @ Watt[e.type]) * v.q) @ S * mu[e.type] for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return ss.sum((a @ ST) * (e.src.val @ Wmsg[e.type]) for a, e in zip(alpha, v.in_edges()))


@functools.lru_cache(maxsize=32)
def _head_maps(heads: int, d: int, dtype: torch.dtype, device: str):
    """``S`` [H*d, H] with ``S[h*d + i, h] = 1`` and its transpose (constants of hgt_typed)."""
    s = torch.kron(torch.eye(heads, dtype=dtype), torch.ones(d, 1, dtype=dtype)).to(device)
    return s, s.t().contiguous()


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """``t`` with zero rows appended up to ``n`` rows (``n >= t``'s rows). Compiled code appends
    them even when there are none: whether there are depends on the graph's sizes."""
    if not torch.compiler.is_compiling() and t.shape[0] >= n:
        return t
    return torch.cat([t, t.new_zeros((n - t.shape[0],) + t.shape[1:])])


def is_metadata(obj) -> bool:
    """PyG's ``metadata``: ``(node_types, edge_types)`` with edge types ``(src, rel, dst)``."""
    return (isinstance(obj, (tuple, list)) and len(obj) == 2 and isinstance(obj[0], (list, tuple))
            and isinstance(obj[1], (list, tuple))
            and all(isinstance(t, tuple) and len(t) == 3 for t in obj[1]))


def block_diagonal(blocks: torch.Tensor) -> torch.Tensor:
    """[R, H, d, e] -> [R, H*d, H*e] with block ``h`` of relation ``r`` on the diagonal."""
    r, h, d, e = blocks.shape
    eye = torch.eye(h, dtype=blocks.dtype, device=blocks.device)
    return torch.einsum("rhde,hg->rhdge", blocks, eye).reshape(r, h * d, h * e)


def _costs(num_edges: int, num_pairs: int, H: int, d: int, x_grad: bool) -> Dict[str, int]:
    # per edge: k and v through the block-diagonal [H*d, H*d] matrices, 2 (H*d)^2 multiply-adds
    # a pass; the step measures about three times that of R-GCN's per-edge product
    # (benchmarks/bench_typed_paths.py: the attention's extra passes over the edges), so its
    # edges count 6 (H*d)^2. Per pair: through the H [d, d] blocks, k and v rows in and out.
    return {"per_edge": per_edge_cost(num_edges, 6 * (H * d) ** 2, x_grad),
            "per_pair": per_pair_cost(num_pairs, 2 * H * d * d, 4 * H * d, x_grad)}


@assume_constant_result
def _typical_mode(bipartite: bool, num_relations: int, H: int, d: int, x_grad: bool) -> str:
    """The cheaper path on a graph of typical sizes for its kind. On a block every pair is an
    edge of its own, so a narrow single-head layer takes the per-edge path (the pair path moves
    each row in and out besides); otherwise the pairs, whose transform is H times cheaper per row."""
    return cheapest(_costs(*typical_sizes(bipartite, num_relations), H, d, x_grad))


class HGTConv(nn.Module):
    r"""Heterogeneous graph transformer layer (Hu, Dong, Wang, Sun, "Heterogeneous Graph
    Transformer", WWW 2020), simplified as PyG's ``HGTConv`` is. For an edge ``e = (s -> t)`` of
    relation ``phi(e)`` between vertices of types ``tau(s)``, ``tau(t)``, and head ``i`` of ``H``
    (``d = out_channels / H``):

    * (Eq. 3) ``ATT-head^i(s, e, t) = (K^i(s) W^ATT_{phi(e)} Q^i(t)^T) * mu_{phi(e)} / sqrt(d)``,
      ``K^i(s) = K-Linear^i_{tau(s)}(H[s])``, ``Q^i(t) = Q-Linear^i_{tau(t)}(H[t])``;
      ``Attention(s, e, t) = softmax over ALL in-edges of t`` (every relation together), per head.
    * (Eq. 4) ``MSG-head^i(s, e, t) = M-Linear^i_{tau(s)}(H[s]) W^MSG_{phi(e)}``.
    * (Eq. 5) ``H~[t] = sum_{s in N(t)} Attention(s, e, t) * Message(s, e, t)`` (heads concatenated).
    * (Eq. 6) ``H'[t] = A-Linear_{tau(t)}(gelu(H~[t])) + H[t]``; as in PyG the residual is a
      learned gate ``beta = sigmoid(skip[tau(t)])``: ``beta * A-Linear(...) + (1 - beta) * H[t]``,
      used only when ``in_channels == out_channels`` (otherwise no residual).

    Simplifications (documented differences from the paper): the prior ``mu`` is per relation and
    head (``p_rel`` [R, H]) rather than per (source type, relation, target type) triple (the paper's
    ``mu_<tau(s), phi(e), tau(t)>``; give each triple its own edge type to recover it); no
    relative temporal encoding; no dropout. Parameters (PyG's names): typed linears ``k_weight``,
    ``q_weight``, ``v_weight``, ``a_weight`` [T, in|out, out] with biases [T, out] (glorot, zeros),
    ``k_rel`` = W^ATT and ``v_rel`` = W^MSG [R, H, d, d] (glorot), ``p_rel`` = mu [R, H] (ones),
    ``skip`` [T] (ones).

    Dense per-type work (K/Q/V and A linears) is torch, one GEMM per node type on the vertices
    grouped by type (the grouping kept by the graph). The graph work is a vertex program; the IR's
    ``@`` takes one 2-D matrix per row, so per-head matrices ``[R, H, d, d]`` are mapped in one of
    two ways (``mode``, as in :class:`RGCNConv`):

    * ``per_edge``: heads flattened into the feature axis and ``W^ATT``, ``W^MSG`` made
      block-diagonal ``[R, H*d, H*d]``; one typed program computes
      ``score = ((k_s @ W^ATT[e.type]) * q_t) @ S * mu[e.type]`` (``S`` sums each head's block),
      the softmax over all in-edges, and ``sum(alpha @ S^T * (v_s @ W^MSG[e.type]))``:
      ``2*E*(H*d)^2`` multiply-adds (H times the useful work: the off-diagonal zeros are
      multiplied too), no edge-sized tensor.
    * ``per_pair``: the per-relation transforms are done in torch once per distinct
      (source, relation) pair, ``k_p = K(s) W^ATT_r * mu_r / sqrt(d)``, ``m_p = V(s) W^MSG_r``
      (an einsum per relation), and an untyped GAT-like program over the pair graph computes the
      softmax and the weighted sum: ``2*P*H*d^2 + 2*E*H*d`` multiply-adds and ``2*P*H*d`` extra
      floats.

    PyG's form, ``HGTConv(in_channels, out_channels, metadata, heads)`` with ``metadata =
    (node_types, edge_types)`` (``in_channels`` an int, a dict per node type, or -1: lazy), takes
    ``conv(x_dict, edge_index_dict)`` (or a ``HeteroData``-like object) and returns a dict per
    destination node type, with PyG's parameter layout: it is another layer, ``HGTDictConv``
    (``seastar.nn.hgt_dict``), which ``HGTConv(...)`` builds when given a ``metadata`` and which
    subclasses ``HGTConv`` so that ``isinstance(conv, HGTConv)`` holds for both forms.

    On a bipartite graph (a block sampled from a typed graph: node types per source, destination
    ``i`` is source ``i``), ``x`` has the sources' rows (or is a pair ``(x_src, x_dst)``): K and V
    are computed for the sources, Q, the output and the residual for the destinations only, and
    the attention runs on the block's square form.

    ``mode="auto"`` takes the cheaper path by ``mode_costs``, the cost model :class:`RGCNConv`
    uses too (``seastar.nn.relations``): ``per_edge`` only when nearly every (source, relation)
    pair is distinct and the rows are narrow. In compiled code, which serves graphs of every
    size, the same model on a graph of sizes typical of its kind (``choose_mode``). ``per_edge``
    with trainable relation matrices runs fused only where the fused backend reduces parameter
    gradients.
    """

    metadata_mode = False  # PyG's metadata form is the subclass HGTDictConv
    _metadata_form: Optional[Type["HGTConv"]] = None  # that subclass, registered by __init_subclass__

    def __init_subclass__(cls, metadata_form: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        if metadata_form:  # hgt_dict.HGTDictConv: registered, since this module cannot import it (it imports this)
            HGTConv._metadata_form = cls

    def __new__(cls, *args, **kwargs):
        """``HGTConv(in, out, metadata, heads)`` (PyG's form, ``metadata`` by position or name)
        builds the metadata form's layer; the typed form is this class."""
        if cls is HGTConv and (kwargs.get("metadata") is not None or (len(args) > 2 and is_metadata(args[2]))):
            cls = HGTConv._metadata_form
        return super().__new__(cls)

    def __init__(self, in_channels, out_channels: int, num_node_types=None, num_edge_types: Optional[int] = None,
                 heads: int = 1, mode: str = "auto", backend: Optional[str] = None, metadata=None):
        super().__init__()  # a given metadata built an HGTDictConv instead (__new__)
        self.mode, self.backend = mode, backend
        if num_node_types is None or num_edge_types is None:
            raise TypeError("HGTConv takes num_node_types and num_edge_types (typed graphs), or PyG's metadata")
        if out_channels % heads:
            raise ValueError(f"HGTConv: out_channels ({out_channels}) must be divisible by heads ({heads})")
        if mode not in MODES:
            raise ValueError(f"HGTConv: mode must be one of {MODES}, got {mode!r}")
        if num_node_types < 1 or num_edge_types < 1:
            raise ValueError("HGTConv: need num_node_types >= 1 and num_edge_types >= 1")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.num_node_types, self.num_edge_types = num_node_types, num_edge_types
        T, R, H, d = num_node_types, num_edge_types, heads, out_channels // heads
        for name, fin in (("k", in_channels), ("q", in_channels), ("v", in_channels), ("a", out_channels)):
            setattr(self, f"{name}_weight", nn.Parameter(torch.empty(T, fin, out_channels)))
            setattr(self, f"{name}_bias", nn.Parameter(torch.empty(T, out_channels)))
        self.k_rel = nn.Parameter(torch.empty(R, H, d, d))
        self.v_rel = nn.Parameter(torch.empty(R, H, d, d))
        self.p_rel = nn.Parameter(torch.empty(R, H))
        self.skip = nn.Parameter(torch.empty(T))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for name in "kqva":
            glorot(getattr(self, f"{name}_weight"))
            zeros(getattr(self, f"{name}_bias"))
        glorot(self.k_rel)
        glorot(self.v_rel)
        with torch.no_grad():
            self.p_rel.fill_(1.0)
            self.skip.fill_(1.0)

    def mode_costs(self, graph: Graph, x_grad: bool = True) -> Dict[str, int]:
        """The cost of one training step of each path on this graph, by the relational layers'
        cost model (``seastar.nn.relations``); ``x_grad``: whether K and V need gradients."""
        graph = self._square(graph)
        pairs = relation_pairs(graph, self.num_edge_types, "HGTConv")
        H, d = self.heads, self.out_channels // self.heads
        return _costs(graph.num_edges, pairs.num_pairs, H, d, x_grad)

    def choose_mode(self, graph: Graph, x_grad: bool = True, bipartite: Optional[bool] = None) -> str:
        """The ``mode`` argument, or the cheapest path by ``mode_costs``; an untyped graph takes
        ``per_pair`` (its pairs are its vertices). In compiled code, the cheapest on a graph of
        sizes typical of its kind (``bipartite``: a block's square form is a block's, by default
        as ``graph`` is), whatever its sizes (``relations.typical_sizes``)."""
        if not graph.has_edge_types:
            return "per_pair"
        if self.mode != "auto":
            return self.mode
        if torch.compiler.is_compiling():
            return _typical_mode(graph.is_bipartite if bipartite is None else bipartite, self.num_edge_types,
                                 self.heads, self.out_channels // self.heads, x_grad)
        return cheapest(self.mode_costs(graph, x_grad))

    @float32_inside
    def forward(self, x, edge_index=None):
        """``forward(graph, x)`` on a typed graph (PyG's ``forward(x_dict, edge_index_dict)`` is
        the metadata form's, ``HGTDictConv``)."""
        if not isinstance(x, Graph) and (isinstance(x, dict) or hasattr(x, "x_dict")):  # no hasattr on a graph
            raise TypeError("HGTConv: x_dict / edge_index_dict inputs need a layer built with PyG's metadata, "
                            "HGTConv(in_channels, out_channels, metadata, heads)")
        graph, x = x, edge_index
        if isinstance(graph, Graph) and graph.is_bipartite:
            x_src, x_dst = self._block_features(graph, x)
            # one x: the destinations are its first rows, so there are no more of them than sources
            sources_span = not isinstance(x, (tuple, list))
        else:
            check_graph("HGTConv", graph, x)
            x_src = x_dst = self._features(x, "x")
            sources_span = True
        return self._layer(graph, x_src, x_dst, sources_span)

    def _features(self, x, what: str) -> torch.Tensor:
        x = dense(x)
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.in_channels:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"HGTConv: {what} must be [rows, {self.in_channels}], got {shape}")
        return x

    def _block_features(self, graph: Graph, x):
        """``(x_src, x_dst)`` of a bipartite graph (a sampled block, say): ``x`` with one row per
        source, whose first ``num_dst`` rows are the destinations', or a pair ``(x_src, x_dst)``."""
        ns, nd = graph.num_src, graph.num_dst
        if isinstance(x, (tuple, list)):
            if len(x) != 2:
                raise ValueError(f"HGTConv: bipartite features are a pair (x_src, x_dst), got {len(x)} items")
            x_src, x_dst = self._features(x[0], "x_src"), self._features(x[1], "x_dst")
        else:
            x_src = self._features(x, "x")
            if nd > ns:
                raise ValueError(f"HGTConv: the bipartite graph has more destinations ({nd}) than sources ({ns}), so "
                                 f"the destinations' features are not the first rows of x; pass (x_src, x_dst)")
            x_dst = x_src[:nd]
        if (x_src.shape[0], x_dst.shape[0]) != (ns, nd):
            raise ValueError(f"HGTConv: the features give {x_src.shape[0]} sources and {x_dst.shape[0]} destinations "
                             f"but the graph has {ns} sources and {nd} destinations")
        return x_src, x_dst

    def _square(self, graph: Graph) -> Graph:
        """The graph the programs run on: a square graph as given; a bipartite one as the square
        graph over ``max(num_src, num_dst)`` vertices (vertex ``i`` is source ``i`` and destination
        ``i``), with its edge types (the typed layers' pair graphs are built on square graphs)."""
        if not graph.is_bipartite:
            return graph
        ns, nd = graph.num_src, graph.num_dst
        if graph.has_edge_types:
            if torch.compiler.is_compiling():  # derived by an op, for whatever block comes at run time
                return derived_typed_square(graph, self.num_edge_types)
            return typed_square(graph.edge_index, graph.edge_type, ns, nd, self.num_edge_types, "HGTConv")
        if torch.compiler.is_compiling():
            return derive(graph, "untyped_square", 0, graph._kind._replace(bipartite=False))
        return derived(graph, _square, max(ns, nd))

    def _layer(self, graph: Graph, x_src: torch.Tensor, x_dst: torch.Tensor,
               sources_span: bool = False) -> torch.Tensor:
        """The layer on ``graph`` (square or bipartite): K and V of the sources, Q, the output and
        the residual of the destinations, the attention on the square form of the graph.
        ``sources_span``: the square form's vertices are the sources (a square graph, or a block
        with no more destinations than sources), so K and V need no zero rows."""
        T, H, C = self.num_node_types, self.heads, self.out_channels
        d = C // H
        edge_types(graph, self.num_edge_types, "HGTConv")  # validates the graph's relations
        src_groups = node_type_groups(graph, T, "HGTConv", "src")
        if not graph.is_bipartite:  # one GEMM per type for K, Q and V together
            kqv = typed_linear(x_src, src_groups, torch.cat([self.k_weight, self.q_weight, self.v_weight], -1),
                               torch.cat([self.k_bias, self.q_bias, self.v_bias], -1))
            k, q, val = kqv.split(C, dim=-1)  # [N, C] each
            dst_groups = src_groups
        else:
            kv = typed_linear(x_src, src_groups, torch.cat([self.k_weight, self.v_weight], -1),
                              torch.cat([self.k_bias, self.v_bias], -1))
            k, val = kv.split(C, dim=-1)  # [num_src, C]
            dst_groups = node_type_groups(graph, T, "HGTConv", "dst")
            q = typed_linear(x_dst, dst_groups, self.q_weight, self.q_bias)  # [num_dst, C]
        nd = x_dst.shape[0]
        square = self._square(graph)
        n = square.num_nodes
        if not sources_span:  # zero rows: vertices with no role on that side (compiled code copies even none)
            k, val = _rows(k, n), _rows(val, n)
        k_rel, v_rel, p_rel = self.k_rel, self.v_rel, self.p_rel
        if not torch.is_grad_enabled():
            k_rel, v_rel, p_rel = k_rel.detach(), v_rel.detach(), p_rel.detach()
        mu = p_rel / math.sqrt(d)  # [R, H]
        if self.choose_mode(square, k.requires_grad or val.requires_grad, graph.is_bipartite) == "per_edge":
            # torch.compile traces the function (the constants enter the compiled code), not its cache
            head_maps = _head_maps.__wrapped__ if torch.compiler.is_compiling() else _head_maps
            S, ST = head_maps(H, d, x_src.dtype, str(x_src.device))
            agg = hgt_typed(square, backend=self.backend, k=k, q=_rows(q, n), val=val, Watt=block_diagonal(k_rel),
                            Wmsg=block_diagonal(v_rel), mu=mu, S=S, ST=ST)
        else:
            pairs = relation_pairs(square, self.num_edge_types, "HGTConv")
            m = pairs.graph.num_nodes
            kp = relation_matmul(k.view(n, H, d), pairs, k_rel * mu[:, :, None, None])
            vp = relation_matmul(val.view(n, H, d), pairs, v_rel)
            agg = hgt_pairs(pairs.graph, backend=self.backend, k=kp, q=_rows(q, m).view(m, H, d), val=vp)
        out = typed_linear(F.gelu(agg[:nd].reshape(nd, C)), dst_groups, self.a_weight, self.a_bias)
        if self.in_channels == self.out_channels:
            if graph.has_node_types:
                nt = tensor_of(graph, "node_type")[:nd].long().to(x_dst.device)
            else:
                nt = torch.zeros(nd, dtype=torch.long, device=x_dst.device)
            beta = gather_rows(torch.sigmoid(self.skip).unsqueeze(-1), nt)
            out = beta * out + (1.0 - beta) * x_dst
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_node_types={self.num_node_types}, num_edge_types={self.num_edge_types}, heads={self.heads})")


def _square(graph: Graph, num_nodes: int) -> Graph:
    """An untyped block as the square graph of ``num_nodes`` vertices (its sources and destinations)."""
    return Graph.from_edge_index(graph.edge_index, num_nodes=num_nodes)


def _square_of_sources(graph: Graph, arg: int) -> Graph:
    if graph.num_dst > graph.num_src:
        raise ValueError(f"HGTConv: a block with more destinations ({graph.num_dst}) than sources ({graph.num_src}) "
                         f"has no square graph of its sources")
    return _square(graph, graph.num_src)


# compiled code derives an untyped block's square graph by the op seastar::derived_graph
register("untyped_square", Derivation(_square_of_sources, square_of_sources=True, same_edges=True))
