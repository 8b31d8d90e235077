"""Figures of the docs site, drawn from the committed benchmark results at each build.

``peers_speed.png`` and ``peers_memory.png``: each ``seastar.nn`` layer's training epoch against
the fastest peer measured in the same run (DGL, PyG, PyG with a CSR adjacency, PyG under
torch.compile), and its peak memory against the leanest, per graph and feature width, from
``benchmarks/results/peers/results.json``. The machine and the run's date go into the title.
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


def draw_all(results: Path, out: Path) -> list:
    out.mkdir(parents=True, exist_ok=True)
    return draw_peers(results, out)
