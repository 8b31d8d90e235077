"""Marks that torch.compile reads, set without importing Dynamo.

``torch._dynamo.assume_constant_result`` only sets an attribute on the function, but reaching it
imports Dynamo (and through it sympy, triton and the inductor's front), which makes every process
that imports Seastar, torch.compile or not, pay for Dynamo at start-up. The mark is set here
directly; ``tests/python/test_import_cost.py`` checks that it is the attribute Dynamo itself sets,
so a torch that changes it fails a test rather than silently losing the mark.
"""
from __future__ import annotations

# the attribute torch/_dynamo/decorators.py's assume_constant_result sets and trace_rules reads
_CONSTANT_RESULT = "_dynamo_marked_constant"


def assume_constant_result(fn):
    """``torch._dynamo.assume_constant_result``: compiled code calls ``fn`` once while tracing
    and bakes its result in as a constant (its inputs must be constants too)."""
    setattr(fn, _CONSTANT_RESULT, True)
    return fn
