#!/usr/bin/env python
"""Node classification on several processes or machines with torch.distributed.

    torchrun --nproc_per_node=2 examples/distributed/train.py --mode fullgraph --dataset cora --model gcn
    torchrun --nproc_per_node=2 examples/distributed/train.py --mode minibatch --dataset cora --model sage
    torchrun --nnodes=2 --node_rank=R --master_addr=HOST --master_port=29500 --nproc_per_node=1 \\
        examples/distributed/train.py --mode fullgraph --dataset synthetic --num-nodes 1000000

``--mode fullgraph``: partition-parallel full-graph training. Rank 0 partitions the graph into
one part per process (``--partition-dir``, kept for later runs; on several machines it must be
on a file system they share, or be made beforehand with ``python -m
seastar.distributed.partition``); every rank trains on its part, exchanging halo rows per layer.
``--mode minibatch``: data-parallel mini-batches with DistributedDataParallel; the first process
of each machine writes the dataset to ``--shared-file`` and every process of the machine maps it.
GCN trains there on the sampled blocks, normalised by each block's degrees (DGL's GraphConv; see
``seastar.nn.GCNConv``).

Rank 0 prints one line per epoch and the final accuracy; every log line carries its rank. A
collective waits at most ``--timeout`` seconds, so a dead rank makes the others exit (status 1,
with a message) instead of hanging.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import signal
import sys
import time
from pathlib import Path

# This script's choice, made before torch loads OpenMP: torch's threads spin briefly after each op,
# then sleep, so they do not take the cores a shared machine's other processes need (docs/process.md:
# "What Seastar changes in the process"). An exported GOMP_SPINCOUNT or OMP_WAIT_POLICY wins.
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")
try:
    import seastar as ss
except ImportError:  # run from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import seastar as ss

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from seastar.distributed import launch  # noqa: E402
from seastar.distributed.checkpoint import (Checkpointer, gather_objects, load_agreed, restart_count,  # noqa: E402
                                            rng_state, set_rng_state)
from seastar.distributed.feature_cache import (CachedFeatures, capacity_rows, epoch_report,  # noqa: E402
                                               hot_by_degree, hot_by_sampling)
from seastar.distributed.fullgraph import PartitionedGraph, PartitionParallel, allreduce_gradients  # noqa: E402
from seastar.distributed.minibatch import (DistributedNeighborLoader, PartitionedFeatures,  # noqa: E402
                                           PartitionNeighborLoader, shared_dataset)

log = logging.getLogger("seastar.examples.distributed")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["minibatch", "fullgraph", "auto"], required=True,
                   help="auto: seastar.distributed.plan picks the mode and the feature placement from a cost model "
                        "calibrated on this machine")
    p.add_argument("--memory-per-process", type=float, help="auto: MB a process may use (default: no limit)")
    p.add_argument("--dataset", choices=["cora", "citeseer", "synthetic", "typed"], default="cora",
                   help="synthetic: a power-law graph; typed: a graph whose classes are written in the relation "
                        "types of the in-edges (for --model rgcn)")
    p.add_argument("--model", choices=["gcn", "gat", "sage", "rgcn"], default="sage",
                   help="rgcn: RGCNConv over the edge types, summed per relation (needs --dataset typed)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--num-nodes", type=int, default=100_000, help="synthetic, typed: vertices")
    p.add_argument("--avg-degree", type=float, default=10.0, help="synthetic, typed: edges per vertex")
    p.add_argument("--num-features", type=int, default=64, help="synthetic, typed: feature width")
    p.add_argument("--num-classes", type=int, default=10, help="synthetic, typed: classes")
    p.add_argument("--num-relations", type=int, default=8, help="typed: edge types")
    p.add_argument("--train-fraction", type=float, default=0.6, help="synthetic, typed: share of training vertices")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--heads", type=int, default=4, help="GAT heads of the hidden layer")
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--fanouts", default="10,5", help="minibatch: neighbours per hop from the seeds")
    p.add_argument("--batch-size", type=int, default=512, help="minibatch: seeds per batch per rank")
    p.add_argument("--partition-dir", help="fullgraph: the partition (default: a folder under /tmp per dataset "
                                           "and process count); '{parts}' in it stands for the part count")
    p.add_argument("--method", choices=["metis", "random"], default="metis", help="fullgraph: partitioner")
    p.add_argument("--features", choices=["shared", "partitioned"], default="shared",
                   help="minibatch: every machine maps all features (shared), or each rank keeps its part's rows "
                        "and fetches remote ones per batch (partitioned; seeds are then the rank's own part's)")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--cache-fraction", type=float, help="partitioned features: cache this share of the remote "
                                                             "rows (the hottest)")
    cache.add_argument("--cache-rows", type=int, help="partitioned features: cache this many remote rows")
    cache.add_argument("--cache-bytes", type=int, help="partitioned features: cache this many bytes of remote rows")
    p.add_argument("--cache-policy", choices=["degree", "sampling"], default="degree",
                   help="which remote rows the cache holds: highest out-degree, or most read by a sampling pass")
    p.add_argument("--shared-file", help="minibatch: the dataset file mapped by the processes of a machine "
                                         "(default under /dev/shm)")
    p.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads per process (0: torch's default)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a collective waits for the other ranks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32", help="parameters and features")
    p.add_argument("--checkpoint-dir", help="checkpoints go here (one folder every rank sees); a restarted job "
                                            "resumes from the newest")
    p.add_argument("--checkpoint-every", type=int, default=10, help="optimizer steps between checkpoints")
    p.add_argument("--keep-checkpoints", type=int, default=3, help="how many checkpoints to keep")
    p.add_argument("--save-final", help="rank 0 saves the final parameters and the steps applied to them here")
    p.add_argument("--step-log", help="rank 0 appends '<restart> <step>' here after every optimizer step")
    p.add_argument("--json", help="rank 0 writes the result here")
    p.add_argument("--exit-at-epoch", type=int, default=0, help=argparse.SUPPRESS)  # tests: this rank dies there
    p.add_argument("--exit-at-step", type=int, default=0, help=argparse.SUPPRESS)  # ... after this step (first try)
    p.add_argument("--exit-rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--exit-kills-agent", action="store_true", help=argparse.SUPPRESS)  # ... and its torchrun agent
    args = p.parse_args(argv)
    try:
        args.fanouts = [int(f) for f in args.fanouts.split(",")]
    except ValueError:
        p.error(f"--fanouts must be comma-separated integers, got {args.fanouts!r}")
    for name in ("epochs", "hidden", "heads", "batch_size", "num_nodes", "num_features", "num_classes",
                 "num_relations", "checkpoint_every", "keep_checkpoints"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if not 0.0 <= args.dropout < 1.0:
        p.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.features != "partitioned" and args.mode != "auto" and (args.cache_fraction is not None or args.cache_rows is not None or
                                           args.cache_bytes is not None):
        p.error("a feature cache (--cache-fraction/--cache-rows/--cache-bytes) needs --features partitioned")
    if not 0.0 < args.train_fraction < 1.0:
        p.error(f"--train-fraction must be in (0, 1), got {args.train_fraction}")
    if args.model == "rgcn" and args.dataset != "typed":
        p.error(f"--model rgcn needs edge types: use --dataset typed (got --dataset {args.dataset})")
    if args.dataset == "typed" and args.num_classes > args.num_relations ** 2:
        p.error(f"--dataset typed writes each class as a pair of relations: --num-classes {args.num_classes} needs "
                f"--num-relations of at least {math.ceil(math.sqrt(args.num_classes))}")
    return args


def load(args):
    if args.dataset == "typed":
        return ss.datasets.planted_typed_classification(
            args.num_nodes, int(args.num_nodes * args.avg_degree), num_node_types=1,
            num_edge_types=args.num_relations, num_classes=args.num_classes, feature_dim=args.num_features,
            seed=args.seed, train_frac=args.train_fraction, val_frac=min(0.2, (1 - args.train_fraction) / 2))
    if args.dataset == "synthetic":
        return ss.datasets.synthetic_node_classification(args.num_nodes, avg_degree=args.avg_degree,
                                                         num_classes=args.num_classes,
                                                         num_features=args.num_features, seed=args.seed,
                                                         train_fraction=args.train_fraction,
                                                         val_fraction=min(0.2, (1 - args.train_fraction) / 2))
    ds = ss.datasets.load(args.dataset)
    if ds.x.is_sparse:
        ds.x = ds.x.to_dense()
    return ds


def synthetic_key(args) -> str:
    """What names a generated graph's partition folder and shared file."""
    if args.dataset not in ("synthetic", "typed"):
        return ""
    relations = f"-r{args.num_relations}" if args.dataset == "typed" else ""
    return (f"-{args.num_nodes}-d{args.avg_degree:g}-f{args.num_features}-c{args.num_classes}"
            f"-t{args.train_fraction:g}{relations}")


def make_convs(args, f_in, classes):
    torch.manual_seed(args.seed)  # the same initial parameters on every rank
    if args.model == "gcn":
        return [ss.nn.GCNConv(f_in, args.hidden), ss.nn.GCNConv(args.hidden, classes)]
    if args.model == "gat":
        return [ss.nn.GATConv(f_in, args.hidden, heads=args.heads),
                ss.nn.GATConv(args.hidden * args.heads, classes, heads=1)]
    if args.model == "rgcn":
        # sums per relation: the per-relation edge counts (the typed graph's signal) reach the classifier
        return [ss.nn.RGCNConv(f_in, args.hidden, args.num_relations, aggr="add"),
                ss.nn.RGCNConv(args.hidden, classes, args.num_relations, aggr="add")]
    return [ss.nn.SAGEConv(f_in, args.hidden), ss.nn.SAGEConv(args.hidden, classes)]


def between_layers(args):
    act = F.elu if args.model == "gat" else F.relu
    def between(i, h, training=True):
        return F.dropout(act(h), args.dropout, training)
    return between


class Blocks(nn.Module):
    """The layers over sampled blocks (DDP synchronises gradients through this forward)."""

    def __init__(self, convs, between):
        super().__init__()
        self.convs = nn.ModuleList(convs)
        self.between_fn = between

    def forward(self, blocks, x):
        for i, (conv, g) in enumerate(zip(self.convs, blocks)):
            x = conv(g, x)
            if i + 1 < len(self.convs):
                x = self.between_fn(i, x, self.training)
        return x

    def between(self, i, h):  # layer-wise inference, eval mode
        return self.between_fn(i, h, False)


class Progress:
    """The step counter and what a checkpoint holds besides the model: the steps applied to the
    parameters (``applied``: every step exactly once in a run's lineage, however often it was
    restarted), the epoch history, and the step log (rank 0, one line per step applied)."""

    def __init__(self, args, rank):
        self.args, self.rank = args, rank
        self.ckpt = Checkpointer(args.checkpoint_dir, args.checkpoint_every, args.keep_checkpoints) \
            if args.checkpoint_dir and rank == 0 else None
        self.step, self.applied, self.history = 0, [], []
        self.restart = restart_count()

    def resume(self, model, opt, mode, world):
        """The newest checkpoint, loaded into ``model`` and ``opt`` (None on a fresh start)."""
        if not self.args.checkpoint_dir:
            return None
        reader = Checkpointer(self.args.checkpoint_dir, self.args.checkpoint_every, self.args.keep_checkpoints)
        state = load_agreed(reader)
        if state is None:
            return None
        for key, want in (("mode", mode), ("model_name", self.args.model), ("dtype", self.args.dtype),
                          ("dataset", self.args.dataset)):
            if state[key] != want:
                raise SystemExit(f"the checkpoint in {self.args.checkpoint_dir} is of {key} {state[key]!r}, this run "
                                 f"is {want!r}: use another --checkpoint-dir")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        rngs = state["rng"]
        if self.rank < len(rngs):  # a rank new to the job keeps its fresh generators
            set_rng_state(rngs[self.rank])
        self.step, self.applied, self.history = state["step"], list(state["applied"]), list(state["history"])
        log.info("resumed from the checkpoint of step %d (epoch %d, saved by %d ranks, now %d; restart %d)",
                 state["step"], state["epoch"], state["world_size"], world, self.restart)
        return state

    def stepped(self):
        self.step += 1
        self.applied.append(self.step)
        if self.rank == 0 and self.args.step_log:
            with open(self.args.step_log, "a") as f:
                f.write(f"{self.restart} {self.step}\n")

    def maybe_save(self, model, opt, mode, world, epoch, **extra):
        """A checkpoint when one is due (a collective: every rank's RNG state goes in)."""
        if not self.args.checkpoint_dir or self.step % self.args.checkpoint_every:
            return
        per_rank = gather_objects(dict(rng=rng_state(), **extra.pop("per_rank", {})))
        if self.ckpt is not None:
            self.ckpt.save(self.step, dict(model=model.state_dict(), optimizer=opt.state_dict(), epoch=epoch,
                                           world_size=world, mode=mode, model_name=self.args.model,
                                           dtype=self.args.dtype, dataset=self.args.dataset, applied=self.applied,
                                           history=self.history, rng=[r.pop("rng") for r in per_rank],
                                           per_rank=per_rank, **extra))

    def maybe_die(self):
        a = self.args
        if a.exit_at_step and self.step == a.exit_at_step and self.rank == a.exit_rank and self.restart == 0:
            log.error("exiting after step %d on request (--exit-at-step)", self.step)
            if a.exit_kills_agent:  # a machine lost: the agent cannot restart this rank, the job shrinks
                os.kill(os.getppid(), signal.SIGKILL)
            os._exit(3)

    def save_final(self, model):
        if self.rank == 0 and self.args.save_final:
            torch.save(dict(model=model.state_dict(), applied=self.applied, step=self.step), self.args.save_final)


def dtype_of(args):
    return torch.float64 if args.dtype == "float64" else torch.float32


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def maybe_die(args, rank, epoch):
    if args.exit_at_epoch and epoch == args.exit_at_epoch and rank == args.exit_rank:
        log.error("exiting at epoch %d on request (--exit-at-epoch)", epoch)
        os._exit(3)


def run_fullgraph(args, rank, world):
    part_dir = ensure_partition(args, rank, world)
    part = ss.distributed.load_partition(part_dir, rank, world_size=world)
    report = ss.distributed.read_report(part_dir)
    pg = PartitionedGraph(part)
    nd = part.node_data
    x, y = nd["x"].to(dtype_of(args)), nd["y"]
    y_max = torch.tensor([int(y.max()) if y.numel() else -1])
    dist.all_reduce(y_max, op=dist.ReduceOp.MAX)
    classes = int(y_max) + 1
    between = between_layers(args)
    model = PartitionParallel(make_convs(args, x.shape[1], classes), pg,
                              between=lambda i, h: between(i, h, model.training)).to(dtype_of(args))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    # one optimizer step per epoch: the step counter is the epoch counter; a checkpoint holds no
    # partition, so a restart at another world size loads (or makes) the partition of its own
    progress = Progress(args, rank)
    state = progress.resume(model, opt, "fullgraph", world)
    first = state["epoch"] + 1 if state else 1
    x_src = pg.input_rows(x)
    masks = {k: nd[k] for k in ("train_mask", "val_mask", "test_mask")}
    total_train = pg.all_sum(float(masks["train_mask"].sum()))[0]
    log.info("part %d: %d owned vertices, %d halo, %d in-edges; partition edge cut %d of %d", rank, part.num_owned,
             part.num_halo, part.edge_ids.numel(), report["edge_cut"], report["num_edges"])
    history = progress.history
    for epoch in range(first, args.epochs + 1):
        maybe_die(args, rank, epoch)
        model.train()
        comm0, bytes0 = pg.exchange.stats["comm_s"], pg.exchange.stats["bytes_sent"]
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad()
        out = model(x_src)
        tm = masks["train_mask"]
        loss = F.cross_entropy(out[tm], y[tm], reduction="sum") / total_train
        loss.backward()
        t1 = time.perf_counter()
        allreduce_gradients(model)
        allreduce_s = time.perf_counter() - t1
        opt.step()
        progress.stepped()
        epoch_s, epoch_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        train_bytes = pg.exchange.stats["bytes_sent"] - bytes0
        train_halo_s = pg.exchange.stats["comm_s"] - comm0
        model.eval()
        with torch.no_grad():
            pred = model(x_src).argmax(-1)
        counts = []
        for k in ("train_mask", "val_mask", "test_mask"):
            m = masks[k]
            counts += [float((pred[m] == y[m]).sum()), float(m.sum())]
        sums = pg.all_sum(loss.item(), *counts)
        acc = {k: sums[1 + 2 * i] / max(1.0, sums[2 + 2 * i]) for i, k in enumerate(("train", "val", "test"))}
        row = dict(epoch=epoch, loss=sums[0], **acc, epoch_s=epoch_s, epoch_cpu_s=epoch_cpu_s, halo_s=train_halo_s,
                   allreduce_s=allreduce_s, halo_bytes_sent=train_bytes,
                   eval_halo_bytes_sent=pg.exchange.stats["bytes_sent"] - bytes0 - train_bytes, world_size=world)
        history.append(row)
        if rank == 0:
            print(f"epoch {epoch:3d}  loss {row['loss']:.4f}  train {acc['train']:.3f}  val {acc['val']:.3f}  "
                  f"test {acc['test']:.3f}  {epoch_s * 1e3:.0f} ms (halo {row['halo_s'] * 1e3:.0f} ms, gradient "
                  f"all-reduce {allreduce_s * 1e3:.0f} ms)", flush=True)
        progress.maybe_save(model, opt, "fullgraph", world, epoch)
        progress.maybe_die()
    progress.save_final(model)
    if history[-1]["epoch"] > args.epochs:
        raise SystemExit(f"the checkpoint in {args.checkpoint_dir} is already past --epochs {args.epochs}")
    all_ranks_bytes = pg.all_sum(history[-1]["halo_bytes_sent"])[0]
    return dict(history=history, halo_bytes_per_epoch_all_ranks=all_ranks_bytes, num_halo=part.num_halo,
                num_owned=part.num_owned, edge_cut=report["edge_cut"],
                boundary_rows=report["boundary_rows"], num_parameters=sum(p.numel() for p in model.parameters()),
                input_halo_bytes=part.num_halo * x.shape[1] * x.element_size())


def partition_dir(args, world) -> Path:
    if args.partition_dir:  # "{parts}" in it: one folder per part count (a job whose world size changes)
        return Path(args.partition_dir.replace("{parts}", str(world)))
    return Path(f"/tmp/seastar-partitions/{args.dataset}{synthetic_key(args)}-{world}-{args.method}")


def ensure_partition(args, rank, world) -> Path:
    part_dir = partition_dir(args, world)
    # which data the partition holds: a folder made for other data (another --num-nodes, say)
    # is refused by name instead of failing later on mismatched sizes
    made_of = f"{args.dataset}{synthetic_key(args)}-seed{args.seed}"
    if rank == 0 and not (part_dir / "partition.json").is_file():
        log.info("partitioning %s into %d parts (%s) at %s", args.dataset, world, args.method, part_dir)
        ss.distributed.partition_graph(load(args), world, part_dir, method=args.method)
        (part_dir / "made_of.txt").write_text(made_of)
    dist.barrier()
    stamp = part_dir / "made_of.txt"
    if stamp.is_file() and stamp.read_text() != made_of:
        raise SystemExit(f"the partition in {part_dir} was made of {stamp.read_text()}, this run trains on {made_of}: "
                         f"remove it or pass another --partition-dir")
    return part_dir


def with_cache(args, graph, feats, y, seeds):
    """``feats`` behind a cache of hot remote rows when a cache size was given."""
    if args.cache_fraction is None and args.cache_rows is None and args.cache_bytes is None:
        return feats
    rows = capacity_rows(feats, rows=args.cache_rows, nbytes=args.cache_bytes, fraction=args.cache_fraction)
    if args.cache_policy == "degree":
        hot = hot_by_degree(graph, feats, rows)
    else:  # a pass over one epoch's samples (the probe loader fetches nothing)
        probe = PartitionNeighborLoader(graph, feats, y, seeds, args.fanouts, batch_size=args.batch_size,
                                        seed=args.seed, prefetch=0)
        hot = hot_by_sampling(probe, feats, rows)
    cached = CachedFeatures(feats, hot)
    log.info("feature cache: %d remote rows (%.2f MB), chosen by %s", cached.stats["cache_rows"],
             cached.stats["cache_bytes"] / 1e6, args.cache_policy)
    return cached


def run_minibatch(args, rank, world):
    partitioned = args.features == "partitioned"
    shared = Path(args.shared_file or f"/dev/shm/seastar-{args.dataset}"
                  f"{synthetic_key(args)}-{args.seed}{'-structure' if partitioned else ''}.pt")
    ds = shared_dataset(shared, make=lambda: load(args), with_features=not partitioned)
    between = between_layers(args)
    model = Blocks(make_convs(args, int(ds.num_features), int(ds.num_classes)), between).to(dtype_of(args))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    progress = Progress(args, rank)
    state = progress.resume(model, opt, "minibatch", world)  # before DDP: it starts from these parameters
    # DDP re-buckets the gradients after its first step, in the order backward produced them;
    # the bucket layout decides the order of gloo's sums. A resumed run's first step would sum
    # in another order than the undisturbed run at that step: every run re-buckets at its first
    # step instead, in the parameters' order (what torch's own Join does for a rank that joined)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp.reducer._push_all_rebuilt_params()
    if partitioned:
        part_dir = ensure_partition(args, rank, world)
        feats = PartitionedFeatures.from_partition(part_dir)
        part = ss.distributed.load_partition(part_dir, rank, world_size=world)
        seeds = part.owned[part.node_data["train_mask"]]
        feats = with_cache(args, ds.graph, feats, ds.y, seeds)
        loader = PartitionNeighborLoader(ds.graph, feats, ds.y, seeds, args.fanouts, batch_size=args.batch_size,
                                         seed=args.seed, prefetch=2)
    else:
        loader = DistributedNeighborLoader(ds, args.fanouts, batch_size=args.batch_size, input_nodes=ds.train_mask,
                                           seed=args.seed, prefetch=2)
    log.info("%d training seeds, %d batches of up to %d per rank per epoch, fanouts %s",
             int(ds.train_mask.sum()), len(loader), args.batch_size, args.fanouts)
    history = progress.history
    first, total, count, consumed = 1, 0.0, 0, []
    if state is not None:
        # the loader continues the epoch where the checkpoint was taken: the same batches at the
        # same world size; the epoch's seeds not yet consumed, dealt again, at another
        first = state["epoch"]
        loader.resume(first - 1, state["next_batch"], state["world_size"],
                      torch.cat([r["consumed"] for r in state["per_rank"]]))
        old = state["per_rank"]
        if state["world_size"] == world:
            total, count, consumed = old[rank]["total"], old[rank]["count"], [old[rank]["consumed"]]
        elif rank == 0:  # the epoch's running loss and consumed seeds, of all old ranks, go on on rank 0
            total, count = sum(r["total"] for r in old), sum(r["count"] for r in old)
            consumed = [r["consumed"] for r in old]
    dtype = dtype_of(args)
    for epoch in range(first, args.epochs + 1):
        maybe_die(args, rank, epoch)
        if state is None or epoch != first:
            loader.set_epoch(epoch - 1)
            total, count, consumed = 0.0, 0, []
        next_batch = loader.start
        resumed_at = loader.start if state is not None and epoch == first else None  # a batch index, or None
        ddp.train()
        fetched0 = dict(feats.stats) if partitioned else {}
        first_step_s = 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        for b in ss.progress.bar(loader, desc=f"epoch {epoch}", disable=rank != 0 or not sys.stderr.isatty()):
            opt.zero_grad()
            loss = F.cross_entropy(ddp(b.blocks, b.x.to(dtype)), b.y, reduction="sum") / max(1, b.batch_size)
            loss.backward()
            opt.step()
            progress.stepped()
            if next_batch == loader.start:  # the epoch's first step: its batch was not prefetched
                first_step_s = time.perf_counter() - t0
            next_batch += 1
            total += loss.item() * b.batch_size
            count += b.batch_size
            consumed.append(b.seed_nodes)
            if args.checkpoint_dir and progress.step % args.checkpoint_every == 0:
                mine = torch.cat(consumed) if consumed else torch.empty(0, dtype=torch.long)
                # the seeds every rank has consumed this epoch: a restart at another world size
                # deals out the rest; at the same size each rank's own list continues
                progress.maybe_save(model, opt, "minibatch", world, epoch, next_batch=next_batch,
                                    per_rank=dict(total=total, count=count, consumed=mine))
            progress.maybe_die()
        epoch_s, epoch_cpu_s = time.perf_counter() - t0, time.process_time() - c0
        t = torch.tensor([total, float(count)], dtype=torch.float64)
        dist.all_reduce(t)
        row = dict(epoch=epoch, loss=t[0].item() / t[1].item(), epoch_s=epoch_s, epoch_cpu_s=epoch_cpu_s,
                   first_step_s=first_step_s,
                   waited_s=loader.stats["wait_s"], sampling_s=loader.stats["sample_s"], world_size=world)
        if partitioned:  # this epoch's remote rows, summed over the ranks
            rep = epoch_report(feats.stats, fetched0)
            t = torch.tensor([rep["remote_rows"], rep["hits"], rep["bytes_received"]], dtype=torch.float64)
            dist.all_reduce(t)
            row.update(remote_rows=int(t[0]), cache_hits=int(t[1]), remote_bytes=int(t[2]),
                       hit_rate=float(t[1] / t[0]) if t[0] else 0.0)
        history.append(row)
        if rank == 0:
            fetched = (f", remote rows {row['remote_rows']}, {row['remote_bytes'] / 1e6:.2f} MB received, cache hit "
                       f"rate {row['hit_rate']:.3f}") if partitioned else ""
            if resumed_at is not None and next_batch == resumed_at:  # the checkpoint was the epoch's last step
                print(f"epoch {epoch:3d}  loss {row['loss']:.4f}  (resumed after the epoch's last batch)", flush=True)
            else:
                since = f"from batch {resumed_at} on, resumed; " if resumed_at is not None else ""
                print(f"epoch {epoch:3d}  loss {row['loss']:.4f}  {epoch_s * 1e3:.0f} ms ({since}waited for batches "
                      f"{row['waited_s'] * 1e3:.0f} ms{fetched})", flush=True)
    progress.save_final(model)
    acc = {}
    x = ds.x
    remote_bytes = feats.stats["bytes_received"] if partitioned else 0  # training's fetches only
    if partitioned:  # rank 0 gathers every row for the evaluation (a collective: the others ask for none)
        x = feats.fetch(torch.arange(ds.graph.num_nodes) if rank == 0 else torch.empty(0, dtype=torch.long))
    if rank == 0:  # full-neighbourhood inference over the whole graph, on one rank
        model.eval()
        out = ss.loader.layerwise_inference(model.convs, ds.graph, x.to(dtype), 8192, between=model.between)
        pred = out.argmax(-1)
        acc = {k: (pred[m] == ds.y[m]).float().mean().item() for k, m in
               (("train", ds.train_mask), ("val", ds.val_mask), ("test", ds.test_mask))}
    return dict(history=history, final=acc, num_parameters=sum(p.numel() for p in model.parameters()),
                batches_per_epoch=len(loader),
                remote_feature_bytes=remote_bytes)


def choose_mode(args, rank, world):
    """--mode auto: every rank takes part in the calibration (its collectives are timed in
    this job's process group), rank 0 plans, and every rank follows rank 0's choice."""
    from seastar.distributed.calibration import calibrate
    from seastar.distributed.planner import plan

    cal = calibrate()
    chosen = [None]
    if rank == 0:
        spec = dict(kind=args.model, hidden=args.hidden, heads=args.heads if args.model == "gat" else 1,
                    dropout=args.dropout,
                    fanouts=tuple(args.fanouts), batch_size=args.batch_size,
                    dtype_bytes=8 if args.dtype == "float64" else 4,
                    cache_fraction=args.cache_fraction if args.cache_fraction is not None else 0.1)
        p = plan(load(args), world, spec, memory_per_process=args.memory_per_process, calibration=cal)
        print(p.table(), flush=True)
        chosen = [dict(mode=p.choice["mode"], features=p.choice["features"],
                       cache_fraction=p.choice.get("cache_fraction"), plan=json.loads(p.to_json()))]
    dist.broadcast_object_list(chosen, src=0)
    c = chosen[0]
    args.mode, args.features = c["mode"], c["features"]
    if c["mode"] == "minibatch" and c["features"] == "partitioned" and args.cache_rows is None and \
            args.cache_bytes is None:
        args.cache_fraction = c["cache_fraction"]
    log.info("--mode auto chose %s (features %s)", args.mode, args.features)
    return c["plan"]


def main(argv=None):
    args = parse_args(argv)
    launch.rank_logging()
    if args.threads:
        torch.set_num_threads(args.threads)
    rank, world = launch.init_from_env(backend="gloo", timeout_s=args.timeout)
    try:
        t0 = time.perf_counter()
        the_plan = choose_mode(args, rank, world) if args.mode == "auto" else None
        result = run_fullgraph(args, rank, world) if args.mode == "fullgraph" else run_minibatch(args, rank, world)
        peak = torch.tensor([peak_rss_mb()], dtype=torch.float64)
        peaks = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(peaks, peak)
    except (RuntimeError, dist.DistError) as exc:
        log.error("a collective failed (%s): another rank has probably died or stalled; exiting", exc)
        os._exit(1)  # no teardown: it would wait for the lost rank
    result.update(args={k: v for k, v in vars(args).items()}, world_size=world, total_s=time.perf_counter() - t0,
                  plan=the_plan,
                  peak_rss_mb=[p.item() for p in peaks])
    if rank == 0:
        h = result["history"]
        if args.mode == "fullgraph":
            print(f"final: test accuracy {h[-1]['test']:.4f} (val {h[-1]['val']:.4f}) after {args.epochs} epochs on "
                  f"{world} processes; mean epoch {sum(r['epoch_s'] for r in h) / len(h) * 1e3:.0f} ms")
        else:
            print(f"final: test accuracy {result['final']['test']:.4f} (val {result['final']['val']:.4f}) after "
                  f"{args.epochs} epochs on {world} processes; mean epoch "
                  f"{sum(r['epoch_s'] for r in h) / len(h) * 1e3:.0f} ms")
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    launch.shutdown()
    return result


if __name__ == "__main__":
    main()
