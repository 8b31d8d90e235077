"""Graph neural network layers built from vertex programs, with PyTorch Geometric's conventions.

    import seastar as ss
    conv = ss.nn.GCNConv(16, 7)
    out = conv(graph, x)              # the graph comes first

All graph work (propagation, attention softmax, aggregation) is a vertex program, run by the
fused backend when available and the reference backend (plain torch) otherwise; dense work
(``x @ W``, biases, feature dropout) is ordinary torch around it. Each layer has a ``backend``
attribute (``None`` = the program's default, "auto") to force "fused" or "reference".

The layers are also drop-ins for PyG's: ``conv(x, edge_index)``, sparse ``adj_t``, ``Data``
objects, bipartite ``(x_src, x_dst)`` pairs, ``size``, edge weights and features, PyG's
constructor options and parameter names (state dicts load both ways); see docs/pyg.md and
``_inputs.py``.
"""
import torch

from ..graph import Graph
from ..loader import layerwise_inference
from .agnn_conv import AGNNConv
from .appnp import APPNP
from .edge_conv import EdgeConv
from .film_conv import FiLMConv
from .gat_conv import GATConv
from .gatv2_conv import GATv2Conv
from .gcn_conv import GCNConv
from .gin_conv import GINConv
from .gine_conv import GINEConv
from .gmm_conv import GMMConv
from .graph_conv import GraphConv
from .res_gated_graph_conv import ResGatedGraphConv
from .sage_conv import SAGEConv
from .transformer_conv import TransformerConv
from .softmax import edge_softmax
from .rgcn_conv import RGCNConv
from .hgt_conv import HGTConv
from .hgt_dict import HGTDictConv  # PyG's metadata form of HGTConv, which HGTConv(..., metadata) builds
from .hetero_conv import HeteroConv

LAYERS = (GCNConv, GATConv, GATv2Conv, TransformerConv, SAGEConv, GINConv, GINEConv, GraphConv, ResGatedGraphConv,
          AGNNConv, EdgeConv, GMMConv, FiLMConv, APPNP, RGCNConv, HGTConv, HeteroConv)

SCRIPT_MESSAGE = ("torch.jit.script cannot compile seastar.nn layers (their graph work is Python that traces "
                  "vertex programs); use torch.compile, or torch.export for a deployable program")


def _refuse_script(self):
    raise RuntimeError(f"{type(self).__name__}: {SCRIPT_MESSAGE}")


for _layer in LAYERS:  # torch.jit.script calls this on every submodule before compiling any
    _layer.__prepare_scriptable__ = _refuse_script

__all__ = ["GCNConv", "GATConv", "GATv2Conv", "TransformerConv", "SAGEConv", "GINConv", "GINEConv", "GraphConv",
           "ResGatedGraphConv", "AGNNConv", "EdgeConv", "GMMConv", "FiLMConv", "APPNP", "edge_softmax", "set_backend", "RGCNConv", "HGTConv", "HeteroConv", "inference", "WithGraph"]


class WithGraph(torch.nn.Module):
    """``model`` with ``graph`` bound: ``WithGraph(model, graph)(*args) == model(graph, *args)``.

    For ``torch.export`` of a model on one graph: the exported program then takes only tensors,
    and the graph, with every value derived from it, is a constant of the program. A model whose
    layers derive per-graph values that only the real graph gives (GCN's normalisation, APPNP,
    HGT, HeteroConv) is exported this way; SAGE, GAT, GIN and R-GCN can also take the graph as
    an argument (``Graph.dynamic_shapes``), one program for every graph of its kind."""

    def __init__(self, model: torch.nn.Module, graph):
        super().__init__()
        if not isinstance(graph, Graph):
            raise TypeError(f"WithGraph binds a seastar.Graph, got {type(graph).__name__}")
        self.model, self.graph = model, graph

    def forward(self, *args, **kwargs):
        return self.model(self.graph, *args, **kwargs)


def inference(layers, graph, x, batch_size: int = 4096, between=None):
    """Layer-wise full-neighbourhood inference in chunks of destinations, for graphs too large
    for one full forward pass: ``seastar.loader.layerwise_inference``."""
    return layerwise_inference(layers, graph, x, batch_size, between)


def set_backend(module, backend):
    """Sets ``backend`` ("auto", "fused", "reference" or None) on every seastar layer in ``module``."""
    for m in module.modules():
        if isinstance(m, LAYERS) and not isinstance(m, HeteroConv):
            m.backend = backend
    return module
