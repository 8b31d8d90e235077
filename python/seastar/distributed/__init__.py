"""Training on many processes and machines with ``torch.distributed``.

* ``partition_graph`` / ``load_partition``: one folder per part (owned vertices, halo, local
  in-edges, node data); ``python -m seastar.distributed.partition`` on the command line.
* Partition-parallel full-graph training (``PartitionedGraph``, ``PartitionParallel``): every
  layer exchanges only its halo rows, forward and backward, and matches single-process training.
* Data-parallel mini-batches (``SeedShards``, ``shared_dataset``): disjoint equal seed shares
  per epoch, gradients averaged by DistributedDataParallel, the graph and features shared by
  the processes of a machine through a memory-mapped file; or partitioned features fetched
  from their owners per batch (``PartitionedFeatures``).
* ``launch``: process groups under torchrun or spawned on localhost, with timeouts.
* ``Checkpointer``: checkpoints written atomically, the last K kept, resumed after a restart
  (elastic under torchrun).
* ``CachedFeatures``: a cache of the hot remote rows of partitioned features.
* ``plan`` / ``calibrate``: a cost model of epoch time and memory per process, calibrated on
  the machine, that picks the mode and the feature placement.

Design and scaling model: docs/DISTRIBUTED.md.
"""
from __future__ import annotations

from .partition import Partition, assemble, load_partition, partition_graph, read_report

__all__ = ["Partition", "assemble", "load_partition", "partition_graph", "read_report",
           "HaloExchange", "PartitionedGraph", "PartitionParallel", "allreduce_gradients",
           "broadcast_parameters", "SeedShards", "shared_dataset", "SharedDataset", "DistributedNeighborLoader",
           "PartitionedFeatures", "PartitionNeighborLoader", "launch", "Checkpointer", "CachedFeatures",
           "hot_by_degree", "hot_by_sampling", "plan", "calibrate", "ModelSpec", "Plan"]


def __getattr__(name):  # the torch.distributed parts load on first use
    if name == "HaloExchange":
        from .halo import HaloExchange
        return HaloExchange
    if name in ("PartitionedGraph", "PartitionParallel", "allreduce_gradients", "broadcast_parameters"):
        from . import fullgraph
        return getattr(fullgraph, name)
    if name in ("SeedShards", "shared_dataset", "SharedDataset", "DistributedNeighborLoader", "PartitionedFeatures",
                "PartitionNeighborLoader"):
        from . import minibatch
        return getattr(minibatch, name)
    if name == "Checkpointer":
        from .checkpoint import Checkpointer
        return Checkpointer
    if name in ("CachedFeatures", "hot_by_degree", "hot_by_sampling"):
        from . import feature_cache
        return getattr(feature_cache, name)
    if name in ("plan", "ModelSpec", "Plan"):
        from . import planner
        return getattr(planner, name)
    if name == "calibrate":
        from .calibration import calibrate
        return calibrate
    if name == "launch":
        import importlib
        return importlib.import_module(".launch", __name__)
    raise AttributeError(f"module 'seastar.distributed' has no attribute {name!r}")
