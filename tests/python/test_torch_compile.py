"""torch.compile, torch.export, torch.jit and torch.profiler over seastar.nn layers.

Each layer is compiled with ``fullgraph=True`` (so any graph break fails the test) and compared
with an eager copy of itself in float64: outputs, the input's gradient and every parameter's
gradient. The eager layers are checked against plain torch in test_nn.py / test_hetero.py; here
the question is whether the compiled code runs the same kernels on the same derived graphs.
These models compile with ``dynamic=False``, one graph at a time; test_compile_minibatch.py runs
one compiled model over many graphs. Most layers compile with the "aot_eager" backend (Dynamo, the fake implementations and
AOTAutograd: everything that concerns Seastar's ops), one model with the default inductor.
The graph is ``small_graph`` (isolated vertices, self loops, multi-edges, a hub, four relations,
one of them empty). The compiled model is built once per layer and reused by the checks. The ops themselves also
pass ``torch.library.opcheck`` (fake implementations against the kernels, autograd).
"""
from __future__ import annotations

import copy

import pytest
import torch

import seastar as ss
import seastar.nn as snn
from seastar import torch_ops

from conftest import NUM_NODE_TYPES, NUM_RELATIONS

DT = torch.float64
TOL = dict(rtol=1e-10, atol=1e-12)
F_IN = 4

LAYERS = {
    "gcn": lambda: snn.GCNConv(F_IN, 3),
    "gcn_no_loops": lambda: snn.GCNConv(F_IN, 3, normalize=False),
    "gat": lambda: snn.GATConv(F_IN, 3, heads=2),
    "sage": lambda: snn.SAGEConv(F_IN, 3, aggr=["mean", "max"]),
    "gin": lambda: snn.GINConv(torch.nn.Linear(F_IN, 3), train_eps=True),
    "appnp": lambda: snn.APPNP(K=2, alpha=0.1),
    "rgcn": lambda: snn.RGCNConv(F_IN, 3, NUM_RELATIONS, aggr="mean"),
    "rgcn_basis": lambda: snn.RGCNConv(F_IN, 3, NUM_RELATIONS, num_bases=2, mode="per_basis"),
    "hgt": lambda: snn.HGTConv(F_IN, F_IN, num_node_types=NUM_NODE_TYPES, num_edge_types=NUM_RELATIONS, heads=2),
    "hetero": lambda: snn.HeteroConv({0: snn.GCNConv(F_IN, 3), 1: snn.SAGEConv(F_IN, 3), 3: snn.GATConv(F_IN, 3)}),
}


def _features(graph, seed=0):
    return torch.randn(graph.num_nodes, F_IN, dtype=DT, generator=torch.Generator().manual_seed(seed))


def _step(model, graph, x):
    """Output, x's gradient and the parameters' gradients of ``sum(model(graph, x) * weights)``."""
    model.zero_grad()
    x = x.clone().requires_grad_()
    out = model(graph, x)
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=DT).view_as(out)
    (out * weights).sum().backward()
    grads = {n.removeprefix("_orig_mod."): p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.detach(), x.grad.clone(), grads


def _assert_same(compiled, eager):
    out_c, gx_c, gp_c = compiled
    out_e, gx_e, gp_e = eager
    torch.testing.assert_close(out_c, out_e, **TOL)
    torch.testing.assert_close(gx_c, gx_e, **TOL)
    assert gp_c.keys() == gp_e.keys()
    for name in gp_e:
        torch.testing.assert_close(gp_c[name], gp_e[name], **TOL, msg=name)


class Counter:
    """A torch.compile backend (aot_eager) that counts the graphs it is given."""

    def __init__(self):
        self.frames = 0

    def __call__(self, gm, example_inputs):
        self.frames += 1
        from torch._dynamo.backends.common import aot_autograd
        from functorch.compile import nop
        return aot_autograd(fw_compiler=nop, bw_compiler=nop)(gm, example_inputs)


@pytest.fixture(scope="module")
def compiled_layers():
    """name -> (compiled layer, eager copy, backend counter), built on first use."""
    cache = {}

    def get(name):
        if name not in cache:
            torch.manual_seed(0)
            layer = LAYERS[name]().to(DT)
            counter = Counter()
            cache[name] = (torch.compile(layer, fullgraph=True, dynamic=False, backend=counter), copy.deepcopy(layer), counter)
        return cache[name]
    return get


@pytest.mark.parametrize("name", list(LAYERS))
def test_fullgraph_compile_matches_eager(small_graph, compiled_layers, name):
    compiled, eager, counter = compiled_layers(name)
    graph = small_graph.graph
    x = _features(graph)
    if name != "appnp":  # the one layer without parameters
        assert any(p.requires_grad for p in eager.parameters())
    _assert_same(_step(compiled, graph, x), _step(eager, graph, x))
    frames = counter.frames
    # the same graph again, with other features: no recompilation, still equal
    x2 = _features(graph, seed=1)
    _assert_same(_step(compiled, graph, x2), _step(eager, graph, x2))
    assert counter.frames == frames, "the same graph recompiled"


def test_other_graph_recompiles_and_matches(graph_factory, compiled_layers):
    """A compiled model is specialised to a graph: another graph compiles again and is right;
    a graph seen before finds its compiled code (the guard compares graphs by uid)."""
    compiled, eager, counter = compiled_layers("gat")
    graphs = [graph_factory(name) for name in ("typed_hub", "typed_no_edges")]
    for graph in graphs:
        x = _features(graph, seed=2)
        _assert_same(_step(compiled, graph, x), _step(eager, graph, x))
    before = counter.frames
    x = _features(graphs[0], seed=3)
    _assert_same(_step(compiled, graphs[0], x), _step(eager, graphs[0], x))
    assert counter.frames == before


class WithEdgeWeights(torch.nn.Module):
    def __init__(self, layer, w):
        super().__init__()
        self.layer = layer
        self.register_buffer("w", w)

    def forward(self, graph, x):
        return self.layer(graph, x, self.w)


@pytest.mark.parametrize("eager_first", [False, True], ids=["compiled_first", "eager_first"])
@pytest.mark.parametrize("name", ["gcn", "appnp"])
def test_cached_layers_with_edge_weights(small_graph, name, eager_first):
    """``cached=True`` with edge weights: compiled code cannot keep what tracing made on the
    layer (it holds it as constants instead), and a layer that kept its graph eagerly (edges in
    destination order) hands it to compiled code; both equal an uncached eager layer."""
    graph = small_graph.graph
    w = torch.rand(graph.num_edges, dtype=DT, generator=torch.Generator().manual_seed(4)) + 0.1
    make = {"gcn": lambda cached: snn.GCNConv(F_IN, 3, cached=cached),
            "appnp": lambda cached: snn.APPNP(K=2, alpha=0.1, cached=cached)}[name]
    torch.manual_seed(0)
    cached = make(True).to(DT)
    plain = make(False).to(DT)
    plain.load_state_dict(cached.state_dict())
    model, eager = WithEdgeWeights(cached, w), WithEdgeWeights(plain, w)
    x = _features(graph)
    if eager_first:
        _step(model, graph, x)
        assert cached._cached_edge_index is not None
    compiled = torch.compile(model, fullgraph=True, dynamic=False, backend=Counter())
    _assert_same(_step(compiled, graph, x), _step(eager, graph, x))
    x2 = _features(graph, seed=1)
    _assert_same(_step(compiled, graph, x2), _step(eager, graph, x2))


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = snn.GCNConv(F_IN, 8)
        self.conv2 = snn.GATConv(8, 3, heads=2, concat=False)

    def forward(self, graph, x):
        return self.conv2(graph, torch.relu(self.conv1(graph, x)))


def test_inductor_compile_matches_eager(small_graph):
    torch.manual_seed(0)
    model = TwoLayers().to(DT)
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, fullgraph=True, dynamic=False)  # the default backend, inductor
    graph = small_graph.graph
    x = _features(graph)
    _assert_same(_step(compiled, graph, x), _step(eager, graph, x))


def test_export_runs_equal_to_eager(small_graph):
    torch.manual_seed(0)
    model = TwoLayers().to(DT).eval()
    graph = small_graph.graph
    x = _features(graph)
    with torch.no_grad():
        expected = model(graph, x)
        program = torch.export.export(snn.WithGraph(model, graph), (x,))
    ops = {str(n.target) for n in program.graph.nodes if n.op == "call_function"}
    # the kernels, and the graph's own tensors (a constant of the program) read by an op
    assert "seastar.vertex_program.default" in ops and "seastar.graph_tensor_of.default" in ops
    with torch.no_grad():
        torch.testing.assert_close(program.module()(x), expected, **TOL)
        x2 = _features(graph, seed=5)
        torch.testing.assert_close(program.module()(x2), model(graph, x2), **TOL)


def _in_degree_column(graph):
    return graph.in_degrees().to(torch.float64).unsqueeze(-1)


class _ScaledByDegree(torch.nn.Module):
    """A model of the user's own that reads a value derived from the real graph
    (``graph_ops.derived``): compiled code holds it as a constant of that graph."""

    def forward(self, graph, x):
        return x * ss.graph_ops.derived(graph, _in_degree_column)


def test_export_with_the_graph_as_an_argument_raises_where_a_value_needs_the_real_graph(small_graph):
    """A graph argument of an exported program is its tensors (test_compile_minibatch.py exports
    one; every seastar.nn option reads it by ops). A value derived from the real graph by
    ``graph_ops.derived`` cannot be read off those tensors: export says so, naming WithGraph,
    which binds the graph instead, and the bound export runs."""
    graph, x = small_graph.graph, _features(small_graph.graph)
    with torch.no_grad(), pytest.raises(Exception, match="WithGraph"):
        torch.export.export(_ScaledByDegree(), (graph, x))
    with torch.no_grad():
        program = torch.export.export(snn.WithGraph(_ScaledByDegree(), graph), (x,))
    torch.testing.assert_close(program.module()(x), _ScaledByDegree()(graph, x), **TOL)


def test_with_graph_needs_a_graph():
    with pytest.raises(TypeError, match="binds a seastar.Graph"):
        snn.WithGraph(snn.GCNConv(F_IN, 3), torch.zeros(2, 3))


def test_compiled_code_takes_an_edge_index(small_graph):
    """PyG's ``conv(x, edge_index)`` compiles: the graph is built and checked by an op at run
    time (test_compile_sweep.py sweeps the layers)."""
    conv = snn.GCNConv(F_IN, 3).to(DT)
    x = _features(small_graph.graph)
    edge_index = small_graph.graph.edge_index.long()
    compiled = torch.compile(lambda x, ei: conv(x, ei), fullgraph=True, dynamic=False, backend="aot_eager")
    torch.testing.assert_close(compiled(x, edge_index), conv(x, edge_index), **TOL)


@pytest.mark.parametrize("aggr", ["mean", "add"])
def test_rgcn_per_run_ops_pass_opcheck(small_graph, aggr):
    """RGCNConv's per_run path as ops (``seastar.nn.rgcn_runs_op``): torch.library's checks, and
    the op's output and gradients are the eager per_run path's, for each pair of gradients asked."""
    from seastar.nn.rgcn_runs_op import rgcn_per_run
    graph = small_graph.graph
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(graph.num_nodes, F_IN, dtype=DT, generator=gen)
    W = torch.randn(NUM_RELATIONS, F_IN, 3, dtype=DT, generator=gen)
    conv = snn.RGCNConv(F_IN, 3, NUM_RELATIONS, aggr=aggr, mode="per_run", root_weight=False, bias=False).to(DT)
    with torch.no_grad():
        conv.weight.copy_(W)
    g_args, kind = graph._in.op_args(), graph._kind.ints()
    mean = aggr == "mean"
    for need_x, need_W in ((True, True), (False, True), (True, False)):
        xs, Ws = x.clone().requires_grad_(need_x), W.clone().requires_grad_(need_W)
        torch.library.opcheck(torch.ops.seastar.rgcn_per_run.default, (g_args, kind, xs, Ws, mean, None))
        out = rgcn_per_run(g_args, kind, xs, Ws, mean, None)
        grad = torch.randn(out.shape, dtype=DT, generator=gen)
        torch.library.opcheck(torch.ops.seastar.rgcn_per_run_backward.default,
                              (g_args, kind, xs, Ws, grad, mean, None, need_x, need_W),
                              test_utils=("test_schema", "test_faketensor"))
        conv.zero_grad()
        xe = x.clone().requires_grad_(need_x)
        expected = conv(graph, xe)
        torch.testing.assert_close(out, expected, **TOL)
        wanted = [t for t, need in ((xs, need_x), (Ws, need_W)) if need]
        got = torch.autograd.grad(out, wanted, grad)
        (expected * grad).sum().backward()
        for g_got, g_want in zip(got, [t for t, need in ((xe.grad, need_x), (conv.weight.grad, need_W)) if need]):
            torch.testing.assert_close(g_got, g_want, **TOL)


def test_a_block_with_global_sources_inside_compile_is_refused():
    local = ss.Graph.from_edge_index(torch.tensor([[2, 0, 1], [0, 1, 1]]), num_nodes=(3, 2))
    block = local.with_global_sources(torch.tensor([5, 1, 7]), 9)
    conv = snn.SAGEConv(F_IN, 3).to(DT)
    compiled = torch.compile(conv, fullgraph=True, dynamic=False, backend="aot_eager")
    with pytest.raises(Exception, match="global source ids .* not supported inside torch.compile"):
        compiled(block, torch.randn(9, F_IN, dtype=DT))
    # the local block compiles, and equals the eager in-place read
    x = torch.randn(9, F_IN, dtype=DT)
    torch.testing.assert_close(compiled(local, x[block.source_ids]), conv(block, x), rtol=1e-12, atol=1e-12)


def test_jit_trace_refuses_with_a_clear_error(small_graph):
    conv = snn.GCNConv(F_IN, 3).to(DT).eval().requires_grad_(False)
    graph, x = small_graph.graph, _features(small_graph.graph)
    with pytest.raises(RuntimeError, match="torch.jit.trace cannot record Seastar's kernels"):
        torch.jit.trace(lambda x: conv(graph, x), (x,))


def test_jit_script_refuses_with_a_clear_error():
    model = torch.nn.Sequential(torch.nn.Linear(F_IN, F_IN), snn.GATConv(F_IN, 3))
    with pytest.raises(RuntimeError, match="torch.jit.script cannot compile seastar.nn layers"):
        torch.jit.script(model)


def _profiled_names(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return {e.name for e in prof.events()}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_profiler_names_each_kernel(small_graph, compiled_layers, compiled):
    model, eager, _ = compiled_layers("gat")
    model = model if compiled else eager
    graph, x = small_graph.graph, _features(small_graph.graph)
    _step(model, graph, x)  # compiled and kernels built before profiling
    names = _profiled_names(lambda: _step(model, graph, x))
    assert {"seastar::gat.forward", "seastar::gat.backward"} <= names, sorted(n for n in names if "seastar" in n)
    if compiled:
        assert {"seastar::vertex_program", "seastar::vertex_program_backward"} <= names


def test_graph_identity_is_its_uid(small_graph):
    graph = small_graph.graph
    assert graph == ss.Graph(graph._g) and hash(graph) == hash(ss.Graph(graph._g))
    other = ss.Graph.from_edge_index(graph.edge_index, num_nodes=graph.num_nodes)
    assert other != graph
    calls = []

    def count_edges(g, scale):
        calls.append(scale)
        return g.num_edges * scale
    assert graph.derive(count_edges, 2) == graph.derive(count_edges, 2) == 2 * graph.num_edges
    assert calls == [2]  # derived once per graph and arguments
    with pytest.raises(RuntimeError, match="does not hold"):
        torch_ops.graph_by_uid(-1)


@pytest.mark.parametrize("program_name", ["weighted_sum", "gat"])
def test_ops_pass_opcheck(small_graph, program_name):
    """torch.library's own checks of the ops: schema, fake implementation against the real
    kernels, autograd registration, AOT dispatch (dynamic shapes)."""
    from seastar.nn.gat_conv import gat_program
    from seastar.nn.gcn_conv import weighted_sum
    graph = small_graph.graph
    gen = torch.Generator().manual_seed(4)
    n, e = graph.num_nodes, graph.num_edges
    if program_name == "weighted_sum":
        program = weighted_sum
        tensors = {"h": torch.randn(n, 3, dtype=DT, generator=gen), "w": torch.randn(e, 1, dtype=DT, generator=gen)}
    else:
        program = gat_program(0.2, False, True, False)
        tensors = {k: torch.randn(n, 2, c, dtype=DT, generator=gen) for k, c in (("h", 3), ("el", 1), ("er", 1))}
    for t in tensors.values():
        t.requires_grad_()
    # the graph as the ops take it: its tensors (sizes as shapes) and its kind
    role = {"h": "src|dst", "el": "src|dst", "er": "src|dst", "w": "edge"}
    metas = tuple((k, role[k], tuple(t.shape[1:]), str(t.dtype).removeprefix("torch."), "cpu", True)
                  for k, t in sorted(tensors.items()))
    sid, names = torch_ops.program_signature(graph._kind, program.uid, metas, "auto")
    bound = [tensors[k] for k in names]
    g_args, kind = graph._in.op_args(), graph._kind.ints()
    torch.library.opcheck(torch.ops.seastar.vertex_program.default, (sid, g_args, kind, bound))
    outs = torch.ops.seastar.vertex_program(sid, g_args, kind, bound)
    grads = [torch.randn_like(o) for o in outs]
    torch.library.opcheck(torch.ops.seastar.vertex_program_backward.default, (sid, g_args, kind, bound, grads),
                          test_utils=("test_schema", "test_faketensor"))
    # the op's gradients are the eager program's
    expected = torch.autograd.grad(program(graph, **tensors), bound, grads[0])
    got = torch.autograd.grad(outs[0], bound, grads[0])
    for k, a, b in zip(names, got, expected):
        torch.testing.assert_close(a, b, **TOL, msg=k)
