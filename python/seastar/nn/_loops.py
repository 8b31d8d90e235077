"""Self loops as PyG adds them, and the per-edge values (weights, attributes) that go with them.

``with_loops`` builds, once per graph, the graph PyG's ``add_remaining_self_loops`` and
``remove_self_loops`` + ``add_self_loops`` both produce: the graph's edges that are not self
loops, in their order, followed by one loop per vertex ``0 .. L-1`` (``L = num_nodes``, or
``min(num_src, num_dst)`` on a bipartite graph). The two PyG functions differ only in the
values they give the loops, which ``loop_values`` computes per call (values may be learned):

* ``"remaining"`` (``add_remaining_self_loops``, GCN / APPNP on ``edge_index``): a vertex that
  had a self loop keeps that loop's value (with several, one of them, assigned as PyG does),
  the others get ``fill``;
* ``"sum"`` (``add_self_loops`` on a sparse adjacency, which then sums duplicate entries):
  ``fill`` plus the values of the vertex's own loops;
* ``"replace"`` (``remove_self_loops`` then ``add_self_loops``, GAT): every loop gets ``fill``,
  which may be a reduction (``"mean"``, ``"add"``, ...) of the values of the vertex's other
  in-edges.
"""
from __future__ import annotations

from typing import List, NamedTuple, Union

import torch

from ..derived_graphs import Derivation, register, self_loop_graph
from ..direct_ops import custom_op
from ..graph import Graph
from ..graph_inputs import kind_ints, resolve
from ..graph_ops import derived
from ._structure import Structure, make_graph

REDUCTIONS = {"mean": "mean", "add": "sum", "sum": "sum", "max": "amax", "min": "amin", "mul": "prod"}


class LoopGraph(NamedTuple):
    """``structure``: the non-loop edges, then loops ``0 .. num_loops-1``."""

    structure: Structure
    num_loops: int


class LoopIds(NamedTuple):
    """What edge values need to follow a LoopGraph: ``kept`` [E'] the ids of the non-loop edges
    in the input; ``loop_edges`` / ``loop_vertex``: the input's self loops at vertices below
    ``num_loops`` (edge ids) and their vertices. Kept apart from the LoopGraph, as only layers
    with edge values read them and ``kept`` is E' int64 ids."""

    kept: torch.Tensor
    loop_edges: torch.Tensor
    loop_vertex: torch.Tensor


def with_loops(s: Structure, num_loops: int = None) -> LoopGraph:
    if torch.compiler.is_compiling() and num_loops is None and not s.padded:
        # a graph that compiled code takes as an input: the loop graph is derived per call by an
        # op (derived_graphs), so the compiled code serves every graph of this kind
        return LoopGraph(Structure(self_loop_graph(s.graph), s.num_src, s.num_dst, None, None, s.layout),
                         min(s.num_src, s.num_dst))
    if num_loops is None:
        num_loops = min(s.num_src, s.num_dst)
    return derived(s.graph, loop_graph, s.num_src, s.num_dst, num_loops, s.layout)


def loop_ids(s: Structure, lg: LoopGraph) -> LoopIds:
    if _compiled_loops(s, lg):  # by an op, for whatever graph comes at run time
        return LoopIds(*loop_ids_op(s.graph._in.op_args(), kind_ints(s.graph), lg.num_loops,
                                    lg.structure.graph._in.edge_rows))
    return derived(s.graph, _loop_ids, s.num_src, s.num_dst, lg.num_loops)


def self_loops(s: Structure):
    """The ids of the graph's self loops and their vertices (int64), kept by the graph."""
    if torch.compiler.is_compiling() and not s.padded:  # by the op of loop_ids
        return tuple(loop_ids(s, with_loops(s))[1:])
    return derived(s.graph, _self_loops, s.num_src, s.num_dst)


def _compiled_loops(s: Structure, lg: LoopGraph) -> bool:
    """Whether ``lg`` is the loop graph compiled code derives by an op (``with_loops``)."""
    return torch.compiler.is_compiling() and not s.padded and lg.num_loops == min(s.num_src, s.num_dst)


@custom_op("seastar::loop_ids")
def loop_ids_op(graph: List[torch.Tensor], kind: List[int], num_loops: int,
                loop_edge_rows: torch.Tensor) -> List[torch.Tensor]:
    """``LoopIds`` of the given graph, whose loop graph has ``loop_edge_rows`` edges."""
    g = resolve(graph, kind)
    ids = g.derive(_loop_ids, g.num_src, g.num_dst, num_loops)
    return [t.clone() for t in ids]  # copies: compiled code owns its outputs


@loop_ids_op.register_fake
def _loop_ids_fake(graph, kind, num_loops, loop_edge_rows):
    # the kept edges are the loop graph's but its loops: sizes compiled code can add back up
    num_loop_edges = torch.library.get_ctx().new_dynamic_size()
    handle = graph[0]
    return [handle.new_empty(loop_edge_rows.shape[0] - num_loops), handle.new_empty(num_loop_edges),
            handle.new_empty(num_loop_edges)]


def _self_loops(graph, num_src: int, num_dst: int):
    num_loops = min(num_src, num_dst)
    if _in_core(graph, num_src, num_dst):
        _, edges, vertex = graph._g.self_loop_ids(num_loops)
        return edges, vertex
    ids = _ids_of_edge_list(graph.edge_index.long(), num_loops)
    return ids.loop_edges, ids.loop_vertex


def _in_core(graph, num_src: int, num_dst: int) -> bool:
    """Whether the graph has the loop graph's own sizes and shape, so the core can build it from
    the graph's storage; else (a square graph read as bipartite) the edge list is used."""
    return graph.num_src == num_src and graph.num_dst == num_dst and graph.is_bipartite == (num_src != num_dst)


def _ids_of_edge_list(ei: torch.Tensor, num_loops: int) -> LoopIds:
    is_loop = ei[0] == ei[1]
    loop_edges = torch.nonzero(is_loop & (ei[0] < num_loops)).flatten()
    return LoopIds(torch.nonzero(~is_loop).flatten(), loop_edges, ei[0, loop_edges])


def _loop_ids(graph, num_src: int, num_dst: int, num_loops: int) -> LoopIds:
    if _in_core(graph, num_src, num_dst):
        return LoopIds(*graph._g.self_loop_ids(num_loops))
    return _ids_of_edge_list(graph.edge_index.long(), num_loops)


def loop_graph(graph, num_src: int, num_dst: int, num_loops: int, layout) -> LoopGraph:
    if _in_core(graph, num_src, num_dst):
        # from the graph's own storage: no [2, E] int64 edge list is made for it (nor kept with
        # the graph once read), and the loop graph keeps none either (edges=None)
        return LoopGraph(Structure(Graph(graph._g.replace_self_loops(num_loops)), num_src, num_dst, None, None,
                                   layout), num_loops)
    ei = graph.edge_index.long()  # the structure's edges: its graph was built from them
    kept = _ids_of_edge_list(ei, num_loops).kept
    loops = torch.arange(num_loops, dtype=torch.int64)
    new_ei = torch.cat([ei[:, kept], torch.stack([loops, loops])], 1).contiguous()
    return LoopGraph(Structure(make_graph(new_ei, num_src, num_dst), num_src, num_dst, new_ei, None, layout),
                     num_loops)


def _self_loop_graph(graph: Graph, arg: int) -> Graph:
    ns, nd = graph.num_src, graph.num_dst
    return loop_graph(graph, ns, nd, min(ns, nd), None).structure.graph


# compiled code derives the self-loop graph by the op seastar::derived_graph: its derivation
register("self_loops", Derivation(_self_loop_graph, square_of_sources=False, same_edges=False))


def fill_values(fill: Union[float, torch.Tensor, str, None], like: torch.Tensor, index: torch.Tensor,
                num: int) -> torch.Tensor:
    """PyG's ``compute_loop_attr``: ``num`` rows shaped like ``like``'s, from a number, a tensor,
    None (ones) or the reduction named by ``fill`` of ``like``'s rows grouped by ``index``
    (0 for a group without rows)."""
    shape = (num,) + tuple(like.shape[1:])
    if fill is None:
        return like.new_ones(shape)
    if isinstance(fill, bool):
        raise TypeError(f"fill_value must be a number, a tensor or one of {sorted(REDUCTIONS)}, got {fill!r}")
    if isinstance(fill, (int, float)):
        return like.new_full(shape, float(fill))
    if isinstance(fill, torch.Tensor):
        t = fill.to(like.device, like.dtype)
        if t.dim() != like.dim():
            t = t.unsqueeze(0)
        return t.expand(shape).contiguous()
    if isinstance(fill, str):
        if fill not in REDUCTIONS:
            raise ValueError(f"fill_value must be a number, a tensor or one of {sorted(REDUCTIONS)}, got {fill!r}")
        idx = index.to(like.device).view((-1,) + (1,) * (like.dim() - 1)).expand_as(like)
        return like.new_zeros(shape).scatter_reduce(0, idx, like, reduce=REDUCTIONS[fill], include_self=False)
    raise TypeError(f"fill_value must be a number, a tensor or one of {sorted(REDUCTIONS)}, "
                    f"got {type(fill).__name__}")


def loop_values(lg: LoopGraph, ids: LoopIds, values: torch.Tensor, fill, mode: str) -> torch.Tensor:
    """The values of ``lg.structure``'s edges: ``values`` [E, ...] of the non-loop edges, then
    the loops' values by ``mode`` (see the module docstring); ``ids`` = loop_ids(...)."""
    dev = values.device
    kept = values[ids.kept.to(dev)]
    if mode == "replace":
        dst = lg.structure.edge_index[1, :ids.kept.numel()]
        loops = fill_values(fill, kept, dst, lg.num_loops)
    elif mode in ("remaining", "sum"):
        if isinstance(fill, str):
            raise ValueError(f"a reduction ({fill!r}) as the fill value of self loops is only supported when "
                             f"existing loops are replaced")
        loops = fill_values(fill, values, None, lg.num_loops)
        if mode == "remaining":
            if torch.compiler.is_compiling() or ids.loop_edges.numel():  # compiled: a size it cannot read
                # PyG's assignment (index_put): with several loops at a vertex one value wins and,
                # in backward, every one of them receives the loop's gradient
                loops = loops.index_put((ids.loop_vertex.to(dev),), values[ids.loop_edges.to(dev)])
        elif torch.compiler.is_compiling() or ids.loop_edges.numel():
            loops = loops.index_add(0, ids.loop_vertex.to(dev), values[ids.loop_edges.to(dev)])
    else:
        raise ValueError(f"unknown self-loop mode {mode!r}")
    return torch.cat([kept, loops])

