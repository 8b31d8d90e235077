"""What one benchmark subprocess measures. ``benchmarks/run.py`` starts one process per
configuration (``run.py --child CONFIG_JSON``) and reads the JSON object it prints last.

Three kinds of child:

* ``train``: one layer, one graph, one feature width, one implementation (``fused`` seastar
  kernels, ``unfused`` = the same seastar layer with ``backend="reference"`` (plain torch
  gather / index_add), or ``pyg`` = PyTorch Geometric's layer). Times a training epoch
  (forward + backward + Adam step of layer -> ReLU -> linear head, cross-entropy over all
  vertices) and a forward pass (eval, no_grad); peak memory of the training epochs. The peers:
  ``pyg`` (PyG's layer on its int64 ``edge_index``), ``pyg_csr`` (PyG's layer on a
  ``torch.sparse`` CSR ``adj_t``, its memory-efficient path: one SpMM, no E x F message
  tensor; not for GAT), ``pyg_compile`` (``pyg`` under ``torch.compile``) and ``dgl`` (DGL's
  layer; the child runs under the DGL environment's interpreter, ``_peer_env.py``).
* ``latency``: first-call latency of a fused layer (tracing, lowering, compiling or loading the
  kernels, running) in a process whose ``SEASTAR_CACHE_DIR`` the parent chose: a fresh folder
  (cold) or the one a previous process filled (warm).
* ``roofline``: the GCN aggregation program (on the graph as given, and with its edges in
  destination order: ``seastar.reorder_graph(g, edges="dst")``) and the GAT program alone
  (forward, no autograd), with bytes moved per call, against the copy bandwidth measured in the
  same process.
* ``breakdown``: the ``train`` epoch under ``torch.profiler``, its time split into torch's dense
  ops (GEMMs, activations, the loss, the optimiser) and the rest (the graph kernels, and the
  Python between ops); see ``DENSE_EXCLUDED``.

Peak memory on CPU: the process's RSS high-water mark (``VmHWM``) after it is reset
(``/proc/self/clear_refs`` = 5, Linux) once setup is done and again after the untimed
epochs, so it is the steady epochs' peak (``peak_first_epoch_mb`` keeps the untimed epochs'). ``getrusage(RUSAGE_SELF).ru_maxrss`` is
recorded too but not used: Linux carries the parent's high-water mark into a child across
fork + exec, so it reads at least the parent's RSS (see ``maxrss_mb``). ``peak_mem_mb`` is that peak
minus the RSS right after the imports, so it counts the graph, the features, the model and
everything training allocates, but not the interpreter and the libraries (PyG's import is
heavier than seastar's). On CUDA: ``torch.cuda.max_memory_allocated`` over the epochs.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

T_START = time.perf_counter()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

NUM_CLASSES = 16
GAT_HEADS = 4
APPNP_K, APPNP_ALPHA = 10, 0.1


# -- memory ------------------------------------------------------------------------------------
from _proc_memory import hwm_mb, maxrss_mb, reset_peak, rss_mb, rss_parts_mb  # noqa: E402


class AnonSampler:
    """Samples RssAnon every ``period`` s on a thread: a cross-check of the getrusage peak that
    file-backed pages (library code faulted in or evicted while the process runs) cannot move."""

    def __init__(self, period: float = 0.01):
        import threading
        self.period, self.peak = period, 0.0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_parts_mb().get("RssAnon", 0.0))
            self._stop.wait(self.period)

    def __enter__(self):
        self.peak = rss_parts_mb().get("RssAnon", 0.0)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_parts_mb().get("RssAnon", 0.0))


# -- timing ------------------------------------------------------------------------------------
def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch
        torch.cuda.synchronize()


def timed(fn, device: str):
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - t0, out


def median_ms(xs):
    return 1e3 * statistics.median(xs) if xs else None


# -- graphs and models -------------------------------------------------------------------------
def load_edge_index(cfg):
    import torch
    return torch.load(cfg["edge_index_path"], weights_only=True)


def _gin_mlp(F: int):
    from torch import nn
    return nn.Sequential(nn.Linear(F, F), nn.ReLU(), nn.Linear(F, F))


def _pyg_conv(layer: str, F: int):
    import torch_geometric.nn as gnn
    if layer == "gcn":
        return gnn.GCNConv(F, F, cached=True)
    if layer == "gat":
        return gnn.GATConv(F, F // GAT_HEADS, heads=GAT_HEADS, negative_slope=0.2)
    if layer == "sage":
        return gnn.SAGEConv(F, F, aggr="mean")
    if layer == "gin":
        return gnn.GINConv(_gin_mlp(F), eps=0.0, train_eps=False)
    if layer == "appnp":
        return gnn.APPNP(APPNP_K, APPNP_ALPHA, cached=True)
    raise ValueError(layer)


def _dgl_conv(layer: str, F: int):
    """DGL's layers with PyG's settings; the graph carries the self loops PyG adds (GCN, GAT,
    APPNP; see make_graph), so ``norm="both"`` is PyG's symmetric normalisation."""
    import dgl.nn as dglnn
    if layer == "gcn":
        return dglnn.GraphConv(F, F, norm="both")
    if layer == "gat":
        return dglnn.GATConv(F, F // GAT_HEADS, num_heads=GAT_HEADS, negative_slope=0.2)
    if layer == "sage":
        return dglnn.SAGEConv(F, F, "mean")
    if layer == "gin":
        return dglnn.GINConv(_gin_mlp(F), "sum", init_eps=0.0, learn_eps=False)
    if layer == "appnp":
        return dglnn.APPNPConv(APPNP_K, APPNP_ALPHA)
    raise ValueError(layer)


def _seastar_conv(layer: str, F: int, backend: str):
    import seastar as ss
    if layer == "gcn":
        return ss.nn.GCNConv(F, F, backend=backend)
    if layer == "gat":
        return ss.nn.GATConv(F, F // GAT_HEADS, heads=GAT_HEADS, negative_slope=0.2, backend=backend)
    if layer == "sage":
        return ss.nn.SAGEConv(F, F, aggr="mean", backend=backend)
    if layer == "gin":
        return ss.nn.GINConv(_gin_mlp(F), eps=0.0, train_eps=False, backend=backend)
    if layer == "appnp":
        return ss.nn.APPNP(APPNP_K, APPNP_ALPHA, backend=backend)
    raise ValueError(layer)


def build_model(layer: str, impl: str, F: int):
    """The model conv -> ReLU -> Linear(F, 16) for one layer and implementation.

    Hyper-parameters match across implementations: GCN (self loops, symmetric normalisation,
    cached: seastar caches per graph, PyG with ``cached=True``, DGL's GraphConv on the graph
    with self loops), GAT (4 heads x F/4 channels, concat, slope 0.2, no dropout, self loops),
    GraphSAGE (mean, root weight), GIN (sum, eps=0, MLP Linear-ReLU-Linear), APPNP
    (Linear(F, F), then K=10, alpha=0.1, cached norm).
    """
    import torch
    from torch import nn

    if impl in ("pyg", "pyg_csr", "pyg_compile"):
        conv = _pyg_conv(layer, F)

        def call(conv, g, x):
            return conv(x, g)
    elif impl == "dgl":
        conv = _dgl_conv(layer, F)

        def call(conv, g, x):
            out = conv(g, x)
            return out.flatten(1) if layer == "gat" else out  # [N, heads, F/heads] -> concat
    else:
        conv = _seastar_conv(layer, F, "fused" if impl == "fused" else "reference")

        def call(conv, g, x):
            return conv(g, x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = nn.Linear(F, F) if layer == "appnp" else None
            self.conv = conv
            self.head = nn.Linear(F, NUM_CLASSES)

        def forward(self, g, x):
            if self.pre is not None:
                x = self.pre(x)
            return self.head(torch.relu(call(self.conv, g, x)))

    net = Net()
    if impl == "pyg_compile":
        return torch.compile(net)
    return net


def make_graph(cfg, impl: str, device: str, layer: str = None):
    """What the layer takes as its graph: a seastar Graph, PyG's int64 edge_index, PyG's
    ``torch.sparse`` CSR ``adj_t`` (row = destination), or a DGL graph (with self loops for
    the layers whose PyG and seastar versions add them)."""
    ei = load_edge_index(cfg)
    N = cfg["num_nodes"]
    if impl in ("pyg", "pyg_compile"):
        return ei.to(device)
    if impl == "pyg_csr":
        from torch_geometric.utils import to_torch_csr_tensor
        return to_torch_csr_tensor(ei.flip(0), size=(N, N)).to(device)
    if impl == "dgl":
        import dgl
        g = dgl.graph((ei[0], ei[1]), num_nodes=N)
        del ei
        if layer in ("gcn", "gat", "appnp"):
            g = dgl.add_self_loop(g)
        return g.to(device)
    import seastar as ss
    g = ss.Graph.from_edge_index(ei, num_nodes=N)
    del ei
    if device != "cpu":
        g.to(device)
    return g


# -- kinds -------------------------------------------------------------------------------------
def _warm_libraries(device: str) -> None:
    """One tiny Adam step, so that lazily imported torch modules (the optimiser pulls in a lot)
    and allocator pools count as library overhead in every implementation alike, not as the
    memory of the first configuration."""
    import torch
    lin = torch.nn.Linear(4, 4).to(device)
    opt = torch.optim.Adam(lin.parameters(), lr=0.01)
    loss = torch.nn.functional.cross_entropy(torch.relu(lin(torch.randn(8, 4, device=device))),
                                             torch.zeros(8, dtype=torch.long, device=device))
    loss.backward()
    opt.step()


def run_train(cfg) -> dict:
    import torch
    import torch.nn.functional as Fn
    if cfg["impl"].startswith("pyg"):
        import torch_geometric  # noqa: F401  (import cost outside the measured memory)
        import torch_geometric.nn  # noqa: F401
    elif cfg["impl"] == "dgl":
        import dgl  # noqa: F401
        import dgl.nn  # noqa: F401
    else:
        import seastar
        # Seastar as its README configures it for training: the caching CPU allocator, which
        # users switch on themselves (import seastar leaves torch's); the peers keep theirs
        seastar.install_cpu_allocator()
    device, threads, F = cfg["device"], cfg["threads"], cfg["width"]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    _warm_libraries(device)
    t_import = time.perf_counter() - T_START
    rss_import = rss_mb()
    parts_import = rss_parts_mb()
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()

    t0 = time.perf_counter()
    g = make_graph(cfg, cfg["impl"], device, cfg["layer"])
    N = cfg["num_nodes"]
    x = torch.randn(N, F, device=device)
    y = torch.randint(0, NUM_CLASSES, (N,), device=device)
    model = build_model(cfg["layer"], cfg["impl"], F).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def epoch():
        opt.zero_grad(set_to_none=True)
        loss = Fn.cross_entropy(model(g, x), y)
        loss.backward()
        opt.step()
        return loss

    def forward():
        with torch.no_grad():
            return model(g, x)

    rss_setup = rss_mb()
    t_setup = time.perf_counter() - t0
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    hiwater_reset = reset_peak()

    t0 = time.perf_counter()
    model.train()
    with AnonSampler() as sampler:
        first_epoch, _ = timed(epoch, device)  # tracing, kernel load (cache was warmed), PyG/GCN caches
        # torch.compile compiles again on the second call (PyG's GCN / APPNP cache is filled
        # by then): one more untimed epoch for it.
        for _ in range(cfg["warmup"] + (1 if cfg.get("impl") == "pyg_compile" else 0)):
            timed(epoch, device)
        # The peak is that of the steady epochs: the high-water mark is reset again after the
        # untimed ones, whose transient compile-time memory (torch.compile's, seastar's
        # tracing) is recorded apart. What they left resident (caches) still counts.
        peak_first_abs = hwm_mb()
        if device.startswith("cuda"):
            peak_first_abs = torch.cuda.max_memory_allocated() / 2**20
            torch.cuda.reset_peak_memory_stats()
        hiwater_reset = reset_peak() and hiwater_reset
        sampler.peak = rss_parts_mb().get("RssAnon", 0.0)
        epochs = [timed(epoch, device)[0] for _ in range(cfg["repeats"])]
    parts_end = rss_parts_mb()
    file_growth = max(0.0, parts_end.get("RssFile", 0.0) - parts_import.get("RssFile", 0.0))
    anon_peak = sampler.peak - parts_import.get("RssAnon", 0.0)
    if device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated() / 2**20
        peak_mem, training_extra = peak, None
        peak_abs = peak
    else:
        # RSS high-water mark since the reset, less the RSS after the imports, less library
        # pages (file-backed) faulted in since then: the tensors' and the graph's memory.
        peak_abs = hwm_mb()
        peak_mem = peak_abs - rss_import - file_growth
        peak_first_abs = peak_first_abs - rss_import - file_growth
        training_extra = peak_abs - rss_setup - file_growth if hiwater_reset else None
    model.eval()
    timed(forward, device)
    forwards = [timed(forward, device)[0] for _ in range(cfg["repeats"])]
    t_measure = time.perf_counter() - t0
    return dict(status="ok", N=N, E=cfg["num_edges"], epoch_ms=median_ms(epochs),
                epoch_ms_all=[1e3 * t for t in epochs], forward_ms=median_ms(forwards),
                first_epoch_ms=1e3 * first_epoch, peak_mem_mb=peak_mem, peak_first_epoch_mb=peak_first_abs, training_extra_mb=training_extra,
                peak_rss_abs_mb=peak_abs, rss_after_import_mb=rss_import, rss_after_setup_mb=rss_setup,
                hiwater_reset=hiwater_reset, peak_source="VmHWM", ru_maxrss_mb=maxrss_mb(),
                rss_file_growth_mb=file_growth, anon_peak_mb=anon_peak,
                rss_parts_import=parts_import, rss_parts_end=parts_end, import_s=t_import, setup_s=t_setup, measure_s=t_measure)


def run_latency(cfg) -> dict:
    """First forward and first backward of a fused layer in a fresh process, then steady state."""
    import torch
    import torch.nn.functional as Fn
    import seastar  # noqa: F401
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(0)
    t_import = time.perf_counter() - T_START
    F = cfg["width"]
    g = make_graph(cfg, "fused", "cpu")
    x = torch.randn(cfg["num_nodes"], F)
    y = torch.randint(0, NUM_CLASSES, (cfg["num_nodes"],))
    model = build_model(cfg["layer"], "fused", F)

    # Warm torch itself first (BLAS, autograd engine, the optimiser-free ops of the model) with
    # a dense stand-in of the same sizes, so the first call below measures seastar's part:
    # tracing, lowering, compiling / loading kernels, per-graph preprocessing, running.
    w_in = torch.randn(F, F, requires_grad=True)
    head = torch.nn.Linear(F, NUM_CLASSES)
    for _ in range(2):
        Fn.cross_entropy(head(torch.relu(x @ w_in)), y).backward()

    def fwd():
        return model(g, x)

    def bwd(out):
        Fn.cross_entropy(out, y).backward()

    t_fwd, out = timed(fwd, "cpu")
    t_bwd, _ = timed(lambda: bwd(out), "cpu")
    fwds, bwds = [], []
    for _ in range(3):
        tf, out = timed(fwd, "cpu")
        tb, _ = timed(lambda: bwd(out), "cpu")
        fwds.append(tf)
        bwds.append(tb)
    cache = os.environ.get("SEASTAR_CACHE_DIR", "")
    files = sorted(os.listdir(cache)) if cache and os.path.isdir(cache) else []
    return dict(status="ok", import_s=t_import, first_forward_ms=1e3 * t_fwd, first_backward_ms=1e3 * t_bwd,
                first_call_ms=1e3 * (t_fwd + t_bwd), steady_forward_ms=median_ms(fwds),
                steady_backward_ms=median_ms(bwds),
                overhead_ms=1e3 * (t_fwd + t_bwd) - median_ms(fwds) - median_ms(bwds),
                cached_kernels=len([f for f in files if f.endswith(".so")]))


# -- roofline ----------------------------------------------------------------------------------
def copy_bandwidth(threads: int, mbytes: int = 256, reps: int = 7) -> dict:
    """STREAM-style copy: bytes read + bytes written per second (write-allocate not counted)."""
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    n = mbytes * 2**20 // 4
    src = torch.ones(n)
    dst = torch.empty(n)
    dst.copy_(src)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        dst.copy_(src)
        ts.append(time.perf_counter() - t0)
    a, b = src.numpy(), dst.numpy()
    np.copyto(b, a)
    tn = []
    for _ in range(3):
        t0 = time.perf_counter()
        np.copyto(b, a)
        tn.append(time.perf_counter() - t0)
    nbytes = 2 * n * 4
    return dict(buffer_mb=mbytes, torch_copy_gbps=nbytes / statistics.median(ts) / 1e9,
                torch_copy_best_gbps=nbytes / min(ts) / 1e9,
                numpy_copy_1thread_gbps=nbytes / statistics.median(tn) / 1e9)


def roofline_bytes(program: str, N: int, E: int, F: int, I: int = 4, T: int = 4, H: int = GAT_HEADS,
                   passes: int = 1):
    """Bytes moved by one forward call of the program, counted two ways.

    Per-edge gathers are counted at full size every time (no cache reuse assumed), index arrays
    at the graph's index width ``I`` (int32 here: 4), floats at ``T`` = 4 bytes. ``passes`` is
    the number of traversals of the in-edges in the generated forward source (counted from
    ``SEASTAR_DUMP_DIR``: GAT was three, max / normaliser / weighted sum, before the online
    softmax; it is one now).

    GCN aggregation ``out[v] = sum_{e=(u->v)} h[u] * w[e]`` (h [N, F], w [E, 1]):
      useful   = (N+1)*I (CSC offsets) + E*I (source ids) + E*T (w) + E*F*T (h rows)
                 + N*F*T (out written)
      executed = useful + N*I (degree order) + E*I (edge ids: w is read through the CSC slot's
                 original edge id, as the generated kernel does)

    GAT ``out[v] = sum_e softmax_e(leaky_relu(el[u] + er[v])) * h[u]`` (h [N, H, F/H],
    el, er [N, H, 1]):
      useful   = (N+1)*I + E*I + E*H*T (el of the source) + E*F*T (h rows) + N*H*T (er)
                 + N*F*T (out written)   -- one pass
      executed = passes*((N+1)*I + N*I (degree order) + E*I + E*H*T + N*H*T) + E*F*T + N*F*T
                 + (passes-1)*2*N*H*T (softmax statistics written by one pass, read by the next)
    """
    if program == "gcn_agg":
        useful = (N + 1) * I + E * I + E * T + E * F * T + N * F * T
        executed = useful + N * I + E * I
    elif program == "gat":
        useful = (N + 1) * I + E * I + E * H * T + E * F * T + N * H * T + N * F * T
        executed = (passes * ((N + 1) * I + N * I + E * I + E * H * T + N * H * T) + E * F * T + N * F * T
                    + (passes - 1) * 2 * N * H * T)
    else:
        raise ValueError(program)
    return useful, executed


def count_passes(program: str) -> int:
    """Traversals of the in-edges in the dumped forward source of ``program`` (1 if not dumped)."""
    import glob
    import re
    d = os.environ.get("SEASTAR_DUMP_DIR")
    files = glob.glob(os.path.join(d, f"{program}.forward.f32_i*.cpp")) if d else []
    if not files:
        return 1
    with open(files[0]) as fh:
        return max(1, len(re.findall(r"for \(int64_t j = beg; j < end; \+\+j\)", fh.read())))


def run_roofline(cfg) -> dict:
    import torch
    import seastar as ss
    from seastar.nn.gat_conv import gat_program
    from seastar.nn.gcn_conv import weighted_sum
    threads = cfg["threads"]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    g = make_graph(cfg, "fused", "cpu")
    N, E = g.num_nodes, g.num_edges
    I = 4 if g.index_dtype == torch.int32 else 8
    backend = "fused" if cfg["impl"] == "fused" else "reference"
    copy0 = copy_bandwidth(threads)
    rows = []
    graphs = {"gcn_agg": g, "gat": g}
    if "gcn_agg_dst" in cfg["programs"]:  # the edges in destination order: per-edge reads stream
        graphs["gcn_agg_dst"] = ss.reorder_graph(g, edges="dst").graph
    for F in cfg["widths"]:
        for program in cfg["programs"]:
            if program in ("gcn_agg", "gcn_agg_dst"):
                prog = weighted_sum
                tensors = dict(h=torch.randn(N, F), w=torch.rand(E, 1))
            else:
                prog = gat_program(0.2, False)
                tensors = dict(h=torch.randn(N, GAT_HEADS, F // GAT_HEADS), el=torch.randn(N, GAT_HEADS, 1),
                               er=torch.randn(N, GAT_HEADS, 1))
            graph = graphs[program]
            with torch.no_grad():
                prog(graph, backend=backend, **tensors)  # trace, load kernels
                ts = []
                for _ in range(cfg["repeats"]):
                    t0 = time.perf_counter()
                    prog(graph, backend=backend, **tensors)
                    ts.append(time.perf_counter() - t0)
            t = statistics.median(ts)
            passes = count_passes("gat" if program == "gat" else "gcn_weighted_sum")
            useful, executed = roofline_bytes("gat" if program == "gat" else "gcn_agg", N, E, F, I=I, passes=passes)
            rows.append(dict(program=program, width=F, passes=passes, kernel_ms=1e3 * t, bytes_useful=useful,
                             bytes_executed=executed, gbps_useful=useful / t / 1e9,
                             gbps_executed=executed / t / 1e9))
            del tensors
    copy1 = copy_bandwidth(threads)
    copy_gbps = max(copy0["torch_copy_gbps"], copy1["torch_copy_gbps"])
    for r in rows:
        r["copy_gbps"] = copy_gbps
        r["ratio_useful"] = r["gbps_useful"] / copy_gbps
        r["ratio_executed"] = r["gbps_executed"] / copy_gbps
    return dict(status="ok", N=N, E=E, index_bytes=I, copy_before=copy0, copy_after=copy1,
                copy_gbps=copy_gbps, rows=rows)


# aten ops that are message passing, not dense compute: PyG's SpMM (which sorts) / gather / scatter paths.
# Every other aten op counts as dense; seastar's kernels (``seastar::*``) and DGL's (called
# through its FFI, so seen by the profiler as time outside any op) fall outside "dense".
DENSE_EXCLUDED = ("sparse", "spmm", "index_add", "index_select", "scatter", "gather", "segment", "sort")


def _is_dense(name: str) -> bool:
    return name.startswith("aten::") and not any(k in name for k in DENSE_EXCLUDED)


def run_breakdown(cfg) -> dict:
    import torch
    import torch.nn.functional as Fn
    from torch.profiler import ProfilerActivity, profile
    if cfg["impl"] == "dgl":
        import dgl  # noqa: F401
    elif cfg["impl"].startswith("pyg"):
        import torch_geometric.nn  # noqa: F401
    else:
        import seastar  # noqa: F401
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(0)
    g = make_graph(cfg, cfg["impl"], "cpu", cfg["layer"])
    N, F = cfg["num_nodes"], cfg["width"]
    x, y = torch.randn(N, F), torch.randint(0, NUM_CLASSES, (N,))
    model = build_model(cfg["layer"], cfg["impl"], F)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def epoch():
        opt.zero_grad(set_to_none=True)
        Fn.cross_entropy(model(g, x), y).backward()
        opt.step()

    for _ in range(2):  # tracing, caches
        epoch()
    plain = [timed(epoch, "cpu")[0] for _ in range(cfg["repeats"])]
    n = cfg["repeats"]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(n):
            epoch()
        wall = (time.perf_counter() - t0) / n
    dense = graph_ops = 0.0
    top = {}
    for ev in prof.key_averages():
        t = ev.self_cpu_time_total / 1e6 / n
        if _is_dense(ev.key):
            dense += t
            top[ev.key] = t
        elif ev.key.startswith("seastar::") or ev.key.startswith("aten::"):
            graph_ops += t
    top = dict(sorted(top.items(), key=lambda kv: -kv[1])[:6])
    return dict(status="ok", epoch_ms=median_ms(plain), profiled_epoch_ms=1e3 * wall, dense_ms=1e3 * dense,
                graph_ops_ms=1e3 * graph_ops, rest_ms=1e3 * (wall - dense),
                top_dense_ms={k: 1e3 * v for k, v in top.items()})


def main(cfg_json: str) -> None:
    cfg = json.loads(cfg_json)
    kind = cfg["kind"]
    try:
        if kind == "train":
            res = run_train(cfg)
        elif kind == "latency":
            res = run_latency(cfg)
        elif kind == "roofline":
            res = run_roofline(cfg)
        elif kind == "breakdown":
            res = run_breakdown(cfg)
        else:
            raise ValueError(f"unknown kind {kind!r}")
    except NotImplementedError as exc:  # e.g. the fused backend on a CUDA tensor
        res = dict(status="unavailable", reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    res["child_wall_s"] = time.perf_counter() - T_START
    print(json.dumps(res), flush=True)
