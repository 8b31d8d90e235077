"""Reading the kernel cache's entries from Python, independently of runtime/jit/kernel_cache.cpp.

An entry is ``object + fields + footer``; the footer is ``b"SEASTAR-ENTRY-1 "``, the fields'
length and FNV-1a hash (16 hex digits each, a space between) and a newline. The fields are
``name=value`` lines (``%``, newline and CR percent-escaped) holding at least ``key``, ``size``
and ``hash`` (FNV-1a of the object). Tests use this to check that every entry a run leaves
behind is whole, and to forge entries the C++ reader must still reject.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Optional, Tuple

MAGIC = b"SEASTAR-ENTRY-1 "
FOOTER = len(MAGIC) + 16 + 1 + 16 + 1


def fnv1a(data: bytes) -> str:
    h = 1469598103934665603
    for c in data:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def split(data: bytes) -> Optional[Tuple[bytes, Dict[str, str]]]:
    """(object, fields) of a valid entry, else None."""
    if len(data) < FOOTER or data[-FOOTER:-FOOTER + len(MAGIC)] != MAGIC:
        return None
    footer = data[-FOOTER:]
    n = int(footer[len(MAGIC):len(MAGIC) + 16], 16)
    if n > len(data) - FOOTER:
        return None
    block = data[len(data) - FOOTER - n:len(data) - FOOTER]
    if fnv1a(block) != footer[len(MAGIC) + 17:len(MAGIC) + 33].decode():
        return None
    obj = data[:len(data) - FOOTER - n]
    fields = {}
    for line in block.decode("latin-1").splitlines():
        name, _, value = line.partition("=")
        fields[name] = re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), value)
    if fields.get("size") != str(len(obj)) or fields.get("hash") != fnv1a(obj):
        return None
    return obj, fields


def seal(obj: bytes, key: str, extra: Optional[Dict[str, str]] = None) -> bytes:
    """A valid entry for ``key`` holding ``obj`` (what the C++ writer produces)."""
    fields = dict(extra or {}, key=key, size=str(len(obj)), hash=fnv1a(obj))
    block = "".join(f"{k}={v}\n" for k, v in sorted(fields.items())).encode()
    return obj + block + MAGIC + f"{len(block):016x} {fnv1a(block)}\n".encode()


def key_of(path: Path) -> str:
    """The key in an entry's file name: ``<stem>-<key>.<ext>``."""
    return path.name.rsplit(".", 1)[0].rsplit("-", 1)[1]


def check_dir(cache: Path) -> None:
    """Every entry in ``cache`` is whole and under its own key; no temporary file is left."""
    leftovers = [p.name for p in cache.iterdir() if p.name.endswith(".tmp") or ".tmp." in p.name]
    assert not leftovers, leftovers
    for p in cache.iterdir():
        if p.suffix in (".so", ".cubin", ".ptx", ".index", ".target"):
            assert p.is_file(), f"{p.name} is not a file"
            parts = split(p.read_bytes())
            assert parts is not None, f"{p.name} is not a valid entry"
            assert parts[1]["key"] == key_of(p), f"{p.name} holds key {parts[1]['key']}"
