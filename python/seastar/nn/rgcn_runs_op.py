"""``RGCNConv(mode="per_run")`` inside ``torch.compile`` and ``torch.export``: the path as two ops.

* ``seastar::rgcn_per_run(graph, kind, x, W, mean, backend) -> Tensor``: every vertex's
  ``sum_r sum_{e in run (i, r)} c_e x_src(e) @ W_r`` (``seastar.nn.rgcn_runs``), ``[N, out]``;
* ``seastar::rgcn_per_run_backward(graph, kind, x, W, grad_out, mean, backend, need_x, need_W)``:
  the gradients asked for, of ``x`` then of ``W``.

Eagerly the path is an ``autograd.Function`` whose context holds the graph's run plans, which
compiled code cannot trace. As ops, the plans stay behind the graph argument (a handle and
tensors whose shapes are its sizes, ``seastar.graph_inputs``): each op finds the graph when it
runs and takes the plans the graph keeps (built on first use, as eagerly), so one compiled
program serves every batch. The bodies are the eager path's own ``run_forward`` and
``run_backward``: compiled and eager calls do the same work.
"""
from __future__ import annotations

from typing import List, Optional

import torch

from ..direct_ops import custom_op
from ..graph import Graph
from ..graph_inputs import kind_ints, resolve
from .rgcn_runs import graph_run_plans, run_backward, run_forward


def per_run_op(graph: Graph, x: torch.Tensor, W: torch.Tensor, mean: bool, backend: Optional[str]) -> torch.Tensor:
    """The per_run messages of ``graph`` (typed, square: ``x`` has a row per vertex) in compiled
    code: ``[N, out]``."""
    return rgcn_per_run(graph._in.op_args(), kind_ints(graph), x, W, mean, backend)


def _plans(graph: List[torch.Tensor], kind: List[int], x: torch.Tensor, W: torch.Tensor, mean: bool):
    g = resolve(graph, kind)
    if x.shape[0] != g.num_nodes or W.dim() != 3 or x.shape[1] != W.shape[1]:
        raise ValueError(f"seastar::rgcn_per_run: x {tuple(x.shape)} and W {tuple(W.shape)} do not fit a graph of "
                         f"{g.num_nodes} vertices ([N, in] and [R, in, out])")
    return graph_run_plans(g, W.shape[0], mean, x.device, x.dtype)


@custom_op("seastar::rgcn_per_run")
def rgcn_per_run(graph: List[torch.Tensor], kind: List[int], x: torch.Tensor, W: torch.Tensor, mean: bool,
                 backend: Optional[str]) -> torch.Tensor:
    fwd, dfwd, _ = _plans(graph, kind, x, W, mean)
    return run_forward(x, W, fwd, dfwd, backend)


@rgcn_per_run.register_fake
def _rgcn_per_run_fake(graph, kind, x, W, mean, backend):
    return x.new_empty((graph[1].shape[0], W.shape[2]))


@custom_op("seastar::rgcn_per_run_backward")
def rgcn_per_run_backward(graph: List[torch.Tensor], kind: List[int], x: torch.Tensor, W: torch.Tensor,
                          grad_out: torch.Tensor, mean: bool, backend: Optional[str], need_x: bool,
                          need_W: bool) -> List[torch.Tensor]:
    fwd, dfwd, reversed_plans = _plans(graph, kind, x, W, mean)
    grad_x, grad_W = run_backward(x, W, grad_out, fwd, dfwd, reversed_plans, backend, need_x, need_W)
    return [g for g in (grad_x, grad_W) if g is not None]


@rgcn_per_run_backward.register_fake
def _rgcn_per_run_backward_fake(graph, kind, x, W, grad_out, mean, backend, need_x, need_W):
    return [torch.empty_like(t) for t, need in ((x, need_x), (W, need_W)) if need]


def _setup_context(ctx, inputs, output):
    graph, kind, x, W, mean, backend = inputs
    ctx.kind, ctx.mean, ctx.backend, ctx.num_graph = kind, mean, backend, len(graph)
    ctx.need = (x.requires_grad, W.requires_grad)
    ctx.save_for_backward(*graph, x, W)


def _backward(ctx, grad_out):
    saved = list(ctx.saved_tensors)
    graph, (x, W) = saved[:ctx.num_graph], saved[ctx.num_graph:]
    need_x, need_W = ctx.need
    grads = iter(rgcn_per_run_backward(graph, ctx.kind, x, W, grad_out, ctx.mean, ctx.backend, need_x, need_W)
                 if need_x or need_W else [])
    grad_x = next(grads) if need_x else None
    grad_W = next(grads) if need_W else None
    return [None] * ctx.num_graph, None, grad_x, grad_W, None, None


rgcn_per_run.register_autograd(_backward, setup_context=_setup_context)
