"""The old import path of the fused backend's public names, kept for code written against it:
``seastar.fused.FallbackWarning`` is ``seastar.FallbackWarning`` (their home is
``seastar.backends``)."""
from __future__ import annotations

from .backends import FALLBACK_MESSAGE, FallbackLog, FallbackWarning

__all__ = ["FALLBACK_MESSAGE", "FallbackLog", "FallbackWarning"]
