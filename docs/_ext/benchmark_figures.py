"""Figures of the docs site, drawn from the committed benchmark results at each build.

``peers_speed.png`` and ``peers_memory.png``: each ``seastar.nn`` layer's training epoch against
the fastest peer measured in the same run (DGL, PyG, PyG with a CSR adjacency, PyG under
torch.compile), and its peak memory against the leanest, per graph and feature width, from
``benchmarks/results/peers/results.json``. ``scaling.png``: each layer's training epoch against
the graph's edge count, fused, unfused and PyG, at both widths, from
``benchmarks/results/results.json``. ``user_layers.png``: PyG's time over Seastar's for the
layers written as plain vertex programs, with the spread over rounds, from
``benchmarks/results/user_layers.json``. The machine and the run's date go into the titles.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt  # noqa: E402

LAYERS = ["gcn", "gat", "sage", "gin", "appnp"]


def _bars(ax, rows, key: str, ylabel: str, threads: int) -> None:
    groups = sorted({(r["graph_label"] if "graph_label" in r else r["graph"], r["width"]) for r in rows},
                    key=lambda g: (g[0], g[1]))
    width = 0.8 / max(1, len(groups))
    for k, (graph, F) in enumerate(groups):
        values = []
        for layer in LAYERS:
            hit = [r[key] for r in rows if r["layer"] == layer and r["width"] == F and r["threads"] == threads
                   and (r.get("graph_label", r["graph"]) == graph) and r.get(key)]
            values.append(hit[0] if hit else 0.0)
        xs = [i + (k - (len(groups) - 1) / 2) * width for i in range(len(LAYERS))]
        ax.bar(xs, values, width, label=f"{graph}, F={F}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(LAYERS)), [layer.upper() for layer in LAYERS])
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")


def draw_peers(results: Path, out: Path) -> list:
    data = json.loads((results / "peers" / "results.json").read_text())
    meta = data["meta"]
    rows = [dict(r, graph_label=_label(r["graph"])) for r in data["ratios"]]
    where = f"{meta.get('cpu', 'CPU')}, {meta.get('cpu_count', '?')} cores, 1 thread, {meta.get('date', '')[:10]}"
    made = []
    for key, ylabel, name, title in (
            ("speedup_vs_best", "epoch speed-up over the fastest peer (x)", "peers_speed.png",
             "Training epoch: Seastar against the fastest peer"),
            ("memory_ratio_vs_leanest", "peak memory of the leanest peer / Seastar's (x)", "peers_memory.png",
             "Peak memory: the leanest peer against Seastar")):
        fig, ax = plt.subplots(figsize=(8, 4))
        _bars(ax, rows, key, ylabel, threads=1)
        ax.set_title(f"{title}\n({where})", fontsize="medium")
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made.append(out / name)
    return made


def _label(graph: str) -> str:
    return {"pl100k": "power law 100k", "pl1m": "power law 1M"}.get(graph, graph)


IMPL_STYLE = {"fused": ("Seastar", "tab:blue"), "unfused": ("unfused torch", "tab:gray"), "pyg": ("PyG", "tab:orange")}


def draw_scaling(results: Path, out: Path) -> list:
    data = json.loads((results / "results.json").read_text())
    rows = [r for r in data["train"] if r.get("status") == "ok" and r.get("epoch_ms")]
    layers = [layer for layer in ("gcn", "gat", "sage", "appnp") if any(r["layer"] == layer for r in rows)]
    fig, axes = plt.subplots(1, len(layers), figsize=(3.2 * len(layers), 3.4), squeeze=False)
    for ax, layer in zip(axes[0], layers):
        for impl, (label, colour) in IMPL_STYLE.items():
            for width, style in ((16, "-"), (64, "--")):
                pts = sorted((r["num_edges"], r["epoch_ms"]) for r in rows
                             if r["layer"] == layer and r["impl"] == impl and r["width"] == width)
                if pts:
                    ax.plot(*zip(*pts), style, marker="o", markersize=3, color=colour, label=f"{label}, F={width}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(layer.upper(), fontsize="medium")
        ax.set_xlabel("edges")
    axes[0][0].set_ylabel("training epoch (ms)")
    axes[0][-1].legend(fontsize="x-small")
    meta = data.get("meta", {})
    fig.suptitle(f"Training epoch against graph size ({meta.get('date', '')[:10]})", fontsize="medium")
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=110)
    plt.close(fig)
    return [out / "scaling.png"]


def draw_user_layers(results: Path, out: Path) -> list:
    data = json.loads((results / "user_layers.json").read_text())
    rows, meta = data["summary"], data["meta"]
    names = [r["layer"] for r in rows]
    ratios = [r["ratio_pyg_over_seastar"] for r in rows]
    low = [r - r_["ratio_spread"][0] for r, r_ in zip(ratios, rows)]
    high = [r_["ratio_spread"][1] - r for r, r_ in zip(ratios, rows)]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar(range(len(names)), ratios, yerr=[low, high], capsize=3, color="tab:blue")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("PyG time / Seastar time (x)")
    machine = meta.get("machine", {})
    ax.set_title(f"Layers written as vertex programs, forward + backward\n({machine.get('processor', 'CPU')}, "
                 f"{meta.get('num_nodes')} vertices, {meta.get('num_edges')} edges, {meta.get('threads')} thread, "
                 f"{meta.get('date', '')})", fontsize="medium")
    fig.tight_layout()
    fig.savefig(out / "user_layers.png", dpi=110)
    plt.close(fig)
    return [out / "user_layers.png"]


def draw_all(results: Path, out: Path) -> list:
    out.mkdir(parents=True, exist_ok=True)
    return draw_peers(results, out) + draw_scaling(results, out) + draw_user_layers(results, out)
