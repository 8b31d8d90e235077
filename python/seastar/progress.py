"""Progress bars for long loops: tqdm when it is installed, else a plain one-line bar on stderr.

    for batch in ss.progress.bar(loader, desc="epoch 3"):
        ...
"""
from __future__ import annotations

import sys
import time
from typing import Iterable, Optional


def bar(iterable: Iterable, total: Optional[int] = None, desc: str = "", disable: bool = False):
    """Wraps ``iterable`` in a progress bar (``total`` defaults to ``len(iterable)``)."""
    if disable:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainBar(iterable, total, desc)
    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True)


class _PlainBar:
    """`desc 37/120 [=====>    ] 1.2 s`, redrawn in place at most every 0.2 s, erased at the end."""

    def __init__(self, iterable, total, desc):
        self.iterable, self.desc = iterable, desc
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.tty = sys.stderr.isatty()

    def __len__(self):
        return self.total

    def __iter__(self):
        t0 = last = time.perf_counter()
        for i, item in enumerate(self.iterable, 1):
            yield item
            now = time.perf_counter()
            if self.tty and (now - last > 0.2 or i == self.total):
                last = now
                self._draw(i, now - t0)
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def _draw(self, i, elapsed):
        if self.total:
            filled = int(30 * i / self.total)
            line = f"{self.desc} {i}/{self.total} [{'=' * filled}{' ' * (30 - filled)}] {elapsed:.1f} s"
        else:
            line = f"{self.desc} {i} {elapsed:.1f} s"
        sys.stderr.write("\r" + line)
        sys.stderr.flush()
