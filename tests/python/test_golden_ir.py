"""Golden tests of the printed GIR: the traced program of every model in models.py, and the
lowered backward program of GCN and GAT, compared with the text in tests/golden/*.gir.

A difference means the tracer, the printer or a pass changed what it produces. If the change is
intended, regenerate the files and review the diff before committing it:

    SEASTAR_UPDATE_GOLDEN=1 python -m pytest tests/python/test_golden_ir.py

The traces of GCN, GAT and R-GCN are also produced with the C++ API by tests/cpp/test_golden.cpp,
which compares them with the same files, so both front ends must print identical text.
The shape signature is fixed (feature widths from models.py, a typed graph with 4 relations and
3 node types); row counts do not appear in the text.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import models
import seastar as ss

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("SEASTAR_UPDATE_GOLDEN") == "1"


def _graph() -> "ss.Graph":
    """A fixed typed graph; only its types matter to the printed text."""
    ei = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 0, 1]])
    return ss.Graph.from_edge_index(ei, num_nodes=5, edge_type=torch.tensor([0, 1, 0, 3, 0]),
                                    node_type=torch.tensor([0, 1, 2, 0, 1]), num_edge_types=4, num_node_types=3)


def _inputs(model, requires_grad: bool = False):
    graph = _graph()
    tensors = model.make_inputs(graph, seed=0)
    return graph, {k: t.requires_grad_(requires_grad) for k, t in tensors.items()}


def _compare(name: str, text: str) -> None:
    path = GOLDEN_DIR / name
    if UPDATE:
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"{path} is missing; run with SEASTAR_UPDATE_GOLDEN=1 to create it, then review it")
    expected = path.read_text()
    assert text == expected, f"printed GIR differs from {path} (SEASTAR_UPDATE_GOLDEN=1 regenerates it)"


@pytest.mark.parametrize("model", list(models.MODELS.values()), ids=lambda m: m.name)
def test_traced_program(model):
    graph, tensors = _inputs(model)
    _compare(f"{model.name}.gir", str(model.program.trace(graph, **tensors)))


@pytest.mark.parametrize("name", ["gcn", "gat"])
def test_lowered_backward(name):
    model = models.MODELS[name]
    graph, tensors = _inputs(model, requires_grad=True)
    lowered = model.program.lower(graph, **tensors)
    assert sorted(lowered.wrt) == sorted(tensors)
    _compare(f"{name}.backward.gir", lowered.backward.print("backward"))


def test_trace_is_deterministic():
    """Two traces of one program print the same text (golden files would be flaky otherwise)."""
    model = models.MODELS["gat"]
    graph, tensors = _inputs(model)
    assert str(model.program.trace(graph, **tensors)) == str(model.program.trace(graph, **tensors))


# ---- facts the golden files must show; they make a bad regeneration obvious -------------------

def _backward(name):
    model = models.MODELS[name]
    graph, tensors = _inputs(model, requires_grad=True)
    bwd = model.program.lower(graph, **tensors).backward
    values = bwd.values
    grads = {n: values[i] for n, i in zip(bwd.output_names, bwd.outputs)}
    return values, grads


def test_gcn_backward_of_source_read_is_out_edge_sum():
    """d/dh of ``e.src.h`` under an in-edge sum is a sum over out-edges, the only traversal needed."""
    values, grads = _backward("gcn")
    assert (grads["h"]["op"], grads["h"]["group"]) == ("agg_sum", "src")
    assert grads["w"]["space"] == "Edge" and grads["w"]["shape"] == [1]
    assert [v["group"] for v in values if v["op"].startswith("agg_")] == ["src"]


def test_gat_backward_traversals():
    """el and h are read at sources (out-edge sums), er at destinations (an in-edge sum); the
    softmax is recomputed from the inputs rather than read from a stored forward value."""
    values, grads = _backward("gat")
    assert (grads["h"]["op"], grads["h"]["group"]) == ("agg_sum", "src")
    assert (grads["el"]["op"], grads["el"]["group"]) == ("agg_sum", "src")
    assert (grads["er"]["op"], grads["er"]["group"]) == ("agg_sum", "dst")
    ops = [v["op"] for v in values]
    assert ops.count("grad_output") == 1 and ops.count("softmax") == 1


# ---- the seastar.nn programs the C++ layers (api/nn.cpp) run too ------------------------------
# The C++ layers write their programs in C++ (a lambda cannot run Python's and a C++ program must
# not need an interpreter); these files pin both to one text: tests/cpp/test_program.cpp traces
# api/nn.cpp's programs with the same shapes (5 vertices, the edges of _untyped_graph, F = 3,
# HEADS = 2) and compares them with the same files.
def _untyped_graph() -> "ss.Graph":
    return ss.Graph.from_edge_index(torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 0, 1]]), num_nodes=5)


def _nn_programs():
    from seastar.nn._programs import neighbour_sum, weighted_sum
    from seastar.nn.gat_conv import gat_program
    n, e, f, heads = 5, 5, 3, 2
    gat = {"h": (n, heads, f), "el": (n, heads, 1), "er": (n, heads, 1)}
    return {"nn_neighbour_sum": (neighbour_sum, {"h": (n, f)}),
            "nn_gcn_weighted_sum": (weighted_sum, {"h": (n, f), "w": (e, 1)}),
            "nn_gat": (gat_program(0.2, False), gat),
            "nn_gat_dropout": (gat_program(0.2, True), dict(gat, m=(e, heads, 1)))}


@pytest.mark.parametrize("name", ["nn_neighbour_sum", "nn_gcn_weighted_sum", "nn_gat", "nn_gat_dropout"])
def test_the_programs_the_cpp_layers_share(name):
    program, shapes = _nn_programs()[name]
    tensors = {k: torch.zeros(s) for k, s in shapes.items()}
    _compare(f"{name}.gir", str(program.trace(_untyped_graph(), **tensors)))
