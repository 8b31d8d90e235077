"""Register use and spills of the generated CUDA kernels (ptxas's report through NVRTC), as JSON.

    python tests/gpu/registers.py OUT.json [ARCH ...]

ARCH: 80, 90, ... (default: sm_80, sm_90 and the local GPU's, when there is one). For GAT at the
widths of the benchmark and the tests (heads x features per head), forward and backward, float32
and float64, then every model of tests/python/models.py (float32). Needs NVRTC, not a GPU.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE.parents[1] / "python"))

import torch  # noqa: E402

import seastar as ss  # noqa: E402
from seastar import _C  # noqa: E402
from models import MODELS  # noqa: E402


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "registers.json"
    archs = [int(a) for a in sys.argv[2:]] or [80, 90]
    if len(sys.argv) <= 2 and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        archs = sorted(set(archs + [10 * major + minor]))
    graph = ss.Graph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4,
                                     edge_type=torch.tensor([0, 1, 0, 1]), node_type=torch.tensor([0, 1, 0, 1]),
                                     num_edge_types=2, num_node_types=2)
    rows = []

    def record(label, compiled, dtypes):
        program = compiled.kernels
        for direction in ("forward", "backward") if compiled.lowered.wrt else ("forward",):
            for dtype in dtypes:
                launches = {l["name"]: l for l in program.cuda_launches(direction, dtype, "int32")}
                src = program.cuda_source(direction, dtype, "int32")
                for arch in archs:
                    r = _C.nvrtc_compile(src, arch, f"reg_{label}_{direction}")
                    for k in r["kernels"]:
                        l = launches.get(k["name"], {})
                        rows.append(dict(program=label, direction=direction, dtype=str(dtype)[6:], target=r["target"],
                                         kernel=k["name"], registers=k["registers"],
                                         spill_store_bytes=k["spill_store_bytes"], spill_load_bytes=k["spill_load_bytes"],
                                         group_threads=l.get("group_threads"), block_threads=l.get("block_threads"),
                                         what=l.get("what")))

    for heads, f in ((1, 16), (4, 16), (8, 8), (4, 64), (1, 256)):
        t = {"h": torch.randn(4, heads, f, requires_grad=True), "el": torch.randn(4, heads, 1, requires_grad=True),
             "er": torch.randn(4, heads, 1, requires_grad=True)}
        record(f"gat_{heads}x{f}", MODELS["gat"].program._compiled(graph, t), [torch.float32, torch.float64])
    for name, model in MODELS.items():
        t = {k: v.requires_grad_() for k, v in model.make_inputs(graph).items()}
        compiled = model.program._compiled(graph, t)
        if not compiled.kernels.unsupported:
            record(name, compiled, [torch.float32])
    Path(out).write_text(json.dumps({"archs": archs, "nvrtc": _C.nvrtc_version(), "kernels": rows}, indent=1))
    for r in rows:
        if r["program"].startswith("gat_"):
            print(f"{r['program']:>10} {r['direction']:>8} {r['dtype']:>7} {r['target']:>6} {r['kernel']:>14}: "
                  f"{r['registers']:3d} registers, spills {r['spill_store_bytes']}/{r['spill_load_bytes']} B, "
                  f"{r['group_threads']} threads per vertex")
    worst = max(rows, key=lambda r: r["registers"])
    print(f"{len(rows)} kernels; most registers: {worst['program']} {worst['direction']} {worst['kernel']} "
          f"{worst['target']} {worst['registers']}; spilling kernels: "
          f"{sum(1 for r in rows if r['spill_store_bytes'] or r['spill_load_bytes'])}")


if __name__ == "__main__":
    main()
