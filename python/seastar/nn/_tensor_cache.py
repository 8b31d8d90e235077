"""A small cache of values derived from a tensor (the ``ss.Graph`` built from an ``edge_index``).

PyG-style calls pass the structure as a tensor on every call (``conv(x, edge_index)``); building
the graph's indices each time would cost O(E log E) per layer and per step. A derived value is
kept while its tensor lives and has not been modified in place: an entry is found by the
tensor's identity and must match its ``_version`` (bumped by every in-place write), so a
changed tensor is never served a stale graph. Entries hold only a weak reference to the
tensor; one is dropped when its tensor is freed, and at most ``maxsize`` are kept (least
recently used first out), so the cache cannot grow without bound.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable, Sequence, Tuple

import torch


class TensorCache:
    def __init__(self, maxsize: int = 64):
        self.maxsize = maxsize
        self._d: "OrderedDict[Tuple, Tuple]" = OrderedDict()  # key -> (refs, versions, value)
        self._lock = threading.RLock()  # a weakref callback may run inside a locked section (GC)

    def get(self, tensor, extra: Hashable, make: Callable[[], Any], also: Sequence = ()):
        """The value for (``tensor``, ``extra``), made by ``make()`` on a miss. ``also``: other
        tensors the value is derived from (an ``edge_type`` next to its ``edge_index``), matched
        by identity and version too."""
        if isinstance(also, torch.Tensor):
            also = (also,)
        tensors = (tensor,) + tuple(also)
        key = (tuple(id(t) for t in tensors), extra)
        versions = tuple(t._version for t in tensors)
        with self._lock:
            hit = self._d.get(key)
            if hit is not None and hit[1] == versions and all(r() is t for r, t in zip(hit[0], tensors)):
                self._d.move_to_end(key)
                return hit[2]
        value = make()
        with self._lock:
            drop = self._dropper(key)
            self._d[key] = (tuple(weakref.ref(t, drop) for t in tensors), versions, value)
            self._d.move_to_end(key)
            while len(self._d) > self.maxsize:
                self._d.popitem(last=False)
        return value

    def _dropper(self, key):
        cache = weakref.ref(self)

        def drop(ref):
            c = cache()
            if c is None:
                return
            with c._lock:
                hit = c._d.get(key)
                if hit is not None and any(ref is r for r in hit[0]):  # not a newer tensor reusing the id
                    del c._d[key]
        return drop

    def clear(self) -> None:
        with self._lock:
            self._d.clear()

    def __len__(self) -> int:
        return len(self._d)


# One cache for the process: the graph of an edge_index is the same whichever layer asks.
GRAPHS = TensorCache(64)
