"""The vertex-program fuzzer: random programs, forward and backward in float64, against plain torch.

    python tests/fuzz/fuzz.py --count 200 --seed 1000 --jobs 2 [--backends fused,reference] [--profile hard]

Program ``seed`` is ``programs.random_program(seed)`` on a small graph with every hazard (an
isolated vertex, a vertex without in-edges, a self-loop, a repeated edge, a hub; edge types
when the program reads them), inputs drawn from the same seed. Each backend's outputs and
gradients (for a random output gradient) must match programs.evaluate's to 1e-9. Programs run in worker processes, a batch each; a batch that
dies (a crash, a signal) is re-run one program per process, so the crash is pinned to a seed.
Each failure prints its seed and the program's source; the exit status is 1 if any failed.
``--profile`` picks the kind of program (programs.PROFILES: default, hard, ties); the hard and
ties profiles also run some programs on a graph without edges and on a single vertex.
A backend that reports a program unsupported (NotImplementedError) is counted, not failed.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Sequence

HERE = Path(__file__).resolve().parent
TOL = dict(rtol=1e-9, atol=1e-9)
sys.path.insert(0, str(HERE))
if importlib.util.find_spec("seastar") is None:  # a source checkout: the package is <repo>/python
    sys.path.insert(0, str(HERE.parents[1] / "python"))


def graph_edges(seed: int, profile: str = "default"):
    """edge_index [2, E] over 8 vertices: vertex 7 isolated, vertex 6 without in-edges. In the
    hard and ties profiles one seed in 8 runs on 8 vertices without edges, one on a single vertex."""
    import torch

    if profile != "default" and seed % 8 in (3, 5):
        return torch.zeros(2, 0, dtype=torch.long), (8 if seed % 8 == 3 else 1)
    gen = torch.Generator().manual_seed(seed)
    n_random = int(torch.randint(6, 14, (1,), generator=gen))
    src = torch.randint(0, 7, (n_random,), generator=gen)
    dst = torch.randint(0, 6, (n_random,), generator=gen)
    hub = torch.tensor([0, 1, 2, 4, 5, 6])
    src = torch.cat([torch.tensor([0, 2, 6]), src, hub, torch.tensor([0])])
    dst = torch.cat([torch.tensor([1, 2, 3]), dst, torch.full_like(hub, 3), torch.tensor([1])])  # 0->1 twice
    return torch.stack([src, dst]), 8


def check(seed: int, backends: Sequence[str], profile: str = "default") -> Dict:
    """Runs program `seed` on every backend; {"seed", "status", "detail"} (status ok/unsupported/fail)."""
    import torch

    import programs
    import seastar as ss

    program = programs.random_program(seed, profile)
    edge_index, n = graph_edges(seed, profile)
    edge_type = None
    if programs.is_typed(program):  # W[e.type]: a typed graph, types drawn from the seed
        edge_type = torch.randint(0, programs.NUM_EDGE_TYPES, (edge_index.shape[1],),
                                  generator=torch.Generator().manual_seed(seed + 2))
        graph = ss.Graph.from_edge_index(edge_index, num_nodes=n, edge_type=edge_type,
                                         num_edge_types=programs.NUM_EDGE_TYPES)
    else:
        graph = ss.Graph.from_edge_index(edge_index, num_nodes=n)
    inputs = programs.make_inputs(program, n, edge_index.shape[1], seed)
    result = {"seed": seed, "status": "ok", "detail": "", "source": programs.source(program)}

    def leaves():
        return {k: t.clone().requires_grad_(True) for k, t in inputs.items()}

    ref_in = leaves()
    expected = programs.evaluate(program, edge_index, n, ref_in, edge_type)
    gen = torch.Generator().manual_seed(seed + 1)
    grad_out = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in expected]
    expected_grads = _grads(expected, ref_in, grad_out)
    unsupported = []
    for backend in backends:
        prog = ss.vertex_program(programs.build(program), name=f"fuzz_{profile}_{seed}")
        ours_in = leaves()
        try:
            outs = prog(graph, backend=backend, **ours_in)
        except NotImplementedError as e:
            unsupported.append(f"{backend}: {e}")
            continue
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        try:
            for i, (a, b) in enumerate(zip(outs, expected)):
                torch.testing.assert_close(a, b, **TOL, msg=lambda m, i=i: f"{backend} output {i}: {m}")
            grads = _grads(outs, ours_in, grad_out)
            for k in inputs:
                torch.testing.assert_close(grads[k], expected_grads[k], **TOL,
                                           msg=lambda m, k=k: f"{backend} d/d{k}: {m}")
        except AssertionError as e:
            result.update(status="fail", detail=str(e))
            return result
    if unsupported:
        result.update(status="unsupported" if len(unsupported) == len(backends) else "ok", detail="; ".join(unsupported))
    return result


def _grads(outs, leaves, grad_out):
    import torch

    xs = list(leaves.values())
    gs = torch.autograd.grad(outs, xs, grad_out, allow_unused=True)
    return {k: torch.zeros_like(x) if g is None else g for k, x, g in zip(leaves, xs, gs)}


def _worker(seeds: Sequence[int], backends: Sequence[str], profile: str) -> None:
    crash = os.environ.get("SEASTAR_FUZZ_CRASH_SEED")  # tests of the pool itself: die on this seed
    for seed in seeds:
        if crash and int(crash) == seed:
            os.kill(os.getpid(), signal.SIGSEGV)
        try:
            r = check(seed, backends, profile)
        except Exception as e:  # a generator bug or an unexpected error: a failure with its message
            r = {"seed": seed, "status": "fail", "detail": f"{type(e).__name__}: {e}",
                 "source": _source(seed, profile)}
        print(json.dumps(r), flush=True)


def _source(seed: int, profile: str) -> str:
    import programs

    return programs.source(programs.random_program(seed, profile))


def _run_batch(seeds: List[int], backends: Sequence[str], timeout: float, profile: str) -> List[Dict]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--backends", ",".join(backends),
           "--profile", profile, *map(str, seeds)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), ""
    done = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            done[r["seed"]] = r
    missing = [s for s in seeds if s not in done]
    if missing and len(seeds) > 1:  # pin the crash (or hang) on its program
        for s in missing:
            done.update({r["seed"]: r for r in _run_batch([s], backends, timeout, profile)})
    elif missing:
        how = "a hang (timed out)" if rc == "timeout" else f"a crash (exit status {rc})"
        done[seeds[0]] = {"seed": seeds[0], "status": "fail", "detail": f"{how}\n{err[-4000:]}",
                          "source": _source(seeds[0], profile)}
    return [done[s] for s in seeds]


def run(seeds: Sequence[int], backends: Sequence[str] = ("reference", "fused"), jobs: int = 1, batch: int = 10,
        timeout: float = 900, profile: str = "default") -> List[Dict]:
    """Checks every seed of `profile` in worker processes; returns one result per seed."""
    seeds = list(seeds)
    batches = [seeds[i:i + batch] for i in range(0, len(seeds), batch)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = pool.map(lambda b: _run_batch(b, backends, timeout, profile), batches)
    return [r for rs in results for r in rs]


def report(results: List[Dict]) -> str:
    lines = []
    for r in results:
        if r["status"] == "fail":
            lines.append(f"--- program {r['seed']} FAILED: {r['detail']}\n{r['source']}")
    counts = {s: sum(r["status"] == s for r in results) for s in ("ok", "unsupported", "fail")}
    lines.append(f"{len(results)} programs: {counts['ok']} ok, {counts['unsupported']} unsupported, "
                 f"{counts['fail']} failed")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=50, help="number of programs")
    ap.add_argument("--seed", type=int, default=0, help="first program's seed")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="worker processes at once")
    ap.add_argument("--batch", type=int, default=10, help="programs per worker process")
    ap.add_argument("--backends", default="reference,fused")
    ap.add_argument("--profile", default="default", help="kind of program: default, hard or ties")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("seeds", nargs="*", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    backends = [b for b in a.backends.split(",") if b]
    if a.worker:
        _worker(a.seeds, backends, a.profile)
        return 0
    results = run(range(a.seed, a.seed + a.count), backends, a.jobs, a.batch, profile=a.profile)
    print(report(results))
    return 1 if any(r["status"] == "fail" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
