"""Every error a user can make while writing or calling a vertex program, in one place.

Each test checks the exception type (seastar.TraceError, TypeError or ValueError; TraceError
derives from ValueError, so the type is compared exactly) and that the message points at the
user's code: this file's name and the line of the offending statement. The line is found with
``inspect`` from a marker comment (``# <- error``) on the offending line, so editing this file
cannot silently break the expectations. Also here: tracing runs once per input signature.
"""
from __future__ import annotations

import builtins
import inspect
import sys
from pathlib import Path

import pytest
import torch

import seastar as ss
from seastar.tracing import UnknownLength

FILE = Path(__file__).name
MARK = "# <- error"
BUILTINS = builtins.sum, builtins.max, builtins.min


def marked_line(obj, marker: str = MARK) -> int:
    """The line number of the single line of ``obj``'s source that contains ``marker``."""
    obj = getattr(obj, "fn", obj)  # a VertexProgram: its user function
    lines, start = inspect.getsourcelines(obj)
    hits = [start + i for i, text in enumerate(lines) if marker in text]
    assert len(hits) == 1, f"{marker!r} should mark exactly one line of {obj.__name__}"
    return hits[0]


def assert_raises_at(exc_type, prog, graph, match=None, **tensors):
    """Calls ``prog`` and checks the exception type, its location (the marked line of the program)
    and, optionally, its text; also that the failed trace left Python's builtins as they were."""
    with pytest.raises(exc_type) as info:
        prog(graph, backend="reference", **tensors)
    assert info.type is exc_type, f"expected exactly {exc_type.__name__}, got {info.type.__name__}: {info.value}"
    msg = str(info.value)
    line = marked_line(prog)
    assert f"{FILE}:{line}" in msg, f"the message should name {FILE}:{line}: {msg}"
    if match is not None:
        assert match in msg, msg
    assert (builtins.sum, builtins.max, builtins.min) == BUILTINS, "a failed trace left builtins patched"
    return msg


@pytest.fixture(scope="module")
def graph(graph_factory):
    return graph_factory("mixed")


@pytest.fixture(scope="module")
def typed(graph_factory):
    return graph_factory("typed_mixed")


def _h(graph, width=3, dtype=torch.float64):
    return torch.randn(graph.num_nodes, width, dtype=dtype, generator=torch.Generator().manual_seed(0))


def _w(graph, dtype=torch.float64):
    return torch.randn(graph.num_edges, 1, dtype=dtype, generator=torch.Generator().manual_seed(1))


# ---- mistakes in the program, found while tracing ------------------------------------------

def test_data_dependent_if(graph):
    @ss.vertex_program
    def prog(v):
        x = sum(e.src.h for e in v.in_edges())
        if x:  # <- error
            return x
        return -x

    assert_raises_at(ss.TraceError, prog, graph, match="control flow", h=_h(graph))


def test_comparison_of_traced_values(graph):
    @ss.vertex_program
    def prog(v):
        x = sum(e.src.h for e in v.in_edges())
        return x if x > 0 else -x  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="comparisons", h=_h(graph))


def test_torch_function_on_traced_value(graph):
    @ss.vertex_program
    def prog(v):
        x = torch.exp(v.h)  # <- error
        return sum(e.src.h for e in v.in_edges()) + x

    msg = assert_raises_at(ss.TraceError, prog, graph, h=_h(graph))
    assert "torch.exp" in msg and "seastar.exp" in msg


def test_torch_python_function_on_traced_value(graph):
    @ss.vertex_program
    def prog(v):
        return sum(torch.nn.functional.relu(e.src.h) for e in v.in_edges())  # <- error

    assert_raises_at(ss.TraceError, prog, graph, h=_h(graph))


def test_torch_tensor_inside_program(graph):
    weight = torch.ones(3, 3)

    @ss.vertex_program
    def prog(v):
        return sum(e.src.h @ weight for e in v.in_edges())  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="pass tensors by name", h=_h(graph))


def test_in_edge_plus_out_edge_values(graph):
    @ss.vertex_program
    def prog(v):
        e_in, e_out = next(iter(v.in_edges())), next(iter(v.out_edges()))
        return ss.sum(e_in.src.h + e_out.dst.h)  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="v.in_edges() and v.out_edges()", h=_h(graph))


def test_shape_mismatch(graph):
    @ss.vertex_program
    def prog(v):
        return sum(e.src.a + e.src.c for e in v.in_edges())  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="do not broadcast", a=_h(graph, 3), c=_h(graph, 4))


def test_matmul_shape_mismatch(graph):
    @ss.vertex_program
    def prog(v, W):
        return sum(e.src.h @ W for e in v.in_edges())  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="do not match", h=_h(graph, 3),
                     W=torch.randn(4, 2, dtype=torch.float64))


def test_empty_feature_axis(graph):
    @ss.vertex_program
    def prog(v):
        return sum(e.src.h for e in v.in_edges())  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="'h' has an empty axis: shape [" + f"{graph.num_nodes}, 0]",
                     h=_h(graph, 0))


def test_empty_weight_axis(graph):
    @ss.vertex_program
    def prog(v, W):
        return sum(e.src.h @ W for e in v.in_edges())

    # a parameter is bound before the program body runs: the error names the calling line
    with pytest.raises(ss.TraceError, match=r"'W' has an empty axis: shape \[3, 0\]") as info:
        prog(graph, backend="reference", h=_h(graph, 3), W=torch.randn(3, 0, dtype=torch.float64))  # <- call
    line = inspect.currentframe().f_lineno - 1
    assert f"{FILE}:{line}" in str(info.value), str(info.value)


def test_attribute_not_bound(graph):
    @ss.vertex_program
    def prog(v):
        return sum(e.src.h * e.src.missing for e in v.in_edges())  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="'missing' is not bound", h=_h(graph))


def test_edge_type_on_untyped_graph(graph):
    @ss.vertex_program
    def prog(v, W):
        return ss.sum(e.src.h @ W[e.type] for e in v.in_edges())  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="no edge types", h=_h(graph),
                     W=torch.randn(4, 3, 2, dtype=torch.float64))


def test_node_type_on_untyped_graph(graph):
    @ss.vertex_program
    def prog(v, W):
        return v.h @ W[v.type]  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="no node types", h=_h(graph),
                     W=torch.randn(3, 3, 2, dtype=torch.float64))


def test_typed_table_with_wrong_row_count(typed):
    assert typed.num_edge_types == 4

    @ss.vertex_program
    def prog(v, W):
        return ss.sum(e.src.h @ W[e.type] for e in v.in_edges())  # <- error

    assert_raises_at(ss.TraceError, prog, typed, match="3 rows but the graph has 4 edge types", h=_h(typed),
                     W=torch.randn(3, 3, 2, dtype=torch.float64))


def test_len_of_edge_list(graph):
    @ss.vertex_program
    def prog(v):
        n = len(v.in_edges())  # <- error
        return sum(e.src.h for e in v.in_edges()) / n

    # a TraceError that is also a TypeError (what list() takes as 'no length hint')
    assert issubclass(UnknownLength, ss.TraceError) and issubclass(UnknownLength, TypeError)
    assert_raises_at(UnknownLength, prog, graph, match="len()", h=_h(graph))


def test_aggregating_a_vertex_value(graph):
    @ss.vertex_program
    def prog(v):
        return ss.mean(v.h)  # <- error

    assert_raises_at(ss.TraceError, prog, graph, match="edge list", h=_h(graph))


def test_returning_a_non_traced_value_is_a_trace_error(graph):
    @ss.vertex_program
    def prog(v):
        return 1.0

    with pytest.raises(ss.TraceError) as info:
        prog(graph, h=_h(graph))
    assert info.type is ss.TraceError and "must return traced values" in str(info.value)


def test_returning_a_non_traced_value_names_the_line(graph):
    @ss.vertex_program
    def prog(v):
        unused = sum(e.src.h for e in v.in_edges())  # noqa: F841
        return 1.0  # <- error

    assert_raises_at(ss.TraceError, prog, graph, h=_h(graph))


def test_finding_the_return_line_keeps_a_profiler_already_set(graph):
    """The return line is found with a profile hook during the trace: one the user had set
    still sees the calls made meanwhile, and is the one set afterwards."""
    seen = []

    def user_profiler(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)

    @ss.vertex_program
    def prog(v):
        return sum(e.src.h for e in v.in_edges()), 2.0  # <- error

    sys.setprofile(user_profiler)
    try:
        with pytest.raises(ss.TraceError) as info:
            prog(graph, backend="reference", h=_h(graph))
        assert sys.getprofile() is user_profiler
    finally:
        sys.setprofile(None)
    assert f"{FILE}:{marked_line(prog)}" in str(info.value), str(info.value)
    assert "prog" in seen


# ---- mistakes in the call: bound tensors that do not fit the graph or each other -----------

@ss.vertex_program
def gcn(v):
    return sum(e.src.h * e.w for e in v.in_edges())


def test_wrong_row_count_of_vertex_tensor(graph):
    with pytest.raises(ValueError) as info:
        gcn(graph, h=_h(graph)[:-1], w=_w(graph))
    assert info.type is ValueError
    assert "'h'" in str(info.value) and f"{graph.num_nodes - 1} rows" in str(info.value)


def test_wrong_row_count_of_edge_tensor(graph):
    with pytest.raises(ValueError) as info:
        gcn(graph, h=_h(graph), w=_w(graph)[:-1])
    assert info.type is ValueError
    assert "'w'" in str(info.value) and f"{graph.num_edges} edges" in str(info.value)


def test_parameter_not_bound(graph):
    @ss.vertex_program
    def prog(v, W):
        return ss.sum(e.src.h @ W for e in v.in_edges())

    with pytest.raises(TypeError) as info:
        prog(graph, h=_h(graph))
    assert info.type is TypeError and "'W'" in str(info.value)


def test_integer_feature_tensor(graph):
    with pytest.raises(TypeError) as info:
        gcn(graph, h=_h(graph).long(), w=_w(graph))
    assert info.type is TypeError and "'h'" in str(info.value) and "floating-point" in str(info.value)


def test_mixed_dtypes(graph):
    with pytest.raises(TypeError) as info:
        gcn(graph, h=_h(graph, dtype=torch.float32), w=_w(graph))
    assert info.type is TypeError and "mix dtypes" in str(info.value)


@pytest.mark.parametrize("case", ["rows", "int", "dtypes"])
def test_call_errors_name_the_calling_line(graph, case):
    h, w = _h(graph), _w(graph)
    bad = {"rows": dict(h=h[:-1], w=w), "int": dict(h=h.long(), w=w), "dtypes": dict(h=h.float(), w=w)}[case]
    with pytest.raises((TypeError, ValueError)) as info:
        gcn(graph, **bad)  # <- error
    line = marked_line(test_call_errors_name_the_calling_line)
    assert f"{FILE}:{line}" in str(info.value), str(info.value)


# ---- what is not an error ---------------------------------------------------------------------

def test_list_of_an_edge_list(graph):
    @ss.vertex_program
    def prog(v):
        (e,) = list(v.in_edges())
        return ss.sum(e.src.h)

    h = _h(graph)
    src, dst = graph.edge_index
    want = torch.zeros_like(h).index_add_(0, dst, h[src])
    for backend in ("reference", "fused"):
        torch.testing.assert_close(prog(graph, backend=backend, h=h), want, rtol=1e-12, atol=1e-12)


def test_failed_trace_restores_builtins_and_is_not_cached(graph):
    @ss.vertex_program
    def prog(v):
        return sum(e.src.h * e.src.scale for e in v.in_edges())

    with pytest.raises(ss.TraceError):
        prog(graph, h=_h(graph))
    assert (builtins.sum, builtins.max, builtins.min) == BUILTINS
    out = prog(graph, backend="reference", h=_h(graph), scale=_h(graph))
    assert out.shape == (graph.num_nodes, 3)


# ---- tracing happens once per signature ---------------------------------------------------

def test_traced_once_per_signature(graph, graph_factory):
    calls = 0

    @ss.vertex_program
    def prog(v):
        nonlocal calls
        calls += 1
        return sum(e.src.h * e.w for e in v.in_edges())

    h, w = _h(graph), _w(graph)
    a = prog(graph, backend="reference", h=h, w=w)
    b = prog(graph, backend="reference", h=h.clone(), w=w.clone())
    assert calls == 1
    torch.testing.assert_close(a, b)

    prog(graph, backend="reference", h=_h(graph, 5), w=w)  # a new feature width: traced again
    assert calls == 2
    prog(graph, backend="reference", h=_h(graph, 5), w=w)
    assert calls == 2

    other = graph_factory("hub")  # new row counts change no code: the same trace serves them
    got = prog(other, backend="reference", h=_h(other), w=_w(other))
    assert calls == 2
    ei = other.edge_index
    expected = torch.zeros(other.num_nodes, 3, dtype=got.dtype).index_add_(0, ei[1], _h(other)[ei[0]] * _w(other))
    torch.testing.assert_close(got, expected)
    prog(graph, backend="reference", h=h, w=w)
    assert calls == 2


def test_dumps_of_a_program_with_a_hostile_name_stay_in_the_dump_folder(tmp_path, monkeypatch):
    """SEASTAR_DUMP_DIR file names come from the program's name made safe, as in the kernel
    cache: no path separators, no '..', no shell characters."""
    dump = tmp_path / "dumps"
    monkeypatch.setenv("SEASTAR_DUMP_DIR", str(dump))
    graph = ss.Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)

    @ss.vertex_program(name="../../up/$(touch x); é")
    def hostile(v):
        return ss.sum(e.src.h for e in v.in_edges())

    hostile(graph, h=torch.ones(2, 3), backend="fused")
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert written and all(p.parts[0] == "dumps" and len(p.parts) == 2 for p in written), written
    assert any(p.name.endswith(".0-traced.gir") for p in written)
    assert all(set(p.name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") for p in written)
