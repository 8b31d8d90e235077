"""HeteroConv with PyG's interface: convolutions keyed by ``(src, rel, dst)`` edge types,
``conv(x_dict, edge_index_dict, *other_dicts, **kwargs_dicts) -> out_dict``.

For each edge type with a layer, the layer is called with the entries of every dict argument
that belong to it, as PyG's ``HeteroConv`` picks them: the edge type's own entry
(``edge_index_dict[et]``, ``edge_attr_dict[et]``), else the node type's entry when source and
destination are one type (``x_dict[t]``), else the pair ``(x_dict[src], x_dict[dst])``
(bipartite). Edge types without any edge-level argument are skipped. The outputs of the edge
types ending in one node type are combined by ``aggr``: ``"sum"``, ``"mean"``, ``"max"``,
``"min"``, ``"cat"`` (along features) or None (stacked along a new axis 1).

Submodules are kept under PyG's ModuleDict keys (``<src___rel___dst>``, dots as ``#``), so a
PyG ``HeteroConv``'s state dict loads.
"""
from __future__ import annotations

import logging
from typing import Dict, List, Optional, Tuple

import torch

log = logging.getLogger("seastar")

DICT_AGGRS = ("sum", "mean", "max", "min", "cat", None)
_MODULE_DICT_ATTRS = tuple(dir(torch.nn.ModuleDict))


def is_edge_type(key) -> bool:
    return isinstance(key, tuple) and len(key) == 3 and all(isinstance(k, str) for k in key)


def internal_key(key) -> str:
    """PyG's ``ModuleDict.to_internal_key``: a tuple becomes ``<a___b___c>``, '.' becomes '#'."""
    if isinstance(key, tuple):
        key = f"<{'___'.join(key)}>"
    if key in _MODULE_DICT_ATTRS:
        key = f"<{key}>"
    return key.replace(".", "#")


def check_self_loops(convs: Dict[Tuple[str, str, str], torch.nn.Module]) -> None:
    for et, module in convs.items():
        if et[0] != et[-1] and getattr(module, "add_self_loops", False):
            raise ValueError(f"'add_self_loops' attribute set to 'True' on module '{module}' for use with edge "
                             f"type(s) '{[et]}'. This will lead to incorrect message passing results.")
    src = {et[0] for et in convs}
    dst = {et[-1] for et in convs}
    if src - dst:
        log.warning("HeteroConv: node types %s are no edge type's destination: their representations are not "
                    "updated by message passing", sorted(src - dst))


def group(xs: List[torch.Tensor], aggr: Optional[str]) -> Optional[torch.Tensor]:
    if not xs:
        return None
    if aggr is None:
        return torch.stack(xs, dim=1)
    if len(xs) == 1:
        return xs[0]
    if aggr == "cat":
        return torch.cat(xs, dim=-1)
    out = getattr(torch, aggr)(torch.stack(xs, dim=0), dim=0)
    return out[0] if isinstance(out, tuple) else out


def _pick(value_dict, et):
    """The argument of edge type ``et`` in ``value_dict`` and whether it is edge-level."""
    src, _, dst = et
    if et in value_dict:
        return value_dict[et], True
    if src == dst and src in value_dict:
        return value_dict[src], False
    if src in value_dict or dst in value_dict:
        return (value_dict.get(src, None), value_dict.get(dst, None)), False
    return None, False


def dict_forward(convs: Dict[tuple, torch.nn.Module], aggr: Optional[str], args_dict, kwargs_dict):
    if len(args_dict) == 1 and not kwargs_dict and hasattr(args_dict[0], "x_dict") \
            and hasattr(args_dict[0], "edge_index_dict"):  # a HeteroData-like object
        args_dict = (args_dict[0].x_dict, args_dict[0].edge_index_dict)
    for i, d in enumerate(args_dict):
        if not isinstance(d, dict):
            raise TypeError(f"HeteroConv: argument {i} must be a dict keyed by node or edge types, "
                            f"got {type(d).__name__}")
    for name in kwargs_dict:
        if not name.endswith("_dict"):
            raise ValueError(f"Keyword arguments in 'HeteroConv' need to end with '_dict' (got '{name}')")
    out: Dict[str, List[torch.Tensor]] = {}
    for et, conv in convs.items():
        has_edge_level = False
        args = []
        for d in args_dict:
            v, edge_level = _pick(d, et)
            has_edge_level |= edge_level
            if v is not None:
                args.append(v)
        kwargs = {}
        for name, d in kwargs_dict.items():
            v, edge_level = _pick(d, et)
            has_edge_level |= edge_level
            if v is not None:
                kwargs[name[:-len("_dict")]] = v
        if not has_edge_level:
            continue
        out.setdefault(et[-1], []).append(conv(*args, **kwargs))
    return {k: group(v, aggr) for k, v in out.items()}
