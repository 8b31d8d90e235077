"""The vertex programs more than one layer runs: sums over in-edges (plain, weighted, with GCN's
per-vertex normalisation factors, with the self loops a graph does not hold), ``propagate``,
which picks the one a layer's weights call for, and HGT's attention over the pair graph.

A program's name (``@vertex_program(name=...)``) names its kernels and its entries in IR dumps;
the names stay as they were when the programs lived with the first layer that used them.
"""
from __future__ import annotations

from typing import Union

import torch

from .. import ops as ss
from ..program import vertex_program
from ._gcn_norm import BlockNorm, VertexNorm


@vertex_program(name="neighbour_sum")
def neighbour_sum(v):
    """sum over in-edges of h[src]."""
    return ss.sum(e.src.h for e in v.in_edges())


@vertex_program(name="gcn_weighted_sum")
def weighted_sum(v):
    """sum over in-edges of w[e] * h[src]: the propagation of GCN and APPNP."""
    return ss.sum(e.src.h * e.w for e in v.in_edges())


@vertex_program(name="gcn_symmetric_sum")
def symmetric_sum(v):
    """sum over in-edges of d[src] * h[src] * d[dst]: GCN's propagation without edge weights."""
    return ss.sum(e.src.d * e.src.h * e.dst.d for e in v.in_edges())


@vertex_program(name="gcn_symmetric_sum_loops")
def symmetric_sum_with_loops(v):
    """``symmetric_sum`` plus the self loops the graph does not hold: ``l[v] * h[v]``."""
    return ss.sum(e.src.d * e.src.h * e.dst.d for e in v.in_edges()) + v.l * v.h


@vertex_program(name="gcn_weighted_symmetric_sum_loops")
def weighted_symmetric_sum_with_loops(v):
    """``symmetric_sum_with_loops`` with edge weights ``w`` (``_gcn_norm._weighted_norm``)."""
    return ss.sum(e.src.d * e.src.h * e.w * e.dst.d for e in v.in_edges()) + v.l * v.h


@vertex_program(name="gcn_block_sum")
def block_sum(v):
    """sum over in-edges of ds[src] * h[src] * dd[dst]: a block's sides have factors of their own."""
    return ss.sum(e.src.ds * e.src.h * e.dst.dd for e in v.in_edges())


@vertex_program(name="gcn_block_sum_loops")
def block_sum_with_loops(v):
    """``block_sum`` plus the self loops the block does not hold: ``l[v] * h[v]`` (``h[v]`` is
    source ``v``'s row: a block's destination ``v`` is its source ``v``)."""
    return ss.sum(e.src.ds * e.src.h * e.dst.dd for e in v.in_edges()) + v.l * v.h


def propagate(s, h: torch.Tensor, w: Union[None, torch.Tensor, VertexNorm, BlockNorm], backend) -> torch.Tensor:
    """``sum_e w_e h_src`` (or the plain sum without ``w``) over ``s``'s in-edges, num_dst rows;
    ``w`` per edge [E] / [E, 1], or GCN's normalisation as per-vertex factors."""
    if w is None:
        return s.out(neighbour_sum(s.graph, backend=backend, h=s.src(h)))
    if isinstance(w, BlockNorm):
        ds, dd = s.src(w.dsrc.to(h.dtype)), s.dst(w.ddst.to(h.dtype))
        if w.loop is None:
            return s.out(block_sum(s.graph, backend=backend, h=s.src(h), ds=ds, dd=dd))
        return s.out(block_sum_with_loops(s.graph, backend=backend, h=s.src(h), ds=ds, dd=dd,
                                          l=s.dst(w.loop.to(h.dtype))))
    if isinstance(w, VertexNorm):
        d = s.src(w.dinv.to(h.dtype))
        if w.w is not None:
            return s.out(weighted_symmetric_sum_with_loops(s.graph, backend=backend, h=s.src(h), d=d,
                                                           w=w.w.to(h.dtype), l=s.dst(w.loop.to(h.dtype))))
        if w.loop is None:
            return s.out(symmetric_sum(s.graph, backend=backend, h=s.src(h), d=d))
        return s.out(symmetric_sum_with_loops(s.graph, backend=backend, h=s.src(h), d=d,
                                              l=s.dst(w.loop.to(h.dtype))))
    if w.dim() == 1:
        w = w.unsqueeze(-1)
    return s.out(weighted_sum(s.graph, backend=backend, h=s.src(h), w=w.to(h.dtype)))


@vertex_program(name="hgt_pairs")
def hgt_pairs(v):
    """HGT's attention over the pair graph (both HGT layers' ``per_pair`` path): ``k``, ``val``
    [M, H, d] are per (source, relation) pair, already transformed (and ``k`` scaled by
    mu / sqrt(d)); ``q`` [M, H, d] per vertex."""
    alpha = ss.softmax([(e.src.k * v.q).sum(-1, keepdim=True) for e in v.in_edges()])
    return ss.sum(a * e.src.val for a, e in zip(alpha, v.in_edges()))
