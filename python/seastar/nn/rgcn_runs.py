"""The ``per_run`` path of ``RGCNConv``: aggregate each (vertex, relation) run, then transform it.

R-GCN's message ``c_e * x_src @ W_r`` is linear in ``x_src``, so the sum over the in-edges of
``i`` with relation ``r`` (one *run* of the type-sorted CSC) can be taken before the transform:

    out_i = sum_r (sum_{e in run (i, r)} c_e x_src(e)) @ W_r = sum_r H_(i,r) @ W_r

``H`` is an untyped weighted aggregation (the fused ``gcn_weighted_sum`` program over a *run
graph* whose edge ``e`` goes from ``src_e`` to the run of ``(dst_e, type_e)``), and the transform
is one dense GEMM per relation on contiguous rows (runs are sorted by relation). The backward
pass is the same computation on the reversed graph: the gradient of ``x`` aggregates
``c_e * grad_out[dst]`` per (source, relation) run ``G`` and multiplies by ``W_r^T``, and the
weight gradient is ``W_r' = sum_p x_src(p)^T G_p``, one GEMM per relation on the same runs.
When ``x`` needs no gradient (input features), the reversed plan is never built: the weight
gradient re-aggregates the forward runs instead, ``W_r' = sum_q H_q^T grad_out[dst(q)]``.

Runs are processed in chunks of at most ``max(N, 4096)`` rows, so the working set is two
``[chunk, F]`` buffers whatever the number of runs (a [Q, F] table of all runs would be as
large as the edge messages on a graph where most runs hold one edge). Nothing of the graph
work is saved for backward beyond ``x`` and ``W``: backward re-aggregates, which costs one
sparse pass, instead of holding ``Q x F`` floats between the passes.
"""
from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Tuple

import torch

from ..graph import Graph
from ..graph_ops import derived
from ._programs import neighbour_sum, weighted_sum
from .relations import edge_types, relation_norm

MIN_CHUNK_ROWS = 4096


class RunChunk(NamedTuple):
    """Runs ``[q0, q0 + rows)`` of a plan: their aggregation graph and where they go.

    ``graph`` has ``vertices`` vertices; its edge ``k`` runs from the source vertex of plan edge
    ``edges[k]`` (an index into the original edge list) to the chunk-local run id.
    ``run_vertex[j]`` is the vertex that run ``j`` belongs to (its destination in the forward
    plan, its source in the reversed plan); ``segments`` lists ``(relation, first, end)`` row
    ranges, one per relation present in the chunk."""

    graph: Graph
    edges: torch.Tensor
    run_vertex: torch.Tensor
    segments: List[Tuple[int, int, int]]
    rows: int


class RunPlan(NamedTuple):
    """The runs of one direction of a typed graph, chunked; ``num_runs`` of them in all."""

    chunks: List[RunChunk]
    num_runs: int
    num_vertices: int
    vertices: int  # vertex count of every chunk graph (>= num_vertices; inputs are zero-padded)


def count_runs(vertex: torch.Tensor, edge_type: torch.Tensor, num_nodes: int) -> int:
    """The number of distinct (vertex, relation) pairs of the edges."""
    return int(torch.unique(edge_type * num_nodes + vertex).numel())


def build_run_plan(src: torch.Tensor, dst: torch.Tensor, edge_type: torch.Tensor, num_nodes: int,
                   chunk_rows: Optional[int] = None) -> RunPlan:
    """Group the edges ``src -> dst`` by (``dst``, relation) runs, sorted by relation then ``dst``,
    and cut the runs into chunks of ``chunk_rows`` (default ``max(N, 4096)``)."""
    n = num_nodes
    rows = max(n, MIN_CHUNK_ROWS) if chunk_rows is None else int(chunk_rows)
    key = edge_type * n + dst
    order = torch.argsort(key, stable=True)
    runs, run_of_edge = torch.unique_consecutive(key[order], return_inverse=True)
    q = runs.numel()
    run_vertex, run_rel = runs % n, runs // n
    vertices = max(n, rows)
    chunks: List[RunChunk] = []
    for q0 in range(0, q, rows):
        q1 = min(q0 + rows, q)
        e0, e1 = torch.searchsorted(run_of_edge, torch.tensor([q0, q1])).tolist()
        edges = order[e0:e1]
        local = run_of_edge[e0:e1] - q0
        graph = Graph.from_edge_index(torch.stack([src[edges], local]), num_nodes=vertices)
        rel = run_rel[q0:q1]
        present, counts = torch.unique_consecutive(rel, return_counts=True)
        bounds = [0] + torch.cumsum(counts, 0).tolist()
        segments = [(int(r), bounds[i], bounds[i + 1]) for i, r in enumerate(present.tolist())]
        chunks.append(RunChunk(graph, edges, run_vertex[q0:q1].clone(), segments, q1 - q0))
    return RunPlan(chunks, q, n, vertices)


def _graph_run_plan(graph: Graph, direction: str, num_relations: int) -> RunPlan:
    """The (destination, relation) runs of ``graph`` ("forward") or its (source, relation) runs."""
    src, dst = graph.edge_index.long()
    t = edge_types(graph, num_relations, "RGCNConv")
    a, b = (src, dst) if direction == "forward" else (dst, src)
    return build_run_plan(a, b, t, graph.num_nodes)


def _graph_device_plan(graph: Graph, direction: str, num_relations: int, device: str, dtype) -> "DevicePlan":
    """A run plan's per-chunk tensors on ``device``: the run vertices, and with ``dtype`` (mean
    aggregation) each chunk's edge weights, the graph's relation norms."""
    norm = None if dtype is None else relation_norm(graph, num_relations, device, dtype)
    return device_plan(derived(graph, _graph_run_plan, direction, num_relations), norm, device)


def graph_run_plans(graph: Graph, num_relations: int, mean: bool, device, dtype):
    """The forward (destination, relation) run plan of ``graph`` with its per-chunk tensors on
    ``device`` (edge weights in ``dtype`` when ``mean``), and a function giving the reversed
    (source, relation) plan, built on first use; all kept by the graph (device tensors per
    device and dtype)."""
    dtype = dtype if mean else None

    def plan(direction: str):
        return (derived(graph, _graph_run_plan, direction, num_relations),
                derived(graph, _graph_device_plan, direction, num_relations, str(device), dtype))

    return plan("forward") + (lambda: plan("reversed"),)


class DevicePlan(NamedTuple):
    """A plan's per-chunk tensors on one device and dtype: edge weights and run vertices."""

    weights: List[Optional[torch.Tensor]]
    run_vertex: List[torch.Tensor]


def device_plan(plan: RunPlan, norm: Optional[torch.Tensor], device) -> DevicePlan:
    weights = [None if norm is None else norm.index_select(0, c.edges.to(norm.device)).contiguous()
               for c in plan.chunks]
    return DevicePlan(weights, [c.run_vertex.to(device) for c in plan.chunks])


def _aggregate(chunk: RunChunk, h: torch.Tensor, w: Optional[torch.Tensor], backend) -> torch.Tensor:
    if w is None:
        return neighbour_sum(chunk.graph, backend=backend, h=h)
    return weighted_sum(chunk.graph, backend=backend, h=h, w=w)


def _pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    return t if t.shape[0] == rows else torch.cat([t, t.new_zeros((rows - t.shape[0],) + t.shape[1:])])


def apply_plan(plan: RunPlan, dplan: DevicePlan, h: torch.Tensor, W: Optional[torch.Tensor], transpose: bool,
               out: Optional[torch.Tensor], backend=None, grad_W: Optional[torch.Tensor] = None,
               other: Optional[torch.Tensor] = None, agg_first: bool = True) -> None:
    """For every run ``(v, r)`` with aggregated ``a = sum_e c_e h[src_e]``:
    ``out[v] += a @ W_r`` (``W_r^T`` when ``transpose``; skipped when ``out`` is None) and, with
    ``grad_W``, ``grad_W[r] += other[v]^T @ a`` (``agg_first``) or ``a^T @ other[v]``."""
    h = _pad_rows(h.contiguous(), plan.vertices)
    rows = max((c.rows for c in plan.chunks), default=0)
    buf = None if out is None else h.new_empty((rows, out.shape[1]))
    for chunk, w, rv in zip(plan.chunks, dplan.weights, dplan.run_vertex):
        agg = _aggregate(chunk, h, w, backend)
        o = None if grad_W is None else other.index_select(0, rv)
        for r, a, b in chunk.segments:
            if out is not None:
                torch.mm(agg[a:b], W[r].t() if transpose else W[r], out=buf[a:b])
            if grad_W is not None:
                if agg_first:
                    grad_W[r].addmm_(o[a:b].t(), agg[a:b])
                else:
                    grad_W[r].addmm_(agg[a:b].t(), o[a:b])
        if out is not None:
            out.index_add_(0, rv, buf[:chunk.rows])


class PerRunConv(torch.autograd.Function):
    """``sum_r sum_{e in run (i, r)} c_e x_src(e) @ W_r`` with the forward plan ``fwd`` (runs
    of (destination, relation)). ``plans`` gives the reversed plan (runs of (source, relation))
    on demand: it is needed only for the gradient of ``x``. Without it, the weight gradient
    re-aggregates the forward runs, ``W_r' = sum_q H_q^T grad_out[dst(q)]``, one GEMM per
    relation again."""

    @staticmethod
    def forward(ctx, x, W, fwd, dfwd, plans, backend):
        out = run_forward(x, W, fwd, dfwd, backend)
        ctx.save_for_backward(x, W)
        ctx.plans = (fwd, dfwd, plans, backend)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        x, W = ctx.saved_tensors
        fwd, dfwd, plans, backend = ctx.plans
        grad_x, grad_W = run_backward(x, W, grad_out, fwd, dfwd, plans, backend, ctx.needs_input_grad[0],
                                      ctx.needs_input_grad[1])
        return grad_x, grad_W, None, None, None, None


def run_forward(x: torch.Tensor, W: torch.Tensor, fwd: RunPlan, dfwd: DevicePlan, backend) -> torch.Tensor:
    """``PerRunConv``'s forward: [num_vertices, out]."""
    out = x.new_zeros((fwd.num_vertices, W.shape[2]))
    apply_plan(fwd, dfwd, x, W, False, out, backend)
    return out


def run_backward(x: torch.Tensor, W: torch.Tensor, grad_out: torch.Tensor, fwd: RunPlan, dfwd: DevicePlan,
                 plans: Callable[[], Tuple[RunPlan, DevicePlan]], backend, need_x: bool,
                 need_W: bool) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """``PerRunConv``'s backward: (the gradient of ``x`` or None, of ``W`` or None)."""
    grad_x = x.new_zeros(x.shape) if need_x else None
    grad_W = torch.zeros_like(W) if need_W else None
    grad_out = grad_out.contiguous()
    if need_x:
        rev, drev = plans()
        apply_plan(rev, drev, grad_out, W, True, grad_x, backend, grad_W=grad_W, other=x)
    elif need_W:
        apply_plan(fwd, dfwd, x, None, False, None, backend, grad_W=grad_W, other=grad_out, agg_first=False)
    return grad_x, grad_W


def per_run_conv(x: torch.Tensor, W: torch.Tensor, fwd: RunPlan, dfwd: DevicePlan,
                 reversed_plans: Callable[[], Tuple[RunPlan, DevicePlan]], backend=None) -> torch.Tensor:
    """``reversed_plans()`` returns the reversed plan and its device tensors (built on first use)."""
    return PerRunConv.apply(x, W, fwd, dfwd, reversed_plans, backend)
