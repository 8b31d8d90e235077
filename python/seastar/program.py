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
import weakref
from typing import Dict, List, Tuple

import torch

from . import _C
from . import reference
from .graph import Graph
from .tracing import Tracer, Value, Vertex, patched_builtins

log = logging.getLogger("seastar")

BACKENDS = ("auto", "fused", "reference")


DST_SUFFIX = "@dst"  # a vertex input read at sources and destinations: its first num_dst rows

# uid -> program: how compiled code (torch_ops) names a program with a constant
PROGRAMS: "weakref.WeakValueDictionary[int, VertexProgram]" = weakref.WeakValueDictionary()
_program_uids = itertools.count()

JIT_TRACE_MESSAGE = ("torch.jit.trace cannot record Seastar's kernels (it would record only the outputs' "
                     "allocation and replay garbage); use torch.compile or torch.export instead, which record "
                     "them as the ops seastar::vertex_program / seastar::vertex_program_backward")


class Compiled:
    """One traced and lowered signature of a program."""

    def __init__(self, lowered, names: List[str], param_names: List[str], param_shapes: Dict[str, tuple]):
        self.lowered = lowered
        # the tensors the kernels take, sorted: the user's names and, on a bipartite graph,
        # ``x@dst`` for each x read at both endpoints
        extra = sorted(n for n in lowered.vertex_inputs if n.endswith(DST_SUFFIX))
        self.names = names + extra
        self.param_names = param_names
        self.param_shapes = param_shapes  # full shapes of the tensors bound as parameters
        self.kernels = None  # the fused backend's compiled kernels, built on first use

    def fits(self, tensors: Dict[str, torch.Tensor]) -> bool:
        return all(tuple(tensors[k].shape) == s for k, s in self.param_shapes.items())

    def bind(self, graph: Graph, tensors: Dict[str, torch.Tensor]) -> List[torch.Tensor]:
        """The tensors in ``names`` order; ``x@dst`` is a view of x's first num_dst rows."""
        out = []
        for k in self.names:
            if k.endswith(DST_SUFFIX):
                base = k[: -len(DST_SUFFIX)]
                if graph.num_dst > graph.num_src:
                    raise ValueError(f"{self.lowered.name}: '{base}' is read at both sources and destinations, which "
                                     f"needs every destination to be a source (num_dst={graph.num_dst} <= "
                                     f"num_src={graph.num_src})")
                out.append(tensors[base][: graph.num_dst])
            else:
                out.append(tensors[k])
        return out


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
        self._cache: Dict[Tuple, Compiled] = {}
        self.uid = next(_program_uids)
        PROGRAMS[self.uid] = self

    # -- tracing -----------------------------------------------------------------------------
    def trace(self, graph: Graph, **tensors) -> "_C.Module":
        """Traces the program for these tensors' shapes; returns the GIR module."""
        builder = _C.Builder({k: list(t.shape) for k, t in tensors.items()}, graph.has_node_types,
                             graph.has_edge_types, graph.num_node_types, graph.num_edge_types)
        tracer = Tracer(builder)
        missing = [p for p in self.param_names if p not in tensors]
        if missing:
            raise TypeError(f"vertex program {self.name} needs parameter(s) {missing} bound by name")
        with patched_builtins():
            args = [tracer.call("param", p) for p in self.param_names]
            out = self.fn(Vertex(tracer), *args)
        outs = list(out) if isinstance(out, tuple) else [out]
        flat = []
        for o in outs:
            if isinstance(o, list) and len(o) == 1:  # softmax(...) returns a one-element list
                o = o[0]
            if not isinstance(o, Value):
                raise _C.TraceError(f"vertex program {self.name} must return traced values, got {type(o).__name__}")
            flat.append(o._v)
        return builder.finish(flat)

    def lower(self, graph: Graph, **tensors):
        """The forward and backward GIR (seastar._C.LoweredProgram) for these tensors."""
        return self._compiled(graph, tensors).lowered

    def _compiled(self, graph: Graph, tensors: Dict[str, torch.Tensor]) -> Compiled:
        # What changes the code, never vertex or edge counts: each tensor's feature shape (all but
        # its first axis), dtype and requires_grad, and the graph's kind and types, so every
        # mini-batch of a loader reuses one trace. Parameters, whose first axis is not a row
        # count, are told apart by Compiled.fits.
        key = (tuple((k, t.dim(), tuple(t.shape[1:]), t.dtype, t.requires_grad) for k, t in sorted(tensors.items())),
               graph.is_bipartite, graph.has_node_types, graph.has_edge_types, graph.num_node_types,
               graph.num_edge_types)
        entries = self._cache.setdefault(key, [])
        for hit in entries:
            if hit.fits(tensors):
                return hit
        t0 = time.perf_counter()
        module = self.trace(graph, **tensors)
        wrt = [k for k, t in sorted(tensors.items()) if t.requires_grad]
        lowered = _C.lower(module, wrt, self.name, graph.is_bipartite)
        params = {v["name"] for v in module.values if v["op"] == "param"}
        compiled = Compiled(lowered, sorted(tensors), self.param_names,
                            {k: tuple(tensors[k].shape) for k in sorted(params)})
        entries.append(compiled)
        log.debug("traced %s in %.1f ms", self.name, 1e3 * (time.perf_counter() - t0))
        return compiled

    @property
    def num_traces(self) -> int:
        """How many signatures have been traced (the size of the trace cache)."""
        return sum(len(v) for v in self._cache.values())

    # -- running -----------------------------------------------------------------------------
    def __call__(self, graph: Graph, backend: str | None = None, **tensors):
        if not isinstance(graph, Graph):
            raise TypeError(f"the first argument of {self.name} must be a seastar.Graph, got {type(graph).__name__}")
        for k, t in tensors.items():
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"'{k}' must be a torch.Tensor, got {type(t).__name__}")
        if torch.compiler.is_compiling():  # torch.compile / torch.export: record the op
            from . import torch_ops
            return torch_ops.call_program(self, graph, backend or self.backend, tensors)
        if torch.jit.is_tracing():
            raise RuntimeError(f"{self.name}: {JIT_TRACE_MESSAGE}")
        compiled = self._compiled(graph, tensors)
        _check_inputs(self.name, compiled.lowered, graph, tensors)
        backend = backend or self.backend
        from . import fused  # late import: the fused runtime is optional for tracing and tests
        if backend in ("auto", "fused") and fused.available(compiled, tensors, backend):
            outs = fused.run(compiled, graph, tensors)
        elif backend == "fused":
            raise NotImplementedError(fused.why_unavailable(compiled, tensors))
        else:
            outs = _ReferenceFunction.apply(compiled, graph, *compiled.bind(graph, tensors))
        return outs[0] if len(outs) == 1 else tuple(outs)


def program_factory(fn):
    """Decorates a function of constants (a slope, flags) that builds a VertexProgram: one program
    per arguments, kept. torch.compile reads a kept program like any attribute, but cannot build
    one: a layer builds the programs it may use in its constructor."""
    built: Dict[Tuple, VertexProgram] = {}

    def get(*args):
        prog = built.get(args)
        if prog is None:
            prog = built[args] = fn(*args)
        return prog

    functools.update_wrapper(get, fn)
    get.built = built
    return get


def vertex_program(fn=None, *, name: str | None = None, backend: str = "auto"):
    """Decorator: ``@seastar.vertex_program`` or ``@seastar.vertex_program(backend="reference")``."""
    if fn is None:
        return lambda f: VertexProgram(f, name=name, backend=backend)
    return VertexProgram(fn, name=name, backend=backend)


def _check_inputs(name: str, lowered, graph: Graph, tensors: Dict[str, torch.Tensor]) -> None:
    """Row counts, dtypes and devices of the bound tensors against the graph and each other."""
    dtypes, devices = set(), set()
    sides = lowered.vertex_inputs
    for v in lowered.forward.values:
        if v["op"] not in ("input_vertex", "input_edge", "param") or v["name"].endswith(DST_SUFFIX):
            continue
        t = tensors[v["name"]]
        if not t.is_floating_point():
            raise TypeError(f"{name}: '{v['name']}' must be a floating-point tensor, got {t.dtype}")
        dtypes.add(t.dtype)
        devices.add(t.device)
        if v["op"] == "input_vertex":
            src = sides.get(v["name"]) == "src"
            what = "vertices" if not graph.is_bipartite else "sources" if src else "destinations"
            rows = (graph.num_src if src else graph.num_dst, what)
        else:
            rows = {"input_edge": (graph.num_edges, "edges")}.get(v["op"])
        if rows and t.shape[0] != rows[0]:
            raise ValueError(f"{name}: '{v['name']}' has {t.shape[0]} rows but the graph has {rows[0]} {rows[1]}")
    if len(dtypes) > 1:
        raise TypeError(f"{name}: inputs mix dtypes {sorted(map(str, dtypes))}; convert them to one")
    if len(devices) > 1:
        raise ValueError(f"{name}: inputs are on different devices {sorted(map(str, devices))}")


class _ReferenceFunction(torch.autograd.Function):
    """Runs the lowered forward and backward GIR with the reference executor."""

    @staticmethod
    def forward(ctx, compiled: Compiled, graph: Graph, *tensors):
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
