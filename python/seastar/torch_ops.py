"""Seastar as ``torch.library`` ops, so that ``torch.compile`` and ``torch.export`` see the kernels.

Three ops, each with a fake (meta) implementation:

* ``seastar::vertex_program(signature, graph, tensors) -> Tensor[]``: one traced signature of a
  vertex program run forward (fused kernels, or the reference executor where the fused backend
  cannot run it); its autograd is registered and runs
* ``seastar::vertex_program_backward(signature, graph, tensors, grad_outputs) -> Tensor[]``:
  the backward kernels, the gradients of the signature's ``wrt`` inputs;
* ``seastar::graph_tensor(ref) -> Tensor``: a tensor derived from a graph alone (its edge list,
  a self-loop graph's edge ids, a normalisation), computed once outside the compiled code.

A ``seastar.Graph`` is a "value" opaque type: compiled code is specialised to the graphs it saw
(guarded by ``Graph.__eq__``, i.e. its uid), so passing the same graph again never recompiles.
Eager calls keep using the C++ autograd function (``_C.fused_apply``); the ops are what compiled
and exported code records. Both name the kernels ``seastar::<program>.forward`` / ``.backward``
in the profiler.
"""
from __future__ import annotations

import contextlib

import itertools
import threading
import weakref
from typing import Any, Dict, List, NamedTuple, Tuple

import torch

from .graph import Graph

_lock = threading.Lock()

# -- graphs and derived tensors as constants of compiled code ---------------------------------------
_GRAPHS: Dict[int, Graph] = {}  # uid -> graph, for graphs that generated code refers to


def graph_by_uid(uid: int) -> Graph:
    """The graph generated code names by uid (registered when the code was generated)."""
    try:
        return _GRAPHS[uid]
    except KeyError:
        raise RuntimeError(f"seastar: compiled code refers to graph uid {uid}, which this process does not hold "
                           f"(an exported program runs in the process that exported it, with its graph)") from None


def graph_fx_repr(graph: Graph):
    with _lock:
        _GRAPHS[graph.uid] = graph
    return f"graph_by_uid({graph.uid})", {"graph_by_uid": graph_by_uid}


_ref_ids = itertools.count()
_REFS: "weakref.WeakValueDictionary[int, TensorRef]" = weakref.WeakValueDictionary()

try:
    from torch._opaque_base import OpaqueBase
    from torch._library.opaque_object import MemberType, register_opaque_type
except ImportError:  # pragma: no cover - torch without opaque types: eager only
    OpaqueBase, register_opaque_type = object, None


class TensorRef(OpaqueBase):
    """A tensor derived from a graph, as compiled code holds it: ``graph_tensor(ref)`` reads it."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor
        self.id = next(_ref_ids)
        _REFS[self.id] = self

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorRef) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("seastar.TensorRef", self.id))

    def __fx_repr__(self):
        return f"tensor_ref_by_id({self.id})", {"tensor_ref_by_id": tensor_ref_by_id}

    def __repr__(self) -> str:
        return f"TensorRef({self.id}, {tuple(self.tensor.shape)}, {self.tensor.dtype})"


def tensor_ref_by_id(i: int) -> TensorRef:
    return _REFS[i]


def to_refs(value: Any) -> Any:
    """``value`` with every tensor (in tuples, named tuples, lists and dicts) replaced by a TensorRef."""
    if isinstance(value, torch.Tensor):
        return TensorRef(value.detach())
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(to_refs(v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(to_refs(v) for v in value)
    if isinstance(value, dict):
        return {k: to_refs(v) for k, v in value.items()}
    return value


def _from_refs(value: Any) -> Any:
    """The inverse of to_refs inside compiled code: each TensorRef becomes a graph_tensor op."""
    if isinstance(value, TensorRef):
        return graph_tensor(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*[_from_refs(v) for v in value])
    if isinstance(value, tuple):
        return tuple(_from_refs(v) for v in value)
    if isinstance(value, list):
        return [_from_refs(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_refs(v) for k, v in value.items()}
    return value


# -- the opaque types -----------------------------------------------------------------------------------
def _register() -> None:
    if register_opaque_type is None:
        return
    # methods run on the real graph at trace time (their results are constants); the properties
    # are inlined, reading through those methods
    members = {m: MemberType.USE_REAL for m in ("_sizes", "_uid", "index_dtype", "_derive_traced",
                                                 "_program_signature", "_is_sources_global")}
    for m in Graph._SIZES + ("num_nodes", "uid", "edge_index", "node_type", "edge_type", "in_degrees",
                             "out_degrees", "sources_global"):
        members[m] = MemberType.INLINED
    register_opaque_type(Graph, typ="value", members=members)
    register_opaque_type(TensorRef, typ="value")


_register()  # before the ops: their schemas name the opaque types


def derived(graph: Graph, fn, *args) -> Any:
    """``graph.derive(fn, *args)``, also inside torch.compile / torch.export: there ``fn`` runs at
    trace time on the real graph and its tensors become ``graph_tensor`` ops (constants of the
    compiled code, read again on each run). ``args`` must be constants (ints, strings, dtypes, ...)."""
    if torch.compiler.is_compiling():
        return _from_refs(graph._derive_traced(fn, *args))
    return graph.derive(fn, *args)


@torch.library.custom_op("seastar::graph_tensor", mutates_args=())
def graph_tensor(ref: TensorRef) -> torch.Tensor:
    # a copy: compiled code owns its outputs and may reuse their memory
    return ref.tensor.clone()


@graph_tensor.register_fake
def _graph_tensor_fake(ref):
    t = ref.tensor
    return torch.empty(tuple(t.shape), dtype=t.dtype, device=t.device)


# -- vertex programs ----------------------------------------------------------------------------------
class Signature(NamedTuple):
    """One traced signature of a program as the ops run it (registered by program_signature)."""

    program: Any  # the VertexProgram
    compiled: Any  # its _C.Signature
    fused: bool  # run by fused kernels (else the reference executor)
    out_shapes: Tuple[tuple, ...]  # outputs' shapes on this graph
    wrt_index: Tuple[int, ...]  # positions in compiled.names of lowered.wrt


_SIGNATURES: List[Signature] = []
_SIGNATURE_IDS: Dict[Tuple, int] = {}


class TensorMeta:
    """What a program's trace and checks read of a tensor, as trace-time constants."""

    def __init__(self, shape, dtype, device, requires_grad):
        self.shape = torch.Size(shape)
        self.dtype, self.device, self.requires_grad = dtype, torch.device(device), requires_grad

    def dim(self) -> int:
        return len(self.shape)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point


def _output_shapes(lowered, graph: Graph) -> Tuple[tuple, ...]:
    values = {v["id"]: v for v in lowered.forward.values}
    rows = {"Vertex": graph.num_dst, "Edge": graph.num_edges, "Param": None}
    shapes = []
    for o in lowered.forward.outputs:
        v = values[o]
        r = rows[v["space"]]
        shapes.append(tuple(v["shape"]) if r is None else (r,) + tuple(v["shape"]))
    return tuple(shapes)


def program_signature(graph: Graph, program_uid: int, metas: Tuple, backend: str) -> Tuple[int, Tuple[str, ...], int]:
    """Runs at trace time (Graph._program_signature, a member torch.compile calls with the real
    graph): traces and lowers the program for these tensors as an eager call would, checks the
    inputs, and returns ``(signature id, bound names, num_dst)`` for the compiled code."""
    from . import fused
    from .program import PROGRAMS

    program = PROGRAMS[program_uid]
    tensors = {name: TensorMeta(shape, dtype, device, rg) for name, shape, dtype, device, rg in metas}
    compiled, why = program._prepare(graph, tensors)
    if backend in ("auto", "fused") and fused.available(compiled, why, backend):
        use_fused = True
    elif backend == "fused":
        raise NotImplementedError(why)
    else:
        use_fused = False
    names = tuple(compiled.names)
    key = (id(compiled), use_fused, graph.num_dst, graph.num_edges)
    with _lock:
        sid = _SIGNATURE_IDS.get(key)
        if sid is None:
            wrt_index = tuple(names.index(w) for w in compiled.lowered.wrt)
            _SIGNATURES.append(Signature(program, compiled, use_fused, _output_shapes(compiled.lowered, graph),
                                         wrt_index))
            sid = _SIGNATURE_IDS[key] = len(_SIGNATURES) - 1
    return sid, names, graph.num_dst


_BOUND_GRAPHS: List[int] = []  # uids of the graphs seastar.nn.WithGraph is running its models on

EXPORT_GRAPH_MESSAGE = ("torch.export: the graph is frozen into the exported program, so one passed as an "
                        "argument would be ignored when the program is called with another; bind it instead: "
                        "torch.export.export(seastar.nn.WithGraph(model, graph), (x, ...))")


@contextlib.contextmanager
def bound_graph(graph: Graph):
    """While WithGraph's model runs: its graph is a constant of what is exported, by design."""
    _BOUND_GRAPHS.append(graph.uid)
    try:
        yield
    finally:
        _BOUND_GRAPHS.pop()


def call_program(program, graph: Graph, backend: str, tensors: Dict[str, torch.Tensor]):
    """VertexProgram.__call__ inside torch.compile / torch.export: one ``seastar::vertex_program`` op."""
    from .program import DST_SUFFIX

    # torch.export's tracing (torch.compile guards on the graph and recompiles for another one):
    # inside WithGraph every graph is its bound graph or derived from it (self loops, blocks)
    if torch.compiler.is_exporting() and not torch.compiler.is_dynamo_compiling() and not _BOUND_GRAPHS:
        raise RuntimeError(f"{program.name}: {EXPORT_GRAPH_MESSAGE}")

    metas = tuple((k, tuple(int(d) for d in t.shape), t.dtype, t.device, bool(t.requires_grad))
                  for k, t in ((k, tensors[k]) for k in sorted(tensors)))
    sid, names, num_dst = graph._program_signature(program.uid, metas, backend)
    bound = [tensors[n[: -len(DST_SUFFIX)]][:num_dst] if n.endswith(DST_SUFFIX) else tensors[n] for n in names]
    outs = vertex_program(sid, graph, bound)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _named(sig: Signature, tensors) -> Dict[str, torch.Tensor]:
    return dict(zip(sig.compiled.names, tensors))


@torch.library.custom_op("seastar::vertex_program", mutates_args=())
def vertex_program(signature: int, graph: Graph, tensors: List[torch.Tensor]) -> List[torch.Tensor]:
    from . import fused, reference

    sig = _SIGNATURES[signature]
    name = sig.compiled.lowered.name
    with torch.profiler.record_function(f"seastar::{name}.forward"):
        if sig.fused:
            outs = fused._program(sig.compiled).run_forward(graph._g, _named(sig, tensors))
        else:
            with torch.no_grad():
                outs = reference.evaluate(sig.compiled.lowered.forward, graph, _named(sig, tensors))
    outs = [o.contiguous() for o in outs]
    got = tuple(tuple(o.shape) for o in outs)
    if got != sig.out_shapes:
        raise RuntimeError(f"seastar::vertex_program: {name} returned shapes {got}, expected {sig.out_shapes}")
    return outs


@vertex_program.register_fake
def _vertex_program_fake(signature, graph, tensors):
    sig = _SIGNATURES[signature]
    floats = [t for t in tensors if t.is_floating_point()]
    like = floats[0] if floats else tensors[0]
    return [like.new_empty(s) for s in sig.out_shapes]


@torch.library.custom_op("seastar::vertex_program_backward", mutates_args=())
def vertex_program_backward(signature: int, graph: Graph, tensors: List[torch.Tensor],
                            grad_outputs: List[torch.Tensor]) -> List[torch.Tensor]:
    from . import fused, reference

    sig = _SIGNATURES[signature]
    name = sig.compiled.lowered.name
    with torch.profiler.record_function(f"seastar::{name}.backward"):
        if sig.fused:
            grads = fused._program(sig.compiled).run_backward(graph._g, _named(sig, tensors), list(grad_outputs))
        else:
            with torch.no_grad():
                grads = reference.evaluate(sig.compiled.lowered.backward, graph, _named(sig, tensors),
                                           grad_outputs=list(grad_outputs))
    out = []
    for i, g in zip(sig.wrt_index, grads):
        t = tensors[i]
        g = g.to(t.dtype).reshape(t.shape)
        out.append(g.clone() if any(g.data_ptr() == x.data_ptr() for x in tensors) else g.contiguous())
    return out


@vertex_program_backward.register_fake
def _vertex_program_backward_fake(signature, graph, tensors, grad_outputs):
    sig = _SIGNATURES[signature]
    return [torch.empty_like(tensors[i], memory_format=torch.contiguous_format) for i in sig.wrt_index]


def _setup_context(ctx, inputs, output):
    signature, graph, tensors = inputs
    ctx.signature, ctx.graph = signature, graph
    ctx.save_for_backward(*tensors)


def _backward(ctx, grad_outputs):
    sig = _SIGNATURES[ctx.signature]
    tensors = list(ctx.saved_tensors)
    grads = [None] * len(tensors)
    if sig.wrt_index:
        shapes = sig.out_shapes
        gouts = [g if g is not None else tensors[0].new_zeros(s) for g, s in zip(grad_outputs, shapes)]
        for i, g in zip(sig.wrt_index, vertex_program_backward(ctx.signature, ctx.graph, tensors, gouts)):
            grads[i] = g
    return None, None, grads


vertex_program.register_autograd(_backward, setup_context=_setup_context)
