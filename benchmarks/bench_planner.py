#!/usr/bin/env python
"""The planner's predicted epoch times against measured ones, for 1, 2 and 3 gloo processes:
every candidate of ``seastar.distributed.plan`` run with ``examples/distributed/train.py``.

    .venv/bin/python benchmarks/bench_planner.py --out benchmarks/results/planner.json
    .venv/bin/python benchmarks/bench_planner.py --dataset synthetic --num-nodes 100000 --out ...
    .venv/bin/python benchmarks/bench_planner.py --dataset typed --model rgcn --out ...
    .venv/bin/python benchmarks/bench_planner.py --markdown benchmarks/results/planner*.json  # docs' tables
    .venv/bin/python benchmarks/bench_planner.py --repredict benchmarks/results/planner*.json  # the model changed

For each process count: one calibration (the compute rates in this process, the collectives
in that many fresh processes), the plan, then each candidate trained for ``--epochs`` epochs
(``torchrun --standalone``), ``--rounds`` times, the candidates taking turns within a round (so
that a slow stretch of a shared machine falls on all of them). The measured epoch is the median
of every round's epochs after its first (kernel compilation and first touch are left out; the
median, because other work on a shared machine comes in bursts), with the quartiles as its
spread. The JSON holds the calibration (with the step fit), every candidate's prediction and
measurement, the ratio, and whether the plan chose the faster mode where the measured times
differ by more than 20%.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "python"))

import seastar as ss  # noqa: E402
from _report import quartiles  # noqa: E402
import torch  # noqa: E402
from seastar.distributed.calibration import calibrate  # noqa: E402
from seastar.distributed.planner import plan  # noqa: E402

log = logging.getLogger("bench_planner")


def data_args(a) -> list:
    if a.dataset == "cora":
        return ["--dataset", "cora"]
    out = ["--dataset", a.dataset, "--num-nodes", str(a.num_nodes), "--avg-degree", str(a.avg_degree),
           "--num-features", str(a.num_features), "--train-fraction", str(a.train_fraction)]
    return out + (["--num-relations", str(a.num_relations)] if a.dataset == "typed" else [])


def load(a):
    """The dataset exactly as examples/distributed/train.py makes it from the same flags."""
    spec = importlib.util.spec_from_file_location("distributed_train", ROOT / "examples" / "distributed" / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    return train.load(train.parse_args(["--mode", "minibatch", "--model", a.model] + data_args(a)))


def measure(a, row, world, work: Path) -> list:
    """The epoch times of one run of the candidate ``row`` after its first epoch."""
    out = work / f"{row['mode']}-{row['features']}-{world}.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}",
           str(ROOT / "examples" / "distributed" / "train.py"), "--mode", row["mode"], "--model", a.model,
           "--hidden", str(a.hidden), "--batch-size", str(a.batch_size), "--epochs", str(a.epochs),
           "--method", "random", "--partition-dir", str(work / "parts-{parts}"),
           "--shared-file", str(work / f"data-{row['features']}.pt"), "--json", str(out)] + data_args(a)
    if row["mode"] == "minibatch":
        cmd += ["--features", row["features"]]
        if row["features"] == "partitioned":
            cmd += ["--cache-fraction", str(row["cache_fraction"])]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=900)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{(r.stdout + r.stderr)[-3000:]}")
    return [h["epoch_s"] for h in json.loads(out.read_text())["history"][1:]]


def judge(rows: list, world: int) -> dict:
    """Which candidate was measured fastest, whether by more than 20%, and whether it was chosen."""
    fastest = min(rows, key=lambda r: r["measured_s"])
    chosen = next(r for r in rows if r["chosen"])
    others = sorted(r["measured_s"] for r in rows)
    clear = len(others) > 1 and others[1] > 1.2 * others[0]
    return dict(world_size=world, chosen=chosen["candidate"], measured_fastest=fastest["candidate"],
                fastest_clearly_faster=clear, chose_fastest=chosen is fastest)


def summary(results: list) -> dict:
    return dict(within_30_percent=sum(abs(r["ratio"] - 1) <= 0.3 for res in results for r in res["rows"]),
                candidates=sum(len(res["rows"]) for res in results))


def repredict(path: Path) -> None:
    """The predictions of a report written before, made again by the planner as it is now from
    the report's own calibrations (every measured input of the plan is in them): the model
    changes, the measurements stay. The report is rewritten in place."""
    report = json.loads(path.read_text())
    a = argparse.Namespace(**report["args"])
    ds = load(a)
    torch.set_num_threads(1)
    for res in report["results"]:
        pl = plan(ds, res["world_size"], dict(kind=a.model, hidden=a.hidden, batch_size=a.batch_size),
                  calibration=res["calibration"])
        for r, row in zip(res["rows"], pl.rows):
            r.update(predicted_s=row["epoch_s"], ratio=row["epoch_s"] / r["measured_s"],
                     predicted_peak_mb=row["peak_mb"], chosen=row is pl.choice)
        res.update(judge(res["rows"], res["world_size"]))
    report.update(summary(report["results"]))
    path.write_text(json.dumps(report, indent=2, default=str))
    print(markdown(report))


def markdown(report: dict) -> str:
    """The report as docs/DISTRIBUTED.md shows it: a row per candidate and process count, then
    the choice per process count and the count within 30%."""
    lines = ["| processes | candidate | predicted | measured (quartiles) | predicted / measured | |",
             "| --- | --- | --- | --- | --- | --- |"]
    choices = []
    for res in report["results"]:
        for r in res["rows"]:
            name = r["candidate"].split(" (")[0]
            spread = f" ({r['measured_q1_s'] * 1e3:.1f}-{r['measured_q3_s'] * 1e3:.1f})" if "measured_q1_s" in r else ""
            lines.append(f"| {res['world_size']} | {name} | {r['predicted_s'] * 1e3:.1f} ms | "
                         f"{r['measured_s'] * 1e3:.1f} ms{spread} | {r['ratio']:.2f} | {'chosen' if r['chosen'] else ''} |")
        choices.append(f"{res['world_size']}: measured fastest {res['measured_fastest'].split(' (')[0]}, "
                       f"{'chosen' if res['chose_fastest'] else 'not chosen'}, margin over 20%: "
                       f"{'yes' if res['fastest_clearly_faster'] else 'no'}")
    within = sum(abs(r["ratio"] - 1) <= 0.3 for res in report["results"] for r in res["rows"])
    total = sum(len(res["rows"]) for res in report["results"])
    return "\n".join(lines) + (f"\n\nPer process count: {'; '.join(choices)}. Within 30% of the measured epoch: "
                              f"{within} of {total}.")


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--markdown":
        for path in sys.argv[2:]:  # the tables of reports written before
            print(markdown(json.loads(Path(path).read_text())) + "\n")
        return
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--repredict":
        for path in sys.argv[2:]:
            repredict(Path(path))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", choices=["cora", "synthetic", "typed"], default="cora")
    p.add_argument("--num-nodes", type=int, default=100_000)
    p.add_argument("--avg-degree", type=float, default=10.0)
    p.add_argument("--num-features", type=int, default=64)
    p.add_argument("--train-fraction", type=float, default=0.05)
    p.add_argument("--num-relations", type=int, default=8, help="typed: edge types")
    p.add_argument("--model", choices=["sage", "gcn", "gat", "rgcn"], default="sage")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2, help="runs of every candidate, taking turns")
    p.add_argument("--worlds", default="1,2,3")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    torch.set_num_threads(1)  # as each process of the example runs
    ds = load(a)
    compute = None
    results = []
    worlds = [int(w) for w in a.worlds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for world in ss.progress.bar(worlds, desc="process counts"):
            cal = calibrate(world_size=max(2, world))
            if compute is None:
                compute = {k: cal[k] for k in ("aggregation_rate", "gemm_rate", "sampling_rate", "gather_rate",
                                               "step_overhead_s")}
            cal.update(compute)  # the same compute rates for every count: only the collectives differ
            spec = dict(kind=a.model, hidden=a.hidden, batch_size=a.batch_size)
            pl = plan(ds, world, spec, calibration=cal)
            log.info("\n%s", pl.table())
            epochs = [[] for _ in pl.rows]
            for _ in range(a.rounds):
                for times, row in zip(epochs, pl.rows):
                    times += measure(a, row, world, Path(tmp))
            rows = []
            for times, row in zip(epochs, pl.rows):
                q1, measured, q3 = quartiles(times)
                rows.append(dict(candidate=row["candidate"], mode=row["mode"], features=row["features"],
                                 predicted_s=row["epoch_s"], measured_s=measured, measured_q1_s=q1, measured_q3_s=q3,
                                 epochs_measured=len(times), ratio=row["epoch_s"] / measured,
                                 predicted_peak_mb=row["peak_mb"], chosen=row is pl.choice))
                log.info("%d processes, %s: predicted %.1f ms, measured %.1f ms (quartiles %.1f-%.1f)", world,
                         row["candidate"], row["epoch_s"] * 1e3, measured * 1e3, q1 * 1e3, q3 * 1e3)
            results.append(dict(calibration=pl.calibration, rows=rows, **judge(rows, world)))
    report = dict(dataset=a.dataset, args=vars(a), machine_cores=cal.get("cores"), results=results,
                  **summary(results))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(report, indent=2, default=str))
    for res in results:
        for r in res["rows"]:
            print(f"{res['world_size']} | {r['candidate'][:60]:60s} | predicted {r['predicted_s'] * 1e3:8.1f} ms | "
                  f"measured {r['measured_s'] * 1e3:8.1f} ms ({r['measured_q1_s'] * 1e3:.1f}-{r['measured_q3_s'] * 1e3:.1f}) | ratio {r['ratio']:.2f}{' | chosen' if r['chosen'] else ''}")
        print(f"  measured fastest: {res['measured_fastest']}; plan chose it: {res['chose_fastest']} "
              f"(clear margin > 20%: {res['fastest_clearly_faster']})")


if __name__ == "__main__":
    main()
