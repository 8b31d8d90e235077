"""EdgeConv: the edge convolution of Wang et al., "Dynamic Graph CNN for Learning on Point
Clouds" (TOG 2019), with PyG's semantics: ``nn([x_i, x_j - x_i])`` per edge, aggregated.

An ``nn`` made of what a program expresses (a ``Sequential`` of ``Linear`` layers and
elementwise activations) runs inside one vertex program: its first layer, linear in
``[x_i, x_j - x_i]``, splits into a destination term and a source term computed once per
vertex in torch, and the rest of the MLP runs per edge in the fused kernels, so no [E, F]
tensor is formed. Any other module runs in torch on the [E, 2F] edge rows, and the
aggregation stays a program. ``EdgeConv.path`` says which one a layer takes."""
from __future__ import annotations

import inspect
from typing import Callable, List, Optional, Tuple

import torch

from .. import ops as ss
from ..program import VertexProgram, program_factory, vertex_program
from ._layer import HomogeneousLayer
from ._precision import float32_inside
from ._utils import reset_module

AGGRS = {"add": ss.sum, "sum": ss.sum, "mean": ss.mean, "max": ss.max, "min": ss.min}

# the activations a program computes: module type -> (name, its constant parameter or None)
ACTIVATIONS = {torch.nn.ReLU: ("relu", None), torch.nn.Sigmoid: ("sigmoid", None), torch.nn.Tanh: ("tanh", None),
               torch.nn.LeakyReLU: ("leaky_relu", "negative_slope"), torch.nn.ELU: ("elu", "alpha"),
               torch.nn.Identity: ("identity", None)}


def activation_step(act) -> Optional[Tuple[str, Optional[float]]]:
    """An activation module as ``(name, constant)`` when a program computes it (None, no
    activation, is ``("identity", None)``); else None."""
    if act is None:
        return ("identity", None)
    if type(act) not in ACTIVATIONS:
        return None
    name, attr = ACTIVATIONS[type(act)]
    return (name, None if attr is None else float(getattr(act, attr)))


def apply_activation(step: Tuple[str, Optional[float]], h):
    """``h`` through an ``activation_step``, traced in a program."""
    name, c = step
    if name == "identity":
        return h
    return getattr(ss, name)(h) if c is None else getattr(ss, name)(h, c)


def _layers(nn: Callable) -> list:
    return list(nn) if isinstance(nn, torch.nn.Sequential) else [nn]


def program_steps(nn: Callable) -> Optional[Tuple]:
    """The steps after the first Linear, ``("linear", has_bias)`` or ``(activation, constant)``, when
    ``nn`` is a Sequential of Linear layers and activations a program computes; else None."""
    layers = _layers(nn)
    if not layers or type(layers[0]) is not torch.nn.Linear:
        return None
    steps = []
    for m in layers[1:]:
        if type(m) is torch.nn.Linear:
            steps.append(("linear", m.bias is not None))
        elif activation_step(m) is not None:
            steps.append(activation_step(m))
        else:
            return None
    return tuple(steps)


@program_factory
def edge_mlp_program(steps: Tuple, aggr: str) -> VertexProgram:
    """``aggr_e mlp(a_i + b_j)``: ``a``, ``b`` the first layer's destination and source terms,
    ``mlp`` the remaining ``steps``, whose weights are the program's parameters ``w0, w1, ...``
    (each Linear's transposed weight, then its bias when it has one)."""
    num_weights = sum(1 + has_bias for kind, has_bias in steps if kind == "linear")

    def edge_mlp(v, *w):
        def mlp(h):
            i = 0
            for kind, c in steps:
                if kind == "linear":
                    h = h @ w[i]
                    if c:
                        h = h + w[i + 1]
                    i += 1 + c
                else:
                    h = apply_activation((kind, c), h)
            return h
        return AGGRS[aggr](mlp(v.a + e.src.b) for e in v.in_edges())

    params = [inspect.Parameter("v", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(f"w{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(num_weights)]
    edge_mlp.__signature__ = inspect.Signature(params)  # the program's parameters, by name
    return vertex_program(edge_mlp, name="edge_conv_" + aggr)


@program_factory
def edge_aggregation(aggr: str) -> VertexProgram:
    """``aggr_e m_e``: the messages computed per edge in torch."""
    @vertex_program(name="edge_" + aggr)
    def edge_aggr(v):
        return AGGRS[aggr](e.m for e in v.in_edges())
    return edge_aggr


class EdgeConv(HomogeneousLayer):
    r"""``x'_i = aggr_{j -> i} nn([x_i, x_j - x_i])``; PyG's ``EdgeConv`` (``aggr``: ``"max"``,
    default, ``"add"``, ``"mean"`` or ``"min"``; an empty neighbourhood gives 0).

    ``path`` is ``"program"`` when ``nn`` is a ``Sequential`` of ``Linear`` layers and ReLU,
    LeakyReLU, ELU, Sigmoid, Tanh or Identity activations (the whole MLP per edge in one vertex
    program), ``"torch"`` otherwise (``nn`` on the [E, 2F] edge rows in torch, the aggregation a
    program).

    Calls: ``conv(graph, x)``, PyG's ``conv(x, edge_index)``, ``conv((x_src, x_dst),
    edge_index)``, ``conv(x, adj_t)``, ``conv(data)``.
    """

    def __init__(self, nn: Callable, aggr: str = "max", backend: Optional[str] = None):
        super().__init__(backend)
        if aggr not in AGGRS:
            raise ValueError(f"EdgeConv: aggr must be one of {sorted(AGGRS)}, got {aggr!r}")
        self.nn, self.aggr = nn, aggr
        self._steps = program_steps(nn)
        if self._steps is not None:
            edge_mlp_program(self._steps, aggr)  # built here: torch.compile cannot build it
        edge_aggregation(aggr)
        self.reset_parameters()

    @property
    def path(self) -> str:
        return "torch" if self._steps is None else "program"

    def reset_parameters(self) -> None:
        reset_module(self.nn)

    @float32_inside
    def forward(self, x, edge_index=None) -> torch.Tensor:
        """``forward(graph, x)`` or PyG's ``forward(x, edge_index)``."""
        call = self.read_call(x, edge_index, None, batches=False, dense_rows=True)
        x_src, x_dst = call.src_dst()
        s = call.structure()
        if self._steps is None:
            src, dst = s.edge_index.to(x_src.device)
            xi = x_dst[dst]
            m = self.nn(torch.cat([xi, x_src[src] - xi], dim=-1))
            return s.out(edge_aggregation(self.aggr)(s.graph, backend=self.backend, m=m))
        first = _layers(self.nn)[0]
        F_in = x_dst.shape[-1]
        w_i, w_j = first.weight[:, :F_in], first.weight[:, F_in:]
        a = x_dst @ (w_i - w_j).t()  # [x_i, x_j - x_i] W^T = x_i (W_i - W_j)^T + x_j W_j^T
        if first.bias is not None:
            a = a + first.bias
        tensors = dict(a=s.dst(a), b=s.src(x_src @ w_j.t()))
        for i, w in enumerate(self._weights()):
            tensors[f"w{i}"] = w
        return s.out(edge_mlp_program(self._steps, self.aggr)(s.graph, backend=self.backend, **tensors))

    def _weights(self) -> List[torch.Tensor]:
        """The later Linear layers' weights, transposed, each followed by its bias."""
        out = []
        for m in _layers(self.nn)[1:]:
            if type(m) is torch.nn.Linear:
                out.append(m.weight.t())
                if m.bias is not None:
                    out.append(m.bias)
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"
