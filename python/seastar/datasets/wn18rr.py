"""WN18RR, a multi-relational knowledge graph for link prediction.

Reads ``train.txt``/``valid.txt``/``test.txt`` (``head<TAB>relation<TAB>tail``) and the
``entities.dict``/``relations.dict`` id maps, and returns a :class:`KnowledgeGraphDataset`
with the triples as tensors, a typed training graph and an index for filtered ranking.
"""

from __future__ import annotations

import functools
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import numpy as np
import torch

from ._common import Dataset, TextRecords, build_graph as _build_graph, file_key, logger

_SPLITS = ("train", "valid", "test")


@dataclass
class KnowledgeGraphDataset(Dataset):
    """Triples ``(head, relation, tail)`` as int64 tensors ``[T, 3]``.

    Entity ids are those of ``entities.dict``. Relation ids are dense, ``0..R-1`` over the
    relations that occur in some split (WN18RR's dictionary lists 18 names, 11 are used), in
    dictionary order; ``relation_names[r]`` names relation ``r``.
    """

    name: str
    num_entities: int
    num_relations: int
    relation_names: List[str]
    entity_names: List[str] = field(repr=False)
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    _filter: Optional["FilterIndex"] = field(default=None, init=False, repr=False, compare=False)

    def train_edges(self, add_inverse: bool = True) -> Tuple[torch.Tensor, torch.Tensor, int]:
        """``(edge_index [2, E], edge_type [E], num_edge_types)`` of the training graph.

        An edge runs head -> tail with type ``relation``; with ``add_inverse`` every triple
        also gives tail -> head with type ``relation + num_relations``, so a message-passing
        encoder sees both directions while still telling them apart.
        """
        h, r, t = self.train.unbind(1)
        if add_inverse:
            edge_index = torch.stack([torch.cat([h, t]), torch.cat([t, h])])
            return edge_index, torch.cat([r, r + self.num_relations]), 2 * self.num_relations
        return torch.stack([h, t]), r.clone(), self.num_relations

    def train_graph(self, add_inverse: bool = True):
        """Typed seastar ``Graph`` over all entities built from :meth:`train_edges`."""
        edge_index, edge_type, num_types = self.train_edges(add_inverse)
        return _build_graph(edge_index, self.num_entities, edge_type=edge_type,
                            num_edge_types=num_types)

    def filter_index(self) -> "FilterIndex":
        """Index of every true triple over train+valid+test (built once, then reused)."""
        if self._filter is None:
            self._filter = FilterIndex.build(torch.cat([self.train, self.valid, self.test]),
                                             self.num_entities, self.num_relations)
        return self._filter


class FilterIndex:
    """All known answers of ``(entity, relation, ?)`` queries, stored CSR-style.

    Query relations are ``0..2R-1``: ``r`` asks for tails of ``(h, r, ?)``; ``r + R`` asks for
    heads of ``(?, r, t)`` written as ``(t, r + R, ?)``, so one code path filters both.
    Lookup is a ``searchsorted`` over sorted query keys, vectorised over a batch.
    """

    def __init__(self, keys: torch.Tensor, offsets: torch.Tensor, answers: torch.Tensor,
                 num_entities: int, num_relations: int):
        self.keys, self.offsets, self.answers = keys, offsets, answers
        self.num_entities, self.num_relations = num_entities, num_relations

    @classmethod
    def build(cls, triples: torch.Tensor, num_entities: int, num_relations: int) -> "FilterIndex":
        h, r, t = triples.unbind(1)
        q = 2 * num_relations
        src = torch.cat([h, t])
        rel = torch.cat([r, r + num_relations])
        ans = torch.cat([t, h])
        # One int64 per (query, answer) pair: sorting it groups queries and sorts answers.
        pair = torch.unique((src * q + rel) * num_entities + ans)
        query, answers = pair // num_entities, pair % num_entities
        keys, counts = torch.unique_consecutive(query, return_counts=True)
        offsets = torch.zeros(keys.numel() + 1, dtype=torch.int64, device=keys.device)
        offsets[1:] = torch.cumsum(counts, 0)
        return cls(keys, offsets, answers, num_entities, num_relations)

    def to(self, device) -> "FilterIndex":
        return FilterIndex(self.keys.to(device), self.offsets.to(device), self.answers.to(device),
                           self.num_entities, self.num_relations)

    def _ranges(self, entity: torch.Tensor, relation: torch.Tensor):
        key = entity.to(self.keys.device) * (2 * self.num_relations) + relation.to(self.keys.device)
        if self.keys.numel() == 0:
            zero = torch.zeros_like(key)
            return zero, zero
        pos = torch.searchsorted(self.keys, key).clamp_(max=self.keys.numel() - 1)
        found = self.keys[pos] == key
        start = self.offsets[pos]
        return start, torch.where(found, self.offsets[pos + 1] - start, torch.zeros_like(start))

    def true_answers(self, entity: int, relation: int) -> torch.Tensor:
        """Sorted known answers of one query."""
        start, count = self._ranges(torch.tensor([entity]), torch.tensor([relation]))
        return self.answers[int(start): int(start) + int(count)]

    def mask(self, entity: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        """Bool ``[B, num_entities]``: True where the candidate is a known answer."""
        start, count = self._ranges(entity, relation)
        b = entity.numel()
        row = torch.repeat_interleave(torch.arange(b, device=start.device), count)
        first = torch.repeat_interleave(start - (torch.cumsum(count, 0) - count), count)
        idx = first + torch.arange(row.numel(), device=start.device)
        out = torch.zeros(b, self.num_entities, dtype=torch.bool, device=start.device)
        out[row, self.answers[idx]] = True
        return out

    def rank(self, scores: torch.Tensor, entity: torch.Tensor, relation: torch.Tensor,
             target: torch.Tensor) -> torch.Tensor:
        """Filtered rank (1 = best) of ``target`` among ``scores [B, num_entities]``.

        Other known answers are ignored; ties with the target count half, so a constant
        scorer gets the middle rank rather than a flattering one.
        """
        filt = self.mask(entity, relation).to(scores.device)
        target = target.to(scores.device)
        filt[torch.arange(target.numel(), device=scores.device), target] = False
        own = scores.gather(1, target.view(-1, 1))
        higher = ((scores > own) & ~filt).sum(1)
        ties = ((scores == own) & ~filt).sum(1) - 1
        return 1.0 + higher.to(scores.dtype) + 0.5 * ties.to(scores.dtype)

    def as_dict(self) -> Dict[Tuple[int, int], Set[int]]:
        """``{(entity, query relation): {answers}}``; convenient, but slow for large graphs."""
        q = 2 * self.num_relations
        answers = self.answers.tolist()
        bounds = self.offsets.tolist()
        return {(k // q, k % q): set(answers[bounds[i]:bounds[i + 1]])
                for i, k in enumerate(self.keys.tolist())}


def load_wn18rr(root) -> KnowledgeGraphDataset:
    """Load WN18RR from the folder ``root``.

    No graph is built here: which edges a model trains on (with or without inverses) is its
    choice, see :meth:`KnowledgeGraphDataset.train_graph`.
    """
    start = time.perf_counter()
    root = Path(root).expanduser()
    names = ["entities.dict", "relations.dict"] + [s + ".txt" for s in _SPLITS]
    for n in names:
        if not (root / n).is_file():
            raise FileNotFoundError(f"wn18rr: {root / n} not found")
    arrays = _parse_cached(file_key(*(root / n for n in names)))
    ds = KnowledgeGraphDataset(
        name="wn18rr",
        num_entities=len(arrays["entity_names"]),
        num_relations=len(arrays["relation_names"]),
        relation_names=list(arrays["relation_names"]),
        entity_names=list(arrays["entity_names"]),
        **{s: torch.from_numpy(arrays[s].copy()) for s in _SPLITS},
    )
    logger.info("loaded wn18rr: %d entities, %d relations, %d/%d/%d triples in %.3fs",
                ds.num_entities, ds.num_relations, len(ds.train), len(ds.valid), len(ds.test),
                time.perf_counter() - start)
    return ds


@functools.lru_cache(maxsize=4)
def _parse_cached(key: tuple) -> dict:
    paths = {Path(p).name: Path(p) for p, _, _ in key}
    entities = _parse_dict(paths["entities.dict"])
    relations = _parse_dict(paths["relations.dict"])
    ent_id = {n: i for i, n in enumerate(entities)}
    rel_id = {n: i for i, n in enumerate(relations)}
    raw = {s: _parse_triples(paths[s + ".txt"], ent_id, rel_id) for s in _SPLITS}
    # Densify relation ids over the relations that actually occur, keeping dictionary order.
    used = np.unique(np.concatenate([raw[s][:, 1] for s in _SPLITS]))
    remap = np.full(len(relations), -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    for s in _SPLITS:
        raw[s][:, 1] = remap[raw[s][:, 1]]
    return dict(entity_names=tuple(entities), relation_names=tuple(relations[i] for i in used),
                **raw)


def _parse_dict(path: Path) -> List[str]:
    """``index<TAB>name`` lines; indices must be exactly ``0..n-1`` (in any order)."""
    tokens = TextRecords(path).tokens(2, "index<TAB>name")
    try:
        index = np.array(tokens[0::2], dtype=np.int64)
    except ValueError:
        raise ValueError(f"{path}: indices must be integers") from None
    names = tokens[1::2]
    if not np.array_equal(np.sort(index), np.arange(len(names))):
        raise ValueError(f"{path}: indices are not 0..{len(names) - 1}, each once")
    ordered = [""] * len(names)
    for i, name in zip(index.tolist(), names):
        ordered[i] = name
    if len(set(ordered)) != len(ordered):
        raise ValueError(f"{path}: a name appears twice")
    return ordered


def _parse_triples(path: Path, ent_id: Dict[str, int], rel_id: Dict[str, int]) -> np.ndarray:
    records = TextRecords(path)
    tokens = records.tokens(3, "head<TAB>relation<TAB>tail")
    n = len(records)
    # map(dict.get, ...) keeps the lookups in C; -1 marks an unknown name.
    out = np.empty((n, 3), dtype=np.int64)
    for col, ids in enumerate((ent_id, rel_id, ent_id)):
        out[:, col] = np.fromiter(map(ids.get, tokens[col::3], itertools.repeat(-1)),
                                  dtype=np.int64, count=n)
    if (out < 0).any():
        row, col = (int(v[0]) for v in np.nonzero(out < 0))
        kind = "relation" if col == 1 else "entity"
        raise records.error(row, f"unknown {kind} {tokens[3 * row + col]!r}")
    return out
