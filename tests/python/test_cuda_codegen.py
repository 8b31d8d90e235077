"""The CUDA backend without a GPU: generated CUDA compiles, launches fit, the source is stable.

* Every model of models.py and every program the seastar.nn layers run, forward and backward, in
  float32 and float64: the generated CUDA compiles with NVRTC to cubins for sm_80 and sm_90
  (SEASTAR_CUDA_ARCHS="80,90,native" adds the local GPU's) with no error; each kernel's register
  use and spills (ptxas's report) are logged. Skipped, with the reason, when NVRTC cannot be
  loaded (a build without the CUDA toolkit, or no libnvrtc at run time).
* The launch configuration of every kernel stays within CUDA's limits for any graph size.
* The emitted CUDA of one GAT layer is compared with tests/golden/gat.forward.cu (no NVRTC
  needed). If a change is intended, regenerate and review the diff:

      SEASTAR_UPDATE_GOLDEN=1 python -m pytest tests/python/test_cuda_codegen.py -k golden
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import seastar as ss
from seastar import _C
from seastar.program import capture_signatures
from models import MODELS

log = logging.getLogger("seastar.tests")
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "gat.forward.cu"
UPDATE = os.environ.get("SEASTAR_UPDATE_GOLDEN") == "1"


def _nvrtc_status():
    if not getattr(_C, "cuda_built", False):
        return False, "this build of Seastar has no CUDA backend (no CUDA toolkit when it was configured)"
    return _C.nvrtc_available()


NVRTC_OK, NVRTC_WHY = _nvrtc_status()
needs_nvrtc = pytest.mark.skipif(not NVRTC_OK, reason=f"NVRTC cannot be loaded: {NVRTC_WHY}")


def _archs():
    archs = []
    for a in os.environ.get("SEASTAR_CUDA_ARCHS", "80,90").split(","):
        a = a.strip()
        if a == "native":
            if torch.cuda.is_available():
                major, minor = torch.cuda.get_device_capability()
                archs.append(10 * major + minor)
        elif a:
            archs.append(int(a.replace("sm_", "")))
    return sorted(set(archs))


ARCHS = _archs()


# ---- the programs: every model (parameters trainable and frozen) and every zoo layer's program ----

def _typed_graph():
    ei = torch.tensor([[0, 1, 2, 3, 1, 4, 4, 0], [1, 2, 3, 0, 1, 0, 2, 4]])
    return ss.Graph.from_edge_index(ei, num_nodes=6, edge_type=torch.tensor([0, 1, 0, 3, 0, 2, 1, 0]),
                                    node_type=torch.tensor([0, 1, 2, 0, 1, 2]), num_edge_types=4, num_node_types=3)


class _Prog:
    """A traced signature's FusedProgram and the directions it has."""

    def __init__(self, compiled):
        self.fused = compiled.kernels
        self.unsupported = self.fused.unsupported
        self.directions = ("forward", "backward") if compiled.lowered.wrt else ("forward",)

    def cuda_source(self, *args):
        return self.fused.cuda_source(*args)

    def cuda_launches(self, *args):
        return self.fused.cuda_launches(*args)


def _model_programs():
    graph = _typed_graph()
    progs = {}
    for name, model in MODELS.items():
        for frozen in (False, True):
            inputs = model.make_inputs(graph)
            params = set(model.program.param_names)
            tensors = {k: t.requires_grad_(not (frozen and k in params)) for k, t in inputs.items()}
            if frozen and not params:
                continue
            compiled = model.program._compiled(graph, tensors)
            progs[name + ("_frozen_params" if frozen else "")] = _Prog(compiled)
    return progs


def _zoo_programs():
    """The programs the seastar.nn layers run, captured where the fused backend is asked for them."""
    import seastar.nn as snn
    graph = _typed_graph()
    # run on the reference backend: nothing is compiled for the CPU here
    with capture_signatures(run_fused=False) as captured:
        torch.manual_seed(0)
        x = torch.randn(graph.num_nodes, 6)
        mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
        layers = [snn.GCNConv(6, 4), snn.GCNConv(6, 4, normalize=False), snn.GATConv(6, 3, heads=2),
                  snn.GATConv(6, 3, heads=2, dropout=0.5), snn.GATConv(6, 16, heads=4, concat=False),
                  snn.SAGEConv(6, 4), snn.SAGEConv(6, 4, aggr="max"), snn.GINConv(mlp, train_eps=True),
                  snn.APPNP(K=2, alpha=0.1)]
        # heterogeneous layers: every typed program (typed parameters inside programs)
        for cls, kwargs in (("RGCNConv", dict(num_relations=4)),
                            ("RGCNConv", dict(num_relations=4, mode="per_edge")),
                            ("RGCNConv", dict(num_relations=4, aggr="add", mode="per_edge")),
                            ("RGCNConv", dict(num_relations=4, num_bases=2, mode="per_basis")),
                            ("RGCNConv", dict(num_relations=4, num_bases=2, aggr="add", mode="per_basis")),
                            ("HGTConv", dict(num_node_types=3, num_edge_types=4, heads=2)),
                            ("HGTConv", dict(num_node_types=3, num_edge_types=4, heads=2, mode="per_edge"))):
            layers.append(getattr(snn, cls)(6, 4, **kwargs))
        for layer in layers:
            layer.train()
            try:
                out = layer(graph, x.clone().requires_grad_())
            except (TypeError, ValueError) as e:  # a layer with another signature: its own tests cover it
                log.info("zoo program capture skipped %s: %s", type(layer).__name__, e)
                continue
            (out[0] if isinstance(out, tuple) else out).sum().backward()
        w = torch.rand(graph.num_edges, requires_grad=True)  # learned edge weights: their programs too
        for layer in (snn.GCNConv(6, 4), snn.APPNP(K=2, alpha=0.1)):
            layer(graph, x.clone().requires_grad_(), w).sum().backward()
        out = snn.edge_softmax(graph, torch.randn(graph.num_edges, 2, requires_grad=True))
        out.sum().backward()
    progs = {}
    for _, c in captured.programs:
        key = f"{c.lowered.name}[{','.join(c.names)}]"
        progs.setdefault(key, _Prog(c))
    return progs


@pytest.fixture(scope="module")
def programs():
    progs = {f"model:{k}": v for k, v in _model_programs().items()}
    progs.update({f"zoo:{k}": v for k, v in _zoo_programs().items()})
    supported = {k: p for k, p in progs.items() if not p.unsupported}
    assert len(supported) >= 15, sorted(progs)
    return supported


def _directions(program):
    return program.directions


# ---- NVRTC -----------------------------------------------------------------------------------

def _compile_all(programs, dtypes, archs, index_dtype="int32"):
    report = []
    for key, program in sorted(programs.items()):
        for direction in _directions(program):
            for dtype in dtypes:
                src = program.cuda_source(direction, dtype, index_dtype)
                for arch in archs:
                    r = _C.nvrtc_compile(src, arch, "test_" + key.split(":")[1].split("[")[0] + "_" + direction)
                    assert r["target"] == f"sm_{arch}" and not r["ptx"], r["target"]
                    assert r["size"] > 0
                    names = {k["name"] for k in r["kernels"]}
                    expected = {launch["name"] for launch in program.cuda_launches(direction, dtype, index_dtype)}
                    assert names == expected, (key, direction, names, expected, "cache hit" if r["cache_hit"] else
                                               "compiled", r["path"], r["log"][-2000:])
                    for k in r["kernels"]:
                        assert k["registers"] > 0, k
                        report.append((key, direction, str(dtype)[6:], r["target"], k["name"], k["registers"],
                                       k["spill_store_bytes"], k["spill_load_bytes"]))
    for row in report:
        log.info("registers %s %s %s %s %s: %d registers, %d B spill stores, %d B spill loads", *row)
    return report


@needs_nvrtc
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_models_compile_with_nvrtc(programs, dtype):
    models = {k: p for k, p in programs.items() if k.startswith("model:")}
    assert len(models) >= len(MODELS)
    report = _compile_all(models, [dtype], ARCHS)
    assert report


@needs_nvrtc
def test_zoo_programs_compile_with_nvrtc(programs):
    zoo = {k: p for k, p in programs.items() if k.startswith("zoo:")}
    assert len(zoo) >= 5, sorted(zoo)
    names = {k.split(":")[1].split("[")[0] for k in zoo}
    assert {"rgcn_typed_mean", "rgcn_typed_add", "rgcn_basis_mean", "rgcn_basis_add", "hgt_typed"} <= names, names
    assert _compile_all(zoo, [torch.float32], ARCHS)


@needs_nvrtc
def test_int64_indices_and_wide_features_compile(programs):
    """int64 ids (graphs past 2^31 ids) and every thread mapping, up to a block per vertex."""
    _compile_all({k: p for k, p in programs.items() if k in ("model:gat", "model:rgcn")}, [torch.float32], ARCHS[-1:],
                 index_dtype="int64")
    graph = _typed_graph()
    for heads, f in ((1, 1), (8, 1), (1, 7), (8, 8), (4, 64), (1, 300), (2, 1024)):
        tensors = {"h": torch.randn(graph.num_nodes, heads, f, requires_grad=True),
                   "el": torch.randn(graph.num_nodes, heads, 1, requires_grad=True),
                   "er": torch.randn(graph.num_nodes, heads, 1, requires_grad=True)}
        program = _Prog(MODELS["gat"].program._compiled(graph, tensors))
        for direction in ("forward", "backward"):
            src = program.cuda_source(direction, torch.float32, "int32")
            r = _C.nvrtc_compile(src, ARCHS[-1], f"test_gat_{heads}x{f}_{direction}")
            for k in r["kernels"]:
                log.info("registers gat %dx%d %s %s: %d", heads, f, direction, k["name"], k["registers"])
                assert k["registers"] > 0


@needs_nvrtc
def test_nvrtc_errors_name_the_source_and_log():
    with pytest.raises(ss.CompileError) as err:
        _C.nvrtc_compile('extern "C" __global__ void k(float* x) { x[0] = undefined_name; }', 80, "broken")
    msg = str(err.value)
    assert "undefined_name" in msg and "broken-" in msg and ".cu" in msg
    source_path = msg.split("source: ")[1].split(")")[0]
    assert Path(source_path).exists()


@needs_nvrtc
def test_nvrtc_cache_and_ptx_fallback(tmp_path):
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 3.f; }'
    env = dict(os.environ, SEASTAR_CACHE_DIR=str(tmp_path), PYTHONPATH=os.pathsep.join(sys.path))
    script = ("import seastar, json, sys; from seastar import _C\n"
              f"r = _C.nvrtc_compile({src!r}, sys.argv[1], 'cached')\n"
              "print(json.dumps({k: r[k] for k in ('target', 'ptx', 'cache_hit', 'path')}))\n")
    import json
    runs = [json.loads(subprocess.run([sys.executable, "-c", script, arch], env=env, capture_output=True, text=True,
                                      timeout=120, check=True).stdout) for arch in ("sm_80", "sm_80")]
    assert not runs[0]["cache_hit"] and runs[1]["cache_hit"] and runs[0]["path"] == runs[1]["path"]
    archs = _C.nvrtc_supported_archs()
    unknown = max(archs) + 5  # newer than this NVRTC: PTX of the newest arch below it
    r = _C.nvrtc_compile(src, unknown, "fallback")
    assert r["ptx"] and r["target"] == f"compute_{max(archs)}"
    with pytest.raises(ss.CompileError, match="cannot compile for sm_"):
        _C.nvrtc_compile(src, min(archs) - 5, "too_old")


def test_missing_nvrtc_is_a_clear_error(tmp_path):
    if not getattr(_C, "cuda_built", False):
        pytest.skip("this build of Seastar has no CUDA backend")
    env = dict(os.environ, SEASTAR_NVRTC=str(tmp_path / "libnvrtc.so.404"), PYTHONPATH=os.pathsep.join(sys.path))
    script = ("import seastar\nfrom seastar import _C\nprint(_C.nvrtc_available())\n"
              "_C.nvrtc_compile('__global__ void k() {}', 90)\n")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "(False," in r.stdout and "NVRTC (libnvrtc) could not be loaded" in r.stderr and "404" in r.stderr


# ---- launch configurations -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_launch_configs_within_limits(programs, dtype):
    checked = 0
    for key, program in programs.items():
        for direction in _directions(program):
            for launch in program.cuda_launches(direction, dtype, "int32"):
                g, b = launch["group_threads"], launch["block_threads"]
                assert 1 <= b <= 1024 and b % g == 0 and g & (g - 1) == 0, (key, launch)
                assert g * launch["elems_per_thread"] >= launch["features"], (key, launch)
                assert launch["shared_bytes"] <= 48 * 1024, (key, launch)
                for n, e in ((0, 0), (1, 0), (2708, 10556), (10**6, 2 * 10**7), (3 * 10**9, 10**10)):
                    grid = _C.FusedProgram.cuda_grid(launch, n, e)
                    assert 0 < grid < 2**31, (key, launch, n, e, grid)
                checked += 1
    assert checked >= 30


def test_wide_features_map_to_blocks_and_stay_within_1024_threads():
    graph = _typed_graph()
    for f in (1, 7, 32, 64, 256, 1024, 5000):
        tensors = {"h": torch.randn(graph.num_nodes, f, requires_grad=True),
                   "w": torch.randn(graph.num_edges, 1, requires_grad=True)}
        program = MODELS["gcn"].program._compiled(graph, tensors).kernels
        for direction in ("forward", "backward"):
            for launch in program.cuda_launches(direction, torch.float32, "int32"):
                assert launch["block_threads"] <= 1024
                if launch["features"] >= 256:
                    assert launch["group_threads"] == launch["block_threads"] >= 256  # a block per vertex


# ---- golden source ---------------------------------------------------------------------------

def test_golden_gat_forward_cuda():
    """One GAT layer (4 heads x 16 features, float32, int32 ids): the emitted CUDA, verbatim."""
    ei = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 0, 1]])
    graph = ss.Graph.from_edge_index(ei, num_nodes=5)
    tensors = {"h": torch.randn(5, 4, 16), "el": torch.randn(5, 4, 1), "er": torch.randn(5, 4, 1)}
    program = MODELS["gat"].program._compiled(graph, tensors).kernels
    text = program.cuda_source("forward", torch.float32, "int32")
    if UPDATE:
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), f"{GOLDEN} is missing; run with SEASTAR_UPDATE_GOLDEN=1 to create it, then review it"
    assert text == GOLDEN.read_text(), f"the CUDA emitted for GAT differs from {GOLDEN} (SEASTAR_UPDATE_GOLDEN=1 regenerates it)"
