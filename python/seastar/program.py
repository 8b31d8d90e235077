"""``@seastar.vertex_program``: trace once per input signature, lower, and run with autograd.

A call ``prog(graph, h=h, el=el, ...)`` binds tensors by name: attributes read through ``v``,
``e.src`` or ``e.dst`` are per-vertex tensors [N, ...], attributes of ``e`` are per-edge tensors
[E, ...], and names of the function's extra parameters (``def layer(v, W)``) are parameters.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import logging
import time
from typing import Dict, Tuple

import torch

from . import _C, reference, torch_ops
from .backends import (BACKENDS, FallbackLog, FallbackWarning, _captures, capture_signatures,  # noqa: F401
                       runs_fused)
from .graph import Graph
from .tracing import Tracer, Value, Vertex, _user_location, patched_builtins, return_location

log = logging.getLogger("seastar")

_program_uids = itertools.count()

JIT_TRACE_MESSAGE = ("torch.jit.trace cannot record Seastar's kernels (it would record only the outputs' "
                     "allocation and replay garbage); use torch.compile or torch.export instead, which record "
                     "them as the ops seastar::vertex_program / seastar::vertex_program_backward")


class VertexProgram:
    """A traced GNN layer; call it with a graph and named tensors."""

    def __init__(self, fn, name: str | None = None, backend: str = "auto"):
        if not callable(fn):
            raise TypeError("vertex_program decorates a function of the centre vertex v")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "program")
        sig = inspect.signature(fn)
        params = list(sig.parameters)
        if not params:
            raise TypeError(f"vertex program {self.name} must take the centre vertex as its first argument")
        self.param_names = params[1:]
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        # the trace cache, the call checks and the kernels: the orchestrator C++ programs use too
        self._core = _C.ProgramCore(self.name)
        # where another process finds this program again (an exported program names it so):
        # (module, qualified name) of a module-level program; a factory's adds its arguments
        qualname = getattr(fn, "__qualname__", "")
        self.address = None if "<locals>" in qualname or not qualname else (fn.__module__, qualname)
        self.uid = next(_program_uids)
        torch_ops.PROGRAMS[self.uid] = self  # compiled code names a program by its uid

    # -- tracing -----------------------------------------------------------------------------
    def trace(self, graph: Graph, **tensors) -> "_C.Module":
        """Traces the program for these tensors' shapes; returns the GIR module."""
        builder = _C.Builder({k: list(t.shape) for k, t in tensors.items()}, graph.has_node_types,
                             graph.has_edge_types, graph.num_node_types, graph.num_edge_types)
        tracer = Tracer(builder)
        missing = [p for p in self.param_names if p not in tensors]
        if missing:
            raise TypeError(f"vertex program {self.name} needs parameter(s) {missing} bound by name")
        returned_at = []
        with patched_builtins(), return_location(self.fn, returned_at):
            args = [tracer.call("param", p) for p in self.param_names]
            out = self.fn(Vertex(tracer), *args)
        outs = list(out) if isinstance(out, tuple) else [out]
        flat = []
        for o in outs:
            if isinstance(o, list) and len(o) == 1:  # softmax(...) returns a one-element list
                o = o[0]
            if not isinstance(o, Value):
                if returned_at:
                    builder.set_loc(*returned_at)
                builder.fail(f"vertex program {self.name} must return traced values, got {type(o).__name__}")
            flat.append(o._v)
        return builder.finish(flat)

    def lower(self, graph: Graph, **tensors):
        """The forward and backward GIR (seastar._C.LoweredProgram) for these tensors."""
        return self._compiled(graph, tensors).lowered

    def _compiled(self, graph: Graph, tensors: Dict[str, torch.Tensor]) -> "_C.Signature":
        """The traced and lowered signature of these tensors (tracing it on a miss); the cache is
        keyed by what changes the code, never by vertex or edge counts (see _C.ProgramCore)."""
        return self._core.signature(graph._g, tensors, lambda: self._trace_for_cache(graph, tensors))

    def _prepare(self, graph: Graph, tensors) -> Tuple["_C.Signature", str]:
        """``(signature, why the fused kernels cannot run these tensors or "")`` from one call into
        the orchestrator (``_C.ProgramCore.prepare``: traced and lowered on a miss, the tensors
        checked); a misfit of the tensors is raised here, naming the calling line as trace errors do."""
        compiled, why, kind, message = self._core.prepare(graph._g, tensors,
                                                          lambda: self._trace_for_cache(graph, tensors))
        if kind is not None:
            raise _misfit(kind, message)
        return compiled, why

    def _trace_for_cache(self, graph: Graph, tensors) -> "_C.Module":
        t0 = time.perf_counter()
        module = self.trace(graph, **tensors)
        log.debug("traced %s in %.1f ms", self.name, 1e3 * (time.perf_counter() - t0))
        return module

    @property
    def num_traces(self) -> int:
        """How many signatures have been traced (the size of the trace cache)."""
        return self._core.num_traces

    # -- running -----------------------------------------------------------------------------
    def __call__(self, graph: Graph, backend: str | None = None, **tensors):
        if not isinstance(graph, Graph):
            raise TypeError(f"the first argument of {self.name} must be a seastar.Graph, got {type(graph).__name__}")
        for k, t in tensors.items():
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"'{k}' must be a torch.Tensor, got {type(t).__name__}")
        backend = backend or self.backend
        if torch.compiler.is_compiling():  # torch.compile / torch.export: record the op
            return torch_ops.call_program(self, graph, backend, tensors)
        if torch.jit.is_tracing():
            raise RuntimeError(f"{self.name}: {JIT_TRACE_MESSAGE}")
        # one entry into C++: traced and lowered on a miss, checked, and run by the fused kernels
        # unless they cannot run it or the reference backend is asked for
        wants_fused = backend != "reference"
        use_fused = wants_fused and all(c.run_fused for c in _captures)
        outs, compiled, why, kind, message = self._core.call(
            graph._g, tensors, lambda: self._trace_for_cache(graph, tensors), use_fused)
        if kind is not None:
            raise _misfit(kind, message)
        for capture in _captures:
            if outs is not None or (wants_fused and not capture.run_fused):
                capture._record(compiled, graph, tensors)
        if outs is None:
            if use_fused:
                runs_fused(compiled, why, backend)  # raises for "fused", says so once for "auto"
            outs = _ReferenceFunction.apply(compiled, graph, *compiled.bind(graph._g, tensors))
        return outs[0] if len(outs) == 1 else tuple(outs)


def _misfit(kind: str, message: str) -> Exception:
    """The orchestrator's misfit of a call's tensors, naming the calling line as trace errors do."""
    file, line = _user_location()
    return (TypeError if kind == "TypeError" else ValueError)(f"{file}:{line}: {message}")


def program_factory(fn):
    """Decorates a function of constants (a slope, flags) that builds a VertexProgram: one program
    per arguments, kept. torch.compile reads a kept program like any attribute, but cannot build
    one: a layer builds the programs it may use in its constructor."""
    built: Dict[Tuple, VertexProgram] = {}

    def get(*args):
        prog = built.get(args)
        if prog is None:
            prog = built[args] = fn(*args)
            if "<locals>" not in fn.__qualname__ and all(isinstance(a, (bool, int, float, str)) for a in args):
                prog.address = (fn.__module__, fn.__qualname__, list(args))
        return prog

    functools.update_wrapper(get, fn)
    get.built = built
    return get


def vertex_program(fn=None, *, name: str | None = None, backend: str = "auto"):
    """Decorator: ``@seastar.vertex_program`` or ``@seastar.vertex_program(backend="reference")``."""
    if fn is None:
        return lambda f: VertexProgram(f, name=name, backend=backend)
    return VertexProgram(fn, name=name, backend=backend)


class _ReferenceFunction(torch.autograd.Function):
    """Runs the lowered forward and backward GIR with the reference executor."""

    @staticmethod
    def forward(ctx, compiled: "_C.Signature", graph: Graph, *tensors):
        named = dict(zip(compiled.names, tensors))
        ctx.compiled, ctx.graph = compiled, graph
        ctx.save_for_backward(*tensors)
        with torch.no_grad():
            outs = reference.evaluate(compiled.lowered.forward, graph, named)
        return tuple(outs)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grad_outputs):
        compiled = ctx.compiled
        tensors = ctx.saved_tensors
        named = dict(zip(compiled.names, tensors))
        wrt = list(compiled.lowered.wrt)
        grads = {}
        if wrt:
            gouts = [g if g is not None else torch.zeros(()) for g in grad_outputs]
            outs = reference.evaluate(compiled.lowered.backward, ctx.graph, named, grad_outputs=gouts)
            grads = dict(zip(wrt, outs))
        result = [None, None]
        for k, t in zip(compiled.names, tensors):  # x@dst's gradient reaches x through the slice
            g = grads.get(k)
            result.append(None if g is None else g.to(t.dtype).reshape(t.shape))
        return tuple(result)
