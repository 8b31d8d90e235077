"""Ratios, target checks, the markdown report and the plots of ``benchmarks/run.py``."""
from __future__ import annotations

import os
import statistics

IMPL_LABEL = {"fused": "seastar fused", "unfused": "unfused torch", "pyg": "PyG edge_index",
              "pyg_csr": "PyG CSR adj_t", "pyg_compile": "PyG + torch.compile", "dgl": "DGL"}
LAYER_LABEL = {"gcn": "GCN", "gat": "GAT (4 heads)", "sage": "SAGE-mean", "gin": "GIN", "appnp": "APPNP (K=10)"}
PROGRAM_LABEL = {"gcn_agg": "GCN aggregation", "gcn_agg_dst": "GCN aggregation, edges in destination order",
                 "gat": "GAT"}
PROGRAM_SHORT = {"gcn_agg": "GCN agg", "gcn_agg_dst": "GCN agg (dst order)", "gat": "GAT"}
COLORS = {"fused": "tab:blue", "unfused": "tab:orange", "pyg": "tab:green", "pyg_csr": "tab:olive",
          "pyg_compile": "tab:cyan", "dgl": "tab:red"}
IMPL_ORDER = ("fused", "unfused", "pyg", "pyg_csr", "pyg_compile", "dgl")
# The peers a CPU user would pick instead of seastar; "best" is the fastest (or the leanest) of
# those measured in a row. The unfused reference is seastar's own and is reported apart.
PEERS = ("dgl", "pyg_csr", "pyg_compile", "pyg")


def quartiles(values) -> list:
    """First quartile, median and third quartile of ``values`` (one value: itself three times)."""
    return statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3


def _div(a, b):
    return a / b if a is not None and b is not None and b > 0 else None


def summarise(train):
    """One record per (graph, layer, width, threads, implementation) over the rounds: medians
    of the per-round medians, with min / max (spread) of the epoch time."""
    groups = {}
    for r in train:
        key = (r["graph"], r["layer"], r["width"], r.get("threads"), r["impl"])
        groups.setdefault(key, []).append(r)
    out = []
    for (graph, layer, width, threads, impl), rs in groups.items():
        ok = [r for r in rs if r.get("status") == "ok"]
        first = rs[0]
        rec = dict(graph=graph, graph_label=first["graph_label"], num_nodes=first["num_nodes"],
                   num_edges=first["num_edges"], layer=layer, width=width, threads=threads, impl=impl,
                   device=first.get("device"), rounds=len(rs), rounds_ok=len(ok))
        if not ok:
            rec.update(status=first.get("status"), reason=first.get("reason", ""))
            out.append(rec)
            continue
        ep = [r["epoch_ms"] for r in ok]
        med = statistics.median(ep)
        rec.update(status="ok", epoch_ms=med, epoch_ms_min=min(ep), epoch_ms_max=max(ep),
                   epoch_spread=(max(ep) - min(ep)) / med if med and len(ep) > 1 else None, epoch_ms_rounds=ep,
                   forward_ms=statistics.median([r["forward_ms"] for r in ok]),
                   peak_mem_mb=statistics.median([r["peak_mem_mb"] for r in ok]),
                   peak_mem_mb_max=max(r["peak_mem_mb"] for r in ok),
                   peak_first_epoch_mb=max((r.get("peak_first_epoch_mb") or 0) for r in ok),
                   first_epoch_ms=statistics.median([r["first_epoch_ms"] for r in ok]),
                   load_1min=[r.get("load_1min") for r in ok])
        out.append(rec)
    return out


def ratios(train):
    """One row per (graph, layer, width, threads): each implementation's numbers, fused's ratios
    against each, and against the best peer (> 1 favours seastar fused)."""
    groups = {}
    for r in summarise(train):
        groups.setdefault((r["num_edges"], r["graph"], r["layer"], r["width"], r["threads"]), {})[r["impl"]] = r
    rows = []
    for (E, graph, layer, width, threads), by in sorted(groups.items(),
                                                        key=lambda kv: (kv[0][4] or 0, kv[0][2], kv[0][3], kv[0][0])):
        ok = {k: v for k, v in by.items() if v.get("status") == "ok"}
        any_rec = next(iter(by.values()))
        row = dict(graph=graph, graph_label=any_rec["graph_label"], N=any_rec["num_nodes"], E=E, layer=layer,
                   width=width, threads=threads)
        for impl in IMPL_ORDER:
            r = ok.get(impl)
            row[f"{impl}_epoch_ms"] = r["epoch_ms"] if r else None
            row[f"{impl}_epoch_spread"] = r["epoch_spread"] if r else None
            row[f"{impl}_forward_ms"] = r["forward_ms"] if r else None
            row[f"{impl}_peak_mb"] = r["peak_mem_mb"] if r else None
            if impl in by and impl not in ok:
                row[f"{impl}_status"] = f"{by[impl]['status']}: {by[impl].get('reason', '')}"
        for base in IMPL_ORDER[1:]:
            row[f"speedup_vs_{base}"] = _div(row[f"{base}_epoch_ms"], row["fused_epoch_ms"])
            row[f"forward_speedup_vs_{base}"] = _div(row[f"{base}_forward_ms"], row["fused_forward_ms"])
            row[f"memory_ratio_vs_{base}"] = _div(row[f"{base}_peak_mb"], row["fused_peak_mb"])
        row["pyg_vs_unfused_speedup"] = _div(row["unfused_epoch_ms"], row["pyg_epoch_ms"])
        timed = [(row[f"{p}_epoch_ms"], p) for p in PEERS if row[f"{p}_epoch_ms"] is not None]
        lean = [(row[f"{p}_peak_mb"], p) for p in PEERS if row[f"{p}_peak_mb"] is not None]
        row["best_peer"] = min(timed)[1] if timed else None
        row["best_peer_epoch_ms"] = min(timed)[0] if timed else None
        row["speedup_vs_best"] = _div(row["best_peer_epoch_ms"], row["fused_epoch_ms"])
        row["leanest_peer"] = min(lean)[1] if lean else None
        row["leanest_peer_peak_mb"] = min(lean)[0] if lean else None
        row["memory_ratio_vs_leanest"] = _div(row["leanest_peer_peak_mb"], row["fused_peak_mb"])
        rows.append(row)
    return rows


def _largest(rows, layer, need):
    """Per width, the row on the largest graph where every key in ``need`` is measured."""
    best = {}
    for r in rows:
        if r["layer"] != layer or any(r.get(k) is None for k in need):
            continue
        if r["width"] not in best or r["E"] > best[r["width"]]["E"]:
            best[r["width"]] = r
    return [best[w] for w in sorted(best)]


def targets(results):
    """The issue's targets (reported, never asserted)."""
    out = []
    rows = results["ratios"]
    for r in _largest(rows, "gat", ["speedup_vs_pyg", "memory_ratio_vs_pyg"]):
        out.append(dict(target="GAT epoch >= 3x faster than PyG on the largest graph", where=_where(r),
                        measured=r["speedup_vs_pyg"], goal=3.0, met=r["speedup_vs_pyg"] >= 3.0))
        out.append(dict(target="GAT peak memory >= 5x less than PyG on the largest graph", where=_where(r),
                        measured=r["memory_ratio_vs_pyg"], goal=5.0, met=r["memory_ratio_vs_pyg"] >= 5.0))
    for r in _largest(rows, "gcn", ["speedup_vs_pyg"]):
        out.append(dict(target="GCN epoch >= 2x faster than PyG on the largest graph", where=_where(r),
                        measured=r["speedup_vs_pyg"], goal=2.0, met=r["speedup_vs_pyg"] >= 2.0))
    for r in rows:
        if r.get("speedup_vs_best") is not None:
            out.append(dict(target="epoch >= 1.5x faster than the best peer (issue 16)",
                            where=_where(r) + f", {r['threads']} thread(s), vs {IMPL_LABEL[r['best_peer']]}",
                            measured=r["speedup_vs_best"], goal=1.5, met=r["speedup_vs_best"] >= 1.5))
        goal = 2.0 if r["layer"] == "gat" else 1.0
        if r.get("memory_ratio_vs_dgl") is not None and r["layer"] in ("gcn", "sage", "appnp", "gat"):
            out.append(dict(target=f"peak memory {'<= half of' if goal > 1 else '<='} DGL's (issue 16)",
                            where=_where(r) + f", {r['threads']} thread(s)", measured=r["memory_ratio_vs_dgl"],
                            goal=goal, met=r["memory_ratio_vs_dgl"] >= goal))
    bw = [r for r in results["roofline"] if r.get("status") == "ok" and r["impl"] == "fused"
          and r["program"] in ("gcn_agg", "gcn_agg_dst")]
    if bw:
        E = max(r["E"] for r in bw)
        for r in sorted((r for r in bw if r["E"] == E), key=lambda r: (r["program"], r["width"])):
            order = ", edges in destination order" if r["program"] == "gcn_agg_dst" else ""
            out.append(dict(target="GCN aggregation bandwidth >= 70% of copy bandwidth (issue 16)",
                            where=f"{r['graph_label']}{order}, F={r['width']}, {r.get('threads', 1)} thread(s)",
                            measured=r["ratio_executed"], goal=0.7, met=r["ratio_executed"] >= 0.7))
    for r in results["latency"]:
        if r.get("phase") == "warm" and r.get("status") == "ok":
            out.append(dict(target="warm first call (forward + backward) < 100 ms",
                            where=f"{LAYER_LABEL[r['layer']]}, F={r['width']}, {r['graph']}",
                            measured=r["first_call_ms"], goal=100.0, met=r["first_call_ms"] < 100.0, unit="ms"))
    return out


def _where(r):
    return f"{r['graph_label']} ({r['E']:,} edges), F={r['width']}"


# -- markdown ----------------------------------------------------------------------------------
def _ms(x):
    if x is None:
        return "-"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _x(x):
    return "-" if x is None else f"{x:.2f}x"


def _mb(x):
    return "-" if x is None else f"{x:.0f}"


def _pct(x):
    return "-" if x is None else f"{100 * x:.0f}%"


def _time(ms):
    return "-" if ms is None else f"{ms / 1e3:.2f} s" if ms >= 1000 else f"{_ms(ms)} ms"


def readme_table(results) -> str:
    """The best-peer table as README.md shows it (``run.py --readme-table``), rows ordered by
    graph size, then layer and width."""
    layer_order = list(LAYER_LABEL)
    rows = [r for r in results["ratios"] if r.get("fused_epoch_ms") is not None and r.get("best_peer")]
    rows.sort(key=lambda r: (r["E"], r.get("threads") or 1, layer_order.index(r["layer"]), r["width"]))
    L = ["| graph | layer | F | threads | seastar epoch | best peer | peer epoch | best peer / seastar "
         "| spread seastar / peer | seastar peak | leanest peer | peer peak | leanest / seastar |",
         "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in rows:
        bp, lp = r["best_peer"], r["leanest_peer"]
        graph = r["graph_label"].replace("power law ", "")
        L.append(f"| {graph} | {LAYER_LABEL[r['layer']]} | {r['width']} | {r.get('threads') or 1} | "
                 f"{_time(r['fused_epoch_ms'])} | "
                 f"{IMPL_LABEL[bp]} | {_time(r['best_peer_epoch_ms'])} | **{_x(r['speedup_vs_best'])}** | "
                 f"{_pct(r['fused_epoch_spread'])} / {_pct(r[f'{bp}_epoch_spread'])} | "
                 f"{_mb(r['fused_peak_mb'])} MB | {IMPL_LABEL[lp] if lp else '-'} | "
                 f"{_mb(r['leanest_peer_peak_mb'])} MB | {_x(r['memory_ratio_vs_leanest'])} |")
    return "\n".join(L) + "\n"


def markdown(results) -> str:
    m = results["meta"]
    L = []
    L.append("# Seastar benchmarks: fused kernels vs DGL, PyTorch Geometric and unfused torch\n")
    L.append(f"Command: `{m['command']}` ({m['date']}, {m['wall_s']:.0f} s).  ")
    L.append(f"Machine: {m['cpu']}, {m['cpu_count']} cores; device `{m['device']}`, {m['threads']} thread(s) for "
             f"every implementation; torch {m['torch']}, Python {m['python']}.  ")
    for prev in m.get("previous_runs") or []:
        L.append(f"Merged with the earlier run `{prev.get('command')}` ({prev.get('date')}, {prev.get('rounds')} "
                 f"round(s), load average {prev.get('load_average_at_start')} -> {prev.get('load_average_at_end')}).  ")
    if m.get("load_average_at_start"):
        L.append(f"Load average (1, 5, 15 min) at the start {m['load_average_at_start']}, at the end "
                 f"{m.get('load_average_at_end')}: the machine is shared, so read the spread.  ")
    L.append(f"PyG: {m['pyg']}. matplotlib: {m['deps']['matplotlib']}.  ")
    L.append(f"{m['dgl']}\n")
    L.append(f"Model: {m['model']}. GAT: 4 heads x F/4 channels; APPNP: Linear(F, F) then K=10, alpha=0.1; "
             f"SAGE: mean; GIN: sum, MLP Linear-ReLU-Linear. Random features of width F. Times are medians of "
             f"{m['repeats']} epochs after {m['warmup'] + 1} warm-up epoch(s) in each process, one process per "
             f"configuration and round, then the median over {m.get('rounds', 1)} interleaved round(s). "
             + (m.get("memory_note", "Peak memory: the child's RSS high-water mark (VmHWM, reset after setup) "
                "during the steady training epochs (reset again after the untimed ones), less its RSS after the imports and "
                "less library pages faulted in meanwhile")
                .rstrip(".") + " (graph + features + model + training). ") +
             "Ratios > 1 favour seastar fused.\n")
    if m.get("graphs_not_run"):
        L.append("Graphs not run: " + "; ".join(f"{g} ({why})" for g, why in m["graphs_not_run"].items()) + "\n")

    rows = [r for r in results["ratios"] if any(r[f"{i}_epoch_ms"] is not None for i in IMPL_ORDER)]
    impls = [i for i in IMPL_ORDER if any(r[f"{i}_epoch_ms"] is not None for r in rows)]
    peers = [i for i in impls if i in PEERS]
    if peers:
        L.append("## Seastar fused against the best peer\n")
        L.append("Best peer = the fastest (time) or the leanest (memory) of "
                 + ", ".join(IMPL_LABEL[p] for p in peers) + " in each row; ratio = peer / seastar, "
                 "> 1 favours seastar. Epoch times are medians over rounds; spread = (max - min) / median "
                 "over the rounds of seastar's and the best peer's epoch time ('-': one round).\n")
        L.append("| graph | layer | F | threads | seastar ms | best peer | peer ms | time ratio | spread s / p "
                 "| seastar MB | leanest peer | peer MB | memory ratio |")
        L.append("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
        for r in rows:
            bp, lp = r["best_peer"], r["leanest_peer"]
            sp = r["fused_epoch_spread"]
            bsp = r[f"{bp}_epoch_spread"] if bp else None
            L.append(f"| {r['graph_label']} | {LAYER_LABEL[r['layer']]} | {r['width']} | {r['threads']} | "
                     f"{_ms(r['fused_epoch_ms'])} | {IMPL_LABEL[bp] if bp else '-'} | {_ms(r['best_peer_epoch_ms'])} | "
                     f"{_x(r['speedup_vs_best'])} | {_pct(sp)} / {_pct(bsp)} | {_mb(r['fused_peak_mb'])} | "
                     f"{IMPL_LABEL[lp] if lp else '-'} | {_mb(r['leanest_peer_peak_mb'])} | "
                     f"{_x(r['memory_ratio_vs_leanest'])} |")
        L.append("")
    if rows:  # none in a --roofline-only run
        L.append("## Training epoch (forward + backward + Adam step), ms\n")
        L.append("| graph | E | layer | F | threads | " + " | ".join(IMPL_LABEL[i] for i in impls)
                 + " | fused vs unfused | fused vs PyG |")
        L.append("| --- | ---: | --- | ---: | ---: | " + " | ".join("---:" for _ in impls) + " | ---: | ---: |")
        for r in rows:
            cells = " | ".join(_ms(r[f"{i}_epoch_ms"]) + (f" ±{_pct(r[f'{i}_epoch_spread'] / 2)}"
                                                         if r[f"{i}_epoch_spread"] else "") for i in impls)
            L.append(f"| {r['graph_label']} | {r['E']:,} | {LAYER_LABEL[r['layer']]} | {r['width']} | {r['threads']} | "
                     f"{cells} | {_x(r['speedup_vs_unfused'])} | {_x(r['speedup_vs_pyg'])} |")
        L.append("\n(± half the min-max spread over the rounds.)\n")
        L.append("## Forward pass (eval, no_grad), ms\n")
        L.append("| graph | layer | F | threads | " + " | ".join(IMPL_LABEL[i] for i in impls) + " |")
        L.append("| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in impls) + " |")
        for r in rows:
            L.append(f"| {r['graph_label']} | {LAYER_LABEL[r['layer']]} | {r['width']} | {r['threads']} | "
                     + " | ".join(_ms(r[f"{i}_forward_ms"]) for i in impls) + " |")
        L.append("\n## Peak memory of training, MB\n")
        L.append("| graph | layer | F | threads | " + " | ".join(IMPL_LABEL[i] for i in impls) + " | unfused / fused | "
                 "PyG / fused |")
        L.append("| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in impls) + " | ---: | ---: |")
        for r in rows:
            L.append(f"| {r['graph_label']} | {LAYER_LABEL[r['layer']]} | {r['width']} | {r['threads']} | "
                     + " | ".join(_mb(r[f"{i}_peak_mb"]) for i in impls)
                     + f" | {_x(r['memory_ratio_vs_unfused'])} | {_x(r['memory_ratio_vs_pyg'])} |")
    notrun = [r for r in summarise(results["train"]) if r.get("status") != "ok"]
    if notrun:
        L.append("\n### Configurations not measured\n")
        for r in notrun:
            L.append(f"* {r['graph_label']}, {LAYER_LABEL[r['layer']]}, F={r['width']}, {r['threads']} thread(s), "
                     f"{IMPL_LABEL[r['impl']]}: {r['status']}: {r.get('reason', '')}")

    roof = results["roofline"]
    if roof:
        L.append("\n## Bandwidth of the aggregation programs (forward of the program alone)\n")
        L.append("Bytes moved per call (formulas in `benchmarks/_child.py:roofline_bytes`): every gathered row "
                 "is counted at full size, index arrays at the graph's index width (int32), outputs written. "
                 "*moved* counts what the generated kernels execute (*passes*: traversals of the in-edges in "
                 "the generated source; GCN reads edge weights through the CSC slot's edge id, which with the "
                 "edges in destination order (`seastar.reorder_graph`) is the slot itself); *useful* is "
                 "the one-pass minimum. Copy "
                 "bandwidth: `torch.Tensor.copy_` of 256 MB, same threads, same process, read + write bytes. "
                 "Above 100% means the gathered rows are served from cache.\n")
        L.append("| graph | program | impl | F | threads | passes | time ms | moved GB/s | useful GB/s | copy GB/s | "
                 "moved / copy | useful / copy |")
        L.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in roof:
            if r.get("status") != "ok":
                continue
            moved = f"{r['gbps_executed']:.1f}" if r["impl"] == "fused" else "-"
            ratio = f"{100 * r['ratio_executed']:.0f}%" if r["impl"] == "fused" else "-"
            L.append(f"| {r['graph_label']} | {PROGRAM_LABEL[r['program']]} | "
                     f"{r['impl']} | {r['width']} | {r.get('threads', '-')} | {r['passes'] if r['impl'] == 'fused' else '-'} | "
                     f"{_ms(r['kernel_ms'])} | {moved} | {r['gbps_useful']:.1f} | "
                     f"{r['copy_gbps']:.1f} | {ratio} | {100 * r['ratio_useful']:.0f}% |")
    lat = results["latency"]
    if lat:
        L.append("\n## First-call latency of a fused layer (Cora)\n")
        L.append("Forward and backward of the first training step in a new process: tracing, lowering, "
                 "compiling (cold: empty `SEASTAR_CACHE_DIR`) or loading (warm: second process, same "
                 "folder) the kernels, and running them; steady state for comparison.\n")
        L.append("| layer | F | cache | first forward ms | first backward ms | first call ms | steady fwd + bwd ms |")
        L.append("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
        for r in lat:
            if r.get("status") != "ok":
                L.append(f"| {LAYER_LABEL[r['layer']]} | {r['width']} | {r['phase']} | {r['status']} | | | |")
                continue
            L.append(f"| {LAYER_LABEL[r['layer']]} | {r['width']} | {r['phase']} | {_ms(r['first_forward_ms'])} | "
                     f"{_ms(r['first_backward_ms'])} | {_ms(r['first_call_ms'])} | "
                     f"{_ms(r['steady_forward_ms'] + r['steady_backward_ms'])} |")
    if results["targets"]:
        L.append("\n## Targets (reported, not asserted)\n")
        L.append("| target | where | measured | met |")
        L.append("| --- | --- | ---: | --- |")
        for t in results["targets"]:
            meas = f"{t['measured']:.0f} ms" if t.get("unit") == "ms" else (
                f"{100 * t['measured']:.0f}%" if "bandwidth" in t["target"] else f"{t['measured']:.2f}x")
            L.append(f"| {t['target']} | {t['where']} | {meas} | {'yes' if t['met'] else 'no'} |")
    plots = m.get("plots") or []
    if plots:
        L.append("\n## Plots\n")
        for p in plots:
            L.append(f"![{p}]({p})")
    return "\n".join(L) + "\n"


# -- plots -------------------------------------------------------------------------------------
def plots(results, out):
    """scaling_F{w}.png (epoch time and peak memory vs E, one panel per layer) and roofline.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    summary = [r for r in summarise(results["train"]) if r.get("status") == "ok"]
    threads0 = min((r["threads"] for r in summary if r["threads"] is not None), default=None)
    train = [r for r in summary if r["threads"] == threads0]
    widths = sorted({r["width"] for r in train})
    layers = [lay for lay in LAYER_LABEL if any(r["layer"] == lay for r in train)]
    files += _ratio_plot(results, out, plt)
    for w in widths:
        fig, axes = plt.subplots(2, len(layers), figsize=(3.3 * len(layers), 5.6), squeeze=False)
        for j, layer in enumerate(layers):
            for impl in IMPL_ORDER:
                pts = sorted((r["num_edges"], r["epoch_ms"], r["peak_mem_mb"]) for r in train
                             if r["layer"] == layer and r["width"] == w and r["impl"] == impl)
                if not pts:
                    continue
                xs = [p[0] for p in pts]
                axes[0][j].plot(xs, [p[1] for p in pts], "o-", color=COLORS[impl], label=IMPL_LABEL[impl], ms=4)
                axes[1][j].plot(xs, [p[2] for p in pts], "o-", color=COLORS[impl], label=IMPL_LABEL[impl], ms=4)
            axes[0][j].set_title(f"{LAYER_LABEL[layer]}, F={w}", fontsize=9)
            for i in (0, 1):
                axes[i][j].set_xscale("log")
                axes[i][j].set_yscale("log")
                axes[i][j].grid(True, which="both", alpha=0.3)
                axes[i][j].tick_params(labelsize=7)
            axes[1][j].set_xlabel("edges E", fontsize=8)
        axes[0][0].set_ylabel("time per epoch, ms", fontsize=8)
        axes[1][0].set_ylabel("peak memory, MB", fontsize=8)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"Training epoch time and peak memory vs edges, feature width {w} "
                     f"({results['meta']['device']}, {threads0} thread(s))", fontsize=10)
        fig.tight_layout()
        name = f"scaling_F{w}.png"
        fig.savefig(os.path.join(out, name), dpi=80)
        plt.close(fig)
        files.append(name)
    roof = [r for r in results["roofline"] if r.get("status") == "ok"]
    if roof:
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        for (prog, impl), style in ((("gcn_agg", "fused"), "o-"), (("gcn_agg_dst", "fused"), "^-"),
                                    (("gat", "fused"), "s-"), (("gcn_agg", "unfused"), "o:"),
                                    (("gcn_agg_dst", "unfused"), "^:"), (("gat", "unfused"), "s:")):
            for w in sorted({r["width"] for r in roof}):
                pts = sorted((r["E"], 100 * r["ratio_useful"]) for r in roof
                             if r["program"] == prog and r["impl"] == impl and r["width"] == w)
                if pts:
                    label = f"{PROGRAM_SHORT[prog]} {impl} F={w}"
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label, ms=4)
        ax.axhline(100, color="k", lw=0.8)
        ax.axhline(70, color="k", lw=0.6, ls="--")  # the bandwidth target of issue 16
        ax.set_xscale("log")
        ax.set_xlabel("edges E", fontsize=8)
        ax.set_ylabel("useful bytes / time, % of copy bandwidth", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
        ax.set_title("Aggregation programs: effective bandwidth vs copy bandwidth", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "roofline.png"), dpi=80)
        plt.close(fig)
        files.append("roofline.png")
    return files


def _ratio_plot(results, out, plt):
    """best_peer.png: seastar's time and memory ratio against the best peer, one bar per row."""
    rows = [r for r in results["ratios"] if r.get("speedup_vs_best") is not None]
    if not rows:
        return []
    labels = [f"{LAYER_LABEL[r['layer']].split(' ')[0]} {r['graph_label'].replace('power law ', '')} "
              f"F={r['width']} t={r['threads']}" for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.28 * len(rows) + 1.6), sharey=True)
    for ax, key, peer_key, title in ((axes[0], "speedup_vs_best", "best_peer", "epoch time: best peer / seastar"),
                                     (axes[1], "memory_ratio_vs_leanest", "leanest_peer",
                                      "peak memory: leanest peer / seastar")):
        vals = [r.get(key) or 0 for r in rows]
        ys = list(range(len(rows)))
        ax.barh(ys, vals, color=[COLORS.get(r.get(peer_key), "grey") for r in rows])
        ax.axvline(1.0, color="k", lw=0.8)
        if key == "speedup_vs_best":
            ax.axvline(1.5, color="k", lw=0.6, ls="--")
        ax.set_xscale("log")
        from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter
        lo, hi = min([v for v in vals if v > 0] or [1]), max(vals + [1.6])
        ax.xaxis.set_major_locator(FixedLocator([t for t in (0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 10, 20)
                                                 if lo / 1.5 <= t <= hi * 1.5]))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(title + " (> 1: seastar better; colour = that peer)", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    axes[0].set_yticks(list(range(len(rows))))
    axes[0].set_yticklabels(labels, fontsize=7)
    axes[0].invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[p]) for p in PEERS]
    axes[1].legend(handles, [IMPL_LABEL[p] for p in PEERS], fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "best_peer.png"), dpi=80)
    plt.close(fig)
    return ["best_peer.png"]
