"""``Linear``: ``x @ weight.T + bias`` with PyG's initialisers and lazy ``in_channels=-1``.

The state-dict layout is ``torch.nn.Linear``'s (``weight`` [out, in], ``bias`` [out]), which is
also PyG's ``Linear``'s, so parameters load either way. With ``in_channels=-1`` the weight is a
``torch.nn.UninitializedParameter`` until the first call (or a loaded state dict) fixes its
width, then it is initialised; this is PyG's lazy initialisation. ``x`` may be a sparse COO
tensor (bag-of-words features).
"""
from __future__ import annotations

import math
from typing import Dict, Optional

import torch
from torch import nn

from ._utils import glorot, linear, zeros

INITIALISERS = (None, "glorot", "kaiming_uniform", "uniform", "zeros")


def is_uninitialized(p) -> bool:
    return isinstance(p, nn.parameter.UninitializedParameter)


class Linear(nn.Module):
    """Constructed with torch.nn.Linear's initialisation; ``reset_parameters()`` applies
    ``weight_initializer``: None (PyG's and torch's default, kaiming-uniform with a = sqrt(5),
    i.e. U(+-1/sqrt(in))), ``"glorot"``, ``"kaiming_uniform"``, ``"uniform"`` or ``"zeros"``;
    ``bias_initializer``: None (U(+-1/sqrt(in))) or ``"zeros"``."""

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True,
                 weight_initializer: Optional[str] = None, bias_initializer: Optional[str] = None):
        super().__init__()
        if weight_initializer not in INITIALISERS:
            raise ValueError(f"Linear: weight_initializer must be one of {INITIALISERS}, got {weight_initializer!r}")
        if bias_initializer not in (None, "zeros"):
            raise ValueError(f"Linear: bias_initializer must be None or 'zeros', got {bias_initializer!r}")
        if in_channels == 0 or in_channels < -1 or out_channels < 1:
            raise ValueError(f"Linear: in_channels must be > 0 (or -1: lazy) and out_channels > 0, "
                             f"got {in_channels} and {out_channels}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.weight_initializer, self.bias_initializer = weight_initializer, bias_initializer
        if in_channels > 0:
            self.weight = nn.Parameter(torch.empty(out_channels, in_channels))
        else:
            self.weight = nn.parameter.UninitializedParameter()
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        # torch.nn.Linear's own initialisation, drawn in its order; a layer then applies its
        # initialiser in its reset_parameters(). The layers keep the random draws they made
        # with torch.nn.Linear, so a seed gives the same model as before (and as api/nn.h).
        self._default_init()

    def _default_init(self) -> None:
        if is_uninitialized(self.weight):
            return
        bound = 1.0 / math.sqrt(self.weight.shape[1])
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    @property
    def in_features(self) -> int:  # torch.nn.Linear's name, read by code that infers widths
        return self.in_channels

    @property
    def out_features(self) -> int:
        return self.out_channels

    def reset_parameters(self) -> None:
        if is_uninitialized(self.weight):
            return
        init = self.weight_initializer
        if init == "glorot":
            glorot(self.weight)
        elif init == "zeros":
            zeros(self.weight)
        else:  # None, "kaiming_uniform" (a = sqrt(5)) and "uniform" all draw U(+-1/sqrt(fan_in))
            bound = 1.0 / math.sqrt(self.weight.shape[1])
            with torch.no_grad():
                self.weight.uniform_(-bound, bound)
        if self.bias is not None:
            if self.bias_initializer == "zeros":
                zeros(self.bias)
            else:
                bound = 1.0 / math.sqrt(self.weight.shape[1])
                with torch.no_grad():
                    self.bias.uniform_(-bound, bound)

    def materialize(self, in_channels: int) -> None:
        """Fixes the width of a lazy weight and initialises it (no-op once initialised)."""
        if not is_uninitialized(self.weight):
            return
        with torch.no_grad():
            dtype = self.bias.dtype if self.bias is not None else None
            device = self.bias.device if self.bias is not None else None
            self.weight.materialize((self.out_channels, int(in_channels)), dtype=dtype, device=device)
        self.in_channels = int(in_channels)
        self.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.materialize(x.shape[-1])
        return linear(x, self.weight, self.bias)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        w = state_dict.get(prefix + "weight")
        if is_uninitialized(self.weight) and w is not None and not is_uninitialized(w):
            self.weight.materialize(tuple(w.shape), dtype=w.dtype, device=self.weight.device)
            self.in_channels = int(w.shape[1])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, bias={self.bias is not None})"


class HeteroDictLinear(nn.Module):
    """PyG's ``HeteroDictLinear`` layout: ``lins`` a ModuleDict of per-key Linears."""

    def __init__(self, in_channels: Dict[str, int], out_channels: int, **kwargs):
        super().__init__()
        self.in_channels, self.out_channels = dict(in_channels), out_channels
        self.lins = nn.ModuleDict({k: Linear(c, out_channels, **kwargs) for k, c in self.in_channels.items()})

    def reset_parameters(self) -> None:
        for lin in self.lins.values():
            lin.reset_parameters()

    def forward(self, x_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        return {k: lin(x_dict[k]) for k, lin in self.lins.items() if k in x_dict}
