"""Layers a user writes as vertex programs, against PyG's own layer with the same weights.

    python benchmarks/bench_user_layers.py [--layers gatv2,transformer,GATv2Conv,...] [--rounds 3] [--out FILE]

Two kinds of layer, both a vertex program for everything per edge and torch for the dense
projections: the tutorial's (``gatv2``, ``transformer``: written as docs/tutorial/write_a_layer.md
writes them, weights copied from PyG's layer), and seastar.nn's layers that are plain programs
(``GATv2Conv``, ``TransformerConv``, ``GINEConv``, ``ResGatedGraphConv``, ``AGNNConv``,
``EdgeConv``, ``GMMConv``, ``FiLMConv``: PyG's state dict loaded, PyG's defaults such as GATv2's self loops, called with the
graph first). Forward and backward are timed apart, float32, on a random graph with a hub (a
tenth of the edges into vertex 0); the implementations alternate within each round (Seastar,
PyG, Seastar, ...) and each round keeps the median of ``--repeats`` steps after a warm-up step,
so a drift of the machine's load hits both. The report gives per layer the medians over rounds,
the spread (min-max over rounds), the ratio PyG / Seastar (above 1: Seastar is faster) and each
implementation's backward over its forward; the JSON keeps every step's time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import torch  # noqa: E402

import seastar as ss  # noqa: E402


@ss.vertex_program
def gatv2(v, att):
    scores = [(ss.leaky_relu(e.src.xl + v.xr, 0.2) * att).sum(-1, keepdim=True) for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return sum(a * e.src.xl for a, e in zip(alpha, v.in_edges()))


class GATv2(torch.nn.Module):
    """The tutorial's layer, its weights copied from PyG's GATv2Conv (share_weights=False)."""

    def __init__(self, theirs):
        super().__init__()
        self.heads, self.out_channels = theirs.heads, theirs.out_channels
        self.lin_l, self.lin_r = theirs.lin_l, theirs.lin_r
        self.att = torch.nn.Parameter(theirs.att.detach().view(self.heads, self.out_channels).clone())
        self.bias = theirs.bias

    def forward(self, graph, x):
        H, C = self.heads, self.out_channels
        xl, xr = self.lin_l(x).view(-1, H, C), self.lin_r(x).view(-1, H, C)
        return gatv2(graph, xl=xl, xr=xr, att=self.att).reshape(-1, H * C) + self.bias


@ss.vertex_program
def transformer(v, scale):
    scores = [((e.src.k + e.ea) * v.q).sum(-1, keepdim=True) * scale for e in v.in_edges()]
    alpha = ss.softmax(scores)
    return sum(a * (e.src.val + e.ea) for a, e in zip(alpha, v.in_edges()))


class Transformer(torch.nn.Module):
    """TransformerConv's attention with edge features (root_weight=False), its weights copied from
    PyG's TransformerConv: the projections are torch, the attention the program."""

    def __init__(self, theirs):
        super().__init__()
        self.heads, self.out_channels = theirs.heads, theirs.out_channels
        self.lin_query, self.lin_key, self.lin_value = theirs.lin_query, theirs.lin_key, theirs.lin_value
        self.lin_edge = theirs.lin_edge
        self.register_buffer("scale", torch.tensor(self.out_channels ** -0.5))

    def forward(self, graph, x, edge_attr):
        H, C = self.heads, self.out_channels
        q, k, val = (lin(x).view(-1, H, C) for lin in (self.lin_query, self.lin_key, self.lin_value))
        ea = self.lin_edge(edge_attr).view(-1, H, C)
        return transformer(graph, q=q, k=k, val=val, ea=ea, scale=self.scale).reshape(-1, H * C)


EDGE_DIM = 8  # the edge features' width, for the layers that read them


class GraphFirst(torch.nn.Module):
    """A seastar.nn layer called with the graph first, ``layer(graph, x, *rest)``."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, graph, x, *rest):
        return self.layer(graph, x, *rest)


def _zoo(name: str, f_in: int, heads: int, channels: int):
    """(PyG's layer, Seastar's with its weights, whether they read edge features) for the
    seastar.nn layers that are plain vertex programs."""
    import seastar.nn as snn
    import torch_geometric.nn as pnn
    hc = heads * channels
    makers = {
        "GATv2Conv": (lambda m: m.GATv2Conv(f_in, channels, heads=heads), False),
        "TransformerConv": (lambda m: m.TransformerConv(f_in, channels, heads=heads, edge_dim=EDGE_DIM), True),
        "GINEConv": (lambda m: m.GINEConv(torch.nn.Linear(f_in, hc), edge_dim=EDGE_DIM), True),
        "ResGatedGraphConv": (lambda m: m.ResGatedGraphConv(f_in, hc), False),
        "AGNNConv": (lambda m: m.AGNNConv(), False),
        "EdgeConv": (lambda m: m.EdgeConv(torch.nn.Sequential(torch.nn.Linear(2 * f_in, hc), torch.nn.ReLU(),
                                                              torch.nn.Linear(hc, hc))), False),
        "GMMConv": (lambda m: m.GMMConv(f_in, hc, dim=EDGE_DIM, kernel_size=4), True),
        "FiLMConv": (lambda m: m.FiLMConv(f_in, hc), False),
    }
    make, edges = makers[name]
    torch.manual_seed(0)
    theirs = make(pnn)
    ours = make(snn)
    ours.load_state_dict(theirs.state_dict())
    return GraphFirst(ours), theirs, edges


ZOO = ("GATv2Conv", "TransformerConv", "GINEConv", "ResGatedGraphConv", "AGNNConv", "EdgeConv", "GMMConv",
       "FiLMConv")
LAYERS = ("gatv2", "transformer") + ZOO


def make_layers(name: str, f_in: int, heads: int, channels: int):
    """(Seastar's layer, PyG's layer, whether they read edge features), with the same weights:
    the tutorial's programs (gatv2, transformer) or seastar.nn's layers (ZOO)."""
    from torch_geometric.nn import GATv2Conv, TransformerConv
    torch.manual_seed(0)
    if name == "gatv2":
        theirs = GATv2Conv(f_in, channels, heads=heads, add_self_loops=False, share_weights=False)
        return GATv2(theirs), theirs, False
    if name == "transformer":
        theirs = TransformerConv(f_in, channels, heads=heads, edge_dim=EDGE_DIM, root_weight=False)
        return Transformer(theirs), theirs, True
    if name in ZOO:
        return _zoo(name, f_in, heads, channels)
    raise SystemExit(f"unknown layer {name!r}; choose from {', '.join(LAYERS)}")


def make_graph(n: int, e: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    hub = e // 10
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.cat([torch.zeros(hub, dtype=torch.long), torch.randint(0, n, (e - hub,), generator=g)])
    return torch.stack([src, dst])


def step_times(call, x, weights) -> tuple:
    """(forward ms, backward ms) of one step."""
    x.grad = None
    t0 = time.perf_counter()
    out = call(x)
    t1 = time.perf_counter()
    (out * weights).sum().backward()
    t2 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3


def _processor() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def measure(args) -> dict:
    torch.set_num_threads(args.threads)
    ei = make_graph(args.num_nodes, args.num_edges)
    graph = ss.Graph.from_edge_index(ei, num_nodes=args.num_nodes)
    x = torch.randn(args.num_nodes, args.in_channels, requires_grad=True)
    rows, summary = [], []
    edge_attr = torch.randn(args.num_edges, EDGE_DIM)
    for name in args.layers.split(","):
        ours, theirs, edges = make_layers(name, args.in_channels, args.heads, args.channels)
        if edges:
            calls = {"seastar": lambda x: ours(graph, x, edge_attr), "pyg": lambda x: theirs(x, ei, edge_attr)}
        else:
            calls = {"seastar": lambda x: ours(graph, x), "pyg": lambda x: theirs(x, ei)}
        expected = calls["pyg"](x)
        torch.testing.assert_close(calls["seastar"](x), expected, rtol=1e-4, atol=1e-4)
        weights = torch.randn(expected.shape)
        per_round = {impl: [] for impl in calls}
        for r in range(args.rounds):
            for impl, call in calls.items():
                step_times(call, x, weights)  # warm-up (the first also compiles)
                steps = [step_times(call, x, weights) for _ in range(args.repeats)]
                fwd = statistics.median(s[0] for s in steps)
                bwd = statistics.median(s[1] for s in steps)
                per_round[impl].append((fwd, bwd))
                rows.append({"layer": name, "impl": impl, "round": r, "steps_ms": steps,
                             "forward_ms": fwd, "backward_ms": bwd})
                print(f"[{name}] round {r} {impl:8s} forward {fwd:8.1f} ms  backward {bwd:8.1f} ms", flush=True)
        line = {"layer": name}
        for impl, got in per_round.items():
            fwd, bwd, tot = [g[0] for g in got], [g[1] for g in got], [g[0] + g[1] for g in got]
            line[impl] = {"forward_ms": statistics.median(fwd), "backward_ms": statistics.median(bwd),
                          "step_ms": statistics.median(tot), "step_ms_spread": [min(tot), max(tot)],
                          "backward_over_forward": statistics.median(b / f for f, b in got)}
        line["ratio_pyg_over_seastar"] = line["pyg"]["step_ms"] / line["seastar"]["step_ms"]
        line["ratio_spread"] = [line["pyg"]["step_ms_spread"][0] / line["seastar"]["step_ms_spread"][1],
                                line["pyg"]["step_ms_spread"][1] / line["seastar"]["step_ms_spread"][0]]
        summary.append(line)
        print(f"[{name}] PyG / Seastar = {line['ratio_pyg_over_seastar']:.2f}x "
              f"(spread {line['ratio_spread'][0]:.2f}-{line['ratio_spread'][1]:.2f}); backward / forward: "
              f"Seastar {line['seastar']['backward_over_forward']:.1f}, PyG {line['pyg']['backward_over_forward']:.1f}",
              flush=True)
    return {"meta": {"command": " ".join(sys.argv), "machine": {"cpus": os.cpu_count(),
                                                              "processor": _processor()},
                     "threads": args.threads, "num_nodes": args.num_nodes, "num_edges": args.num_edges,
                     "in_channels": args.in_channels, "heads": args.heads, "channels": args.channels,
                     "rounds": args.rounds, "repeats": args.repeats, "torch": torch.__version__,
                     "date": time.strftime("%Y-%m-%d")},
            "summary": summary, "rows": rows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", default=",".join(LAYERS), help="comma-separated: " + ", ".join(LAYERS))
    ap.add_argument("--num-nodes", type=int, default=50_000)
    ap.add_argument("--num-edges", type=int, default=550_000)
    ap.add_argument("--in-channels", type=int, default=32)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "user_layers.json"))
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        raise SystemExit("--rounds and --repeats must be at least 1")
    result = measure(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
