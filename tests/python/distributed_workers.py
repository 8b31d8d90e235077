"""What the ranks of the distributed tests run (a module of its own: spawned processes import
their function by name), and the single-process references they are compared with."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import seastar as ss
from seastar.distributed import fullgraph, load_partition

EPOCHS = 5
LR = 0.01


def make_convs(model: str, f_in: int, classes: int, num_relations: int = 0):
    torch.manual_seed(0)
    if model == "gcn":
        convs = [ss.nn.GCNConv(f_in, 16), ss.nn.GCNConv(16, classes)]
    elif model == "gat":
        convs = [ss.nn.GATConv(f_in, 8, heads=4), ss.nn.GATConv(32, classes, heads=1)]
    elif model == "sage":
        convs = [ss.nn.SAGEConv(f_in, 16), ss.nn.SAGEConv(16, classes)]
    elif model == "rgcn":
        convs = [ss.nn.RGCNConv(f_in, 16, num_relations), ss.nn.RGCNConv(16, classes, num_relations)]
    else:
        raise ValueError(model)
    return torch.nn.ModuleList(convs).double()


def between(i, h):
    return F.relu(h)


def train_single(graph, x, y, train_mask, model: str, classes: int, num_relations: int = 0):
    """Full-graph training in one process: the losses of EPOCHS epochs and the final parameters."""
    convs = make_convs(model, x.shape[1], classes, num_relations)
    opt = torch.optim.Adam(convs.parameters(), lr=LR)
    losses = []
    for _ in range(EPOCHS):
        opt.zero_grad()
        h = x
        for i, conv in enumerate(convs):
            h = conv(graph, h)
            if i + 1 < len(convs):
                h = between(i, h)
        loss = F.cross_entropy(h[train_mask], y[train_mask])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in convs.state_dict().items()}


def fullgraph_rank(rank, world, part_dir, model, classes, num_relations, out_dir):
    """One rank of partition-parallel training; writes its losses, parameters and byte counts."""
    torch.set_num_threads(1)
    part = load_partition(part_dir, rank, world_size=world)
    pg = fullgraph.PartitionedGraph(part)
    x = part.node_data["x"].double()
    y, train = part.node_data["y"], part.node_data["train_mask"]
    convs = make_convs(model, x.shape[1], classes, num_relations)
    net = fullgraph.PartitionParallel(convs, pg, between)
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    x_src = pg.input_rows(x)
    total = pg.all_sum(float(train.sum()))[0]
    params_per_step, losses = [], []
    for _ in range(EPOCHS):
        opt.zero_grad()
        out = net(x_src)
        loss = F.cross_entropy(out[train], y[train], reduction="sum") / total
        loss.backward()
        fullgraph.allreduce_gradients(net)
        opt.step()
        losses.append(pg.all_sum(loss.item())[0])
        params_per_step.append(torch.cat([p.detach().reshape(-1) for p in net.parameters()]))
    torch.save(dict(losses=losses, state=convs.state_dict(), params_per_step=params_per_step,
                    stats=dict(pg.exchange.stats), num_halo=part.num_halo), f"{out_dir}/rank{rank}.pt")


def loop_model_rank(rank, world):
    from seastar.distributed.calibration import _loop_model
    assert isinstance(_loop_model(8, True), torch.nn.parallel.DistributedDataParallel)
    assert not isinstance(_loop_model(8, False), torch.nn.parallel.DistributedDataParallel)


def fail_on_rank_one(rank, world):
    """Rank 1 dies before a collective that rank 0 waits in: rank 0 must fail, not hang."""
    import torch.distributed as dist

    if rank == 1:
        raise SystemExit(3)
    dist.all_reduce(torch.ones(1))


def fullgraph_cases(rank, world, cases):
    """Several ``fullgraph_rank`` runs in one process group (one start-up for all)."""
    for case in cases:
        fullgraph_rank(rank, world, *case)


def _cora():
    ds = ss.datasets.load("cora")
    ds.x = ds.x.to_dense() if ds.x.is_sparse else ds.x
    return ds


def _mapped_from(t: torch.Tensor, path: str) -> bool:
    """Whether ``t``'s memory lies in a mapping of the file ``path`` (shared, not a copy)."""
    import os

    ptr = t.data_ptr()
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and os.path.realpath(fields[5]) == real:
                lo, hi = (int(v, 16) for v in fields[0].split("-"))
                if lo <= ptr < hi:
                    return True
    return False


class Blocks(torch.nn.Module):
    """test_minibatch_training's model with forward(blocks, x): DDP synchronises gradients
    only for passes through its own forward."""

    def __init__(self, convs):
        super().__init__()
        self.convs = convs

    def forward(self, blocks, x):
        from test_minibatch_training import _forward

        return _forward(self.convs, blocks, x, self.training)


def minibatch_rank(rank, world, shared_path, out_dir, epochs, batch_size):
    """DDP mini-batch SAGE on Cora: the seeds of every batch and the parameters after every step."""
    from torch.nn.parallel import DistributedDataParallel

    from seastar.distributed.minibatch import DistributedNeighborLoader, shared_dataset

    from test_minibatch_training import _model

    torch.set_num_threads(1)
    ds = shared_dataset(shared_path, make=_cora)
    convs = _model(ds.x.shape[1], ds.num_classes, seed=rank)  # different on purpose: DDP starts from rank 0's
    model = DistributedDataParallel(Blocks(convs))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DistributedNeighborLoader(ds, [10, 5], batch_size=batch_size, input_nodes=ds.train_mask, seed=7,
                                       prefetch=1)
    seeds, params = [], []
    for _ in range(epochs):
        used = []
        for b in loader:
            opt.zero_grad()
            F.cross_entropy(model(b.blocks, b.x), b.y).backward()
            opt.step()
            used.append(b.seed_nodes.clone())
            params.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
        seeds.append(torch.cat(used))
    torch.save(dict(seeds=seeds, params=params, batches=len(loader), mapped=_mapped_from(ds.x, shared_path)),
               f"{out_dir}/mb{rank}.pt")


ACC_FANOUTS = [10, 5]


def _fit(model, loader, epochs):
    """The accuracy protocol's training (Adam, lr 0.01, weight decay 5e-4), the same on one
    process and on many."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(epochs):
        model.train()
        for b in loader:
            opt.zero_grad()
            F.cross_entropy(model(b.blocks, b.x), b.y).backward()
            opt.step()


def minibatch_accuracy_rank(rank, world, shared_path, out_dir, seeds, epochs, batch_size):
    """SAGE on Cora as in test_minibatch_training, the global batch split over the ranks."""
    from torch.nn.parallel import DistributedDataParallel

    from seastar.distributed.minibatch import DistributedNeighborLoader, shared_dataset

    from test_minibatch_training import _model, _test_accuracy

    torch.set_num_threads(1)
    ds = shared_dataset(shared_path, make=_cora)
    accs = []
    for seed in seeds:
        convs = _model(ds.x.shape[1], ds.num_classes, seed)
        loader = DistributedNeighborLoader(ds, ACC_FANOUTS, batch_size=batch_size, input_nodes=ds.train_mask,
                                           seed=seed, prefetch=1)
        _fit(DistributedDataParallel(Blocks(convs)), loader, epochs)
        accs.append(_test_accuracy(convs, ds, ds.x))
    torch.save(accs, f"{out_dir}/acc{rank}.pt")


def minibatch_accuracy_single(ds, seed, epochs, batch_size):
    """The same protocol in one process with the global batch."""
    from test_minibatch_training import _model, _test_accuracy

    convs = _model(ds.x.shape[1], ds.num_classes, seed)
    loader = ss.loader.NeighborLoader(ds, ACC_FANOUTS, batch_size=batch_size, input_nodes=ds.train_mask, seed=seed,
                                      prefetch=1)
    _fit(Blocks(convs), loader, epochs)
    return _test_accuracy(convs, ds, ds.x)


def one_rank_fetch(rank, world, part_dir, out_dir):
    """PartitionedFeatures on one rank: every row is local (no exchange); bad ids are refused."""
    from seastar.distributed.minibatch import PartitionedFeatures

    feats = PartitionedFeatures.from_partition(part_dir)
    x = load_partition(part_dir, 0, world_size=1).node_data["x"]
    ids = torch.tensor([5, 0, 5, x.shape[0] - 1, 17])
    errors = []
    for bad in (torch.tensor([0, x.shape[0]]), torch.tensor([-1])):
        try:
            feats.fetch(bad)
        except ValueError as e:
            errors.append(str(e))
    torch.save(dict(rows=feats.fetch(ids), want=x[ids], empty=feats.fetch(ids[:0]).shape, errors=errors,
                    stats=dict(feats.stats)), f"{out_dir}/one.pt")


def partitioned_minibatch_rank(rank, world, part_dir, shared_path, out_dir, epochs):
    """Mini-batches of each rank's own part, features fetched from their owners."""
    from torch.nn.parallel import DistributedDataParallel

    from seastar.distributed.minibatch import PartitionedFeatures, PartitionNeighborLoader, shared_dataset

    from test_minibatch_training import _model

    torch.set_num_threads(1)
    ds = shared_dataset(shared_path, make=_cora)  # the reference x, the structure and the labels
    feats = PartitionedFeatures.from_partition(part_dir)
    g = torch.Generator().manual_seed(rank)
    ids = torch.randint(0, ds.x.shape[0], (500,), generator=g)
    ids = torch.cat([ids, ids[:50], torch.empty(0, dtype=torch.long)])  # duplicates too
    fetch_ok = torch.equal(feats.fetch(ids), ds.x[ids]) and feats.fetch(ids[:0]).shape == (0, ds.x.shape[1])
    part = load_partition(part_dir, rank, world_size=world)
    seeds = part.owned[part.node_data["train_mask"]]
    model = DistributedDataParallel(Blocks(_model(ds.x.shape[1], ds.num_classes, seed=0)))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = PartitionNeighborLoader(ds.graph, feats, ds.y, seeds, [10, 5], batch_size=30, seed=3, prefetch=1)
    used, params, rows_ok = [], [], True
    for _ in range(epochs):
        mine = []
        for b in loader:
            rows_ok &= torch.equal(b.x, ds.x[b.input_nodes]) and torch.equal(b.y, ds.y[b.seed_nodes])
            opt.zero_grad()
            F.cross_entropy(model(b.blocks, b.x), b.y, reduction="sum").div(max(1, b.batch_size)).backward()
            opt.step()
            mine.append(b.seed_nodes.clone())
            params.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
        used.append(torch.cat(mine))
    torch.save(dict(fetch_ok=fetch_ok, rows_ok=rows_ok, seeds=used, params=params, owned=part.owned,
                    remote_rows=feats.stats["remote_rows"], batches=len(loader)), f"{out_dir}/pmb{rank}.pt")
