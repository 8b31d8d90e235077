"""Comparing seastar.nn's layers with PyTorch Geometric's, and the graphs they run on.

Every comparison builds PyG's layer, loads its state dict into seastar's (strict: the parameter
layout is PyG's), runs both on the same inputs and compares, in float64 to 1e-10, the outputs
and the gradients of every input and every parameter. The graphs carry every hazard at once:
self loops (one vertex with two), duplicate edges, isolated vertices and a hub.

``SEASTAR_COMPAT_DEVICE=cuda`` (tests/gpu/run.sh sets it on a GPU machine) runs every comparison
made through ``assert_same`` on that device: both layers and every input tensor are moved there
first, so seastar's CUDA kernels are checked against PyG's layer on the same device.

Each test module starts with ``pytest.importorskip("torch_geometric")``: without PyG (which
scripts/test.sh installs from requirements.txt next to this file) the folder is skipped. There
is deliberately no conftest.py here: tests/python's helpers are imported as ``conftest``.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable, Dict, List, Sequence


if importlib.util.find_spec("seastar") is None:  # a source checkout without PYTHONPATH
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

import torch  # noqa: E402

DT = torch.float64
TOL = dict(rtol=1e-10, atol=1e-10)
DEVICE = torch.device(os.environ.get("SEASTAR_COMPAT_DEVICE", "cpu"))


def on_device(obj):
    """``obj`` (a tensor, or tuples / lists / dicts of them) on DEVICE; other values as they are."""
    if isinstance(obj, torch.Tensor):
        return obj.to(DEVICE)
    if isinstance(obj, (tuple, list)):
        return type(obj)(on_device(o) for o in obj)
    if isinstance(obj, dict):
        return {k: on_device(v) for k, v in obj.items()}
    return obj


# ---------------------------------------------------------------- graphs

def hazard_edges() -> torch.Tensor:
    """10 vertices: 0 is a hub (in-edges from 1..7, out-edges to 1..5), 2 has a self loop, 5 has
    two, 1 -> 3 and 4 -> 6 appear twice (not adjacent), 8 and 9 are isolated, 7 has no in-edges."""
    src = [1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 2, 5, 1, 4, 5, 3, 1, 6, 4]
    dst = [0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 2, 5, 3, 6, 5, 4, 3, 2, 6]
    return torch.tensor([src, dst])


NUM_NODES = 10


def bipartite_edges() -> torch.Tensor:
    """7 sources -> 4 destinations: destination 0 is a hub, 3 has no in-edges, source 6 sends
    nothing, 1 -> 2 appears twice, 2 -> 2 is a "loop" (same id on both sides)."""
    src = [0, 1, 2, 3, 4, 5, 1, 2, 1, 0, 4, 2]
    dst = [0, 0, 0, 0, 0, 0, 2, 1, 2, 1, 1, 2]
    return torch.tensor([src, dst])


NUM_SRC, NUM_DST = 7, 4


def features(n: int, f: int, seed: int = 0, dtype=DT) -> torch.Tensor:
    return torch.randn(n, f, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---------------------------------------------------------------- comparing two layers

def _tensors(obj) -> List[torch.Tensor]:
    """The tensors of an output (a tensor, nested tuples / lists, dicts, sparse tensors)."""
    if isinstance(obj, torch.Tensor):
        if obj.layout == torch.sparse_coo:
            obj = obj.coalesce()
            return [obj.indices(), obj.values()]
        if obj.layout == torch.sparse_csr:
            return [obj.crow_indices(), obj.col_indices(), obj.values()]
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for k in sorted(obj, key=str) for t in _tensors(obj[k])]
    return []


def run(layer: torch.nn.Module, call: Callable, inputs: Sequence[torch.Tensor], seed: int = 5):
    """Outputs of ``call(layer, *inputs)`` and gradients of a fixed random projection of them
    with respect to every floating input that requires grad and every parameter (by name)."""
    out = call(layer, *inputs)
    flat = _tensors(out)
    gen = torch.Generator().manual_seed(seed)
    floats = [t for t in flat if t.is_floating_point() and t.requires_grad]
    wrt_inputs = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    params = dict(layer.named_parameters())
    grads: Dict[str, torch.Tensor] = {}
    if floats:
        loss = sum((t * torch.randn(t.shape, generator=gen, dtype=t.dtype)).sum() for t in floats)
        wrt = wrt_inputs + list(params.values())
        gs = torch.autograd.grad(loss, wrt, allow_unused=True)
        names = [f"input {i}" for i in range(len(wrt_inputs))] + list(params)
        grads = {n: g for n, g in zip(names, gs)}
    return out, flat, grads


def fresh(tensors: Sequence, requires_grad: bool = True) -> List:
    """Independent copies of the float tensors (requiring grad) so each layer gets its own leaves."""
    out = []
    for t in tensors:
        if isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex()):
            out.append(t)  # indices as given: no gradient, and a subclass (PyG's EdgeIndex) keeps what it carries
        elif isinstance(t, torch.Tensor):
            c = t.detach().clone()
            if requires_grad and c.is_floating_point() and c.layout == torch.strided:
                c.requires_grad_()
            out.append(c)
        else:
            out.append(t)
    return out


def assert_same(ours: torch.nn.Module, theirs: torch.nn.Module, inputs: Sequence, call: Callable = None,
                their_call: Callable = None, tol: dict = None, load: bool = True, check_grads: bool = True):
    """Loads ``theirs``' state dict into ``ours`` and compares outputs and all gradients."""
    call = call or (lambda layer, *a: layer(*a))
    their_call = their_call or call
    tol = tol or TOL
    if load:
        ours.load_state_dict(theirs.state_dict())
    if DEVICE.type != "cpu":
        ours.to(DEVICE), theirs.to(DEVICE)
        inputs = [on_device(t) for t in inputs]
    o_ours, f_ours, g_ours = run(ours, call, fresh(inputs))
    o_theirs, f_theirs, g_theirs = run(theirs, their_call, fresh(inputs))
    assert len(f_ours) == len(f_theirs), f"outputs differ in structure: {len(f_ours)} vs {len(f_theirs)} tensors"
    for i, (a, b) in enumerate(zip(f_ours, f_theirs)):
        assert a.shape == b.shape, f"output {i}: shape {tuple(a.shape)} vs PyG's {tuple(b.shape)}"
        if a.is_floating_point():
            torch.testing.assert_close(a, b.to(a.dtype), **tol, msg=lambda m: f"output {i}: {m}")
        else:
            assert torch.equal(a.long(), b.long()), f"output {i} (indices) differs"
    if check_grads:
        assert set(g_ours) == set(g_theirs), f"gradients of {sorted(set(g_ours) ^ set(g_theirs))} exist on one side"
        for name in g_ours:
            a, b = g_ours[name], g_theirs[name]
            if a is None or b is None:
                assert a is None and b is None or (a if a is not None else b).abs().max() == 0, \
                    f"gradient of {name}: {'ours' if a is None else 'PyG'} is missing"
                continue
            torch.testing.assert_close(a, b.to(a.dtype), **tol, msg=lambda m: f"gradient of {name}: {m}")
    return o_ours, o_theirs


def seeded(factory: Callable, seed: int = 0):
    torch.manual_seed(seed)
    return factory()


def randomise(module: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """Every parameter and floating buffer drawn at random (biases, eps, gates and priors are
    not left at their 0 / 1 initial values, which would hide a wrong gradient)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in list(module.parameters()) + [b for b in module.buffers() if b.is_floating_point()]:
            if isinstance(t, torch.nn.parameter.UninitializedParameter):
                continue
            t.copy_(torch.randn(t.shape, generator=gen, dtype=t.dtype) * 0.5)
    return module


def pair(factory_ours: Callable, factory_theirs: Callable, backend=None, seed: int = 0):
    """(ours, theirs) in float64, PyG's randomised; ours takes PyG's parameters in assert_same."""
    import seastar.nn as snn
    theirs = randomise(seeded(factory_theirs, seed).to(DT), seed + 1)
    ours = seeded(factory_ours, seed).to(DT)
    if backend is not None:
        snn.set_backend(ours, backend)
    return ours, theirs


BACKENDS = ("reference", "fused")  # parametrize a test taking ``backend`` over both

