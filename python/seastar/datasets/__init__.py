"""Datasets for seastar: the Planetoid citation graphs (shipped with the package), WN18RR
(read from a folder) and seeded synthetic graphs.

    ds = seastar.datasets.load("cora")      # ds.graph, ds.x, ds.y, ds.train_mask, ...
    kg = seastar.datasets.load("wn18rr")    # from $SEASTAR_WN18RR_DIR or ../shared/data/wn18rr

Loaders log one line per load on the ``seastar.datasets`` logger. ``build_graph=False``
returns tensors only, without importing the compiled extension.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

import torch

from ._common import Dataset
from .planetoid import PLANETOID_NAMES, NodeClassificationDataset, load_planetoid
from .synthetic import (SyntheticGraph, planted_typed_classification, power_law_graph,
                        synthetic_node_classification, typed_graph, uniform_graph)
from .wn18rr import FilterIndex, KnowledgeGraphDataset, load_wn18rr

NAMES = PLANETOID_NAMES + ("wn18rr",)

__all__ = [
    "NAMES", "load", "default_wn18rr_root", "Dataset", "NodeClassificationDataset",
    "KnowledgeGraphDataset", "FilterIndex", "SyntheticGraph", "load_planetoid", "load_wn18rr",
    "uniform_graph", "power_law_graph", "typed_graph", "planted_typed_classification",
    "synthetic_node_classification",
]


def load(name: str, root=None, dtype: torch.dtype = torch.float32, *,
         build_graph: bool = True) -> Union[NodeClassificationDataset, KnowledgeGraphDataset]:
    """Load a dataset by (case-insensitive) name: ``cora``, ``citeseer`` or ``wn18rr``.

    ``root`` overrides where the files are read from; ``dtype`` is the feature dtype of node
    classification datasets (WN18RR has no features, and builds its graph on demand with
    ``train_graph()``, so ``dtype`` and ``build_graph`` do not apply to it).
    """
    key = name.lower()
    if key in PLANETOID_NAMES:
        return load_planetoid(key, root=root, dtype=dtype, build_graph=build_graph)
    if key == "wn18rr":
        return load_wn18rr(root if root is not None else default_wn18rr_root())
    raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(NAMES)}")


def default_wn18rr_root() -> Path:
    """``$SEASTAR_WN18RR_DIR`` if set, else ``<repository>/../shared/data/wn18rr``.

    WN18RR is too large to ship inside the package, so it is found by convention.
    """
    env = os.environ.get("SEASTAR_WN18RR_DIR")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"wn18rr: SEASTAR_WN18RR_DIR={env} is not a directory")
        return path
    repo_root = Path(__file__).resolve().parents[3]
    path = repo_root.parent / "shared" / "data" / "wn18rr"
    if not path.is_dir():
        raise FileNotFoundError(f"wn18rr: no data at {path}; set SEASTAR_WN18RR_DIR or pass root=")
    return path
