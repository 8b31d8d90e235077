"""What the example scripts share: checks of their command-line numbers."""
from __future__ import annotations

import argparse
from typing import Dict, Iterable


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, at_least: Dict[str, int],
                    fractions: Iterable[str] = ("dropout",)) -> argparse.Namespace:
    """``parser.error`` (exit status 2, the option named) for a number out of range: each
    ``at_least`` option (when given) below its minimum, each ``fractions`` option outside [0, 1)."""
    for name, low in at_least.items():
        value = getattr(args, name)
        if value is not None and value < low:
            parser.error(f"--{name.replace('_', '-')} must be at least {low}, got {value}")
    for name in fractions:
        value = getattr(args, name)
        if not 0.0 <= value < 1.0:
            parser.error(f"--{name.replace('_', '-')} must be in [0, 1), got {value}")
    return args
