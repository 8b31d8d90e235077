"""The reference executor: runs any GIR module with plain torch ops (gather / index_add / scatter).

It is the oracle the fused kernels are tested against and the slow fallback for programs a
backend cannot run. It materialises every edge value, so it is not the fast path. Row values
carry their row axis first: Vertex [N, *shape], Edge [E, *shape]; Param values have no row axis.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch

from . import _C
from .graph import Graph


class _Ctx:
    def __init__(self, graph: Graph, device, dtype):
        t = graph.tensors(device)
        self.src = t["src"].long()
        self.dst = t["dst"].long()
        self.node_type = t["node_type"].long() if "node_type" in t else None
        self.edge_type = t["edge_type"].long() if "edge_type" in t else None
        self.N, self.E = graph.num_dst, graph.num_edges
        self.NS = graph.num_src  # a bipartite graph's sources (N on a square graph)
        self.device, self.dtype = device, dtype

    def index(self, group: str) -> torch.Tensor:
        return self.dst if group == "dst" else self.src

    def count(self, group: str) -> int:
        """The vertices an aggregation over ``group`` has rows for: its centres."""
        return self.N if group == "dst" else self.NS

    def rows(self, space: str) -> Optional[int]:
        return {"Vertex": self.N, "Edge": self.E}.get(space)


def _align(x: torch.Tensor, space: str, rank: int) -> torch.Tensor:
    """Inserts singleton feature axes after the row axis so feature shapes broadcast right-aligned."""
    has_row = space != "Param"
    feat = x.dim() - (1 if has_row else 0)
    if feat >= rank or not has_row:
        return x
    return x.reshape(x.shape[:1] + (1,) * (rank - feat) + x.shape[1:])


def _sum_to(x: torch.Tensor, has_row: bool, target: Sequence[int]) -> torch.Tensor:
    lead = 1 if has_row else 0
    feat = list(x.shape[lead:])
    extra = len(feat) - len(target)
    if extra > 0:
        x = x.sum(dim=tuple(range(lead, lead + extra)))
    for i, t in enumerate(target):
        if t == 1 and x.shape[lead + i] != 1:
            x = x.sum(dim=lead + i, keepdim=True)
    return x


def _scatter(x: torch.Tensor, index: torch.Tensor, n: int, reduce: str) -> torch.Tensor:
    out = x.new_zeros((n,) + x.shape[1:])
    idx = index.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    return out.scatter_reduce(0, idx, x, reduce=reduce, include_self=False)


def _arg_extreme(x: torch.Tensor, index: torch.Tensor, n: int, reduce: str) -> torch.Tensor:
    """Smallest edge id reaching the max (min) of each group, -1 for an empty group."""
    best = _scatter(x, index, n, reduce)
    E = x.shape[0]
    eid = torch.arange(E, device=x.device).view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    cand = torch.where(x == best[index], eid, torch.full_like(eid, E))
    first = torch.full((n,) + x.shape[1:], E, dtype=torch.long, device=x.device)
    idx = index.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    first = first.scatter_reduce(0, idx, cand, reduce="amin", include_self=True)
    return torch.where(first == E, torch.full_like(first, -1), first)


def _matvec(x, xs, w, ws, transpose=False):
    if transpose:
        w = w.transpose(-1, -2)
    if ws == "Param":
        return torch.matmul(x, w)
    # a typed row of weights per vertex/edge: [R, k, n]
    if xs == "Param":
        x = x.unsqueeze(0).expand((w.shape[0],) + x.shape)
    lead = x.dim() - 2
    w = w.reshape(w.shape[:1] + (1,) * lead + w.shape[1:])
    return torch.matmul(x.unsqueeze(-2), w).squeeze(-2)


def _elementwise_rules() -> Dict[str, tuple]:
    """op -> (binary, fn(a, b, p0, p1)): each elementwise row's torch expression in ops.def."""
    rules = {}
    for row in _C.op_table():
        if row["kind"] in ("Unary", "Binary") and row["ref"]:
            fn = eval(f"lambda a, b, p0, p1: {row['ref']}", {"torch": torch})  # noqa: S307 - our own table
            rules[row["name"]] = (row["kind"] == "Binary", fn)
    return rules


_ELEMENTWISE = _elementwise_rules()


def evaluate(module, graph: Graph, inputs: Dict[str, torch.Tensor],
             grad_outputs: Optional[Sequence[torch.Tensor]] = None,
             dtype: Optional[torch.dtype] = None) -> List[torch.Tensor]:
    """Evaluates ``module`` (a seastar._C.Module) and returns its outputs in order."""
    if dtype is None:
        floats = [t for t in inputs.values() if t.is_floating_point()]
        dtype = floats[0].dtype if floats else torch.get_default_dtype()
    device = next(iter(inputs.values())).device if inputs else torch.device("cpu")
    c = _Ctx(graph, device, dtype)
    vals: List[Optional[torch.Tensor]] = []
    values = module.values
    for v in values:
        vals.append(_eval(v, values, vals, c, inputs, grad_outputs))
    return [vals[o] for o in module.outputs]


def _eval(v, values, vals, c: _Ctx, inputs, grad_outputs):
    op, ins = v["op"], v["inputs"]
    a = vals[ins[0]] if ins else None
    b = vals[ins[1]] if len(ins) > 1 else None
    sp = lambda i: values[ins[i]]["space"]  # noqa: E731
    p0, p1 = v["p0"], v["p1"]
    rank = len(v["shape"])
    if op in ("input_vertex", "input_edge", "param"):
        return inputs[v["name"]].to(c.dtype)
    if op == "grad_output":
        return grad_outputs[int(p0)]
    if op == "constant":
        return torch.tensor(p0, dtype=c.dtype, device=c.device)
    if op == "edge_id":
        return torch.arange(c.E, device=c.device)
    if op == "edge_type":
        return c.edge_type
    if op == "node_type":
        return c.node_type
    if op == "degree":
        deg = torch.bincount(c.index(v["group"]), minlength=c.count(v["group"]))
        return deg.to(c.dtype)
    if op == "gather":
        return a[c.index(v["group"])]
    if op in _ELEMENTWISE:
        binary, fn = _ELEMENTWISE[op]
        if binary:
            a, b = _align(a, sp(0), rank), _align(b, sp(1), rank)
        r = fn(a, b, p0, p1)
        return r if r.dtype == c.dtype else r.to(c.dtype)
    if op == "fsum":
        return a.sum(-1)
    if op == "fmean":
        return a.mean(-1)
    if op == "fmax":
        return a.amax(-1)
    if op == "unsqueeze":
        return a.unsqueeze(-1)
    if op == "sum_to":
        return _sum_to(a, v["space"] != "Param", v["attr_shape"])
    if op == "expand":
        has_row = v["space"] != "Param"
        x = _align(a, v["space"], len(v["attr_shape"]))
        return x.expand(((x.shape[0],) if has_row else ()) + tuple(v["attr_shape"]))
    if op == "matvec":
        return _matvec(a, sp(0), b, sp(1))
    if op == "matvec_t":
        return _matvec(a, sp(0), b, sp(1), transpose=True)
    if op == "outer":
        r = torch.einsum("...k,...n->...kn", a, b)
        has_row = v["space"] != "Param"
        lead = r.dim() - 2 - (1 if has_row else 0)
        if lead > 0:
            r = r.sum(dim=tuple(range(1 if has_row else 0, (1 if has_row else 0) + lead)))
        return r
    if op == "type_index":
        return a[b]
    if op == "sum_rows":
        return a.sum(0)
    if op == "sum_rows_typed":
        out = a.new_zeros((int(p0),) + a.shape[1:])
        return out.index_add(0, b, a)
    idx = c.index(v["group"]) if v["group"] != "none" else None
    n = c.count(v["group"])
    if op == "agg_sum":
        return a.new_zeros((n,) + a.shape[1:]).index_add(0, idx, a)
    if op == "agg_mean":
        s = a.new_zeros((n,) + a.shape[1:]).index_add(0, idx, a)
        deg = torch.bincount(idx, minlength=n).clamp(min=1).to(a.dtype)
        return s / deg.view((-1,) + (1,) * (a.dim() - 1))
    if op == "agg_max":
        return _scatter(a, idx, n, "amax")
    if op == "agg_min":
        return _scatter(a, idx, n, "amin")
    if op == "agg_argmax":
        return _arg_extreme(a, idx, n, "amax")
    if op == "agg_argmin":
        return _arg_extreme(a, idx, n, "amin")
    if op == "agg_softmax_sum":
        x, f = _align(a, sp(0), rank), _align(b, sp(1), rank)
        m = _scatter(x.detach(), idx, n, "amax")
        ex = torch.exp(x - m[idx])
        z = ex.new_zeros((n,) + ex.shape[1:]).index_add(0, idx, ex)
        y = ex / z[idx] * f
        return y.new_zeros((n,) + y.shape[1:]).index_add(0, idx, y)
    if op == "softmax":
        m = _scatter(a.detach(), idx, n, "amax")
        ex = torch.exp(a - m[idx])
        z = ex.new_zeros((n,) + a.shape[1:]).index_add(0, idx, ex)
        return ex / z[idx]
    raise NotImplementedError(f"the reference executor has no rule for '{op}'")
