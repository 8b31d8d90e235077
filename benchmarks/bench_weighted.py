#!/usr/bin/env python
"""GCN and APPNP with edge weights: seastar against PyG, with and without ``cached=True``.

    .venv/bin/python benchmarks/bench_weighted.py --num-nodes 100000 --widths 16,64 \\
        --layers gcn,appnp --rounds 3 --out benchmarks/results/weighted/pl100k.json

The peer suite (``run.py --peers``) runs the layers without edge weights; with weights the
normalisation depends on them, so a layer either recomputes it every call (PyG's default) or
keeps the first call's (``cached=True``). The model is the suite's (conv -> ReLU -> Linear(F, 16),
cross-entropy over every vertex, Adam; APPNP: Linear(F, F), then K=10, alpha=0.1) on the suite's
power-law graph with a uniform weight in [0.1, 1.1) per edge, given as the call's
``edge_weight``.

Implementations, each configuration in its own process (``_spawn.spawn_json``), interleaved over
``--rounds``, all on one graph and one set of weights written once by this script:
``seastar`` / ``seastar_cached`` (``seastar.nn`` on a ``seastar.Graph``), ``pyg`` /
``pyg_cached`` (PyG on ``edge_index``), ``pyg_csr_cached`` (PyG on a ``torch.sparse`` CSR
``adj_t`` whose values are the weights, normalised once), and ``dgl`` / ``dgl_cached`` (DGL 2.1
in its own environment, ``_peer_env.py``: the graph with its loops replaced by one loop of
weight 1 per vertex, built once as a DGL user would; ``EdgeWeightNorm("both")`` per call or
once, then ``GraphConv(norm="none")``; APPNP: ``APPNPConv`` with the weights, which normalises
them every call and has no cached form). DGL's "both" normalises by the source's weighted
out-degree where PyG and seastar use in-degrees: the same work, other values on a directed
graph. Reported: the median epoch over ``--repeats`` epochs after two untimed ones, the spread
(min-max over rounds of the medians), the first epoch (normalisation, graph structures, kernel
load) and seastar's ratio against the best peer with the same caching. PyG and DGL are optional
(``benchmarks/requirements.txt``, ``--no-install``): without them their rows say ``unavailable``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python"))

from _peer_env import dgl_python  # noqa: E402
from _spawn import spawn_json  # noqa: E402

IMPLS = ("seastar", "seastar_cached", "pyg", "pyg_cached", "pyg_csr_cached", "dgl", "dgl_cached")
PEERS = {"seastar": ("pyg", "dgl"), "seastar_cached": ("pyg_cached", "pyg_csr_cached", "dgl_cached")}
NUM_CLASSES, APPNP_K, APPNP_ALPHA = 16, 10, 0.1


def _dgl_layer(layer: str, impl: str, F: int, ei, w, N: int):
    """DGL's layer as a function of ``h``, and its parameters."""
    import dgl
    import dgl.nn as dglnn
    import torch
    keep = ei[0] != ei[1]
    g = dgl.add_self_loop(dgl.graph((ei[0][keep], ei[1][keep]), num_nodes=N))  # loops appended last
    wl = torch.cat([w[keep], torch.ones(N)])
    if layer == "appnp":
        conv = dglnn.APPNPConv(APPNP_K, APPNP_ALPHA)
        return (lambda h: conv(g, h, edge_weight=wl)), []
    conv, norm = dglnn.GraphConv(F, F, norm="none"), dglnn.EdgeWeightNorm(norm="both")
    if impl == "dgl_cached":
        kept = norm(g, wl)
        return (lambda h: conv(g, h, edge_weight=kept)), list(conv.parameters())
    return (lambda h: conv(g, h, edge_weight=norm(g, wl))), list(conv.parameters())


def _conv(layer: str, impl: str, F: int):
    cached = impl.endswith("_cached")
    if impl.startswith("seastar"):
        import seastar.nn as snn
        return snn.GCNConv(F, F, cached=cached) if layer == "gcn" else snn.APPNP(APPNP_K, APPNP_ALPHA, cached=cached)
    import torch_geometric.nn as gnn
    return gnn.GCNConv(F, F, cached=cached) if layer == "gcn" else gnn.APPNP(APPNP_K, APPNP_ALPHA, cached=cached)


def child(cfg: dict) -> dict:
    import torch
    import torch.nn.functional as Fn
    F, layer, impl = cfg["width"], cfg["layer"], cfg["impl"]
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(0)
    saved = torch.load(cfg["graph_path"], weights_only=True)
    ei, w, N = saved["edge_index"], saved["w"], int(saved["num_nodes"])
    if impl.startswith("dgl"):
        conv_fn, conv_params = _dgl_layer(layer, impl, F, ei, w, N)
    else:
        if impl.startswith("seastar"):
            import seastar as ss
            graph, args = ss.Graph.from_edge_index(ei, num_nodes=N), (w,)
        elif impl == "pyg_csr_cached":
            from torch_geometric.utils import to_torch_csr_tensor
            graph, args = to_torch_csr_tensor(ei.flip(0), w, size=(N, N)), ()
        else:
            import torch_geometric.nn  # noqa: F401
            graph, args = ei, (w,)
        conv = _conv(layer, impl, F)
        conv_params = list(conv.parameters())
        if impl.startswith("seastar"):
            conv_fn = lambda h: conv(graph, h, *args)  # noqa: E731
        else:
            conv_fn = lambda h: conv(h, graph, *args)  # noqa: E731
    pre = torch.nn.Linear(F, F) if layer == "appnp" else None
    head = torch.nn.Linear(F, NUM_CLASSES)
    params = conv_params + list(head.parameters()) + (list(pre.parameters()) if pre else [])
    opt = torch.optim.Adam(params, lr=0.01)
    x = torch.randn(N, F)
    y = torch.randint(0, NUM_CLASSES, (N,))

    def forward():
        h = pre(x) if pre is not None else x
        return head(torch.relu(conv_fn(h)))

    def epoch() -> float:
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        Fn.cross_entropy(forward(), y).backward()
        opt.step()
        return time.perf_counter() - t0

    first = epoch()
    epoch()
    times = [epoch() for _ in range(cfg["repeats"])]
    return dict(status="ok", epoch_ms=1e3 * statistics.median(times), epoch_ms_all=[1e3 * t for t in times],
                first_epoch_ms=1e3 * first, num_edges=int(ei.shape[1]), torch=torch.__version__)


def summarise(rows: list) -> list:
    """Per (layer, width): each implementation's median over rounds and spread, and seastar's
    ratio against the best peer with the same caching."""
    out = []
    keys = sorted({(r["layer"], r["width"]) for r in rows})
    for layer, width in keys:
        line = dict(layer=layer, width=width)
        for impl in IMPLS:
            ok = [r["epoch_ms"] for r in rows if (r["layer"], r["width"], r["impl"]) == (layer, width, impl)
                  and r.get("status") == "ok"]
            line[impl] = dict(median_ms=statistics.median(ok), min_ms=min(ok), max_ms=max(ok)) if ok else None
        for mine, peers in PEERS.items():
            best = [line[p]["median_ms"] for p in peers if line.get(p)]
            line[f"{mine}_vs_best_peer"] = (min(best) / line[mine]["median_ms"]) if best and line[mine] else None
        out.append(line)
    return out


def _version(module: str) -> str:
    from importlib.metadata import version
    return version(module)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-nodes", type=int, default=100_000)
    ap.add_argument("--avg-degree", type=int, default=20)
    ap.add_argument("--widths", default="16,64")
    ap.add_argument("--layers", default="gcn,appnp")
    ap.add_argument("--impls", default=",".join(IMPLS), help=f"subset of {','.join(IMPLS)}")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--no-install", action="store_true", help="never create the DGL environment")
    ap.add_argument("--out", default="benchmarks/results/weighted/pl100k.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    impls = args.impls.split(",")
    for i in impls:
        if i not in IMPLS:
            raise SystemExit(f"unknown implementation {i!r}; choose from {', '.join(IMPLS)}")
    pyg = importlib.util.find_spec("torch_geometric") is not None
    dgl = dgl_python(install=not args.no_install) if any(i.startswith("dgl") for i in impls) else {}
    workdir = tempfile.mkdtemp(prefix="seastar-weighted-")
    import seastar as ss
    import torch
    data = ss.datasets.power_law_graph(args.num_nodes, args.avg_degree, seed=0, build_graph=False)
    graph_path = os.path.join(workdir, "graph.pt")
    torch.save(dict(edge_index=data.edge_index.contiguous(), num_nodes=data.num_nodes,
                    w=torch.rand(data.edge_index.shape[1], generator=torch.Generator().manual_seed(1)) + 0.1),
               graph_path)
    del data
    rows = []
    for rnd in range(args.rounds):
        for layer in args.layers.split(","):
            for width in (int(f) for f in args.widths.split(",")):
                for impl in impls:
                    cfg = dict(layer=layer, width=width, impl=impl, num_nodes=args.num_nodes,
                               avg_degree=args.avg_degree, threads=args.threads, repeats=args.repeats,
                               graph_path=graph_path)
                    # a row that cannot exist is n/a whether or not its peer is installed
                    if impl == "dgl_cached" and layer == "appnp":
                        res = dict(status="n/a", reason="DGL's APPNPConv normalises its weights every call")
                    elif impl.startswith("pyg") and not pyg:
                        res = dict(status="unavailable", reason="PyTorch Geometric is not installed")
                    elif impl.startswith("dgl") and not dgl.get("python"):
                        res = dict(status="unavailable", reason=f"DGL: {dgl.get('reason')}")
                    else:
                        res = spawn_json(os.path.abspath(__file__), cfg, args.threads, args.timeout,
                                         python=dgl["python"] if impl.startswith("dgl") else None)
                    rows.append(dict(cfg, round=rnd, **res))
                    shown = f"{res['epoch_ms']:.1f} ms" if res.get("status") == "ok" else res.get("reason")
                    print(f"[round {rnd}] {layer} F={width} {impl}: {shown}", flush=True)
    summary = summarise(rows)
    for line in summary:
        cells = ", ".join(f"{i} {line[i]['median_ms']:.1f} ms ({line[i]['min_ms']:.1f}-{line[i]['max_ms']:.1f})"
                          for i in IMPLS if line.get(i))
        ratios = ", ".join(f"{k} {line[k]:.2f}x" for k in ("seastar_vs_best_peer", "seastar_cached_vs_best_peer")
                           if line.get(k))
        print(f"{line['layer']} F={line['width']}: {cells}; {ratios}")
    meta = dict(num_nodes=args.num_nodes, avg_degree=args.avg_degree, threads=args.threads, rounds=args.rounds,
                repeats=args.repeats, python=platform.python_version(), machine=platform.machine(),
                torch=torch.__version__, pyg=_version("torch_geometric") if pyg else None,
                dgl=dgl.get("versions"),
                date=time.strftime("%Y-%m-%d %H:%M:%S"))
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=meta, rows=rows, summary=summary), f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
