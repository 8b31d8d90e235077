"""Smoke test of the benchmark suite: ``benchmarks/run.py --quick`` end to end.

Runs in a subprocess with ``--no-install`` (CI does not install benchmarks/requirements.txt and
must not reach for the network): PyG and matplotlib are used when importable and recorded as
unavailable otherwise.
"""
import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quick_benchmark_writes_results_with_ratios(tmp_path):
    out = tmp_path / "bench"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick", "--no-install", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert r.returncode == 0, f"run.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"

    results = json.loads((out / "results.json").read_text())
    md = (out / "results.md").read_text()

    train = results["train"]
    assert {(t["layer"], t["impl"]) for t in train} >= {("gcn", "fused"), ("gcn", "unfused"),
                                                         ("gat", "fused"), ("gat", "unfused")}
    assert all(t["graph"] == "cora" for t in train)
    for t in train:
        if t["impl"] in ("fused", "unfused"):
            assert t["status"] == "ok", t
            assert t["epoch_ms"] > 0 and t["forward_ms"] > 0 and t["peak_mem_mb"] > 0

    ratios = {(r["layer"], r["width"]): r for r in results["ratios"]}
    assert set(ratios) == {("gcn", 16), ("gat", 16)}
    for r in ratios.values():
        assert r["speedup_vs_unfused"] > 0 and r["memory_ratio_vs_unfused"] > 0

    pyg = results["meta"]["pyg"]
    if importlib.util.find_spec("torch_geometric") is None:
        assert pyg.startswith("unavailable")
        assert all(t["impl"] != "pyg" for t in train)
        assert all(r["speedup_vs_pyg"] is None for r in ratios.values())
    elif not pyg.startswith("unavailable"):
        assert all(r["speedup_vs_pyg"] > 0 for r in ratios.values())

    assert "DGL" in results["meta"]["dgl"]
    assert any(r["phase"] == "warm" and r["status"] == "ok" for r in results["latency"])
    assert any(r.get("status") == "ok" and r["copy_gbps"] > 0 for r in results["roofline"])

    assert "fused vs unfused" in md and "x |" in md
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "scaling_F16.png").stat().st_size > 0


def test_roofline_only_runs_the_bandwidth_at_every_thread_count_and_nothing_else(tmp_path):
    out = tmp_path / "roofline"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--roofline-only", "--graphs", "cora",
           "--widths", "16", "--impls", "fused", "--threads", "1,2", "--repeats", "2", "--no-install",
           "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"run.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    results = json.loads((out / "results.json").read_text())
    assert results["train"] == [] and results["latency"] == []
    ok = [row for row in results["roofline"] if row.get("status") == "ok"]
    assert {(row["program"], row["threads"]) for row in ok} == {(p, t) for p in ("gcn_agg", "gcn_agg_dst", "gat")
                                                                for t in (1, 2)}
    assert all(row["kernel_ms"] > 0 and row["copy_gbps"] > 0 for row in ok)
    md = (out / "results.md").read_text()
    assert "Bandwidth of the aggregation programs" in md and "## Training epoch" not in md
    assert ">= 70% of copy bandwidth" in md

    bad = subprocess.run(cmd[:2] + ["--roofline-only", "--no-roofline", "--out", str(out)], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert bad.returncode != 0 and "--roofline-only" in bad.stderr


def test_typed_paths_benchmark_times_every_path_and_the_choice(tmp_path):
    out = tmp_path / "typed_paths.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_typed_paths.py"), "--nodes", "50",
           "--edges", "400", "--widths", "4", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"bench_typed_paths.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    rows = json.loads(out.read_text())["rows"]
    assert [row["x_grad"] for row in rows] == [True, False]
    for row in rows:
        assert set(row["rgcn_ms"]) == {"per_edge", "per_pair", "per_run"} and set(row["hgt_ms"]) == {"per_edge", "per_pair"}
        assert row["rgcn_auto"] in row["rgcn_ms"] and row["hgt_auto"] in row["hgt_ms"]
        assert row["rgcn_regret"] >= 1.0 and row["hgt_regret"] >= 1.0


def test_breakdown_splits_the_epoch_into_dense_ops_and_the_rest(tmp_path):
    """seastar alone on the 10k graph: the dense part is a real share of the profiled epoch and
    the two parts make it up; the summary names no lead without a peer."""
    out = tmp_path / "breakdown.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_breakdown.py"), "--graph", "pl10k",
           "--layers", "gcn", "--widths", "16", "--impls", "fused", "--rounds", "1", "--repeats", "2",
           "--no-install", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"bench_breakdown.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    res = json.loads(out.read_text())
    (row,) = res["rows"]
    assert row["status"] == "ok", row
    assert 0 < row["dense_ms"] < row["profiled_epoch_ms"], row
    assert abs(row["dense_ms"] + row["rest_ms"] - row["profiled_epoch_ms"]) < 1e-3, row
    assert row["top_dense_ms"] and all(k.startswith("aten::") for k in row["top_dense_ms"]), row
    (entry,) = res["summary"]["table"]
    assert entry["best_peer"] is None and entry["lead"] is None


def test_threads_benchmark_compares_the_governor_on_and_off(tmp_path):
    out = tmp_path / "threads.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_threads.py"), "--num-nodes", "2000",
           "--avg-degree", "5", "--width", "16", "--layer", "sage", "--busy", "0", "--repeats", "2",
           "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"bench_threads.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    result = json.loads(out.read_text())
    setups = {(row["what"], row["threads"], row["governor"]) for row in result["rows"]}
    assert setups == {(w, t, g) for w in ("epoch", "propagation") for t, g in ((1, True), (2, True), (2, False))}
    for row in result["rows"]:
        assert len(row["seconds"]) == 2 and min(row["seconds"]) > 0
        assert row["threads_after"] == [1, 1] if row["threads"] == 1 else len(row["threads_after"]) == 2
    assert set(result["thread_governor_stats"]["0"]) >= {"other_cores", "lowered", "restored"}
    assert "governor off" in r.stdout and "thread governor after the block" in r.stdout


def test_weighted_benchmark_times_each_implementation_and_the_ratio(tmp_path):
    out = tmp_path / "weighted.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_weighted.py"), "--num-nodes", "2000",
           "--avg-degree", "5", "--widths", "16", "--rounds", "1", "--repeats", "2", "--no-install",
           "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"bench_weighted.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    result = json.loads(out.read_text())
    impls = ("seastar", "seastar_cached", "pyg", "pyg_cached", "pyg_csr_cached", "dgl", "dgl_cached")
    assert {(row["layer"], row["impl"]) for row in result["rows"]} == {
        (layer, impl) for layer in ("gcn", "appnp") for impl in impls}
    pyg = importlib.util.find_spec("torch_geometric") is not None
    for row in result["rows"]:
        if row["impl"] == "dgl_cached" and row["layer"] == "appnp":
            assert row["status"] == "n/a"
        elif row["impl"].startswith("dgl"):  # DGL's environment may not exist (never installed here)
            assert row["status"] in ("ok", "unavailable"), row
        elif row["impl"].startswith("seastar") or pyg:
            assert row["status"] == "ok", row
        else:
            assert row["status"] == "unavailable"
        if row["status"] == "ok":
            assert len(row["epoch_ms_all"]) == 2 and row["epoch_ms"] > 0 and row["first_epoch_ms"] > 0
    for line in result["summary"]:
        assert line["seastar"]["median_ms"] > 0 and line["seastar_cached"]["median_ms"] > 0
        if pyg:
            assert line["seastar_vs_best_peer"] > 0 and line["seastar_cached_vs_best_peer"] > 0


def test_compile_minibatch_benchmark_pairs_eager_and_compiled_steps(tmp_path):
    out = tmp_path / "compile_minibatch.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_compile_minibatch.py"), "--quick", "--models", "sage",
           "--backend", "aot_eager", "--prefetch", "0", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"bench_compile_minibatch.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    data = json.loads(out.read_text())
    assert data["meta"]["prefetch"] == 0
    (res,) = data["results"]
    assert res["model"] == "sage" and res["batches"] == 8 and res["graph_breaks"] == 0 and res["compiles"] >= 1
    ratio = res["paired_ratio"]
    assert 0 < ratio["q1"] <= ratio["median"] <= ratio["q3"]
    assert res["from_batch_3"]["compiled"]["sum_s"] > 0 and res["eager_over_compiled"] > 0
    # each change of torch's thread count by the governor is a compile: the report says how many
    assert set(res["thread_governor"]) == {"lowered", "restored"}
    assert res["compiles"] <= 2 + res["thread_governor"]["lowered"] + res["thread_governor"]["restored"]


def test_first_compile_benchmark_times_each_call_and_its_compile(tmp_path):
    out = tmp_path / "first_compile.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_first_compile.py"), "--rounds", "1",
           "--programs", "gatv2", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, f"bench_first_compile.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    result = json.loads(out.read_text())
    assert [x["program"] for x in result["rounds"]] == ["gatv2"]
    for rec in result["rounds"]:
        # a fresh cache: both calls compile, and each compile is part of its call's time
        assert rec["forward_kernels"] >= 1 and rec["backward_kernels"] >= 1
        assert 0 < rec["forward_compile_s"] <= rec["forward_s"] and 0 < rec["backward_compile_s"] <= rec["backward_s"]
    assert set(result["summary"]) == {"gatv2"}
    bad = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_first_compile.py"), "--programs",
                          "gin9", "--out", str(out)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert bad.returncode != 0 and "unknown program ['gin9']" in bad.stderr


def test_user_layers_benchmark_times_both_and_the_ratio(tmp_path):
    """bench_user_layers.py: the tutorial's GATv2 and seastar.nn's GINEConv against PyG's on a
    tiny graph (plumbing only: the numbers are the committed run's business)."""
    if importlib.util.find_spec("torch_geometric") is None:
        import pytest
        pytest.skip("PyTorch Geometric is not installed")
    out = tmp_path / "user_layers.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_user_layers.py"), "--num-nodes", "300",
           "--num-edges", "2000", "--rounds", "2", "--repeats", "1", "--layers", "gatv2,GINEConv", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"bench_user_layers.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    result = json.loads(out.read_text())
    assert [line["layer"] for line in result["summary"]] == ["gatv2", "GINEConv"]
    for line in result["summary"]:
        assert line["ratio_pyg_over_seastar"] > 0
        assert line["ratio_spread"][0] <= line["ratio_pyg_over_seastar"] <= line["ratio_spread"][1]
        assert line["seastar"]["backward_over_forward"] > 0
    assert {(row["layer"], row["impl"], row["round"]) for row in result["rows"]} == {
        (name, i, r) for name in ("gatv2", "GINEConv") for i in ("seastar", "pyg") for r in (0, 1)}
    assert "PyG / Seastar" in r.stdout
