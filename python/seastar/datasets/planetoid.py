"""Planetoid citation graphs (Cora, Citeseer) for node classification.

Reads the plain-text format described in ``data/README.md`` (edges, sparse features,
labels, the standard public split and a ``meta.txt`` with the expected sizes), checks every
file against ``meta.txt`` and returns a :class:`NodeClassificationDataset`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import torch

from ._common import Dataset, TextRecords, build_graph as _build_graph, file_key, logger

DATA_DIR = Path(__file__).resolve().parent / "data" / "planetoid"
PLANETOID_NAMES = ("cora", "citeseer")
_FILES = ("meta.txt", "edges.txt", "features.txt", "labels.txt", "split.txt")
_SPLITS = ("train", "val", "test")


@dataclass
class NodeClassificationDataset(Dataset):
    """A graph with node features, labels and boolean train/val/test masks.

    ``edge_index`` is int64 ``[2, E]`` with row 0 the source; ``graph`` is the seastar
    ``Graph`` built from it (``None`` when loaded with ``build_graph=False``). The typed
    fields are set only by heterogeneous datasets (e.g. the synthetic planted one).
    """

    name: str
    graph: Any
    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    num_classes: int
    num_features: int
    edge_index: torch.Tensor
    node_type: Optional[torch.Tensor] = None
    edge_type: Optional[torch.Tensor] = None
    num_node_types: Optional[int] = None
    num_edge_types: Optional[int] = None

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])


def load_planetoid(name: str, root=None, dtype: torch.dtype = torch.float32,
                   build_graph: bool = True) -> NodeClassificationDataset:
    """Load ``cora`` or ``citeseer``.

    ``root`` is either the dataset folder itself (containing ``meta.txt``) or a folder with a
    ``<name>/`` sub-folder; by default the copy shipped with the package is used. Features are
    row-normalised (all-zero rows stay zero) and returned as ``dtype``.
    """
    start = time.perf_counter()
    name = name.lower()
    folder = _resolve_folder(name, root)
    arrays = _parse_cached(file_key(*(folder / f for f in _FILES)))
    n, f = arrays["num_nodes"], arrays["num_features"]

    # Fresh tensors every call: the cache holds numpy arrays that callers never see.
    edge_index = torch.from_numpy(arrays["edges"].T.copy())
    x = torch.zeros(n, f, dtype=dtype)
    x[torch.from_numpy(arrays["feat_rows"]), torch.from_numpy(arrays["feat_cols"])] = \
        torch.from_numpy(arrays["feat_values"]).to(dtype)
    masks = {s: torch.from_numpy(arrays[s + "_mask"].copy()) for s in _SPLITS}
    ds = NodeClassificationDataset(
        name=name,
        graph=_build_graph(edge_index, n) if build_graph else None,
        x=x,
        y=torch.from_numpy(arrays["labels"].copy()),
        train_mask=masks["train"], val_mask=masks["val"], test_mask=masks["test"],
        num_classes=arrays["num_classes"], num_features=f, edge_index=edge_index,
    )
    logger.info("loaded %s: %d nodes, %d edges, %d features, %d classes, split %d/%d/%d in %.3fs",
                name, n, ds.num_edges, f, ds.num_classes, int(masks["train"].sum()),
                int(masks["val"].sum()), int(masks["test"].sum()), time.perf_counter() - start)
    return ds


def _resolve_folder(name: str, root) -> Path:
    if root is None:
        folder = DATA_DIR / name
    else:
        root = Path(root).expanduser()
        folder = root if (root / "meta.txt").is_file() else root / name
    if not (folder / "meta.txt").is_file():
        raise FileNotFoundError(f"{name}: no meta.txt in {folder}")
    return folder


@functools.lru_cache(maxsize=8)
def _parse_cached(key: tuple) -> Dict[str, Any]:
    paths = {Path(p).name: Path(p) for p, _, _ in key}
    return _parse(paths)


def _parse(paths: Dict[str, Path]) -> Dict[str, Any]:
    meta = _parse_meta(paths["meta.txt"])
    n, f, c = meta["nodes"], meta["features"], meta["classes"]

    edges_file = TextRecords(paths["edges.txt"])
    edges = edges_file.numbers(2, "src dst")
    _expect(edges_file.path, "edges", len(edges_file), meta["edges"])
    edges_file.check_range(edges[:, 0], n, "source node")
    edges_file.check_range(edges[:, 1], n, "destination node")

    feat_file = TextRecords(paths["features.txt"])
    triples = feat_file.numbers(3, "node feature value", dtype=np.float64)
    ids = triples[:, :2]
    fractional = np.flatnonzero((ids != np.round(ids)).any(1))
    if fractional.size:
        raise feat_file.error(int(fractional[0]), "node and feature must be integers")
    rows, cols = ids[:, 0].astype(np.int64), ids[:, 1].astype(np.int64)
    if "feature_nnz" in meta:
        _expect(feat_file.path, "non-zero features", len(feat_file), meta["feature_nnz"])
    feat_file.check_range(rows, n, "node")
    feat_file.check_range(cols, f, "feature")
    values = triples[:, 2]
    # Row-normalise in float64 once here; rows with no non-zeros simply never appear.
    row_sum = np.bincount(rows, weights=values, minlength=n)
    norm = row_sum[rows]
    values = np.divide(values, norm, out=np.zeros_like(values), where=norm != 0)

    labels_file = TextRecords(paths["labels.txt"])
    labels = labels_file.numbers(1, "class")[:, 0]
    _expect(labels_file.path, "labels (one per node)", len(labels_file), n)
    labels_file.check_range(labels, c, "class")

    masks = _parse_split(TextRecords(paths["split.txt"]), meta, n)
    return dict(num_nodes=n, num_features=f, num_classes=c, edges=edges, feat_rows=rows,
                feat_cols=cols, feat_values=values, labels=labels, **masks)


def _parse_meta(path: Path) -> Dict[str, int]:
    records = TextRecords(path)
    tokens = records.tokens(2, "key count")
    meta = {}
    for i, (key, value) in enumerate(zip(tokens[0::2], tokens[1::2])):
        if not value.isdigit():
            raise records.error(i, f"count of {key!r} is not a non-negative integer: {value!r}")
        meta[key] = int(value)
    missing = [k for k in ("nodes", "edges", "features", "classes") if k not in meta]
    if missing:
        raise ValueError(f"{path}: missing key(s) {', '.join(missing)}")
    return meta


def _parse_split(records: TextRecords, meta: Dict[str, int], n: int) -> Dict[str, np.ndarray]:
    path = records.path
    tokens = records.tokens(2, "train|val|test node")
    kinds = np.array(tokens[0::2])
    try:
        nodes = np.array(tokens[1::2], dtype=np.int64)
    except ValueError:
        i = next((i for i, t in enumerate(tokens[1::2]) if not t.lstrip("-").isdigit()), 0)
        raise records.error(i, f"node id {tokens[2 * i + 1]!r} is not an integer") from None
    unknown = np.flatnonzero(~np.isin(kinds, _SPLITS))
    if unknown.size:
        i = int(unknown[0])
        raise records.error(i, f"unknown split {str(kinds[i])!r}, "
                               f"expected one of {', '.join(_SPLITS)}")
    records.check_range(nodes, n, "node")
    out, seen = {}, np.zeros(n, dtype=np.int64)
    for split in _SPLITS:
        members = nodes[kinds == split]
        if split in meta:
            _expect(path, f"{split} nodes", members.shape[0], meta[split])
        mask = np.zeros(n, dtype=bool)
        mask[members] = True
        if mask.sum() != members.shape[0]:
            raise ValueError(f"{path}: {split} lists a node more than once")
        seen += mask
        out[split + "_mask"] = mask
    if (seen > 1).any():
        node = int(np.flatnonzero(seen > 1)[0])
        raise ValueError(f"{path}: node {node} is in more than one split")
    return out


def _expect(path: Path, what: str, got: int, expected: int) -> None:
    if got != expected:
        raise ValueError(f"{path}: {got} {what}, but meta.txt says {expected}")
