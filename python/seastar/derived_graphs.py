"""Graphs derived from a graph, inside compiled code: one op, ``seastar::derived_graph``.

A layer that runs its program on a graph made from the one it was given (GAT's graph with self
loops, R-GCN's square typed graph of a block and its edges in (destination, relation) order)
gets, inside ``torch.compile`` / ``torch.export``, a graph of the form compiled code reads
(``seastar.graph_inputs``): the op finds the given graph by its handle at run time, derives the
new graph once per graph and derivation (``Graph.derive``, kept with the given graph) and returns
the new graph's handle and its edge count. Its sizes are the given graph's where the derivation
keeps them (the same tensors, so the same symbolic sizes), and a new size the op reports where
it does not (a self-loop graph's edge count, which depends on how many loops the graph had).
"""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple

import torch

from . import graph_inputs
from .graph import Graph
from .graph_inputs import GraphKind, GraphTensors, kind_ints, rows, static_int


class Derivation(NamedTuple):
    make: Callable  # (graph, arg) -> Graph, run once per graph and arg
    square_of_sources: bool  # the new graph is square, with the given graph's sources as vertices
    same_edges: bool  # as many edges as the given graph (else an unknown count)


def _self_loop_graph(graph: Graph, arg: int) -> Graph:
    from .nn._loops import loop_graph
    ns, nd = graph.num_src, graph.num_dst
    return loop_graph(graph, ns, nd, min(ns, nd), None).structure.graph


def _typed_square(graph: Graph, num_relations: int) -> Graph:
    if graph.num_dst > graph.num_src:
        raise ValueError(f"a block with more destinations ({graph.num_dst}) than sources ({graph.num_src}) has no "
                         f"square graph of its sources")
    return Graph.from_edge_index(graph.edge_index, num_nodes=graph.num_src, edge_type=graph.edge_type.long(),
                                 num_edge_types=num_relations)


def _destination_ordered(graph: Graph, arg: int) -> Graph:
    from .reorder import destination_ordered
    return destination_ordered(graph)


DERIVATIONS: Dict[str, Derivation] = {
    "self_loops": Derivation(_self_loop_graph, False, False),
    "typed_square": Derivation(_typed_square, True, True),
    "destination_ordered": Derivation(_destination_ordered, False, True),
}


@torch.library.custom_op("seastar::derived_graph", mutates_args=())
def derived_graph_op(name: str, arg: int, graph: List[torch.Tensor], kind: List[int]) -> List[torch.Tensor]:
    g = graph_inputs.resolve(graph, kind)
    new = g.derive(DERIVATIONS[name].make, arg)
    return [new._in.handle.clone(), rows(new.num_edges)]


@derived_graph_op.register_fake
def _derived_graph_fake(name, arg, graph, kind):
    handle, edge_rows = graph[0], graph[3]
    if DERIVATIONS[name].same_edges:
        n = edge_rows.shape[0]
    else:
        n = torch.library.get_ctx().new_dynamic_size()
    return [handle.new_empty(1), edge_rows.new_empty((n, 0))]


def derive(graph: Graph, name: str, arg: int = 0, kind: GraphKind = None) -> Graph:
    """The graph ``name`` derives from ``graph`` (a ``Graph._view`` inside compiled code; eagerly,
    the derived graph itself). ``kind``: the new graph's, when it differs from ``graph``'s."""
    d = DERIVATIONS[name]
    if not torch.compiler.is_compiling():
        return graph.derive(d.make, arg)
    handle, edge_rows = derived_graph_op(name, static_int(arg), graph._in.op_args(), kind_ints(graph))
    t = graph._in
    src = t.src_rows
    dst = src if d.square_of_sources else t.dst_rows
    return Graph._view(GraphTensors(handle, src, dst, t.edge_rows if d.same_edges else edge_rows),
                       kind if kind is not None else graph._kind)


def self_loop_graph(graph: Graph) -> Graph:
    """``graph``'s edges that are not self loops, then one loop per vertex ``0 .. min(num_src,
    num_dst) - 1`` (``nn._loops.loop_graph``)."""
    return derive(graph, "self_loops")


def typed_square(graph: Graph, num_relations: int) -> Graph:
    """A typed block as the square typed graph of its sources (its destinations are its first sources)."""
    kind = GraphKind(False, False, 0, True, num_relations)
    return derive(graph, "typed_square", num_relations, kind)


def destination_ordered(graph: Graph) -> Graph:
    """``graph`` with its edges renumbered in (destination, relation) order (``reorder.destination_ordered``)."""
    return derive(graph, "destination_ordered")


# -- PyG's edge_index inside compiled code ---------------------------------------------------------
@torch.library.custom_op("seastar::graph_of_edge_index", mutates_args=())
def graph_of_edge_index_op(edge_index: torch.Tensor, src_rows: torch.Tensor, dst_rows: torch.Tensor,
                           flow: str) -> torch.Tensor:
    from .nn._structure import from_edge_index
    # checked and built once per tensor (its identity and version), as an eager call does
    s = from_edge_index(edge_index, src_rows.shape[0], dst_rows.shape[0], flow)
    return s.graph._in.handle.clone()


@graph_of_edge_index_op.register_fake
def _graph_of_edge_index_fake(edge_index, src_rows, dst_rows, flow):
    return edge_index.new_empty(1, dtype=torch.int64)


def graph_of_edge_index(edge_index: torch.Tensor, num_src, num_dst, flow: str) -> Graph:
    """The graph of a [2, E] ``edge_index`` inside compiled code: built (and checked) by an op at
    run time, once per tensor, so that compiled code neither reads the ids (a graph break) nor
    holds one graph: ``conv(x, edge_index)`` compiles once for every ``edge_index``."""
    src = torch.empty((num_src, 0), dtype=torch.uint8)
    from .torch_ops import _equal
    same = _equal(num_src, num_dst)
    dst = src if same else torch.empty((num_dst, 0), dtype=torch.uint8)
    handle = graph_of_edge_index_op(edge_index, src, dst, flow)
    edges = torch.empty((edge_index.shape[1], 0), dtype=torch.uint8)
    kind = GraphKind(not same, False, 0, False, 0)
    return Graph._view(GraphTensors(handle, src, dst, edges), kind)


@torch.library.custom_op("seastar::typed_graph_of_edge_index", mutates_args=())
def typed_graph_of_edge_index_op(edge_index: torch.Tensor, edge_type: torch.Tensor, src_rows: torch.Tensor,
                                 dst_rows: torch.Tensor, num_relations: int, layer: str) -> torch.Tensor:
    from .nn._structure import typed_square
    # checked and built once per pair of tensors, as an eager call does
    g = typed_square(edge_index, edge_type, src_rows.shape[0], dst_rows.shape[0], num_relations, layer)
    return g._in.handle.clone()


@typed_graph_of_edge_index_op.register_fake
def _typed_graph_of_edge_index_fake(edge_index, edge_type, src_rows, dst_rows, num_relations, layer):
    return edge_index.new_empty(1, dtype=torch.int64)


def typed_graph_of_edge_index(edge_index: torch.Tensor, edge_type: torch.Tensor, num_src, num_dst,
                              num_relations: int, layer: str) -> Graph:
    """PyG's ``(edge_index, edge_type)`` of a relational layer inside compiled code: the typed
    square graph of ``max(num_src, num_dst)`` vertices (``nn._structure.typed_square``), built and
    checked by an op at run time, once per pair of tensors."""
    src = torch.empty((num_src, 0), dtype=torch.uint8)
    dst = src if _same(num_src, num_dst) else torch.empty((num_dst, 0), dtype=torch.uint8)
    handle = typed_graph_of_edge_index_op(edge_index, edge_type, src, dst, num_relations, layer)
    n = num_src if _same(num_src, num_dst) else max(num_src, num_dst)
    rows_ = src if n is num_src else torch.empty((n, 0), dtype=torch.uint8)
    edges = torch.empty((edge_index.shape[1], 0), dtype=torch.uint8)
    return Graph._view(GraphTensors(handle, rows_, rows_, edges), GraphKind(False, False, 0, True, num_relations))


def _same(a, b) -> bool:
    from .torch_ops import _equal
    return _equal(a, b)
