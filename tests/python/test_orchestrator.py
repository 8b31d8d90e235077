"""The one orchestrator (``_C.ProgramCore``, runtime/engine/program_core.h) as Python's vertex programs use it.

Python keeps the tracer (its proxies), the reference fallback and the autograd glue; the trace
cache, the call checks, the binding and the kernels are C++'s, shared with seastar::Program.
Results are checked against plain torch in float64.
"""
import threading

import pytest
import torch

import seastar as ss


def _graph():
    # vertex 4 isolated, 0 -> 1 twice, a self loop on 2
    ei = torch.tensor([[0, 0, 1, 2, 3, 2], [1, 1, 2, 2, 0, 3]])
    return ss.Graph.from_edge_index(ei, num_nodes=5)


def _weighted_sum(g, h, w):
    src, dst = g.edge_index.long()
    return torch.zeros(g.num_nodes, h.shape[1], dtype=h.dtype).index_add(0, dst, h[src] * w[src])


class CountingProgram(ss.VertexProgram):
    """Counts how often the tracer runs (the orchestrator calls it only on a cache miss)."""

    def __init__(self, fn, **kw):
        super().__init__(fn, **kw)
        self.traced = 0

    def trace(self, graph, **tensors):
        self.traced += 1
        return super().trace(graph, **tensors)


def _program(name):
    def fn(v):
        return ss.sum(e.src.h * e.src.w for e in v.in_edges())
    return CountingProgram(fn, name=name)


@pytest.mark.parametrize("backend", ["fused", "reference"])
def test_concurrent_first_calls_trace_once_and_agree_with_torch(backend):
    g = _graph()
    prog = _program(f"concurrent_{backend}")
    h = torch.randn(5, 3, dtype=torch.float64)
    w = torch.randn(5, 1, dtype=torch.float64)
    outs, errors = [None] * 4, []
    start = threading.Barrier(4)

    def work(i):
        try:
            start.wait()
            outs[i] = prog(g, backend=backend, h=h, w=w)
        except Exception as e:  # reported below: a thread's exception would otherwise vanish
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a call hung (the cache's lock and the GIL)"
    assert not errors, errors
    assert prog.traced == 1 and prog.num_traces == 1
    want = _weighted_sum(g, h, w)
    for o in outs:
        torch.testing.assert_close(o, want, rtol=1e-12, atol=1e-12)


def test_the_tracer_runs_only_on_a_miss():
    prog = _program("counted")
    for n in (5, 7, 9):  # other row counts: the same code
        ei = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n])
        g = ss.Graph.from_edge_index(ei, num_nodes=n)
        prog(g, h=torch.randn(n, 3, dtype=torch.float64), w=torch.randn(n, 1, dtype=torch.float64))
    assert prog.traced == 1
    g = _graph()
    prog(g, h=torch.randn(5, 4, dtype=torch.float64), w=torch.randn(5, 1, dtype=torch.float64))  # a feature shape
    prog(g, h=torch.randn(5, 4, dtype=torch.float64, requires_grad=True), w=torch.randn(5, 1, dtype=torch.float64))
    prog(g, h=torch.randn(5, 4), w=torch.randn(5, 1))  # a dtype
    assert prog.traced == 4 and prog.num_traces == 4


def test_a_failed_trace_leaves_no_entry_and_names_the_users_line():
    @ss.vertex_program
    def bad(v):
        return ss.sum(e.src.h + e.src.g for e in v.in_edges())  # features [2] and [3] do not broadcast

    g = _graph()
    with pytest.raises(ss.TraceError, match="test_orchestrator.py"):
        bad(g, h=torch.randn(5, 2), g=torch.randn(5, 3))
    assert bad.num_traces == 0
    assert bad(g, h=torch.randn(5, 3), g=torch.randn(5, 3)).shape == (5, 3)
    assert bad.num_traces == 1


def test_python_gets_the_cpp_call_checks():
    prog = _program("checked")
    g = _graph()
    h, w = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"'h' must be a dense \(strided\) tensor"):
        prog(g, h=h.to_sparse(), w=w)
    with pytest.raises(TypeError, match=r"'w' must be a floating-point tensor, got torch.int64"):
        prog(g, h=h, w=w.long())
    with pytest.raises(TypeError, match=r"inputs mix dtypes \['torch.float32', 'torch.float64'\]"):
        prog(g, h=h, w=w.float())
    with pytest.raises(ValueError, match="'h' has 4 rows but the graph has 5 vertices"):
        prog(g, h=h[:4], w=w)


def test_a_call_crosses_into_the_orchestrator_once():
    """The signature, the checks, the fused backend's answer and the outputs come from one
    call(); a misfit of the tensors comes back from it and is raised naming the calling line."""
    class Recording:
        def __init__(self, core):
            self.core, self.calls = core, []

        def __getattr__(self, name):
            self.calls.append(name)
            return getattr(self.core, name)

    prog = _program("prepared_once")
    prog._core = Recording(prog._core)
    g = _graph()
    h, w = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)
    for _ in range(2):
        torch.testing.assert_close(prog(g, h=h, w=w), _weighted_sum(g, h, w), rtol=1e-12, atol=1e-12)
    assert prog._core.calls == ["call", "call"]
    with pytest.raises(ValueError, match=r"test_orchestrator.py:\d+: .*'h' has 4 rows but the graph has 5"):
        prog(g, h=h[:4], w=w)


def test_the_fused_backend_says_what_it_cannot_run():
    prog = _program("unsupported_probe")
    g = _graph()
    h, w = torch.randn(5, 3), torch.randn(5, 1)
    with pytest.raises(NotImplementedError, match=r"float32 and float64; \['torch.float16'\] inputs run in the CUDA kernels"):
        prog(g, backend="fused", h=h.half(), w=w.half())
    sig = prog._compiled(g, dict(h=h, w=w))
    assert sig.unsupported(dict(h=h, w=w)) == ""
    assert sig.unsupported(dict(h=h.to("meta"), w=w.to("meta"))) == \
        "the fused backend runs CPU and CUDA tensors, not ['meta']"
    assert list(sig.names) == ["h", "w"] and list(sig.lowered.wrt) == []
