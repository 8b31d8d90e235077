"""The distinct (source, relation) pairs of a typed graph: the transform-then-aggregate path of
``RGCNConv`` and ``HGTConv`` (``mode="per_pair"``).

Each pair's row is transformed once, ``h_p = x_src(p) @ W_r(p)``, and an untyped program sums
the rows over the *pair graph*, whose edge ``e`` runs from its pair to its destination.

* Eagerly the pairs are computed once per graph and kept by it (``graph_ops.derived``); the
  transform is one dense GEMM per relation, split by sizes known in Python.
* Inside compiled code the op ``seastar::relation_pairs`` gives them for whatever graph comes at
  run time (kept by that graph alike). Their number is data, so the op reports the pair graph's
  vertex count as a new dynamic size, and the transform is ``seastar::segment_matmul``, whose
  groups' sizes are data too. Compiled code therefore serves every graph of a kind.
"""
from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Union

import torch

from ..direct_ops import custom_op
from ..graph import Graph
from ..graph_inputs import GraphKind, GraphTensors, graph_class, kind_ints, resolve, rows, static_int
from ..graph_ops import derived
from ._row_ops import gather_rows, segment_matmul
from .relations import edge_types


class RelationPairs(NamedTuple):
    """The distinct (source, relation) pairs of a typed graph and the graph that aggregates them.

    ``src[p]`` is the source vertex of pair ``p`` (``None`` on an untyped graph, whose pairs are
    its vertices and whose pair graph is itself); pairs are sorted by relation, ``counts[r]`` of
    relation ``r``. ``graph`` has ``max(N, P)`` vertices and edge ``e`` runs from the pair
    ``(src_e, type_e)`` to ``dst_e``: the same edges in the same order (edge ids, and so bound
    edge tensors like ``norm``, are shared with the original graph). A value computed once per
    pair is bound as a vertex tensor of this graph (rows ``0..P-1``, zero-padded), and an
    untyped program over it aggregates exactly what a typed per-edge program would.

    Inside compiled code ``src`` has a row per vertex of ``graph`` (the padding rows read vertex
    0) and ``counts`` is a tensor of ``R + 1`` sizes, the last the padding's; ``num_pairs`` is
    then the pair graph's vertex count.
    """

    graph: Graph
    src: Optional[torch.Tensor]
    counts: Union[List[int], torch.Tensor]
    num_pairs: int
    num_edges: int


def relation_pairs(graph: Graph, num_relations: int, layer: str = "RGCNConv") -> RelationPairs:
    if torch.compiler.is_compiling():
        return _compiled_pairs(graph, num_relations, layer)
    return derived(graph, _relation_pairs, num_relations, layer)


def _relation_pairs(graph: Graph, num_relations: int, layer: str) -> RelationPairs:
    n = graph.num_nodes
    if not graph.has_edge_types:  # one relation: every vertex is its own pair
        return RelationPairs(graph, None, [n], n, graph.num_edges)
    t = edge_types(graph, num_relations, layer)
    src, dst = graph.edge_index.long()
    pairs, pair_of_edge = torch.unique(t * n + src, return_inverse=True)  # sorted: grouped by relation
    counts = torch.bincount(pairs // n, minlength=num_relations).tolist()
    p = pairs.numel()
    g = Graph.from_edge_index(torch.stack([pair_of_edge, dst]), num_nodes=max(n, p))
    return RelationPairs(g, pairs % n, counts, p, graph.num_edges)


def per_relation(x: torch.Tensor, pairs: RelationPairs, fn: Callable[[torch.Tensor, int], torch.Tensor],
                 rows: Optional[int] = None) -> torch.Tensor:
    """``fn(x[src of relation r's pairs], r)`` for every relation, stacked in pair order and
    zero-padded to ``rows`` (the pair graph's vertex count): one dense GEMM per relation."""
    xs = x if pairs.src is None else x.index_select(0, pairs.src.to(x.device))
    chunks = [fn(c, r) for r, c in enumerate(torch.split(xs, pairs.counts)) if c.shape[0] > 0]
    out = torch.cat(chunks) if chunks else None
    rows = pairs.num_pairs if rows is None else rows
    if out is None:
        shape = fn(xs[:0], 0).shape[1:]
        return x.new_zeros((rows,) + tuple(shape))
    if rows > out.shape[0]:
        out = torch.cat([out, out.new_zeros((rows - out.shape[0],) + out.shape[1:])])
    return out


def relation_matmul(x: torch.Tensor, pairs: RelationPairs, weight: torch.Tensor) -> torch.Tensor:
    """``x[src of each pair] @ weight[relation of the pair]``, one row per vertex of the pair
    graph (zero rows past the pairs): ``x`` [N, in] with ``weight`` [R, in, out], or per head
    ``x`` [N, H, d] with ``weight`` [R, H, d, e]."""
    rows = pairs.graph.num_nodes
    table = torch.cat([weight, weight.new_zeros((1,) + tuple(weight.shape[1:]))])  # the padding rows' "relation"
    if not isinstance(pairs.counts, torch.Tensor):  # eager: the same op, the sizes known here
        # (the op writes each relation's product in place: no per-relation pieces to concatenate)
        src, counts = _with_padding(pairs)
        if pairs.src is None and rows == pairs.num_pairs:  # every vertex its own pair: x as it is
            return segment_matmul(x, counts, table)
        return segment_matmul(x.index_select(0, src.to(x.device)), counts, table)
    return segment_matmul(gather_rows(x, pairs.src.to(x.device)), pairs.counts, table)


def relation_rows(table: torch.Tensor, pairs: RelationPairs, index: torch.Tensor) -> torch.Tensor:
    """``table[relation of each pair][index[src of the pair]]`` (featureless input: each pair's
    row of its relation's matrix), one row per vertex of the pair graph (zero rows past the pairs)."""
    if not isinstance(pairs.counts, torch.Tensor):
        return per_relation(index, pairs, lambda idx, r: table[r][idx], rows=pairs.graph.num_nodes)
    relation = torch.repeat_interleave(torch.arange(pairs.counts.numel()), pairs.counts,
                                       output_size=pairs.num_pairs).to(index.device)
    padded = torch.cat([table, table.new_zeros((1,) + tuple(table.shape[1:]))])
    return padded[relation, index.index_select(0, pairs.src.to(index.device))]


# ---- inside compiled code: the op -------------------------------------------------------------------

def _compiled_pairs(graph: Graph, num_relations: int, layer: str) -> RelationPairs:
    edge_types(graph, num_relations, layer)  # validates the relations against the graph's kind
    if not graph.has_edge_types:
        return RelationPairs(graph, None, [graph.num_nodes], graph.num_nodes, graph.num_edges)
    handle, vertex_rows, src, counts = relation_pairs_op(static_int(num_relations), graph._in.op_args(),
                                                         kind_ints(graph))
    view = graph_class()._view(GraphTensors(handle, vertex_rows, vertex_rows, graph._in.edge_rows),
                               GraphKind(False, False, 0, False, 0))
    m = vertex_rows.shape[0]
    torch._check(m >= graph.num_nodes)  # max(N, P): the given graph's vertices are the pair graph's first
    return RelationPairs(view, src, counts, m, graph.num_edges)


def _with_padding(p: RelationPairs) -> tuple:
    """Each row of the pair graph's source (its pair's; 0 for the padding rows past the pairs)
    and the group sizes of ``segment_matmul``: the relations', then the padding rows' count."""
    pad = p.graph.num_nodes - p.num_pairs
    src = p.src if p.src is not None else torch.arange(p.num_pairs)
    return torch.cat([src, src.new_zeros(pad)]), torch.tensor(list(p.counts) + [pad], dtype=torch.int64)


def _padded_pairs(graph: Graph, num_relations: int):
    p = graph.derive(_relation_pairs, num_relations, "RGCNConv")
    return (p.graph._in.handle, rows(p.graph.num_nodes)) + _with_padding(p)


@custom_op("seastar::relation_pairs")
def relation_pairs_op(num_relations: int, graph: List[torch.Tensor], kind: List[int]) -> List[torch.Tensor]:
    g = resolve(graph, kind)
    return [t.clone() for t in g.derive(_padded_pairs, num_relations)]  # copies: compiled code owns its outputs


@relation_pairs_op.register_fake
def _relation_pairs_fake(num_relations, graph, kind):
    m = torch.library.get_ctx().new_dynamic_size()
    handle, src_rows = graph[0], graph[1]
    return [handle.new_empty(1), src_rows.new_empty((m, 0)), handle.new_empty(m), handle.new_empty(num_relations + 1)]
