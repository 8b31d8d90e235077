"""Results name paths the way another machine can read them: the checkout as a relative path,
the home directory as ``~`` and the temporary directory as ``<scratch>``, so committed JSON
holds no machine's absolute paths."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
_PREFIXES = [(ROOT + os.sep, ""), (ROOT, "."), (tempfile.gettempdir().rstrip(os.sep), "<scratch>"),
             (os.path.expanduser("~").rstrip(os.sep), "~")]


def portable(obj):
    """``obj`` (a JSON-ready value) with every string's machine paths rewritten."""
    if isinstance(obj, str):
        for prefix, repl in _PREFIXES:
            if prefix and len(prefix) > 1:
                obj = obj.replace(prefix, repl)
        return obj
    if isinstance(obj, dict):
        return {k: portable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [portable(v) for v in obj]
    return obj
