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
