"""Seastar as ``torch.library`` ops, so that ``torch.compile`` and ``torch.export`` see the kernels.

* ``seastar::vertex_program(signature, graph, kind, tensors) -> Tensor[]``: one traced signature
  of a vertex program run forward (fused kernels, or the reference executor where the fused
  backend cannot run it) on the graph given as its tensors (``seastar.graph_inputs``: a handle
  and tensors whose shapes are the sizes, so the outputs' shapes are symbolic); its autograd is
  registered and runs
* ``seastar::vertex_program_backward(signature, graph, kind, tensors, grad_outputs) -> Tensor[]``:
  the backward kernels, the gradients of the signature's ``wrt`` inputs;

and, in ``seastar.graph_ops``, the ops that read a graph's own and derived tensors.

A signature is traced for the graph's kind (bipartite, types) and the tensors' feature shapes,
never its sizes, so compiled code does not depend on the graph's sizes: one compile (torch's
first static one, then one dynamic one) serves every batch of a loader. The derived values that
no op computes yet (``graph_ops.derived``) are read from the graph as a constant: a "value" opaque type
(``graph_inputs.GraphConstant``) guarded by the graph's uid. Eager calls keep using the C++
autograd function (``_C.fused_apply``); the ops are what compiled and exported code records.
Both name the kernels ``seastar::<program>.forward`` / ``.backward`` in the profiler.
"""
from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import threading
import weakref
from typing import Any, Dict, List, NamedTuple, Tuple

import torch
from torch.utils._python_dispatch import _disable_current_modes

from . import graph_inputs, reference
from ._dynamo_marks import assume_constant_result
from .backends import runs_fused
from .direct_ops import custom_op
from .graph import Graph
from .graph_inputs import GraphKind, graph_by_uid, kind_ints, same_size, static_int  # noqa: F401
# what compiled code reads of a graph: re-exported, the names layers and tests use
from .graph_ops import COMPILED_VIEW, GraphRefs, TensorRef, derived, graph_tensor, graph_tensor_of  # noqa: F401
from .graph_ops import to_refs  # noqa: F401

_lock = threading.Lock()

DST_SUFFIX = "@dst"  # a vertex input read at sources and destinations: its first num_dst rows

# uid -> program: how compiled code names a program with a constant (VertexProgram registers)
PROGRAMS: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()

# -- vertex programs ----------------------------------------------------------------------------------
class Signature(NamedTuple):
    """One traced signature of a program as the ops run it (registered by program_signature)."""

    program: Any  # the VertexProgram
    compiled: Any  # its _C.Signature
    fused: bool  # run by fused kernels (else the reference executor)
    outs: Tuple[Tuple[str, tuple], ...]  # each output's space (Vertex, Edge, Param) and feature shape
    wrt_index: Tuple[int, ...]  # positions in compiled.names of lowered.wrt


# key -> signature. A key names the program by its address (``VertexProgram.address``) and holds
# what the signature is traced for, so a process that loads an exported program makes the same
# signature again from the key alone (``_signature_of``).
_SIGNATURES: Dict[str, Signature] = {}


class TensorMeta:
    """What a program's trace and checks read of a tensor, as trace-time constants."""

    def __init__(self, shape, dtype, device, requires_grad):
        self.shape = torch.Size(shape)
        self.dtype, self.device, self.requires_grad = dtype, torch.device(device), requires_grad

    def dim(self) -> int:
        return len(self.shape)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point


def _output_spaces(lowered) -> Tuple[Tuple[str, tuple], ...]:
    values = {v["id"]: v for v in lowered.forward.values}
    return tuple((values[o]["space"], tuple(values[o]["shape"])) for o in lowered.forward.outputs)


def _output_shapes(sig: Signature, num_dst, num_edges) -> List[tuple]:
    rows = {"Vertex": num_dst, "Edge": num_edges}
    return [shape if space not in rows else (rows[space],) + shape for space, shape in sig.outs]


# The graph a signature is traced and checked with: one small graph per kind, with as many sources,
# destinations and edges as MODEL_SIZES (all different, so that a tensor's rows say what it is)
MODEL_SIZES = (3, 2, 4)
_MODELS: Dict[GraphKind, Graph] = {}


def model_graph(kind: GraphKind) -> Graph:
    g = _MODELS.get(kind)
    if g is None:
        ns, nd, ne = MODEL_SIZES
        if kind.bipartite:
            ei, num_nodes = torch.tensor([[0, 1, 2, 2], [0, 1, 0, 1]]), (ns, nd)
        else:
            ei, num_nodes = torch.tensor([[0, 1, 2, 1], [1, 2, 0, 1]]), ns
        g = _MODELS[kind] = Graph.from_edge_index(
            ei, num_nodes=num_nodes,
            node_type=torch.zeros(ns, dtype=torch.int64) if kind.has_node_types else None,
            edge_type=torch.zeros(ne, dtype=torch.int64) if kind.has_edge_types else None,
            num_node_types=kind.num_node_types if kind.has_node_types else None,
            num_edge_types=kind.num_edge_types if kind.has_edge_types else None)
    return g


def program_signature(kind: GraphKind, program_uid: int, metas: Tuple, backend: str) -> Tuple[str, Tuple[str, ...]]:
    """Traces and lowers the program for these tensors as an eager call would, on the kind's
    model graph, checks the inputs, and returns ``(signature key, bound names)`` for the compiled
    code. ``metas``: (name, role, shape without rows, dtype, device, requires_grad) per tensor,
    role "src", "dst" or "src|dst" (a vertex tensor's rows; both when the graph has as many of
    each), "edge", or "param" (shape in full)."""
    with _lock:
        program = PROGRAMS[program_uid]
        graph = model_graph(kind)
        rows = {"src": graph.num_src, "dst": graph.num_dst, "edge": graph.num_edges}
        ambiguous = [name for name, role, *_ in metas if role == "src|dst"]
        # a vertex tensor of a graph with as many sources as destinations: read at the sources
        # unless the program reads it at the centre only (the check says which)
        choices = list(itertools.product(("src", "dst"), repeat=len(ambiguous)))
        for choice in choices:
            chosen = dict(zip(ambiguous, choice))
            tensors = {name: TensorMeta(((rows[chosen.get(name, role)],) if role != "param" else ()) + shape,
                                        getattr(torch, dtype), device, rg)
                       for name, role, shape, dtype, device, rg in metas}
            try:
                compiled, why = program._prepare(graph, tensors)
                break
            except ValueError:
                if choice == choices[-1]:
                    raise
        use_fused = runs_fused(compiled, why, backend)
        names = tuple(compiled.names)
        key = _signature_key(program, kind, metas, backend)
        if key not in _SIGNATURES:
            wrt_index = tuple(names.index(w) for w in compiled.lowered.wrt)
            _SIGNATURES[key] = Signature(program, compiled, use_fused, _output_spaces(compiled.lowered), wrt_index)
    return key, names


def _signature_key(program, kind: GraphKind, metas: Tuple, backend: str) -> str:
    """What a signature is made from, as text: the program's address (its uid when it has none:
    then only this process can run the compiled code), the graph's kind, the tensors' metas and
    the backend asked for."""
    where = {"address": program.address} if program.address is not None else {"uid": program.uid}
    return json.dumps(dict(where, kind=kind.ints(), metas=metas, backend=backend), sort_keys=True)


def _signature_of(key: str) -> Signature:
    """The signature of a key, made again when this process has not made it: compiled code saved
    by another process (torch.export.save) names its programs by address."""
    sig = _SIGNATURES.get(key)
    if sig is not None:
        return sig
    spec = json.loads(key)
    if "address" not in spec:
        raise RuntimeError("seastar: compiled code refers to a vertex program defined inside a function (no module-level "
                           "name), which only the process that compiled it holds; define the program at module level "
                           "(or build it with a @program_factory there) to load the code in another process")
    program = _program_at(spec["address"])
    metas = tuple((n, role, tuple(shape), dtype, device, rg) for n, role, shape, dtype, device, rg in spec["metas"])
    made, _ = program_signature(GraphKind.of_ints(spec["kind"]), program.uid, metas, spec["backend"])
    return _SIGNATURES[made]


def _program_at(address) -> Any:
    module, qualname = address[0], address[1]
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise RuntimeError(f"seastar: compiled code refers to the vertex program {module}.{qualname}, which "
                               f"{module} does not define")
    program = obj(*address[2]) if len(address) > 2 else obj
    if list(getattr(program, "address", None) or ()) != list(address):
        raise RuntimeError(f"seastar: compiled code refers to the vertex program {module}.{qualname}, but that name "
                           f"holds {type(program).__name__} in this process")
    return program


@assume_constant_result
def _edge_inputs(kind: Tuple[int, ...], program_uid: int, shapes: Tuple) -> Tuple[str, ...]:
    """The names of the per-edge inputs of the program's trace for these tensors' shapes (one
    row for the graph's tensors: a trace reads no rows): which tensors have a row per edge and
    which one per vertex is the program's to say, not the sizes' (which may coincide)."""
    with _disable_current_modes(), _lock:
        graph = model_graph(GraphKind.of_ints(kind))
        module = PROGRAMS[program_uid].trace(graph, **{n: TensorMeta(shape, torch.float32, "cpu", False)
                                                      for n, shape in shapes})
    return tuple(v["name"] for v in module.values if v["op"] == "input_edge")


def _vertex_role(rows, graph: Graph) -> str:
    """Which vertices a vertex tensor's rows are: the sources', the destinations', or (a graph
    with as many of each, as a square one has) either."""
    src, dst = same_size(rows, graph.num_src), same_size(rows, graph.num_dst)
    if src and dst:
        return "src|dst"
    if src or dst:
        return "src" if src else "dst"
    what = "sources" if graph.is_bipartite else "vertices"
    raise ValueError(f"a vertex tensor has {rows} rows but the graph has {graph.num_src} {what}"
                     + (f" and {graph.num_dst} destinations" if graph.is_bipartite else ""))


def call_program(program, graph: Graph, backend: str, tensors: Dict[str, torch.Tensor]):
    """VertexProgram.__call__ inside torch.compile / torch.export: one ``seastar::vertex_program`` op
    on the graph's tensors."""
    kind = kind_ints(graph)
    params = set(program.param_names)
    shapes = tuple((k, tuple(static_int(d) for d in (tensors[k].shape if k in params else (1,) + tensors[k].shape[1:])))
                   for k in sorted(tensors))
    edges = _edge_inputs(tuple(kind), program.uid, shapes)
    metas = []
    for k in sorted(tensors):
        t = tensors[k]
        if k in params:
            role, shape = "param", tuple(static_int(d) for d in t.shape)
        else:
            role = "edge" if k in edges else _vertex_role(t.shape[0], graph)
            shape = tuple(static_int(d) for d in t.shape[1:])
        metas.append((k, role, shape, str(t.dtype).removeprefix("torch."), str(t.device), bool(t.requires_grad)))
    sid, names = _signature(tuple(kind), program.uid, tuple(metas), backend)
    num_dst = graph.num_dst
    # x@dst is x's first num_dst rows, as Signature::bind makes it for eager calls; here the slice
    # is traced, so that Dynamo sees its symbolic size and autograd carries x@dst's gradient
    # into x (the C++ binding is opaque to both)
    bound = [tensors[n[: -len(DST_SUFFIX)]][:num_dst] if n.endswith(DST_SUFFIX) else tensors[n] for n in names]
    outs = vertex_program(sid, graph._in.op_args(), kind, bound)
    return outs[0] if len(outs) == 1 else tuple(outs)


@assume_constant_result
def _signature(kind, program_uid, metas, backend):
    # run at trace time with constants, its result a constant: torch.compile does not trace into
    # the orchestrator, and the signature depends on nothing else (never on the graph's sizes)
    with _disable_current_modes():
        return program_signature(GraphKind.of_ints(kind), program_uid, metas, backend)


def _named(sig: Signature, tensors) -> Dict[str, torch.Tensor]:
    return dict(zip(sig.compiled.names, tensors))


def _profiled(name: str):
    """A profiler range named ``name`` while a profiler runs; else nothing, since entering a
    range costs as much as the rest of a small op's Python."""
    if torch.autograd.profiler._is_profiler_enabled:
        return torch.profiler.record_function(name)
    return contextlib.nullcontext()


@custom_op("seastar::vertex_program")
def vertex_program(signature: str, graph: List[torch.Tensor], kind: List[int],
                   tensors: List[torch.Tensor]) -> List[torch.Tensor]:
    sig = _signature_of(signature)
    g = graph_inputs.resolve(graph, kind)
    name = sig.compiled.lowered.name
    with _profiled(f"seastar::{name}.forward"):
        if sig.fused:
            outs = sig.compiled.kernels.run_forward(g._g, _named(sig, tensors))
        else:
            with torch.no_grad():
                outs = reference.evaluate(sig.compiled.lowered.forward, g, _named(sig, tensors))
    outs = [o.contiguous() for o in outs]
    got = tuple(tuple(o.shape) for o in outs)
    want = tuple(_output_shapes(sig, g.num_dst, g.num_edges))
    if got != want:
        raise RuntimeError(f"seastar::vertex_program: {name} returned shapes {got}, expected {want}")
    return outs


@vertex_program.register_fake
def _vertex_program_fake(signature, graph, kind, tensors):
    sig = _signature_of(signature)
    floats = [t for t in tensors if t.is_floating_point()]
    like = floats[0] if floats else tensors[0]
    return [like.new_empty(s) for s in _output_shapes(sig, graph[2].shape[0], graph[3].shape[0])]


@custom_op("seastar::vertex_program_backward")
def vertex_program_backward(signature: str, graph: List[torch.Tensor], kind: List[int], tensors: List[torch.Tensor],
                            grad_outputs: List[torch.Tensor]) -> List[torch.Tensor]:
    sig = _signature_of(signature)
    g = graph_inputs.resolve(graph, kind)
    name = sig.compiled.lowered.name
    with _profiled(f"seastar::{name}.backward"):
        if sig.fused:
            grads = sig.compiled.kernels.run_backward(g._g, _named(sig, tensors), list(grad_outputs))
        else:
            with torch.no_grad():
                grads = reference.evaluate(sig.compiled.lowered.backward, g, _named(sig, tensors),
                                           grad_outputs=list(grad_outputs))
    out = []
    for i, gr in zip(sig.wrt_index, grads):
        t = tensors[i]
        gr = gr.to(t.dtype).reshape(t.shape)
        out.append(gr.clone() if any(gr.data_ptr() == x.data_ptr() for x in tensors) else gr.contiguous())
    return out


@vertex_program_backward.register_fake
def _vertex_program_backward_fake(signature, graph, kind, tensors, grad_outputs):
    sig = _signature_of(signature)
    return [torch.empty_like(tensors[i], memory_format=torch.contiguous_format) for i in sig.wrt_index]


def _setup_context(ctx, inputs, output):
    signature, graph, kind, tensors = inputs
    ctx.signature, ctx.kind, ctx.num_graph = signature, kind, len(graph)
    ctx.save_for_backward(*graph, *tensors)


def _backward(ctx, grad_outputs):
    sig = _signature_of(ctx.signature)
    saved = list(ctx.saved_tensors)
    graph, tensors = saved[:ctx.num_graph], saved[ctx.num_graph:]
    grads = [None] * len(tensors)
    if sig.wrt_index:
        shapes = _output_shapes(sig, graph[2].shape[0], graph[3].shape[0])
        gouts = [g if g is not None else tensors[0].new_zeros(s) for g, s in zip(grad_outputs, shapes)]
        for i, g in zip(sig.wrt_index, vertex_program_backward(ctx.signature, graph, ctx.kind, tensors, gouts)):
            grads[i] = g
    return None, [None] * ctx.num_graph, None, grads


vertex_program.register_autograd(_backward, setup_context=_setup_context)
