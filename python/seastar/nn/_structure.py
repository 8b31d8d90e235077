"""What a layer propagates over, whichever way the caller gave it: a ``seastar.Graph``, PyG's
``edge_index`` [2, E], or a sparse adjacency (``torch.sparse`` COO / CSR / CSC, or a
``torch_sparse.SparseTensor``-like object with ``.coo()``), square or bipartite.

A sparse adjacency is PyG's ``adj_t``: the *transposed* adjacency, ``adj_t[i, j] != 0`` for an
edge ``j -> i`` (rows are destinations), so it is ``[num_dst, num_src]``. Its edges are taken in
coalesced (destination-major) order and its values, when it has any, travel with them
(``Structure.values``): edge weights for GCN / APPNP, messages' weights for sum / mean
aggregations, edge types for R-GCN, as PyG reads them.

Bipartite graphs (``num_src != num_dst``) are the core's ``Graph.from_edge_index(edge_index,
num_nodes=(num_src, num_dst))``. A structure can also be bipartite on a square graph of
``max(num_src, num_dst)`` vertices (the typed layers' graphs, whose pair and run graphs are
square, and builds whose core has no bipartite graphs): its tensors are zero-padded to that many
rows (``Structure.src`` / ``dst``) and its outputs cut to ``num_dst`` rows (``Structure.out``);
the padded rows have no in-edges and send none, so the first ``num_dst`` rows are exact.
"""
from __future__ import annotations

import logging
from typing import NamedTuple, Optional

import torch

from ..direct_ops import custom_op
from ..graph import Graph, tensor_of
from ..graph_inputs import GraphKind, GraphTensors, same_size
from ._tensor_cache import GRAPHS

log = logging.getLogger("seastar")

FLOWS = ("source_to_target", "target_to_source")

COMPILED_STRUCTURE = ("inside torch.compile / torch.export the graph must be a seastar.Graph built outside the "
                      "compiled code (seastar.Graph.from_edge_index(edge_index, num_nodes)) and passed in, or an "
                      "edge_index tensor; a sparse adjacency would be turned into a graph on every call")


def core_has_bipartite() -> bool:
    """Whether ``seastar.Graph`` builds bipartite graphs itself (``num_nodes=(num_src, num_dst)``)."""
    return hasattr(Graph, "is_bipartite")


class Structure(NamedTuple):
    """The graph of one call: ``graph`` (edges in the order the caller gave them, or the sparse
    adjacency's coalesced order), ``num_src`` x ``num_dst`` vertices, ``edge_index`` [2, E] int64
    (row 0 sources) and the sparse adjacency's ``values`` [E, ...] when it came with any.

    ``edges`` is the ``edge_index`` the structure was built from; None for a ``seastar.Graph``,
    whose ``edge_index`` is read only when something asks (the layers that run a vertex program
    need the graph alone, and the graph's ``edge_index``, once read, is kept with it)."""

    graph: Graph
    num_src: int
    num_dst: int
    edges: Optional[torch.Tensor]
    values: Optional[torch.Tensor] = None
    layout: Optional[object] = None  # the sparse layout given (torch.layout, or "torch_sparse")

    @property
    def edge_index(self) -> torch.Tensor:
        return self.edges if self.edges is not None else tensor_of(self.graph, "edge_index")

    @property
    def padded(self) -> bool:
        """A bipartite structure on a square graph (a core without bipartite graphs)."""
        if getattr(self.graph, "is_bipartite", False):
            return False
        return self.graph.num_nodes != self.num_src or self.graph.num_nodes != self.num_dst

    @property
    def num_edges(self) -> int:
        return self.edges.shape[1] if self.edges is not None else self.graph.num_edges

    def src(self, t: torch.Tensor) -> torch.Tensor:
        """A tensor read at the sources, with the graph's vertex rows."""
        return pad_rows(t, self.graph.num_nodes) if self.padded else t

    def dst(self, t: torch.Tensor) -> torch.Tensor:
        """A tensor read at the centre (destination) vertices, with the graph's vertex rows."""
        return pad_rows(t, self.graph.num_nodes) if self.padded else t

    def out(self, t: torch.Tensor) -> torch.Tensor:
        """A program's output, ``num_dst`` rows."""
        return t[:self.num_dst] if t.shape[0] != self.num_dst else t

    def with_values(self, values: Optional[torch.Tensor]) -> "Structure":
        return self._replace(values=values)


def pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    if t.shape[0] >= rows:
        return t
    return torch.cat([t, t.new_zeros((rows - t.shape[0],) + tuple(t.shape[1:]))])


def make_graph(edge_index: torch.Tensor, num_src: int, num_dst: int, **types) -> Graph:
    """A graph of ``edge_index`` (int64 [2, E], checked), bipartite when ``num_src != num_dst``."""
    if num_src == num_dst:
        return Graph.from_edge_index(edge_index, num_nodes=num_src, **types)
    if core_has_bipartite():
        return Graph.from_edge_index(edge_index, num_nodes=(num_src, num_dst), **types)
    return Graph.from_edge_index(edge_index, num_nodes=max(num_src, num_dst), **types)


def is_pyg_edge_index(t) -> bool:
    """PyG's ``EdgeIndex`` (2.5 and later): a [2, E] tensor subclass that carries its sparse size
    and sort order. Duck-typed, so PyG stays optional."""
    return (isinstance(t, torch.Tensor) and type(t) is not torch.Tensor and callable(getattr(t, "sparse_size", None))
            and callable(getattr(t, "as_tensor", None)))


def plain_edge_index(layer: str, edge_index, size: Optional[tuple] = None):
    """``(edge_index, size)`` with a PyG ``EdgeIndex`` read as PyG's layers read it: a plain
    [2, E] tensor and the sparse size it carries (rows of ``edge_index[0]``, of ``edge_index[1]``;
    either may be unknown), merged with an explicit ``size``, which must agree with it. Anything
    else passes through. The sort order is not taken: the graph is built by a linear pass either way."""
    if not is_pyg_edge_index(edge_index):
        return edge_index, size
    carried = tuple(None if n is None else int(n) for n in edge_index.sparse_size())
    if size is None:
        merged = carried
    else:
        if len(size) != 2:
            raise ValueError(f"{layer}: size must be (num_src, num_dst), got {size!r}")
        merged = []
        for dim, (given, have) in enumerate(zip(size, carried)):
            if given is not None and have is not None and int(given) != have:
                raise ValueError(f"{layer}: size[{dim}] is {int(given)} but the EdgeIndex's sparse size is "
                                 f"{carried} (dimension {dim}: {have})")
            merged.append(have if given is None else int(given))
        merged = tuple(merged)
    return edge_index.as_tensor(), (None if merged == (None, None) else merged)


def check_edge_index(edge_index: torch.Tensor, num_src: int, num_dst: int) -> None:
    """PyG's checks and messages, plus the vertex range (which PyG leaves to an index error)."""
    if edge_index.is_floating_point() or edge_index.is_complex() or edge_index.dtype == torch.bool:
        raise ValueError(f"Expected 'edge_index' to be of integer type (got '{edge_index.dtype}')")
    if edge_index.dim() != 2:
        raise ValueError(f"Expected 'edge_index' to be two-dimensional (got {edge_index.dim()} dimensions)")
    if edge_index.size(0) != 2:
        raise ValueError(f"Expected 'edge_index' to have size '2' in the first dimension "
                         f"(got '{edge_index.size(0)}')")
    if edge_index.numel() == 0:
        return
    lo = int(edge_index.min())
    s_hi, d_hi = int(edge_index[0].max()), int(edge_index[1].max())
    if lo < 0 or s_hi >= num_src or d_hi >= num_dst:
        raise ValueError(f"edge_index refers to vertices outside the graph: sources must be in [0, {num_src}) "
                         f"and destinations in [0, {num_dst}), got sources up to {s_hi}, destinations up to "
                         f"{d_hi}, smallest id {lo}")


def from_edge_index(edge_index: torch.Tensor, num_src: int, num_dst: int, flow: str = "source_to_target") -> Structure:
    """The structure of a [2, E] ``edge_index``, cached per tensor (identity and version)."""
    def make():
        check_edge_index(edge_index, *((num_dst, num_src) if flow == "target_to_source" else (num_src, num_dst)))
        ei = edge_index.detach().to("cpu", torch.int64)
        if flow == "target_to_source":
            ei = ei.flip(0)
        ei = ei.contiguous()
        return Structure(make_graph(ei, num_src, num_dst), num_src, num_dst, ei)
    return GRAPHS.get(edge_index, ("edge_index", num_src, num_dst, flow), make)


def is_torch_sparse(t) -> bool:
    return isinstance(t, torch.Tensor) and t.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc)


def is_sparse_tensor_like(t) -> bool:
    """A ``torch_sparse.SparseTensor`` (duck-typed: ``.storage``, ``.coo()``, ``.sparse_sizes()``)."""
    if isinstance(t, Graph) or isinstance(t, torch.Tensor):  # a graph is opaque to torch.compile: no hasattr
        return False
    return all(hasattr(t, a) for a in ("coo", "sparse_sizes", "storage"))


def _sparse_edges(adj_t):
    """``(edge_index [2, E] int64 on the CPU, order, num_src, num_dst)`` of an ``adj_t``: its
    edges in destination-major order; ``order`` permutes the layout's values into that order
    (None when they already are)."""
    if is_sparse_tensor_like(adj_t):
        row, col, _ = adj_t.coo()
        n_dst, n_src = (int(s) for s in adj_t.sparse_sizes())
        order = None
    else:
        n_dst, n_src = int(adj_t.shape[0]), int(adj_t.shape[1])
        order = None
        if adj_t.layout == torch.sparse_coo:
            row, col = adj_t.coalesce().indices()
        elif adj_t.layout == torch.sparse_csr:
            ptr, col = adj_t.crow_indices(), adj_t.col_indices()
            row = torch.repeat_interleave(torch.arange(n_dst, device=ptr.device), ptr[1:] - ptr[:-1])
        else:  # CSC: stored by source; sorted to destination-major order like the others
            ptr, r = adj_t.ccol_indices(), adj_t.row_indices()
            c = torch.repeat_interleave(torch.arange(n_src, device=ptr.device), ptr[1:] - ptr[:-1])
            order = torch.argsort(r * max(n_src, 1) + c, stable=True)
            row, col = r[order], c[order]
    ei = torch.stack([col.detach().to("cpu", torch.int64), row.detach().to("cpu", torch.int64)]).contiguous()
    return ei, order, n_src, n_dst


def _sparse_values(adj_t, order) -> Optional[torch.Tensor]:
    if is_sparse_tensor_like(adj_t):
        return adj_t.storage.value()
    v = adj_t.coalesce().values() if adj_t.layout == torch.sparse_coo else adj_t.values()
    return v if order is None else v[order.to(v.device)]


def from_sparse(adj_t) -> Structure:
    """The structure of a sparse ``adj_t`` ([num_dst, num_src]); its values come along, read on
    every call (they are the caller's, possibly differentiable, tensor)."""
    layout = "torch_sparse" if is_sparse_tensor_like(adj_t) else adj_t.layout

    def make():
        ei, order, ns, nd = _sparse_edges(adj_t)
        return Structure(make_graph(ei, ns, nd), ns, nd, ei, None, layout), order

    s, order = GRAPHS.get(adj_t, ("sparse",), make) if isinstance(adj_t, torch.Tensor) else make()
    return s.with_values(_sparse_values(adj_t, order))


def from_graph(graph: Graph) -> Structure:
    """A ``seastar.Graph`` as given (bipartite when the core's graph is)."""
    if getattr(graph, "is_bipartite", False):
        ns, nd = graph.num_src, graph.num_dst
    else:
        ns = nd = graph.num_nodes
    return Structure(graph, ns, nd, None)


def structure(layer: str, edge_index, num_src: Optional[int], num_dst: Optional[int],
              flow: str = "source_to_target") -> Structure:
    """Any of the accepted structures; ``num_src`` / ``num_dst`` come from the features (or
    ``size``) and are checked against a sparse adjacency's or a graph's own sizes."""
    if flow not in FLOWS:
        raise ValueError(f"{layer}: flow must be one of {FLOWS}, got {flow!r}")
    if torch.compiler.is_compiling() and not isinstance(edge_index, Graph):
        if not (isinstance(edge_index, torch.Tensor) and edge_index.layout == torch.strided):
            raise TypeError(f"{layer}: {COMPILED_STRUCTURE}")
        if num_src is None or num_dst is None:
            raise ValueError(f"{layer}: the number of vertices is unknown; pass 'size=(num_src, num_dst)'")
        # built and checked by an op at run time, once per tensor (no graph break on its ids)
        ei = edge_index.to(torch.int64)
        ei = ei.flip(0) if flow == "target_to_source" else ei
        return Structure(graph_of_edge_index(edge_index, num_src, num_dst, flow), num_src, num_dst, ei)
    if isinstance(edge_index, Graph):
        s = from_graph(edge_index)
    elif is_torch_sparse(edge_index) or is_sparse_tensor_like(edge_index):
        if flow != "source_to_target":
            raise ValueError(f"{layer}: flow direction 'target_to_source' is invalid for message propagation via "
                             f"a sparse adjacency; pass 'adj_t' with flow='source_to_target' (rows are destinations)")
        s = from_sparse(edge_index)
    elif isinstance(edge_index, torch.Tensor):
        if num_src is None or num_dst is None:
            raise ValueError(f"{layer}: the number of vertices is unknown; pass 'size=(num_src, num_dst)'")
        return from_edge_index(edge_index, num_src, num_dst, flow)
    else:
        raise TypeError(f"{layer}: expected 'edge_index' as a [2, E] integer tensor, a sparse adjacency 'adj_t' "
                        f"(torch.sparse or SparseTensor) or a seastar.Graph; got {type(edge_index).__name__}")
    for given, have, what in ((num_src, s.num_src, "source"), (num_dst, s.num_dst, "destination")):
        if given is not None and given != have:
            raise ValueError(f"{layer}: the {what} features have {given} rows but the graph has {have} {what} vertices")
    return s


def typed_square(edge_index: torch.Tensor, edge_type: torch.Tensor, num_src: int, num_dst: int,
                 num_edge_types: int, layer: str) -> Graph:
    """A typed graph of ``edge_index`` and ``edge_type`` (cached per pair of tensors), square:
    a bipartite one has ``max(num_src, num_dst)`` vertices (the typed layers' machinery, pair and
    run graphs, works on square graphs; inputs are zero-padded to that many rows)."""
    def make():
        check_edge_index(edge_index, num_src, num_dst)
        t = edge_type.detach().to("cpu")
        if t.is_floating_point():
            if not bool((t == t.round()).all()):
                raise ValueError(f"{layer}: edge_type must hold integer relation ids, got non-integer values")
        t = t.to(torch.int64).reshape(-1)
        if t.numel() != edge_index.shape[1]:
            raise ValueError(f"{layer}: edge_type has {t.numel()} entries but edge_index has "
                             f"{edge_index.shape[1]} edges")
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_edge_types):
            raise ValueError(f"{layer}: edge_type must be in [0, {num_edge_types}), got values in "
                             f"[{int(t.min())}, {int(t.max())}]")
        ei = edge_index.detach().to("cpu", torch.int64).contiguous()
        return Graph.from_edge_index(ei, num_nodes=max(num_src, num_dst), edge_type=t, num_edge_types=num_edge_types)
    return GRAPHS.get(edge_index, ("typed", num_src, num_dst, num_edge_types), make, also=edge_type)


# -- PyG's edge_index inside compiled code ---------------------------------------------------------
@custom_op("seastar::graph_of_edge_index")
def graph_of_edge_index_op(edge_index: torch.Tensor, src_rows: torch.Tensor, dst_rows: torch.Tensor,
                           flow: str) -> torch.Tensor:
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
    same = same_size(num_src, num_dst)
    dst = src if same else torch.empty((num_dst, 0), dtype=torch.uint8)
    handle = graph_of_edge_index_op(edge_index, src, dst, flow)
    edges = torch.empty((edge_index.shape[1], 0), dtype=torch.uint8)
    kind = GraphKind(not same, False, 0, False, 0)
    return Graph._view(GraphTensors(handle, src, dst, edges), kind)


@custom_op("seastar::typed_graph_of_edge_index")
def typed_graph_of_edge_index_op(edge_index: torch.Tensor, edge_type: torch.Tensor, src_rows: torch.Tensor,
                                 dst_rows: torch.Tensor, num_relations: int, layer: str) -> torch.Tensor:
    # checked and built once per pair of tensors, as an eager call does
    g = typed_square(edge_index, edge_type, src_rows.shape[0], dst_rows.shape[0], num_relations, layer)
    return g._in.handle.clone()


@typed_graph_of_edge_index_op.register_fake
def _typed_graph_of_edge_index_fake(edge_index, edge_type, src_rows, dst_rows, num_relations, layer):
    return edge_index.new_empty(1, dtype=torch.int64)


def typed_graph_of_edge_index(edge_index: torch.Tensor, edge_type: torch.Tensor, num_src, num_dst,
                              num_relations: int, layer: str) -> Graph:
    """PyG's ``(edge_index, edge_type)`` of a relational layer inside compiled code: the typed
    square graph of ``max(num_src, num_dst)`` vertices (``typed_square``), built and
    checked by an op at run time, once per pair of tensors."""
    src = torch.empty((num_src, 0), dtype=torch.uint8)
    same = same_size(num_src, num_dst)
    dst = src if same else torch.empty((num_dst, 0), dtype=torch.uint8)
    handle = typed_graph_of_edge_index_op(edge_index, edge_type, src, dst, num_relations, layer)
    n = num_src if same else max(num_src, num_dst)
    rows_ = src if n is num_src else torch.empty((n, 0), dtype=torch.uint8)
    edges = torch.empty((edge_index.shape[1], 0), dtype=torch.uint8)
    return Graph._view(GraphTensors(handle, rows_, rows_, edges), GraphKind(False, False, 0, True, num_relations))
