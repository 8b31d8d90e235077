"""Seastar leaves the process as it found it, with the defaults users get.

In a fresh process whose environment has no ``SEASTAR_*`` switch, while other processes keep the
cores busy (a governor of torch's threads would act on that load):

* torch's and the process's global state is snapshot after ``import torch`` (and a plain torch
  model's first compile, which changes some of torch's own state), then again after ``import
  seastar`` and a training step of every ``seastar.nn`` layer, eager and under torch.compile, and
  the two must be equal: thread counts, default dtype, grad mode,
  deterministic algorithms, matmul precision, the environment, warning filters, logging (the
  root logger and every logger that existed before, Seastar's own excepted), signal handlers,
  Dynamo's and Inductor's config, and which allocator torch's CPU tensors come from;
* a two-layer SAGE compiled with ``fullgraph=True`` over 12 ``NeighborLoader`` batches of Cora,
  with an eager call of the same model before each compiled one, compiles at most twice (torch's
  static then dynamic graph) and breaks no graph.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPIN = "while True: pass"

SNAPSHOT = """
import logging, os, signal, sys, warnings
import torch
import torch._dynamo.config, torch._inductor.config  # loaded first: loading them is not a change

def snapshot():
    loggers = {name: lg for name, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    loggers[""] = logging.root
    return {
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "default_dtype": str(torch.get_default_dtype()),
        "grad_enabled": torch.is_grad_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "environment": dict(os.environ),
        "warning_filters": [repr(f) for f in warnings.filters],
        "loggers": {name: [lg.level, lg.propagate, lg.disabled, [repr(h) for h in lg.handlers]]
                    for name, lg in loggers.items()},
        "signals": {int(s): repr(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD,
                                                               signal.SIGPIPE, signal.SIGUSR1)},
        "dynamo_config": {k: repr(v) for k, v in torch._dynamo.config.get_config_copy().items()},
        "inductor_config": {k: repr(v) for k, v in torch._inductor.config.get_config_copy().items()},
    }

def differences(before, after):
    out = {}
    for key, was in before.items():
        now = after[key]
        if isinstance(was, dict):
            changed = {k: (was.get(k), now.get(k)) for k in set(was) | set(now) if was.get(k) != now.get(k)
                       and not (key == "loggers" and (k not in was or k.startswith("seastar")))}
            if changed:
                out[key] = changed
        elif was != now:
            out[key] = (was, now)
    return out
"""

# torch changes some of its own state the first time it compiles (its structured-trace logger
# drops its lazy handler): a plain torch model trained eager and compiled first, before the
# snapshot, so the snapshot compares what Seastar's import and layers change, not torch's first
# compile
CONTROL = """
plain = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
for run in (plain, torch.compile(plain, backend="aot_eager")):
    torch.nn.functional.cross_entropy(run(torch.randn(5, 6)), torch.tensor([0, 1, 2, 0, 1])).backward()
"""

LAYERS = """
import torch.nn.functional as F
import seastar as ss
import seastar.nn as snn

N, E, F_IN, C, R, T = 120, 700, 6, 3, 3, 2
g = torch.Generator().manual_seed(0)
ei = torch.randint(0, N, (2, E), generator=g)
graph = ss.Graph.from_edge_index(ei, num_nodes=N, edge_type=torch.randint(0, R, (E,), generator=g), num_edge_types=R,
                                 node_type=torch.randint(0, T, (N,), generator=g), num_node_types=T)
x, y = torch.randn(N, F_IN, generator=g), torch.randint(0, C, (N,), generator=g)
LAYERS = {
    "gcn": lambda: snn.GCNConv(F_IN, C), "gat": lambda: snn.GATConv(F_IN, C, heads=2, concat=False),
    "sage": lambda: snn.SAGEConv(F_IN, C), "gin": lambda: snn.GINConv(torch.nn.Linear(F_IN, C)),
    "graph": lambda: snn.GraphConv(F_IN, C), "appnp": lambda: torch.nn.Sequential(),
    "rgcn": lambda: snn.RGCNConv(F_IN, C, R), "hgt": lambda: snn.HGTConv(F_IN, C, T, R, heads=1),
    "hetero": lambda: snn.HeteroConv({0: snn.GCNConv(F_IN, C), 2: snn.SAGEConv(F_IN, C)}),
}

class Step(torch.nn.Module):
    def __init__(self, name):
        super().__init__()
        self.lin = torch.nn.Linear(F_IN, C) if name == "appnp" else None
        self.conv = snn.APPNP(K=2, alpha=0.1) if name == "appnp" else LAYERS[name]()

    def forward(self, graph, x, y):
        h = self.conv(graph, self.lin(x)) if self.lin is not None else self.conv(graph, x)
        return F.cross_entropy(h, y)

for name in LAYERS:
    for compiled in (False, True):
        model = Step(name)
        run = torch.compile(model, backend="aot_eager") if compiled else model
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            run(graph, x, y).backward()
            opt.step()
"""


def _child(code: str) -> dict:
    """Runs ``code`` with the defaults users get while other processes keep the cores busy; its
    last line of output, as JSON."""
    # users' defaults: no switch of Seastar's, and torch on every core (the test command gives its
    # workers OMP_NUM_THREADS=1, under which a governor would have nothing to lower)
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("SEASTAR_") or k == "SEASTAR_CACHE_DIR") and k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(ROOT / "python")
    # at the lowest priority: the cores stay busy (a governor counts nice time as busy), but the spinners
    # take only what no other process wants, so they slow neither the child nor a test beside it
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], preexec_fn=lambda: os.nice(19))
                for _ in range(len(os.sched_getaffinity(0)))]
    try:
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                           timeout=900, cwd=ROOT)
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    assert r.returncode == 0, r.stderr[-5000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_and_training_leave_the_process_as_they_found_it():
    result = _child(SNAPSHOT + CONTROL + "\nbefore = snapshot()\n" + LAYERS + """
after = snapshot()
stats = ss.cpu_allocator_stats()
import json
print(json.dumps({"differences": {k: repr(v) for k, v in differences(before, after).items()},
                  "governor": ss.thread_governor_stats()["enabled"], "seastar_allocator": stats["installed"],
                  "seastar_allocator_served": stats["mapped"] + stats["reused"]}))
""")
    assert result["differences"] == {}
    assert not result["governor"] and not result["seastar_allocator"] and result["seastar_allocator_served"] == 0


def test_compiled_minibatch_loop_under_load_compiles_at_most_twice():
    result = _child("""
import json
import torch, torch.nn.functional as F
import seastar as ss
import seastar.nn as snn
from torch._dynamo.utils import counters

class Sage(torch.nn.Module):
    def __init__(self, f_in, hidden, classes):
        super().__init__()
        self.conv1, self.conv2 = snn.SAGEConv(f_in, hidden), snn.SAGEConv(hidden, classes)

    def forward(self, block0, block1, x):
        return self.conv2(block1, F.relu(self.conv1(block0, x)))

compiles = []
def backend(gm, example_inputs):
    from functorch.compile import nop
    from torch._dynamo.backends.common import aot_autograd
    compiles.append(torch.get_num_threads())
    return aot_autograd(fw_compiler=nop, bw_compiler=nop)(gm, example_inputs)

ds = ss.datasets.load("cora")
model = Sage(ds.x.shape[1], 16, int(ds.y.max()) + 1)
compiled = torch.compile(model, fullgraph=True, backend=backend)
loader = ss.loader.NeighborLoader((ds.graph, ds.x, ds.y), [10, 5], batch_size=32, prefetch=0, seed=1)
threads = torch.get_num_threads()
done = 0
for batch in loader:
    b0, b1 = batch.blocks
    eager_out = model(b0, b1, batch.x)
    out = compiled(b0, b1, batch.x)
    torch.testing.assert_close(out, eager_out)
    F.cross_entropy(out, batch.y).backward()
    done += 1
    if done == 12:
        break
print(json.dumps({"batches": done, "compiles": len(compiles), "threads_seen": sorted(set(compiles)),
                  "threads": [threads, torch.get_num_threads()],
                  "graph_breaks": sum(counters["graph_break"].values())}))
""")
    assert result["batches"] == 12
    assert result["compiles"] <= 2 and result["graph_breaks"] == 0, result
    assert result["threads"][0] == result["threads"][1] and result["threads_seen"] == [result["threads"][0]], result
