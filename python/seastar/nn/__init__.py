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
constructor options and parameter names (state dicts load both ways); see the README's "Coming
from PyG" and ``_inputs.py``.
"""
from .appnp import APPNP
from .gat_conv import GATConv
from .gcn_conv import GCNConv
from .gin_conv import GINConv
from .sage_conv import SAGEConv
from .softmax import edge_softmax
from .rgcn_conv import RGCNConv
from .hgt_conv import HGTConv
from .hetero_conv import HeteroConv

__all__ = ["GCNConv", "GATConv", "SAGEConv", "GINConv", "APPNP", "edge_softmax", "set_backend",
           "RGCNConv", "HGTConv", "HeteroConv", "inference"]


def inference(layers, graph, x, batch_size: int = 4096, between=None):
    """Layer-wise full-neighbourhood inference in chunks of destinations, for graphs too large
    for one full forward pass: ``seastar.loader.layerwise_inference``."""
    from ..loader import layerwise_inference
    return layerwise_inference(layers, graph, x, batch_size, between)


def set_backend(module, backend):
    """Sets ``backend`` ("auto", "fused", "reference" or None) on every seastar layer in ``module``."""
    for m in module.modules():
        if isinstance(m, (GCNConv, GATConv, SAGEConv, GINConv, APPNP, RGCNConv, HGTConv)):
            m.backend = backend
    return module
