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
from .direct_ops import custom_op
from .graph import Graph
from .graph_inputs import GraphKind, GraphTensors, kind_ints, rows, static_int
from .reorder import destination_ordered as _reordered


class Derivation(NamedTuple):
    make: Callable  # (graph, arg) -> Graph, run once per graph and arg
    square_of_sources: bool  # the new graph is square, with the given graph's sources as vertices
    same_edges: bool  # as many edges as the given graph (else an unknown count)


def _typed_square(graph: Graph, num_relations: int) -> Graph:
    if graph.num_dst > graph.num_src:
        raise ValueError(f"a block with more destinations ({graph.num_dst}) than sources ({graph.num_src}) has no "
                         f"square graph of its sources")
    return Graph.from_edge_index(graph.edge_index, num_nodes=graph.num_src, edge_type=graph.edge_type.long(),
                                 num_edge_types=num_relations)


def _destination_ordered(graph: Graph, arg: int) -> Graph:
    return _reordered(graph)


# name -> derivation; a derivation made by a layer's toolkit is registered by it
# (``nn._loops`` registers "self_loops"), which keeps this module below seastar.nn
DERIVATIONS: Dict[str, Derivation] = {
    "typed_square": Derivation(_typed_square, True, True),
    "destination_ordered": Derivation(_destination_ordered, False, True),
}


def register(name: str, derivation: Derivation) -> None:
    DERIVATIONS[name] = derivation


@custom_op("seastar::derived_graph")
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
    num_dst) - 1`` (``nn._loops.loop_graph``, which registers the derivation)."""
    return derive(graph, "self_loops")


def typed_square(graph: Graph, num_relations: int) -> Graph:
    """A typed block as the square typed graph of its sources (its destinations are its first sources)."""
    kind = GraphKind(False, False, 0, True, num_relations)
    return derive(graph, "typed_square", num_relations, kind)


def destination_ordered(graph: Graph) -> Graph:
    """``graph`` with its edges renumbered in (destination, relation) order (``reorder.destination_ordered``)."""
    return derive(graph, "destination_ordered")
