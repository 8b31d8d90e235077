"""Graph partitioning for distributed training: one folder per part.

    report = seastar.distributed.partition_graph(ds, 4, "parts/", method="metis")
    part = seastar.distributed.load_partition("parts/", 2)   # owned, halo, local in-edges, features

Every vertex is owned by one part; every edge ``u -> v`` is stored once, in the part that owns
``v`` (its in-edges: a layer aggregating over in-edges needs nothing else of the structure). A
part's *halo* is the set of vertices it does not own that are sources of its in-edges: the rows
it must receive from their owners before each layer. Local ids: a part's destinations are its
owned vertices ``0 .. num_owned-1`` (ascending global id); its sources are the owned vertices
followed by the halo, the halo sorted by (owner part, global id), so a halo exchange receives
each owner's rows as one contiguous block in place.

Layout of ``out_dir``: ``partition.json`` (sizes, method, edge cut, balance), ``assignment.pt``
(the part of every vertex) and ``part-K/`` with ``graph.pt`` (owned, halo, halo_owner,
edge_index, edge_ids, edge_type, the global-to-local map as sorted keys and values) and
``node_data.pt`` (the owned rows of x, y and the masks).

``method="metis"`` partitions the symmetrised graph with METIS (``pymetis``) to minimise the
edge cut; ``"random"`` assigns vertices at random in equal counts (no dependency, a large cut).
``balance_training=True`` also equalises the number of training vertices per part, so that
every rank has the same share of the loss (METIS balances vertex counts; a greedy pass then
moves training vertices from over-full parts to the under-full part most of their neighbours
are in).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import numpy as np
import torch

from .. import datasets
from ..graph import Graph

log = logging.getLogger("seastar.distributed")

FORMAT_VERSION = 1
NODE_FIELDS = ("x", "y", "train_mask", "val_mask", "test_mask", "node_type")


# -- the vertex assignment -----------------------------------------------------------------
def _symmetric_csr(edge_index: np.ndarray, n: int):
    """The undirected simple graph METIS needs: no self loops, no duplicates, both directions."""
    src, dst = edge_index
    keep = src != dst
    a = np.concatenate([src[keep], dst[keep]])
    b = np.concatenate([dst[keep], src[keep]])
    key = np.unique(a * n + b)
    a, b = key // n, key % n
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=n), out=xadj[1:])
    return xadj, b


def _metis(edge_index: np.ndarray, n: int, num_parts: int, seed: int) -> np.ndarray:
    try:
        import pymetis
    except ImportError as exc:
        raise ImportError("partition_graph(method='metis') needs pymetis (pip install pymetis); "
                          "method='random' needs nothing") from exc
    xadj, adjncy = _symmetric_csr(edge_index, n)
    opts = pymetis.Options()
    opts.seed = int(seed)
    res = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, adjncy), options=opts)
    return np.asarray(res.vertex_part, dtype=np.int64)


def _random(n: int, num_parts: int, seed: int, train: Optional[np.ndarray]) -> np.ndarray:
    """Equal counts (and equal training counts when ``train`` is given), at random."""
    rng = np.random.default_rng(seed)
    part = np.empty(n, dtype=np.int64)
    groups = [np.arange(n)] if train is None else [np.flatnonzero(train), np.flatnonzero(~train)]
    offset = 0
    for ids in groups:
        ids = rng.permutation(ids)
        part[ids] = (np.arange(ids.size) + offset) % num_parts
        offset += ids.size  # the second group starts where the first ended: sizes stay within one
    return part


def _balance_training(part: np.ndarray, edge_index: np.ndarray, train: np.ndarray, num_parts: int) -> np.ndarray:
    """Moves training vertices out of parts holding more than their share (ceil(T / k)) into the
    under-full part most of their neighbours are in (any under-full part if none is), most
    attached first, until every part holds floor(T / k) or ceil(T / k)."""
    part = part.copy()
    total = int(train.sum())
    lo, hi = total // num_parts, -(-total // num_parts)
    counts = np.bincount(part[train], minlength=num_parts)
    # a part may keep `hi` only as long as the parts at `hi` do not exceed total - k * lo
    extra_allowed = total - num_parts * lo
    target = np.full(num_parts, lo)
    order = np.argsort(-counts, kind="stable")
    target[order[:extra_allowed]] = hi
    surplus = counts - target
    if not (surplus > 0).any():
        return part
    src, dst = edge_index
    n = part.size
    # neighbour counts per (training vertex of an over-full part, other part), both directions
    over = surplus[part] > 0
    cand = train & over
    a = np.concatenate([src, dst])
    b = np.concatenate([dst, src])
    m = cand[a] & (part[b] != part[a])
    key, cnt = np.unique(a[m] * num_parts + part[b[m]], return_counts=True)
    v, q = key // num_parts, key % num_parts
    by_affinity = np.argsort(-cnt, kind="stable")
    moved = np.zeros(n, dtype=bool)
    for i in by_affinity:
        vi, qi = v[i], q[i]
        if moved[vi] or surplus[part[vi]] <= 0 or surplus[qi] >= 0:
            continue
        surplus[part[vi]] -= 1
        surplus[qi] += 1
        part[vi] = qi
        moved[vi] = True
    for p in np.flatnonzero(surplus > 0):  # vertices without a neighbour in an under-full part
        ids = np.flatnonzero(train & (part == p) & ~moved)
        for vi in ids[:surplus[p]]:
            qi = int(np.flatnonzero(surplus < 0)[0])
            surplus[p] -= 1
            surplus[qi] += 1
            part[vi] = qi
    return part


# -- the input -------------------------------------------------------------------------------
def _unpack(dataset_or_graph):
    """(edge_index [2, E] int64 numpy, num_nodes, node tensors, edge_type, num_edge_types)."""
    if isinstance(dataset_or_graph, Graph):
        g, node = dataset_or_graph, {}
    elif hasattr(dataset_or_graph, "graph") and isinstance(dataset_or_graph.graph, Graph):
        g = dataset_or_graph.graph
        node = {}
        for name in NODE_FIELDS:
            t = getattr(dataset_or_graph, name, None)
            if t is not None:
                node[name] = t.to_dense() if t.is_sparse else t
    else:
        raise TypeError("partition_graph takes a seastar.Graph or a dataset with a .graph (and x, y, masks), got "
                        f"{type(dataset_or_graph).__name__}")
    if g.is_bipartite:
        raise ValueError("partition_graph needs a square graph, got a bipartite one")
    n = g.num_nodes
    for name, t in node.items():
        if t.shape[0] != n:
            raise ValueError(f"partition_graph: {name} has {t.shape[0]} rows but the graph has {n} vertices")
    edge_type = g.edge_type if g.has_edge_types else None
    num_edge_types = g.num_edge_types if g.has_edge_types else None
    return g.edge_index.to(torch.int64).numpy(), n, node, edge_type, num_edge_types


# -- writing ---------------------------------------------------------------------------------
def _part_structure(p: int, part: np.ndarray, edge_index: np.ndarray, edge_type) -> Dict[str, torch.Tensor]:
    src, dst = edge_index
    owned = np.flatnonzero(part == p)
    eids = np.flatnonzero(part[dst] == p)  # ascending: the original edge order within the part
    s, d = src[eids], dst[eids]
    remote = np.unique(s[part[s] != p])
    halo = remote[np.lexsort((remote, part[remote]))]  # by owner, then id
    local_ids = np.concatenate([owned, halo])
    order = np.argsort(local_ids, kind="stable")
    keys, values = local_ids[order], order
    def to_local(g):
        return values[np.searchsorted(keys, g)]
    out = dict(owned=owned, halo=halo, halo_owner=part[halo],
               edge_index=np.stack([to_local(s), np.searchsorted(owned, d)]),
               edge_ids=eids, global_to_local_keys=keys, global_to_local_values=values)
    out = {k: torch.from_numpy(np.ascontiguousarray(v)).to(torch.int64) for k, v in out.items()}
    if edge_type is not None:
        out["edge_type"] = edge_type[torch.from_numpy(eids)].clone()
    return out


def partition_graph(dataset_or_graph, num_parts: int, out_dir, method: str = "metis",
                    balance_training: bool = True, seed: int = 0) -> dict:
    """Partitions a graph (or a dataset: its graph, x, y, masks) into ``num_parts`` folders
    under ``out_dir`` (see the module doc); returns the report also written to
    ``partition.json``: the edge cut (edges whose ends are in different parts), and per part
    the owned, training, halo and in-edge counts with their max / mean ratios."""
    if method not in ("metis", "random"):
        raise ValueError(f"partition_graph: method must be 'metis' or 'random', got {method!r}")
    edge_index, n, node, edge_type, num_edge_types = _unpack(dataset_or_graph)
    num_parts = int(num_parts)
    if num_parts < 1:
        raise ValueError(f"partition_graph: num_parts must be >= 1, got {num_parts}")
    if num_parts > n:
        raise ValueError(f"partition_graph: cannot split {n} vertices into {num_parts} parts (more parts than "
                         f"vertices)")
    train = node["train_mask"].numpy().astype(bool) if balance_training and "train_mask" in node else None
    t0 = time.perf_counter()
    if method == "random":
        part = _random(n, num_parts, seed, train)
    else:
        part = _metis(edge_index, n, num_parts, seed) if num_parts > 1 else np.zeros(n, dtype=np.int64)
        if train is not None and num_parts > 1:
            part = _balance_training(part, edge_index, train, num_parts)
    partition_s = time.perf_counter() - t0
    if np.bincount(part, minlength=num_parts).min() == 0:
        raise ValueError(f"partition_graph: {method} left a part empty ({n} vertices into {num_parts} parts)")

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(torch.from_numpy(part), out / "assignment.pt")
    rows = []
    for p in range(num_parts):
        st = _part_structure(p, part, edge_index, edge_type)
        d = out / f"part-{p}"
        d.mkdir(exist_ok=True)
        torch.save(st, d / "graph.pt")
        torch.save({k: t[st["owned"]].clone() for k, t in node.items()}, d / "node_data.pt")
        rows.append(dict(part=p, owned=int(st["owned"].numel()), halo=int(st["halo"].numel()),
                         in_edges=int(st["edge_ids"].numel()),
                         train=int(node["train_mask"][st["owned"]].sum()) if "train_mask" in node else 0))
    src, dst = edge_index
    cut = int((part[src] != part[dst]).sum())
    def imbalance(key):
        vals = [r[key] for r in rows]
        mean = sum(vals) / len(vals)
        return max(vals) / mean if mean else 1.0
    report = dict(format_version=FORMAT_VERSION, method=method, num_parts=num_parts, num_nodes=n,
                  num_edges=int(src.size), edge_cut=cut, edge_cut_fraction=cut / max(1, src.size),
                  boundary_rows=sum(r["halo"] for r in rows),
                  imbalance={k: imbalance(k) for k in ("owned", "train", "in_edges", "halo")},
                  balance_training=bool(balance_training), seed=int(seed), partition_s=partition_s,
                  num_edge_types=num_edge_types, node_fields=sorted(node), parts=rows)
    (out / "partition.json").write_text(json.dumps(report, indent=2))
    log.info("partitioned %d vertices, %d edges into %d parts (%s): edge cut %d (%.1f%%), %d halo rows, "
             "imbalance owned %.3f train %.3f edges %.3f", n, src.size, num_parts, method, cut,
             100 * report["edge_cut_fraction"], report["boundary_rows"], report["imbalance"]["owned"],
             report["imbalance"]["train"], report["imbalance"]["in_edges"])
    return report


# -- reading ---------------------------------------------------------------------------------
@dataclass
class Partition:
    """One part as loaded from its folder (tensors as described in the module doc)."""

    part_id: int
    num_parts: int
    num_nodes: int
    owned: torch.Tensor
    halo: torch.Tensor
    halo_owner: torch.Tensor
    edge_index: torch.Tensor
    edge_ids: torch.Tensor
    edge_type: Optional[torch.Tensor]
    num_edge_types: Optional[int]
    node_data: Dict[str, torch.Tensor]
    global_to_local_keys: torch.Tensor
    global_to_local_values: torch.Tensor

    @property
    def num_owned(self) -> int:
        return int(self.owned.numel())

    @property
    def num_halo(self) -> int:
        return int(self.halo.numel())

    def global_to_local(self, ids: torch.Tensor) -> torch.Tensor:
        """Local source ids (owned then halo) of global vertex ids; -1 for vertices the part
        neither owns nor has in its halo."""
        ids = torch.as_tensor(ids, dtype=torch.int64)
        keys = self.global_to_local_keys
        if keys.numel() == 0:
            return torch.full_like(ids, -1)
        pos = torch.searchsorted(keys, ids).clamp(max=keys.numel() - 1)
        return torch.where(keys[pos] == ids, self.global_to_local_values[pos], torch.full_like(ids, -1))

    def local_graph(self):
        """The part's in-edges as a bipartite seastar.Graph: sources owned + halo, destinations
        owned (so a layer's output has one row per owned vertex)."""
        return Graph.from_edge_index(self.edge_index, num_nodes=(self.num_owned + self.num_halo, self.num_owned),
                                     edge_type=self.edge_type, num_edge_types=self.num_edge_types)


def read_report(out_dir) -> dict:
    path = Path(out_dir) / "partition.json"
    if not path.is_file():
        raise FileNotFoundError(f"no partition at {out_dir}: {path} is missing (write one with "
                                f"seastar.distributed.partition_graph or python -m seastar.distributed.partition)")
    return json.loads(path.read_text())


def load_partition(out_dir, part_id: int, world_size: Optional[int] = None) -> Partition:
    """Loads part ``part_id`` from ``out_dir``. ``world_size``: the number of processes that
    will use the partition, checked against its part count (one part per process)."""
    report = read_report(out_dir)
    k = int(report["num_parts"])
    if world_size is not None and int(world_size) != k:
        raise ValueError(f"the partition at {out_dir} has {k} parts but the world size is {world_size}: run one "
                         f"process per part, or partition again with {world_size} parts")
    if not 0 <= int(part_id) < k:
        raise ValueError(f"part {part_id} does not exist: the partition at {out_dir} has parts 0 .. {k - 1}")
    d = Path(out_dir) / f"part-{int(part_id)}"
    for f in ("graph.pt", "node_data.pt"):
        if not (d / f).is_file():
            raise FileNotFoundError(f"partition {out_dir} is incomplete: {d / f} is missing")
    st = torch.load(d / "graph.pt", weights_only=True)
    node = torch.load(d / "node_data.pt", weights_only=True)
    return Partition(part_id=int(part_id), num_parts=k, num_nodes=int(report["num_nodes"]), owned=st["owned"],
                     halo=st["halo"], halo_owner=st["halo_owner"], edge_index=st["edge_index"],
                     edge_ids=st["edge_ids"], edge_type=st.get("edge_type"),
                     num_edge_types=report.get("num_edge_types"), node_data=node,
                     global_to_local_keys=st["global_to_local_keys"],
                     global_to_local_values=st["global_to_local_values"])


def assemble(out_dir) -> dict:
    """Puts the parts back together: the global ``edge_index`` (and ``edge_type``) in the
    original edge order and the node tensors in the original vertex order."""
    report = read_report(out_dir)
    parts = [load_partition(out_dir, p) for p in range(int(report["num_parts"]))]
    n, e = int(report["num_nodes"]), int(report["num_edges"])
    edge_index = torch.full((2, e), -1, dtype=torch.int64)
    edge_type = torch.full((e,), -1, dtype=torch.int64) if parts[0].edge_type is not None else None
    node: Dict[str, torch.Tensor] = {}
    for p in parts:
        local_to_global = torch.cat([p.owned, p.halo])
        edge_index[0, p.edge_ids] = local_to_global[p.edge_index[0]]
        edge_index[1, p.edge_ids] = p.owned[p.edge_index[1]]
        if edge_type is not None:
            edge_type[p.edge_ids] = p.edge_type.to(torch.int64)
        for k, t in p.node_data.items():
            if k not in node:
                node[k] = t.new_zeros((n,) + tuple(t.shape[1:]))
            node[k][p.owned] = t
    return dict(edge_index=edge_index, edge_type=edge_type, **node)


# -- command line ----------------------------------------------------------------------------
def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m seastar.distributed.partition",
                                 description="Partition a graph into one folder per part for distributed training.")
    ap.add_argument("--dataset", required=True, help="cora, citeseer or synthetic")
    ap.add_argument("--num-nodes", type=int, default=100_000, help="synthetic: vertices")
    ap.add_argument("--avg-degree", type=float, default=20.0, help="synthetic: edges per vertex")
    ap.add_argument("--num-features", type=int, default=100, help="synthetic: feature width")
    ap.add_argument("--num-classes", type=int, default=10, help="synthetic: classes")
    ap.add_argument("--parts", type=int, required=True, help="number of parts (one per process)")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--method", choices=("metis", "random"), default="metis")
    ap.add_argument("--no-balance-training", action="store_true", help="do not equalise training vertices per part")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.dataset == "synthetic":
            ds = datasets.synthetic_node_classification(args.num_nodes, avg_degree=args.avg_degree,
                                                        num_classes=args.num_classes,
                                                        num_features=args.num_features, seed=args.seed)
        else:
            ds = datasets.load(args.dataset)
    except ValueError as exc:
        ap.error(str(exc))
    try:
        report = partition_graph(ds, args.parts, args.out, method=args.method,
                                 balance_training=not args.no_balance_training, seed=args.seed)
    except (ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2)
    print(f"{args.parts} parts of {report['num_nodes']} vertices in {args.out}: edge cut {report['edge_cut']} of "
          f"{report['num_edges']} edges ({100 * report['edge_cut_fraction']:.1f}%), {report['boundary_rows']} halo "
          f"rows; imbalance (max / mean) owned {report['imbalance']['owned']:.3f}, training "
          f"{report['imbalance']['train']:.3f}, in-edges {report['imbalance']['in_edges']:.3f}")
    return report


if __name__ == "__main__":
    main()
