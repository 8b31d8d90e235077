"""Shared pieces of the datasets package: the dataset base class, fast text parsing
helpers that report the offending file and line, and lazy construction of seastar graphs.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from pathlib import Path

import numpy as np
import torch

from ..graph import Graph

logger = logging.getLogger("seastar.datasets")


class Dataset:
    """Base class of every dataset object in this package.

    Subclasses are dataclasses whose fields are tensors, a seastar ``Graph`` (or ``None``
    when loaded with ``build_graph=False``) and plain Python values.
    """

    name: str

    def to(self, device) -> "Dataset":
        """Return a shallow copy with every tensor field (and the graph, if it supports
        ``.to``) moved to ``device``; the original is left untouched."""
        changes = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor) or (f.name == "graph" and hasattr(value, "to")):
                changes[f.name] = value.to(device)
        return dataclasses.replace(self, **changes)


def build_graph(edge_index: torch.Tensor, num_nodes: int, **typed):
    """Build a ``seastar.Graph``; imported here so that tensor-only use never needs the
    compiled extension."""
    return Graph.from_edge_index(edge_index, num_nodes=num_nodes, **typed)


def file_key(*paths: Path) -> tuple:
    """A cache key that changes when any of the files is rewritten, so an in-process cache
    never serves stale contents."""
    key = []
    for p in paths:
        st = os.stat(p)
        key.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(key)


_SPACE = np.zeros(256, dtype=bool)
_SPACE[[ord(c) for c in " \t\n\r\v\f"]] = True


class TextRecords:
    """A whitespace-separated text file, one record a line (blank lines allowed).

    Fields per line are counted with numpy over the raw bytes, so checking that every line
    has the right shape costs milliseconds, and errors can name the real line number.
    """

    def __init__(self, path: Path):
        self.path = path
        try:
            self.data = path.read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"dataset file not found: {path}") from None
        if not self.data.isascii():
            raise ValueError(f"{path}: not plain ASCII text")
        b = np.frombuffer(self.data, dtype=np.uint8)
        space = _SPACE[b]
        starts = ~space
        starts[1:] &= space[:-1]
        line = np.cumsum(b == 10)  # 0-based line of each byte
        counts = np.bincount(line[starts], minlength=int(line[-1]) + 1 if b.size else 0)
        self.fields_per_line = counts
        self.record_lines = np.flatnonzero(counts) + 1  # 1-based line of each record

    def __len__(self) -> int:
        return int(self.record_lines.size)

    def line(self, record: int) -> int:
        return int(self.record_lines[record])

    def error(self, record: int, message: str) -> ValueError:
        return ValueError(f"{self.path}: line {self.line(record)}: {message}")

    def check_columns(self, columns: int, form: str) -> None:
        bad = np.flatnonzero((self.fields_per_line != 0) & (self.fields_per_line != columns))
        if bad.size:
            lineno = int(bad[0]) + 1
            text = self.data.split(b"\n")[lineno - 1].decode()
            raise ValueError(f"{self.path}: line {lineno}: expected '{form}', got {text!r}")

    def tokens(self, columns: int, form: str) -> list:
        """All fields as strings, after checking every line has ``columns`` of them."""
        self.check_columns(columns, form)
        return self.data.decode().split()

    def numbers(self, columns: int, form: str, dtype=np.int64) -> np.ndarray:
        """Parse into a ``[records, columns]`` array.

        ``np.fromstring`` with a separator is an order of magnitude faster than ``np.loadtxt``;
        it only tells us *that* a field is not a number, so then we rescan to name the line.
        """
        self.check_columns(columns, form)
        with warnings.catch_warnings():
            # Older numpy only warns (and truncates) on unparsable input; make it an error.
            warnings.simplefilter("error", DeprecationWarning)
            try:
                flat = np.fromstring(self.data, dtype=dtype, sep=" ")
            except (ValueError, DeprecationWarning):
                flat = None
        if flat is not None and flat.size == len(self) * columns:
            return flat.reshape(-1, columns)
        kind = int if np.issubdtype(dtype, np.integer) else float
        for i, line in enumerate(self.data.decode().split("\n"), 1):
            try:
                [kind(f) for f in line.split()]
            except ValueError:
                raise ValueError(f"{self.path}: line {i}: not {kind.__name__}s: {line!r}") from None
        raise ValueError(f"{self.path}: malformed numbers")

    def check_range(self, values: np.ndarray, bound: int, what: str) -> None:
        """Raise if any of ``values`` (one per record) lies outside ``[0, bound)``."""
        bad = np.flatnonzero((values < 0) | (values >= bound))
        if bad.size:
            i = int(bad[0])
            raise self.error(i, f"{what} {int(values[i])} out of range [0, {bound}) "
                                f"({bad.size} such record(s))")
