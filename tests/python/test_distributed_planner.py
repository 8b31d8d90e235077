"""The planner: its formulas against hand counts on a fixed calibration (so the test does not
depend on the machine's speed), the expected halo against simulated random partitions, its
choice under a memory limit and on a slow network, its errors, and a real calibration with the
step fit written into the plan. Predicted against measured epochs: benchmarks/bench_planner.py
(timings on a shared machine are too noisy for a CI assertion)."""
from __future__ import annotations

import math

import pytest
import torch

import seastar as ss
from seastar.distributed import launch
from seastar.distributed.calibration import calibrate, compute_rates
from seastar.distributed.planner import ModelSpec, _cache_hit_rate, _expected_halo, plan

import distributed_workers as workers

# a fixed machine: round numbers, so the hand counts below are exact
CAL = dict(aggregation_rate=1e9, gemm_rate=1e10, sampling_rate=1e7, gather_rate=1e9, step_overhead_s=1e-3,
           base_rss_mb=500.0, latency_s=1e-4, bandwidth=1e9, sync_s=0.0, skew=0.0, threads=1, cores=64,
           step_fixed_s=2e-3, step_scale=1.0,
           minibatch_step_s=None, fullgraph_step_s=None,  # None: the steps from the fit, not timed
           minibatch_scale=None, fullgraph_scale=None)  # None: the k-process slowdowns from the loop or the cores


class _Data:
    def __init__(self, n=400, e=4000, f=16, classes=4, train=100, seed=0, relations=None):
        g = torch.Generator().manual_seed(seed)
        typed = {}
        if relations is not None:
            typed = dict(edge_type=torch.randint(0, relations, (e,), generator=g), num_edge_types=relations)
        self.graph = ss.Graph.from_edge_index(torch.randint(0, n, (2, e), generator=g), num_nodes=n, **typed)
        self.x = torch.randn(n, f, generator=g)
        self.y = torch.randint(0, classes, (n,), generator=g)
        self.train_mask = torch.zeros(n, dtype=torch.bool)
        self.train_mask[torch.randperm(n, generator=g)[:train]] = True
        self.num_classes = classes


def test_fullgraph_single_process_is_the_hand_count():
    d = _Data()
    p = plan(d, 1, {"kind": "gcn", "hidden": 8}, calibration=CAL)
    fg = next(r for r in p.rows if r["mode"] == "fullgraph")
    n, e = 400, 4000
    # GCN: project the sources (one GEMM of n x in x out), aggregate out-wide over e + n loops
    compute = sum((e + n) * fout / 1e9 + n * fin * fout / 1e10 for fin, fout in ((16, 8), (8, 4)))
    assert fg["epoch_s"] == pytest.approx(2e-3 + compute, rel=1e-12)
    assert fg["comm_bytes"] == 0 and fg["comm_s"] == 0
    assert p.calibration["aggregation_rate"] == 1e9  # the inputs are written into the plan
    assert p.inputs["num_nodes"] == n and p.inputs["parameters"] == 2 * (16 * 8 + 8 * 4) + 8 + 4


def test_fullgraph_communication_terms():
    d = _Data()
    k = 2
    p = plan(d, k, {"kind": "gcn", "hidden": 8}, calibration=CAL)
    fg = next(r for r in p.rows if r["mode"] == "fullgraph")
    out_deg = torch.bincount(d.graph.edge_index[0], minlength=400).double()
    halo = float((0.5 * (1 - 0.5 ** out_deg)).sum())
    assert p.inputs["halo_rows"] == pytest.approx(halo, rel=1e-12)
    params_bytes = (2 * (16 * 8 + 8 * 4) + 12) * 4
    exchange = 2 * (1e-4 + halo * 8 * 4 / 1e9)  # the second layer's input rows, forward and back
    grads = 2 * 1e-4 + params_bytes / 1e9
    assert fg["comm_s"] == pytest.approx(exchange + grads, rel=1e-12)


def test_expected_halo_and_hit_rate_against_simulation():
    g = torch.Generator().manual_seed(0)
    d = _Data(n=2000, e=20000)
    out_deg = torch.bincount(d.graph.edge_index[0], minlength=2000)
    k = 3
    src, dst = d.graph.edge_index
    halos = []
    for s in range(20):  # random assignments: distinct remote sources of part 0's in-edges
        part = torch.randint(0, k, (2000,), generator=g)
        into0 = part[dst] == 0
        halos.append(torch.unique(src[into0 & (part[src] != 0)]).numel())
    assert _expected_halo(out_deg, k) == pytest.approx(sum(halos) / len(halos), rel=0.03)
    rows, hit = _cache_hit_rate(out_deg, 1, 0.1)
    assert (rows, hit) == (0, 0.0)
    rows, hit = _cache_hit_rate(torch.tensor([10, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 2, 0.2)
    assert rows == 1 and hit == 1.0  # the one vertex with out-edges holds all of them


def test_memory_limit_and_expensive_network_change_the_choice():
    d = _Data(n=3000, e=30000, f=64, train=1500)
    spec = {"kind": "sage", "hidden": 16, "batch_size": 64}
    free = plan(d, 2, spec, calibration=CAL)
    slow = plan(d, 2, spec, calibration=dict(CAL, latency_s=0.05))  # a network of 50 ms per message
    assert slow.choice["mode"] == "fullgraph"  # one step per epoch: the fewest collectives
    replicated = next(r for r in free.rows if r["features"] == "shared")
    limit = replicated["peak_mb"] - 1e-3  # just too little for replicated features
    tight = plan(d, 2, spec, memory_per_process=limit, calibration=CAL)
    assert tight.choice["features"] != "shared" or tight.choice["mode"] == "fullgraph"
    assert "does not fit" in next(r for r in tight.rows if r["features"] == "shared" and r["mode"] == "minibatch")["reason"]
    none = plan(d, 2, spec, memory_per_process=1.0, calibration=CAL)
    assert "nothing fits" in none.choice["reason"]
    assert "chosen" in free.table() and free.to_json().startswith("{")


def test_rgcn_full_graph_is_the_hand_count():
    """R-GCN on a typed graph: the relations come from the graph; a layer transforms at most one
    row per edge and at most one per (relation, source), plus the root's on the destinations."""
    d = _Data(relations=3)
    p = plan(d, 1, {"kind": "rgcn", "hidden": 8}, calibration=CAL)
    fg = next(r for r in p.rows if r["mode"] == "fullgraph")
    n, e = 400, 4000
    compute = sum(e * fout / 1e9 + (min(e, 3 * n) + n) * fin * fout / 1e10 for fin, fout in ((16, 8), (8, 4)))
    assert fg["epoch_s"] == pytest.approx(2e-3 + compute, rel=1e-12)
    assert p.inputs["model"]["relations"] == 3
    assert p.inputs["parameters"] == 4 * (16 * 8 + 8 * 4) + 8 + 4  # three relations' matrices and the root's
    assert plan(_Data(), 1, {"kind": "rgcn", "hidden": 8, "relations": 5}, calibration=CAL).inputs["parameters"] \
        == 6 * (16 * 8 + 8 * 4) + 12
    with pytest.raises(ValueError, match="edge types"):
        plan(_Data(), 1, {"kind": "rgcn"}, calibration=CAL)


def test_rgcn_steps_are_measured_on_typed_blocks():
    cal = {k: v for k, v in CAL.items() if k not in ("minibatch_step_s", "fullgraph_step_s")}
    p = plan(_Data(relations=3), 2, {"kind": "rgcn", "hidden": 8, "batch_size": 20}, calibration=cal)
    assert p.calibration["minibatch_step_s"] > 0 and p.calibration["fullgraph_step_s"] > 0
    assert {r["mode"] for r in p.rows} == {"minibatch", "fullgraph"} and p.choice in p.rows


def test_minibatch_epoch_from_the_measured_loop_is_the_hand_count():
    """With the loop, the loader's first batch, the fetch's local work and the k-process
    slowdown measured (given here), an epoch is its steps slowed, each with its gradients'
    all-reduce (and a partitioned fetch), after the first batch's wait."""
    d = _Data(train=100)
    cal = dict(CAL, minibatch_step_s=0.004, loader_batch_s=0.001, process_cores=1.0, fetch_work_s=0.0005,
               loop_scale=1.5, loop_stall_s=0.002)
    k, params_bytes = 2, (2 * (16 * 8 + 8 * 4) + 12) * 4
    p = plan(d, k, {"kind": "sage", "hidden": 8, "batch_size": 20}, calibration=cal)
    shared, parted = (next(r for r in p.rows if r.get("features") == f and r["mode"] == "minibatch")
                      for f in ("shared", "partitioned"))
    steps = math.ceil(50 / 20)
    grads = 2 * 1e-4 + params_bytes / 1e9
    assert shared["steps"] == steps
    assert shared["epoch_s"] == pytest.approx(steps * (0.004 * 1.5 + 0.002 + grads) + 0.001 * 1.5, rel=1e-12)
    miss = p.inputs["batch"]["input_rows"] / 2 * (1 - parted["expected_hit_rate"]) * 16 * 4
    fetch = 0.0005 * 1.5 + 2 * 1e-4 + (1e-4 + miss / 1e9) + 0.002  # its exchange waits, as an all-reduce does
    # one fetch per batch: the first batch's before the first step, the others each in turn
    # with the step before
    assert parted["epoch_s"] == pytest.approx(steps * (0.004 * 1.5 + 0.002 + grads + fetch) + 0.001 * 1.5,
                                              rel=1e-12)


def test_fullgraph_step_pays_the_stall_at_each_collective():
    """A full-graph step of two layers has three collectives (the halo exchange forward and
    backward, the gradients' all-reduce); the k-process stall is paid at each."""
    cal = dict(CAL, minibatch_step_s=0.004, loader_batch_s=0.001, process_cores=1.0, fetch_work_s=0.0005,
               loop_scale=1.5)
    epochs = [next(r for r in plan(_Data(), 2, {"kind": "sage", "hidden": 8}, calibration=dict(cal, loop_stall_s=s))
                   .rows if r["mode"] == "fullgraph")["epoch_s"] for s in (0.0, 0.002)]
    assert epochs[1] - epochs[0] == pytest.approx(3 * 0.002, rel=1e-9)


def test_fullgraph_step_slows_by_its_own_measured_scale():
    """A full-graph step in k processes slows by the model's own measured scale when the
    calibration has it, else by the loop's."""
    cal = dict(CAL, minibatch_step_s=0.004, loader_batch_s=0.001, process_cores=1.0, fetch_work_s=0.0005,
               loop_scale=2.0, loop_stall_s=0.001)

    def epoch(**kw):
        p = plan(_Data(), 2, {"kind": "sage", "hidden": 8}, calibration=dict(cal, **kw))
        return next(r for r in p.rows if r["mode"] == "fullgraph")["epoch_s"]

    e1, e2, e3 = (epoch(fullgraph_scale=s) for s in (1.0, 2.0, 3.0))
    assert e2 - e1 > 0 and e3 - e2 == pytest.approx(e2 - e1, rel=1e-9)  # the step times the scale
    assert epoch() == pytest.approx(e2, rel=1e-12)  # None: the loop's scale (2.0)


def test_scales_in_spawned_processes():
    """The model's full-graph step on one part of the data and its mini-batch loop on the
    data, each alone and in two processes at once."""
    from seastar.distributed.planner import _part_of, _widths, measure_scales

    d = _Data(relations=3)
    m = ModelSpec.of({"kind": "rgcn", "hidden": 8, "relations": 3})
    ei, types, n_src, n_dst = _part_of(d.graph, 2)
    assert 1200 < ei.shape[1] < 2800 and types.shape == (ei.shape[1],)  # the in-edges of about half the vertices
    assert 150 < n_dst < 250 and n_dst < n_src <= 400
    assert int(ei[1].max()) < n_dst and int(ei[0].max()) < n_src  # destinations first, then the halo
    assert torch.unique(ei[0][ei[0] >= n_dst]).numel() == n_src - n_dst  # every halo vertex is a source
    r = measure_scales(m, _widths(m, 16, 4), d.graph, 2, 2, 20)
    assert r["fullgraph_part"] == [n_src, n_dst, ei.shape[1]]
    for what in ("fullgraph", "minibatch"):
        alone, together = r[f"{what}_alone_s"], r[f"{what}_together_s"]
        assert alone > 0 and together > 0
        assert r[f"{what}_scale"] == pytest.approx(max(1.0, together / alone))
    assert measure_scales(m, _widths(m, 16, 4), d.graph, 4, 1, 20) is None  # one process per machine


def test_minibatch_step_slows_by_its_own_measured_scale():
    cal = dict(CAL, minibatch_step_s=0.004, loader_batch_s=0.001, process_cores=1.0, fetch_work_s=0.0,
               loop_scale=2.0, loop_stall_s=0.001)

    def epoch(**kw):
        p = plan(_Data(), 2, {"kind": "sage", "hidden": 8, "batch_size": 20}, calibration=dict(cal, **kw))
        return next(r for r in p.rows if r["mode"] == "minibatch")["epoch_s"]

    steps = math.ceil(50 / 20)
    assert epoch(minibatch_scale=3.0) - epoch(minibatch_scale=2.0) == pytest.approx((steps * 0.004 + 0.001) * 1.0)
    assert epoch() == pytest.approx(epoch(minibatch_scale=2.0), rel=1e-12)  # None: the loop's scale (2.0)


def test_minibatch_steps_follow_the_share():
    d = _Data(train=101)
    p = plan(d, 3, {"kind": "sage", "hidden": 8, "batch_size": 10}, calibration=CAL)
    assert all(r["steps"] == math.ceil(math.ceil(101 / 3) / 10) for r in p.rows if r["mode"] == "minibatch")


@pytest.mark.parametrize("spec,match", [({"kind": "mlp"}, "kind"), ({"hidden": 0}, "hidden"),
                                        ({"fanouts": (10, 0)}, "fanouts"), ({"layers": 2}, "unknown keys"),
                                        ({"cache_fraction": 2.0}, "cache_fraction"),
                                        ({"kind": "rgcn", "relations": 0}, "relations")])
def test_bad_model_spec(spec, match):
    with pytest.raises(ValueError, match=match):
        ModelSpec.of(spec)


def test_bad_arguments():
    d = _Data()
    with pytest.raises(ValueError, match="world_size"):
        plan(d, 0, {}, calibration=CAL)
    with pytest.raises(ValueError, match="memory_per_process"):
        plan(d, 2, {}, memory_per_process=0, calibration=CAL)
    with pytest.raises(ValueError, match="latency_s"):
        plan(d, 2, {}, calibration=dict(CAL, latency_s=None))
    with pytest.raises(TypeError, match="model_spec"):
        plan(d, 2, "sage", calibration=CAL)


@pytest.mark.serial  # real ranks and timed calibration
def test_real_calibration_and_fit():
    cal = compute_rates(num_nodes=2000, num_edges=20000, width=16)
    for key in ("aggregation_rate", "gemm_rate", "sampling_rate", "gather_rate", "step_overhead_s", "base_rss_mb"):
        assert cal[key] > 0 and math.isfinite(cal[key]), key
    cal.update(latency_s=1e-4, bandwidth=1e9, skew=0.0)
    p = plan(_Data(), 2, {"kind": "gat", "hidden": 4, "heads": 2}, calibration=cal)
    assert p.calibration["step_scale"] > 0 and p.calibration["step_fixed_s"] >= 0  # the fit is in the plan
    # the steps measured on the data's own blocks and graph are in the plan too: two processes
    # on this machine, so a part's full-graph step, timed alone and together, and not the whole
    # graph's, which would be read by nothing
    assert p.calibration["minibatch_step_s"] > 0 and p.calibration["fullgraph_alone_s"] > 0
    assert p.calibration["fullgraph_together_s"] > 0 and "fullgraph_step_s" not in p.calibration
    assert p.calibration["loader_batch_s"] > 0 and p.calibration["process_cores"] > 0
    assert p.calibration["fetch_work_s"] > 0  # two processes: the fetch routes, serves and places rows
    assert all(r["epoch_s"] > 0 and r["peak_mb"] > cal["base_rss_mb"] for r in p.rows)


@pytest.mark.serial  # real ranks and timed calibration
def test_loop_fit_in_spawned_processes():
    """The calibration's k-process measurement: a training loop timed alone at two batch
    sizes, then in two processes at once with DDP; the line through the two points."""
    cal = calibrate(world_size=2)
    (a0, a1), (t0, t1) = cal["loop_alone_s"], cal["loop_together_s"]
    assert 0 < a0 < a1 and t0 > 0 and t1 > 0  # the larger batch takes longer
    assert cal["loop_scale"] == pytest.approx(max(1.0, (t1 - t0) / (a1 - a0)))
    assert cal["loop_stall_s"] == pytest.approx(max(0.0, t0 - cal["loop_scale"] * a0))
    assert math.isfinite(cal["latency_s"]) and cal["world_size"] == 2
    assert cal["rank_threads"] == torch.get_num_threads()  # the ranks measure with the caller's threads


@pytest.mark.serial  # real ranks and timed calibration
def test_loop_together_runs_under_ddp():
    """The loop timed in k processes synchronises its gradients as training does (in the
    default group, given as None, as in a named one)."""
    launch.spawn(workers.loop_model_rank, 2, timeout_s=120)
