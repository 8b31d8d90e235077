"""FiLMConv: the feature-wise linear modulation of Brockschmidt, "GNN-FiLM: Graph Neural Networks
with Feature-wise Linear Modulation" (ICML 2020), with PyG's semantics, as one plain vertex
program."""
from __future__ import annotations

import copy
from typing import Callable, Optional, Tuple

import torch

from .. import ops as ss
from ..graph import Graph
from ..program import VertexProgram, program_factory, vertex_program
from ._layer import HomogeneousLayer
from ._linear import Linear
from ._precision import float32_inside
from ._utils import reset_module
from .edge_conv import AGGRS, activation_step, apply_activation, edge_aggregation


@program_factory
def film_program(aggr: str, act: Tuple[str, Optional[float]], typed: bool) -> VertexProgram:
    """``aggr_e act(gamma_i * h_j + beta_i)``. Typed (several relations): ``h``, ``gamma`` and
    ``beta`` hold a column per relation ([C, R]), ``e.onehot`` [R] picks the edge's, and ``e.w``
    weighs the sum (1, or one over the destination's in-edges of that relation: a mean per
    relation, summed over the relations, as PyG's one propagation per relation)."""
    if typed:
        def film(v):
            def pick(t, e):
                return (t * e.onehot).sum(-1)
            return ss.sum(apply_activation(act, pick(v.gamma, e) * pick(e.src.h, e) + pick(v.beta, e)) * e.w
                          for e in v.in_edges())
    else:
        def film(v):
            return AGGRS[aggr](apply_activation(act, v.gamma * e.src.h + v.beta) for e in v.in_edges())
    return vertex_program(film, name=f"film_{'typed_' if typed else ''}{aggr}_{act[0]}")


class FiLMConv(HomogeneousLayer):
    r"""``x'_i = act(gamma_0(x_i) * W_0 x_i + beta_0(x_i))
    + sum_r aggr_{j -> i, type r} act(gamma_r(x_i) * W_r x_j + beta_r(x_i))``; PyG's ``FiLMConv``.

    ``[beta_r, gamma_r] = films[r](x_i)`` (a Linear to ``2 * out_channels`` unless ``nn`` is
    given, copied per relation as PyG does); ``W_r`` is ``lins[r]``, the skip term ``lin_skip``
    with ``film_skip``. ``aggr``: ``"mean"`` (default), ``"add"``, or with one relation also
    ``"max"`` / ``"min"`` (an empty neighbourhood gives 0). ``act``: ReLU (default), LeakyReLU,
    ELU, Sigmoid, Tanh, Identity or None run in the program; any other callable runs in torch on
    the [E, C] messages, and the aggregation stays a program. With ``num_relations > 1`` each
    edge's relation is ``edge_type`` (or a typed ``seastar.Graph``'s): the per-vertex FiLM terms
    and projections of every relation are dense torch, and one program picks each edge's.

    Calls: ``conv(graph, x)`` (``graph`` typed for several relations), PyG's
    ``conv(x, edge_index, edge_type=None)``, ``conv((x_src, x_dst), edge_index, edge_type)``,
    ``conv(x, adj_t)`` (a sparse adjacency whose values are the edge types, with several
    relations), ``conv(data)``; float16 / bfloat16 compute in float32.
    """

    def __init__(self, in_channels, out_channels: int, num_relations: int = 1, nn: Optional[Callable] = None,
                 act: Optional[Callable] = torch.nn.ReLU(), aggr: str = "mean", backend: Optional[str] = None):
        super().__init__(backend)
        if aggr not in AGGRS:
            raise ValueError(f"FiLMConv: aggr must be one of {sorted(AGGRS)}, got {aggr!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.num_relations = max(int(num_relations), 1)
        if self.num_relations > 1 and aggr in ("max", "min"):
            raise ValueError(f"FiLMConv: aggr={aggr!r} is supported with one relation only (a per-relation "
                             f"{aggr} summed over {self.num_relations} relations has no one-program form)")
        self.act, self.aggr = act, aggr
        src, dst = in_channels if isinstance(in_channels, (tuple, list)) else (in_channels, in_channels)
        self.lins = torch.nn.ModuleList(Linear(src, out_channels, bias=False) for _ in range(self.num_relations))
        self.films = torch.nn.ModuleList(Linear(dst, 2 * out_channels) if nn is None else copy.deepcopy(nn)
                                         for _ in range(self.num_relations))
        self.lin_skip = Linear(dst, out_channels, bias=False)
        self.film_skip = Linear(dst, 2 * out_channels, bias=False) if nn is None else copy.deepcopy(nn)
        self._act_step = activation_step(act)
        # built here: torch.compile cannot build a program
        film_program(aggr, self._act_step or ("identity", None), self.num_relations > 1)
        edge_aggregation("sum" if self.num_relations > 1 else aggr)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin, film in zip(self.lins, self.films):
            lin.reset_parameters()
            reset_module(film)
        self.lin_skip.reset_parameters()
        reset_module(self.film_skip)

    def _act(self, h: torch.Tensor) -> torch.Tensor:
        return h if self.act is None else self.act(h)

    @float32_inside
    def forward(self, x, edge_index=None, edge_type: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index, edge_type=None)``."""
        call = self.read_call(x, edge_index, None, dense_rows=True, edge_type=edge_type)
        x_src, x_dst = call.src_dst()
        s = call.structure()
        C, R = self.out_channels, self.num_relations
        beta, gamma = self.film_skip(x_dst).split(C, dim=-1)
        out = self._act(gamma * self.lin_skip(x_dst) + beta)[:s.num_dst]
        if R == 1:
            beta, gamma = self.films[0](x_dst).split(C, dim=-1)
            h = self.lins[0](x_src)
            return call.output(out + s.out(self._propagate(s, h, gamma, beta, None)))
        types = self._edge_types(call, s)
        h = torch.stack([lin(x_src) for lin in self.lins], -1)  # [N_src, C, R]
        films = [film(x_dst).split(C, dim=-1) for film in self.films]
        beta = torch.stack([b for b, _ in films], -1)  # [N_dst, C, R]
        gamma = torch.stack([g for _, g in films], -1)
        return call.output(out + s.out(self._propagate(s, h, gamma, beta, types)))

    def _edge_types(self, call, s) -> torch.Tensor:
        types = call.extra.get("edge_type")
        if types is None and isinstance(s.graph, Graph):
            types = s.graph.edge_type
        if types is None:
            types = s.values  # a sparse adjacency whose values are the edge types
        if types is None:
            raise ValueError(f"FiLMConv: num_relations={self.num_relations} needs edge_type (or a typed graph)")
        if types.is_floating_point() or types.dim() != 1 or types.shape[0] != s.num_edges:
            raise ValueError(f"FiLMConv: edge_type must be [E] = [{s.num_edges}] integer relation ids, got "
                             f"{types.dtype} of shape {list(types.shape)}")
        types = types.long()
        if types.numel() and (int(types.min()) < 0 or int(types.max()) >= self.num_relations):
            raise ValueError(f"FiLMConv: edge_type must be in [0, {self.num_relations}), got values in "
                             f"[{int(types.min())}, {int(types.max())}]")
        return types

    def _propagate(self, s, h, gamma, beta, types) -> torch.Tensor:
        """The neighbourhood term: one program, or messages in torch for an activation it lacks."""
        typed = types is not None
        prog = film_program(self.aggr, self._act_step or ("identity", None), typed)
        if typed:
            R = self.num_relations
            onehot = torch.nn.functional.one_hot(types, R).to(h.dtype)
            dst = s.edge_index[1]
            if self.aggr == "mean":  # one over the destination's in-edges of the edge's relation
                key = dst * R + types
                counts = torch.zeros(s.num_dst * R, dtype=h.dtype, device=h.device).index_add_(
                    0, key, torch.ones_like(key, dtype=h.dtype))
                w = (1.0 / counts[key]).unsqueeze(-1)
            else:
                w = torch.ones(s.num_edges, 1, dtype=h.dtype, device=h.device)
        if self._act_step is not None:
            if typed:
                return prog(s.graph, backend=self.backend, h=s.src(h), gamma=s.dst(gamma), beta=s.dst(beta),
                            onehot=onehot, w=w)
            return prog(s.graph, backend=self.backend, h=s.src(h), gamma=s.dst(gamma), beta=s.dst(beta))
        # an activation the programs lack: the messages in torch, summed (or aggregated) by a program
        src, dst = s.edge_index[0], s.edge_index[1]
        if typed:
            pick = (torch.arange(s.num_edges, device=h.device), slice(None), types)
            m = self.act(gamma[dst][pick] * h[src][pick] + beta[dst][pick]) * w
            return edge_aggregation("sum")(s.graph, backend=self.backend, m=m)
        return edge_aggregation(self.aggr)(s.graph, backend=self.backend, m=self.act(gamma[dst] * h[src] + beta[dst]))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, num_relations={self.num_relations})"

