"""Smoke test of the R-GCN benchmark: ``benchmarks/bench_rgcn.py --quick --num-bases 2`` end to end
(with bases, so that every seastar path, ``per_basis`` included, runs and is verified).

Runs in a subprocess. CI does not install PyG (benchmarks/requirements.txt): its configurations
must then be recorded as unavailable, with null ratios, and everything else must still run.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEASTAR = ("seastar_per_edge", "seastar_per_pair", "seastar_per_run", "seastar_per_basis", "seastar_auto")


def test_quick_rgcn_benchmark_writes_results_with_ratios(tmp_path):
    out = tmp_path / "bench_rgcn.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_rgcn.py"), "--quick", "--threads", "1",
           "--num-bases", "2", "--out", str(out)]
    # PyG's R-GCN is the slowest configuration by far; it is measured by the benchmark itself,
    # the smoke test checks the harness (PyG treated as unavailable, its rows still present)
    cmd.append("--no-pyg")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, f"bench_rgcn.py failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"

    res = json.loads(out.read_text())
    assert set(res) >= {"meta", "graph", "verify", "results", "ratios"}
    assert res["meta"]["quick"] is True and res["meta"]["threads"] == 1 and res["meta"]["num_bases"] == 2
    assert {"nodes", "edges", "relations", "features", "src_relation_pairs"} <= set(res["graph"])
    assert res["graph"]["edges"] > 0 and res["graph"]["relations"] > 1

    verify = res["verify"]
    assert verify["passed"] is True and verify["dtype"] == "float64"
    assert {"loop", *SEASTAR} <= set(verify["impls"])
    for v in verify["impls"].values():
        assert v["status"] == "ok" and v["max_abs_diff"] <= verify["tol"]

    by_impl = {t["impl"]: t for t in res["results"]}
    assert set(by_impl) == {"loop", "pyg", "pyg_fast", *SEASTAR}
    for impl in ("loop", *SEASTAR):
        t = by_impl[impl]
        assert t["status"] == "ok", t
        assert t["epoch_ms"] > 0 and t["forward_ms"] > 0 and t["backward_ms"] > 0
        assert t["peak_rss_mb"] > 0 and t["peak_mem_mb"] is not None
        assert "step_added_mb" in t
    for s in SEASTAR[:-1]:
        assert by_impl[s]["mode_used"] == s[len("seastar_"):]
    assert by_impl["seastar_auto"]["mode_used"] in {s[len("seastar_"):] for s in SEASTAR[:-1]}

    ratios = {(q["seastar"], q["baseline"]): q for q in res["ratios"]}
    assert set(ratios) == {(s, b) for s in SEASTAR for b in ("loop", "pyg", "pyg_fast")}
    for s in SEASTAR:
        q = ratios[(s, "loop")]
        assert q["speedup"] > 0 and q["peak_rss_ratio"] > 0

    pyg = res["meta"]["pyg"]
    # --no-pyg: PyG's rows are present and marked unavailable, without ratios
    assert pyg.startswith("unavailable")
    assert all(by_impl[i]["status"].startswith("unavailable") for i in ("pyg", "pyg_fast"))
    assert all(ratios[(s, b)]["speedup"] is None for s in SEASTAR for b in ("pyg", "pyg_fast"))
    assert "pyg" not in verify["impls"]
