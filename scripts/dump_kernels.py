"""Writes the IR after every pass and the generated kernels (C++ and, through the CUDA emulator,
CUDA) of the test zoo's programs and of the seastar.nn layers into one folder, so that two
builds can be compared with ``diff -r``: a refactoring of the compiler should leave every file
byte-identical.

    python scripts/dump_kernels.py OUT_DIR
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(out: str) -> None:
    os.environ["SEASTAR_DUMP_DIR"] = out
    os.environ.setdefault("SEASTAR_CACHE_DIR", str(Path(out) / ".cache"))  # compile every kernel again
    sys.path[:0] = [str(ROOT / "python"), str(ROOT / "tests" / "python")]
    import torch
    import seastar as ss
    from conftest import build_graph
    from models import MODELS

    graph, typed = build_graph("mixed"), build_graph("typed_mixed")
    for emulate in ("0", "1"):  # the C++ kernels, then the CUDA kernels run by the emulator
        os.environ["SEASTAR_CUDA_EMULATE"] = emulate
        for dtype in (torch.float32, torch.float64):
            for model in MODELS.values():
                g = typed if model.typed else graph
                inputs = {k: t.requires_grad_() for k, t in model.make_inputs(g, dtype=dtype).items()}
                y = model.program(g, backend="fused", **inputs)
                torch.autograd.grad(y.sum(), list(inputs.values()), allow_unused=True)
            x = torch.randn(graph.num_nodes, 16, dtype=dtype, requires_grad=True)
            ei = graph.edge_index
            for layer in (ss.nn.GCNConv(16, 8), ss.nn.GATConv(16, 4, heads=2), ss.nn.SAGEConv(16, 8),
                          ss.nn.GINConv(torch.nn.Linear(16, 8)), ss.nn.APPNP(K=2, alpha=0.1)):
                layer = layer.to(dtype)
                layer(x, ei).sum().backward()
    files = [p for p in Path(out).iterdir() if p.is_file()]
    print(f"{len(files)} files in {out} (compiled kernels cached in {os.environ['SEASTAR_CACHE_DIR']})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
