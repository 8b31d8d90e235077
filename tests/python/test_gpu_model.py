"""The GPU models that need no GPU (seastar.gpu_model): the static traffic of generated kernels
against hand counts, the load-imbalance model on graphs with known answers, NVRTC's registers
for every zoo kernel, and the two scripts built on them (benchmarks/gpu_model.py,
benchmarks/bench_gpu.py --smoke on the CPU)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import seastar as ss
from seastar import gpu_model

from models import MODELS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NVRTC, WHY_NOT = gpu_model.nvrtc_status()


def _compiled(name, graph=None):
    graph = graph or ss.Graph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4)
    model = MODELS[name]
    t = {k: v.requires_grad_() for k, v in model.make_inputs(graph).items()}
    return model.program._compiled(graph, t)


def _terms(launch):
    return {(t["what"], t["per"], t["write"]): t["bytes"] for t in launch["traffic"]}


# -- traffic -----------------------------------------------------------------------------------
def test_gcn_traffic_is_the_hand_count():
    # gcn: out[v] = sum_e h[src] * w[e], h [N, 3], w [E, 1]; float32, int32 indices
    c = _compiled("gcn")
    (fwd,) = gpu_model.launches(c, "forward")
    assert fwd["what"] == "traversal of in-edges"
    assert _terms(fwd) == {
        ("graph in_order", "vertex", False): 4, ("graph in_ptr", "vertex", False): 8,   # the centre's slot, offsets
        ("graph in_nbr", "edge", False): 4, ("graph in_eid", "edge", False): 4,         # source id, edge id
        ('input "h"', "edge", False): 12, ('input "w"', "edge", False): 4,              # h[src], w[eid]
        ("output 0", "vertex", True): 12}                                               # out[v]
    s = gpu_model.traffic_summary(fwd)
    assert (s["bytes_per_edge"], s["bytes_per_vertex"], s["edge_gathered"], s["passes"]) == (24, 24, 16, 1)
    assert gpu_model.kernel_bytes(fwd, 10, 100) == 24 * 100 + 24 * 10

    # backward: grad h over out-edges (source-parallel), grad w per edge
    by_what = {l["what"]: l for l in gpu_model.launches(c, "backward")}
    out_t = by_what["traversal of out-edges"]
    assert _terms(out_t) == {
        ("graph out_order", "vertex", False): 4, ("graph out_ptr", "vertex", False): 8,
        ("graph out_nbr", "edge", False): 4, ("graph out_eid", "edge", False): 4,
        ("grad_output 0", "edge", False): 12, ('input "w"', "edge", False): 4,
        ("output 0", "vertex", True): 12}
    edge_map = by_what["per-edge map"]
    assert _terms(edge_map) == {
        ("graph src", "edge", False): 4, ("graph dst", "edge", False): 4,
        ('input "h"', "edge", False): 12, ("grad_output 0", "edge", False): 12, ("output 1", "edge", True): 4}


def test_gat_traffic_is_the_hand_count():
    # gat: one online-softmax pass; h [N, 2, 3], el, er [N, 2, 1]
    (fwd,) = gpu_model.launches(_compiled("gat"), "forward")
    t = _terms(fwd)
    per_edge = {k: v for k, v in t.items() if k[1] == "edge"}
    assert per_edge == {("graph in_nbr", "edge", False): 4, ('input "el"', "edge", False): 8,
                        ('input "h"', "edge", False): 24}  # no edge id: nothing is read per edge id
    assert t[('input "er"', "vertex", False)] == 8 and t[("output 0", "vertex", True)] == 24
    s = gpu_model.traffic_summary(fwd)
    assert s["bytes_per_edge"] == 36 and s["edge_gathered"] == 32 and s["passes"] == 1
    assert s["bytes_per_vertex"] == 4 + 8 + 8 + 24 + sum(v for k, v in t.items() if k[1] == "vertex" and k[2]) - 24


def test_every_zoo_kernel_has_traffic_and_later_passes_read_again():
    for name in MODELS:
        c = _compiled(name, ss.Graph.from_edge_index(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4,
                                                     edge_type=torch.tensor([0, 1, 0, 1]),
                                                     node_type=torch.tensor([0, 1, 0, 1]),
                                                     num_edge_types=2, num_node_types=2))
        if c.kernels.unsupported:
            continue
        for d in gpu_model.directions(c):
            for l in gpu_model.launches(c, d):
                s = gpu_model.traffic_summary(l)
                assert s["bytes_per_edge"] + s["bytes_per_vertex"] + s["bytes_per_launch"] > 0, (name, d, l["name"])
                if l["what"].startswith("traversal"):
                    assert s["vertex_read"] >= 12, (name, d, l["name"])  # its slot and offsets
                    # an edge loop that reads nothing is compiled away: no pass, no bytes per edge
                    assert (s["edge_read"] > 0) == (s["edge_passes"] > 0), (name, d, l["name"])
                    # a pass over the edges reads its neighbours' rows anew
                    for p in range(1, s["passes"]):
                        assert any(t["pass"] == p and t["per"] == "edge" for t in l["traffic"]), (name, d, l["name"])


# -- load imbalance ----------------------------------------------------------------------------
def test_schedule_takes_tasks_in_order_as_workers_free_up():
    assert gpu_model.schedule([5, 1, 1, 1, 1, 1], 2).tolist() == [5, 5]
    assert gpu_model.schedule([3, 2, 2], 4).tolist() == [3, 2, 2, 0]
    assert gpu_model.schedule([4, 3, 2, 1, 1], 2).tolist() == [6, 5]  # 4+2, 3+1+1
    with pytest.raises(ValueError, match="workers"):
        gpu_model.schedule([1], 0)


def _warp_launch(what="traversal of in-edges"):
    # one warp per centre, blocks of 8 warps, as choose_mapping gives widths 32..255
    return dict(name="k", what=what, items="vertices", count=0, group_threads=32, block_threads=256,
                groups_per_block=8, shared_bytes=0,
                traffic=[dict(what="x", buffer=0, per="edge", write=False, gathered=True, bytes=4, **{"pass": 0})])


def test_a_hub_makes_its_block_the_busiest_by_the_known_ratio():
    one_sm = gpu_model.Device("one SM", sms=1)  # 2048 / 256 = 8 resident blocks: 64 warps
    D, N = 56, 64
    din = np.zeros(N, np.int64)
    din[5] = D
    dout = np.zeros(N, np.int64)
    dout[:D] = 1
    r = gpu_model.load_imbalance(_warp_launch(), din, dout, one_sm)
    assert (r["blocks"], r["workers"]) == (8, 64)
    # 64 tasks for 64 warps: the hub's warp does D + 1, the others 1; block 0 holds it and 7 more
    assert r["busiest_worker_over_mean"] == pytest.approx((D + 1) / ((D + 64) / 64))
    assert r["busiest_block_over_mean"] == pytest.approx((D + 8) / ((D + 64) / 8))
    # source-parallel: D sources of out-degree 1, the rest 0: every warp one task of cost 1 or 2
    r = gpu_model.load_imbalance(_warp_launch("traversal of out-edges"), din, dout, one_sm)
    assert r["busiest_block_over_mean"] == pytest.approx(16 / ((2 * D + (N - D)) / 8))


def test_a_hub_split_over_its_block_by_the_known_ratio():
    """The same hub with the hub path (blocks of 16 warps): the hub's block walks ceil(D / 16)
    edges per warp, plus one combine step, before its warps take the rest of the centres."""
    one_sm = gpu_model.Device("one SM", sms=1)  # 2048 / 512 = 4 resident blocks: 64 warps
    D, N = 160, 64
    din = np.zeros(N, np.int64)
    din[5] = D
    launch = dict(_warp_launch(), block_threads=512, groups_per_block=16, hub_degree=100)
    r = gpu_model.load_imbalance(launch, din, din[::-1].copy(), one_sm)
    assert (r["blocks"], r["workers"], r["hubs"]) == (4, 64, 1)
    hub = D / 16 + 1 + 1  # its slice, the centre, one combine
    # 63 centres of cost 1 go to the 48 idle warps first, then to the hub block's 16 once free:
    # the 15 left over land on idle warps, which end at 2
    per_warp = [hub] * 16 + [2] * 15 + [1] * 33
    assert r["largest_task_over_mean_worker"] == pytest.approx(hub / (sum(per_warp) / 64))
    assert r["busiest_block_over_mean"] == pytest.approx(16 * hub / (sum(per_warp) / 4))
    without = gpu_model.load_imbalance(dict(launch, hub_degree=0), din, din[::-1].copy(), one_sm)
    assert without["hubs"] == 0 and without["busiest_worker_over_mean"] > 2 * r["busiest_worker_over_mean"]


def test_hub_pieces_spread_a_parameter_gradient_over_the_chunks():
    """A chunks traversal (parameter-gradient partial sums) with a hub path: the hub of D edges
    becomes ceil(D / PE) items of PE = ceil(E / (2 NB)) edges, taken by consecutive chunks."""
    one_sm = gpu_model.Device("one SM", sms=1)
    N, D, NB = 64, 120, 8
    din = np.ones(N, np.int64)
    din[5] = D  # E = 183: PE = ceil(183 / 16) = 12, so 10 pieces of 12 edges
    launch = dict(_warp_launch(), items="chunks", count=NB, hub_degree=100)
    assert ss._C.FusedProgram.cuda_hub_piece_edges(launch, N, int(din.sum())) == 12
    r = gpu_model.load_imbalance(launch, din, din, one_sm)
    # items: 10 pieces (12 + 1 each), then the 63 centres of cost 2; item q to chunk q mod NB
    chunks = np.zeros(NB)
    np.add.at(chunks, np.arange(10) % NB, 13)
    np.add.at(chunks, (10 + np.arange(63)) % NB, 2)
    assert r["largest_task"] == pytest.approx(chunks.max())
    without = gpu_model.load_imbalance(dict(launch, hub_degree=0), din, din, one_sm)
    assert without["largest_task"] == pytest.approx(D + 1 + 7 * 2)  # chunk 0: the hub and 7 more centres


def test_hub_workers_take_the_hubs_of_a_parameter_gradient_with_accumulators():
    """A chunks traversal with hub workers (partial sums and accumulators): worker w takes hubs
    w, w + HW, ..., a 16-warp block each, every warp of it a slice of each hub (ceil(D / 16)
    edges, the centre, one combine); the chunks then add up the other centres."""
    one_sm = gpu_model.Device("one SM", sms=1)  # 4 resident blocks of 512 threads: 64 warps
    N, NB = 64, 64
    din = np.ones(N, np.int64)
    din[5], din[9] = 160, 96  # two hubs: 160 / 16 + 2 = 12 and 96 / 16 + 2 = 8 per warp
    launch = dict(_warp_launch(), items="chunks", count=NB, block_threads=512, groups_per_block=16,
                  hub_degree=64, hub_workers=1)
    r = gpu_model.load_imbalance(launch, din, din, one_sm)
    assert (r["blocks"], r["workers"], r["hubs"], r["largest_task"]) == (4, 64, 2, 20)
    # one worker: both hubs on one block's 16 warps (20 each); the 62 other centres (cost 2,
    # a chunk each) go to the 48 idle warps first, then 14 more to those
    per_warp = [20] * 16 + [4] * 14 + [2] * 34
    assert r["busiest_worker_over_mean"] == pytest.approx(20 / (sum(per_warp) / 64))
    two = gpu_model.load_imbalance(dict(launch, hub_workers=2), din, din, one_sm)
    assert (two["hubs"], two["largest_task"]) == (2, 12)  # a worker each: 12 and 8
    assert two["busiest_worker_over_mean"] < r["busiest_worker_over_mean"]
    pieces = gpu_model.load_imbalance(dict(launch, hub_workers=0), din, din, one_sm)
    assert pieces["hubs"] == 0  # hub_workers 0: the hubs are cut into pieces instead


def test_uniform_degrees_are_balanced_and_a_real_launch_reads_its_mapping():
    N, k = 4096, 7
    din = np.full(N, k, np.int64)
    r = gpu_model.load_imbalance(_warp_launch(), din, din)
    assert r["busiest_block_over_mean"] == pytest.approx(1.0, abs=0.02)
    # the zoo's GCN at F=3: groups of 4 lanes, 8 centres per warp take, one block on a 4-cycle
    (fwd,) = gpu_model.launches(_compiled("gcn"), "forward")
    assert fwd["group_threads"] == 4
    cyc = np.ones(4, np.int64)
    r = gpu_model.load_imbalance(fwd, cyc, cyc)
    assert (r["blocks"], r["busiest_block_over_mean"]) == (1, 1.0)
    assert r["busiest_worker_over_mean"] == pytest.approx(fwd["block_threads"] // 32)  # one warp of 8 works


def test_degrees_reject_bad_input():
    assert [d.tolist() for d in gpu_model.degrees(np.array([[0, 0, 1], [1, 2, 2]]), 3)] == [[0, 1, 2], [2, 1, 0]]
    with pytest.raises(ValueError, match=r"\[2, E\]"):
        gpu_model.degrees(np.zeros((3, 2), np.int64), 3)
    with pytest.raises(ValueError, match="outside"):
        gpu_model.degrees(np.array([[0], [5]]), 3)
    with pytest.raises(ValueError, match="same graph"):
        gpu_model.load_imbalance(_warp_launch(), np.ones(4, np.int64), np.ones(3, np.int64))


def test_resident_blocks_follow_registers_and_threads():
    d = gpu_model.H200
    assert d.resident_blocks(256) == 8 * 132
    assert d.resident_blocks(256, registers=64) == 4 * 132   # 64 x 256 = 16384 registers a block
    assert d.resident_blocks(1024, registers=128) == 1 * 132  # only half a block's worth fits: still one
    with pytest.raises(ValueError):
        d.resident_blocks(0)


# -- registers ---------------------------------------------------------------------------------
@pytest.mark.skipif(not NVRTC, reason=f"NVRTC: {WHY_NOT}")
def test_registers_of_a_zoo_program_for_sm90_are_sane():
    c = _compiled("gat")
    for d in gpu_model.directions(c):
        regs = gpu_model.registers(c, d, 90, name="test_gat")
        assert set(regs) == {l["name"] for l in gpu_model.launches(c, d)}
        for k in regs.values():
            assert k["target"] == "sm_90" and 8 <= k["registers"] <= 255
            assert k["spill_store_bytes"] >= 0 and k["spill_load_bytes"] >= 0


# -- the scripts -------------------------------------------------------------------------------
def _run(args, timeout):
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                       env=dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "")))
    assert r.returncode == 0, f"{args[0]} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def test_model_script_reports_every_zoo_kernel(tmp_path):
    _run([os.path.join(ROOT, "benchmarks", "gpu_model.py"), "--smoke", "--out", str(tmp_path)], 300)
    res = json.loads((tmp_path / "gpu_model.json").read_text())
    rows = res["graphs"]["pl2k"]
    assert {r["program"] for r in rows} >= {"gcn", "gat", "sage_mean", "gin", "appnp_step"}
    for r in rows:
        assert r["busiest_block_over_mean"] >= 1.0 - 1e-9 and r["bytes_per_call"] > 0
        if NVRTC:
            assert r["registers"] > 0 and r["spill_store_bytes"] >= 0, r
    # a traversal of the power-law graph is less balanced than a map over its vertices
    trav = [r for r in rows if r["what"] == "traversal of in-edges"]
    assert max(r["busiest_block_over_mean"] for r in trav) > 1.0
    assert "busiest/mean" in (tmp_path / "gpu_model.md").read_text()


def test_gpu_benchmark_spends_its_budget_on_the_large_graphs_at_64_first():
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_gpu", os.path.join(ROOT, "benchmarks", "bench_gpu.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.plan_groups(["pl1m", "pl4m", "cora"], [64, 16, 256]) == [
        ("pl1m", 64), ("pl4m", 64), ("cora", 64), ("cora", 16), ("cora", 256),
        ("pl1m", 16), ("pl4m", 16), ("pl1m", 256), ("pl4m", 256)]
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_gpu.py"), "--out", "x", "--graphs",
                        "pl9"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode != 0 and "unknown graph ['pl9']" in r.stderr


def test_gpu_benchmark_smoke_on_the_cpu(tmp_path):
    # the GPU benchmark's code paths on a small graph on the CPU (where there is no GPU): rows,
    # ratios when PyG is there, unavailable rows when it is not, a profile, kernel bandwidth; the
    # budget leaves room for a second test worker on the same cores
    _run([os.path.join(ROOT, "benchmarks", "bench_gpu.py"), "--smoke", "--device", "cpu", "--layers", "gcn,gat",
          "--impls", "fused,pyg,pyg_csr", "--budget", "240", "--out", str(tmp_path)], 480)
    res = json.loads((tmp_path / "bench.json").read_text())
    (grp,) = res["groups"]
    assert grp["status"] == "ok" and grp["copy_gbps"] > 0
    layers = {rec["layer"]: rec for rec in grp["layers"]}
    assert set(layers) == {"gcn", "gat"}
    for rec in layers.values():
        fused = rec["impls"]["fused"]
        assert fused["status"] == "ok" and fused["epoch_ms"] > 0 and len(fused["epochs_ms"]) == 3
        assert fused["profile"]["wall_ms"] > 0
        assert rec["kernels"] and all(k["bytes"] > 0 for k in rec["kernels"])
        pyg = rec["impls"]["pyg"]
        if pyg["status"] == "ok":
            assert rec["ratio_vs_best"] > 0
        else:
            assert pyg["status"] in ("unavailable", "failed"), pyg
    assert layers["gat"]["impls"]["pyg_csr"]["status"] == "unavailable"
    assert "fastest peer" in (tmp_path / "bench.md").read_text()


def test_launch_sweep_smoke_on_the_cpu(tmp_path):
    """The sweep's plumbing (one process per setting, two rounds, the table, the merge into a
    bench.json, a bad value refused by the runtime in its own process and reported); on the CPU
    the settings change nothing, so no timing is asserted."""
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"groups": []}))
    _run([os.path.join(ROOT, "benchmarks", "sweep_launch.py"), "--smoke", "--device", "cpu",
          "--settings", "hub=0,group=8+block=64,block=33", "--layers", "gcn", "--budget", "400", "--out", str(tmp_path),
          "--merge-into", str(bench)], 800)
    res = json.loads((tmp_path / "launch_sweep.json").read_text())
    assert list(res["settings"]) == ["default", "hub=0", "group=8+block=64", "block=33"]
    assert res["settings"]["group=8+block=64"] == {"SEASTAR_CUDA_GROUP_THREADS": "8", "SEASTAR_CUDA_BLOCK_THREADS": "64"}
    assert len(res["rounds"]) == 2
    row = res["table"]["gcn"]
    assert row["best"] in ("default", "hub=0", "group=8+block=64") and row[row["best"]]["over_best"] == 1.0
    assert all(row[s]["epoch_ms"] > 0 for s in ("default", "hub=0", "group=8+block=64"))
    bad = res["rounds"][0]["block=33"]
    assert bad["status"] == "failed" and "SEASTAR_CUDA_BLOCK_THREADS must be a multiple of 32" in bad["reason"]
    assert json.loads(bench.read_text())["launch_sweep"]["table"] == res["table"]
    md = (tmp_path / "launch_sweep.md").read_text()
    assert "| gcn |" in md and "Failed:" in md
    for setting, message in [("hub=a", "hub must be a non-negative integer"), ("warp=4", "a setting is name=value")]:
        r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "sweep_launch.py"), "--out", "x",
                            "--settings", setting], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert r.returncode != 0 and message in r.stderr



def test_launch_settings_model_smoke_on_the_cpu(tmp_path):
    """The model of each launch setting, in a process of its own: a setting reaches the code
    generator (threads per item capped at 2 for the zoo's widths of 3 to 8), a bad one is
    reported by the runtime's message, and the table has a column per setting."""
    _run([os.path.join(ROOT, "benchmarks", "model_launch_settings.py"), "--smoke", "--settings", "group=2,block=33",
          "--out", str(tmp_path)], 300)
    res = json.loads((tmp_path / "launch_settings.json").read_text())
    default, capped = res["models"]["default"], res["models"]["group=2"]
    assert default["status"] == "ok" and capped["status"] == "ok"
    key = "zoo: gat for kernel_0"
    assert default["kernels"][key]["group_threads"] == 8 and capped["kernels"][key]["group_threads"] == 2
    # the zoo's GAT message: 2 heads x 3 features, one element a lane by default, 3 on 2 lanes
    assert (default["kernels"][key]["elems_per_thread"], capped["kernels"][key]["elems_per_thread"]) == (1, 3)
    assert set(default["kernels"]) == set(capped["kernels"])
    assert default["summary"]["max_worker_over_mean"] >= 1.0
    assert res["models"]["block=33"]["status"] == "failed"
    assert "SEASTAR_CUDA_BLOCK_THREADS must be a multiple of 32" in res["models"]["block=33"]["reason"]
    md = (tmp_path / "launch_settings.md").read_text()
    assert "| kernel | default | group=2 |" in md and f"| {key} |" in md and "Failed:" in md
