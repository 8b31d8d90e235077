"""GMMConv: the Gaussian mixture model convolution of Monti et al., "Geometric Deep Learning on
Graphs and Manifolds using Mixture Model CNNs" (CVPR 2017), with PyG's semantics, as one plain
vertex program."""
from __future__ import annotations

from typing import Optional

import torch

from .. import ops as ss
from ..program import VertexProgram, program_factory, vertex_program
from ._layer import HomogeneousLayer
from ._linear import Linear, is_uninitialized
from ._precision import float32_inside
from ._utils import glorot, zeros
from .edge_conv import AGGRS

EPS = 1e-15  # PyG's: a Gaussian of zero width stays finite


@program_factory
def gmm_program(aggr: str, separate: bool) -> VertexProgram:
    """``aggr_e sum_k w_k(u_e) x_jk``, ``w_k(u) = exp(sum_d (u_d - mu_kd)^2 * prec_kd)`` the
    Gaussian weights of the edge's pseudo-coordinates ``u`` (``prec = -1 / (2 (eps + sigma^2))``).

    Shared Gaussians: ``e.src.xg`` is [M, K] (the source's projection by ``g``), ``mu`` and
    ``prec`` [K, D], ``e.u`` [1, D]. Separate Gaussians (one per input and output channel):
    ``mu`` and ``prec`` [M, F, K, D], ``g`` [M, F, K], ``e.src.x`` [F]."""
    if separate:
        def gmm(v, mu, prec, g):
            return AGGRS[aggr](((ss.exp(((e.u - mu) * (e.u - mu) * prec).sum(-1)) * g).sum(-1) * e.src.x).sum(-1)
                               for e in v.in_edges())
    else:
        def gmm(v, mu, prec):
            return AGGRS[aggr]((e.src.xg * ss.exp(((e.u - mu) * (e.u - mu) * prec).sum(-1))).sum(-1)
                               for e in v.in_edges())
    return vertex_program(gmm, name=f"gmm_{'separate_' if separate else ''}{aggr}")


class GMMConv(HomogeneousLayer):
    r"""``x'_i = root x_i + aggr_{j -> i} sum_k w_k(e_ij) (x_j g)_k + bias``; PyG's ``GMMConv``.

    ``w_k(u) = exp(-1/2 sum_d (u_d - mu_kd)^2 / (eps + sigma_kd^2))``: ``kernel_size`` Gaussians
    over the ``dim``-dimensional edge pseudo-coordinates ``edge_attr``. With
    ``separate_gaussians=True`` every pair of input and output channels has its own Gaussians
    (PyG's option). ``aggr``: ``"mean"`` (default), ``"add"``, ``"max"`` or ``"min"`` (an empty
    neighbourhood gives 0). ``root_weight``, ``bias`` and the parameter names (``g``, ``mu``,
    ``sigma``, ``root.weight``) are PyG's, so a PyG state dict loads. The Gaussians and the sum
    over them are the plain program ``gmm_program``; the projection by ``g`` and the root term
    are dense torch.

    Calls: ``conv(graph, x, edge_attr)``, PyG's ``conv(x, edge_index, edge_attr, size=None)``,
    ``conv((x_src, x_dst), edge_index, edge_attr)``, ``conv(x, adj_t)`` with the pseudo-coordinates
    as the sparse adjacency's [E, dim] values (or ``conv(x, adj_t, edge_attr)`` in its order),
    ``conv(data)``; float16 / bfloat16 compute in float32.
    """

    def __init__(self, in_channels, out_channels: int, dim: int, kernel_size: int, separate_gaussians: bool = False,
                 aggr: str = "mean", root_weight: bool = True, bias: bool = True, backend: Optional[str] = None):
        super().__init__(backend)
        if aggr not in AGGRS:
            raise ValueError(f"GMMConv: aggr must be one of {sorted(AGGRS)}, got {aggr!r}")
        if dim < 1 or kernel_size < 1:
            raise ValueError(f"GMMConv: dim and kernel_size must be positive, got dim={dim}, kernel_size={kernel_size}")
        src_channels, dst_channels = in_channels if isinstance(in_channels, (tuple, list)) else (in_channels,) * 2
        self.in_channels, self.out_channels, self.dim, self.kernel_size = in_channels, out_channels, dim, kernel_size
        self.separate_gaussians, self.aggr, self.root_weight = separate_gaussians, aggr, root_weight
        self.rel_in_channels = src_channels
        if src_channels > 0:
            self.g = torch.nn.Parameter(torch.empty(self._shapes(src_channels)[0]))
            self.mu = torch.nn.Parameter(torch.empty(self._shapes(src_channels)[1]))
            self.sigma = torch.nn.Parameter(torch.empty(self._shapes(src_channels)[1]))
        else:  # PyG's lazy initialisation: the widths are fixed by the first call or a loaded state dict
            self.g = torch.nn.parameter.UninitializedParameter()
            self.mu = torch.nn.parameter.UninitializedParameter()
            self.sigma = torch.nn.parameter.UninitializedParameter()
        self.root = Linear(dst_channels, out_channels, bias=False, weight_initializer="glorot") if root_weight else None
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        gmm_program(aggr, separate_gaussians)  # built here: torch.compile cannot build it
        self.reset_parameters()

    def _shapes(self, src_channels: int):
        """The shapes of ``g`` and of ``mu`` / ``sigma`` for ``src_channels`` input features."""
        M, K, D = self.out_channels, self.kernel_size, self.dim
        return (src_channels, M * K), ((src_channels, M, K, D) if self.separate_gaussians else (K, D))

    def _materialize(self, src_channels: int, dtype=None, device=None) -> bool:
        """Fixes the widths of lazy parameters; whether they were lazy."""
        if not is_uninitialized(self.g):
            return False
        g_shape, shape = self._shapes(src_channels)
        self.g.materialize(g_shape, dtype=dtype, device=device)
        self.mu.materialize(shape, dtype=dtype, device=device)
        self.sigma.materialize(shape, dtype=dtype, device=device)
        self.rel_in_channels = src_channels
        return True

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        g = state_dict.get(prefix + "g")
        if g is not None:
            self._materialize(g.shape[0], dtype=g.dtype, device=self.g.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def reset_parameters(self) -> None:
        if not is_uninitialized(self.g):
            glorot(self.g)
            glorot(self.mu)
            glorot(self.sigma)
        if self.root is not None:
            self.root.reset_parameters()
        zeros(self.bias)

    @float32_inside
    def forward(self, x, edge_index=None, edge_attr: Optional[torch.Tensor] = None, size=None) -> torch.Tensor:
        """``forward(graph, x, edge_attr)`` or PyG's ``forward(x, edge_index, edge_attr, size=None)``."""
        call = self.read_call(x, edge_index, size, dense_rows=True, edge_attr=edge_attr)
        x_src, x_dst, u = call.x_src, call.x_dst, call.extra["edge_attr"]
        if x_src is None or x_src.dim() != 2:
            raise ValueError("GMMConv: x (or x_src) must be a [N, F] tensor")
        if self._materialize(x_src.shape[-1], dtype=x_src.dtype, device=x_src.device):
            with torch.no_grad():
                glorot(self.g)
                glorot(self.mu)
                glorot(self.sigma)
        if x_src.shape[-1] != self.rel_in_channels:
            raise ValueError(f"GMMConv: x has {x_src.shape[-1]} features, the layer was made for {self.rel_in_channels}")
        s = call.structure()
        if u is None:  # a sparse adjacency whose values are the pseudo-coordinates (PyG reads them so)
            u = s.values
        if u is None:
            raise ValueError("GMMConv: edge_attr (the edges' pseudo-coordinates, [E, dim]) is required")
        u = u.view(-1, 1) if u.dim() == 1 else u
        if u.dim() != 2 or u.shape != (s.num_edges, self.dim):
            raise ValueError(f"GMMConv: edge_attr must be [E, dim] = [{s.num_edges}, {self.dim}], "
                             f"got {list(u.shape)}")
        F, M, K, D = self.rel_in_channels, self.out_channels, self.kernel_size, self.dim
        prec = -0.5 / (EPS + self.sigma * self.sigma)
        prog = gmm_program(self.aggr, self.separate_gaussians)
        if self.separate_gaussians:  # [M, F, ...]: the program reduces the last axes only
            out = prog(s.graph, backend=self.backend, x=s.src(x_src), u=u.view(-1, 1, 1, D).to(x_src.dtype),
                       mu=self.mu.permute(1, 0, 2, 3), prec=prec.permute(1, 0, 2, 3), g=self.g.view(F, M, K).transpose(0, 1))
        else:
            xg = (x_src @ self.g).view(-1, K, M).transpose(1, 2)  # [N, M, K]
            out = prog(s.graph, backend=self.backend, xg=s.src(xg), u=u.view(-1, 1, D).to(x_src.dtype),
                       mu=self.mu, prec=prec)
        out = s.out(out)
        if x_dst is not None and self.root is not None:
            out = out + self.root(x_dst[:out.shape[0]])
        if self.bias is not None:
            out = out + self.bias
        return call.output(out)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, dim={self.dim})"
