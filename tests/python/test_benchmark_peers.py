"""The peer comparison's bookkeeping in benchmarks/: rounds summarised to median and spread,
the best peer chosen per row, --append merging, and the child-process helper's failure records.
Pure Python on hand-made records (no peer library needed); the measurements themselves live in
benchmarks/results/."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import _report  # noqa: E402
import _spawn  # noqa: E402


def _rec(impl, rnd, epoch_ms, peak_mb, layer="gcn", threads=1, status="ok"):
    r = dict(graph="pl100k", graph_label="power law 100k", num_nodes=100, num_edges=2000, layer=layer, width=16,
             threads=threads, impl=impl, device="cpu", round=rnd, status=status)
    if status == "ok":
        r.update(epoch_ms=epoch_ms, forward_ms=epoch_ms / 3, peak_mem_mb=peak_mb, first_epoch_ms=2 * epoch_ms,
                 peak_first_epoch_mb=peak_mb + 1)
    else:
        r["reason"] = "did not fit"
    return r


def test_summary_takes_the_median_over_rounds_and_the_min_max_spread():
    train = [_rec("fused", i, ms, 100) for i, ms in enumerate((10.0, 30.0, 12.0))]
    (s,) = _report.summarise(train)
    assert s["epoch_ms"] == 12.0 and s["epoch_ms_min"] == 10.0 and s["epoch_ms_max"] == 30.0
    assert s["epoch_spread"] == pytest.approx(20.0 / 12.0)
    assert s["rounds"] == 3 and s["rounds_ok"] == 3


def test_best_peer_is_the_fastest_and_leanest_is_the_smallest_and_unfused_is_no_peer():
    train = []
    for rnd in range(2):
        train += [_rec("fused", rnd, 20.0, 300), _rec("dgl", rnd, 30.0 + rnd, 200),
                  _rec("pyg_csr", rnd, 50.0, 150), _rec("pyg", rnd, 90.0, 900), _rec("unfused", rnd, 5.0, 50),
                  _rec("pyg_compile", rnd, 0, 0, status="timeout")]
    (row,) = _report.ratios(train)
    assert row["best_peer"] == "dgl" and row["best_peer_epoch_ms"] == pytest.approx(30.5)
    assert row["speedup_vs_best"] == pytest.approx(30.5 / 20.0)
    assert row["leanest_peer"] == "pyg_csr" and row["memory_ratio_vs_leanest"] == pytest.approx(150 / 300)
    assert row["speedup_vs_unfused"] == pytest.approx(5.0 / 20.0)  # reported, but not a peer
    assert row["pyg_compile_epoch_ms"] is None and row["pyg_compile_status"].startswith("timeout")
    md = _report.markdown(dict(meta=dict(command="x", date="d", wall_s=1, cpu="c", cpu_count=2, device="cpu",
                                         threads=[1], torch="t", python="p", pyg="2", deps=dict(matplotlib="no"),
                                         dgl="DGL 2.1.0", model="m", repeats=2, warmup=0, rounds=2),
                               train=train, ratios=[row], targets=[], latency=[], roofline=[]))
    assert "| GCN | 16 | 1 | 20.0 | DGL | 30.5 | 1.52x |" in md
    assert "PyG + torch.compile: timeout" in md


def test_readme_table_shows_the_best_peer_rows_smaller_graphs_first():
    train = [_rec("fused", 0, 1500.0, 300), _rec("dgl", 0, 3000.0, 200)]
    big = [dict(r, graph="pl1m", graph_label="power law 1M", num_edges=20000) for r in train]
    rows = _report.ratios(big + train)
    table = _report.readme_table(dict(ratios=rows)).splitlines()
    assert len(table) == 4 and table[1].startswith("| --- |")
    assert table[2] == ("| 100k | GCN | 16 | 1 | 1.50 s | DGL | 3.00 s | **2.00x** | - / - | 300 MB | DGL | 200 MB "
                        "| 0.67x |")
    assert table[3].startswith("| 1M | GCN | 16 | 1 |")


def test_rows_are_kept_apart_per_thread_count():
    train = [_rec("fused", 0, 10.0, 1, threads=1), _rec("dgl", 0, 20.0, 1, threads=1),
             _rec("fused", 0, 8.0, 1, threads=2), _rec("dgl", 0, 4.0, 1, threads=2)]
    rows = {r["threads"]: r for r in _report.ratios(train)}
    assert rows[1]["speedup_vs_best"] == pytest.approx(2.0) and rows[2]["speedup_vs_best"] == pytest.approx(0.5)


def test_append_keeps_records_this_run_did_not_measure(tmp_path):
    import run
    old = dict(meta=dict(command="first", date="d0", rounds=3), latency=[], roofline=[],
               train=[_rec("fused", 0, 10.0, 1), _rec("dgl", 0, 20.0, 1), _rec("fused", 0, 5.0, 1, layer="gat")])
    (tmp_path / "results.json").write_text(json.dumps(old))
    new = dict(meta=dict(command="second"), latency=[], roofline=[], train=[_rec("fused", 0, 12.0, 1)])
    run.merge_previous(new, str(tmp_path))
    got = sorted((r["layer"], r["impl"], r["epoch_ms"]) for r in new["train"])
    assert got == [("gat", "fused", 5.0), ("gcn", "dgl", 20.0), ("gcn", "fused", 12.0)]
    assert new["meta"]["previous_runs"][0]["command"] == "first"


def _script(tmp_path, body):
    p = tmp_path / "child.py"
    p.write_text("import json, os, sys, time\n" + body)
    return str(p)


def test_spawn_reads_the_last_json_line_and_passes_the_thread_count(tmp_path):
    s = _script(tmp_path, "print('noise')\nprint(json.dumps(dict(status='ok', cfg=json.loads(sys.argv[2]), "
                          "omp=os.environ['OMP_NUM_THREADS'])))\n")
    res = _spawn.spawn_json(s, dict(a=1), threads=3, timeout=60)
    assert res["status"] == "ok" and res["cfg"] == dict(a=1) and res["omp"] == "3" and res["child_wall_s"] > 0


def test_spawn_reports_a_crash_a_kill_and_a_timeout_as_records(tmp_path):
    crash = _spawn.spawn_json(_script(tmp_path, "raise ValueError('bad config')\n"), {}, 1, 60)
    assert crash["status"] == "failed" and "ValueError: bad config" in crash["reason"]
    killed = _spawn.spawn_json(_script(tmp_path, "import signal; os.kill(os.getpid(), signal.SIGKILL)\n"), {}, 1, 60)
    assert killed["status"] == "killed" and "out of memory" in killed["reason"]
    slow = _spawn.spawn_json(_script(tmp_path, "time.sleep(30)\n"), {}, 1, timeout=1)
    assert slow["status"] == "timeout"
