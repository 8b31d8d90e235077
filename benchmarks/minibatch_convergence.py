#!/usr/bin/env python
"""Does mini-batch training reach the accuracy of full-graph training on the same large graph?

    .venv/bin/python benchmarks/minibatch_convergence.py --num-nodes 1000000 \
        --out benchmarks/results/minibatch_convergence.json

GraphSAGE (2 layers, mean, hidden --hidden) on ``ss.datasets.synthetic_node_classification``
with noisy features (``--feature-noise``: the class signal of one vertex's features alone is
weak, its neighbourhood's is strong), trained twice from the same initialisation: on the whole
graph (one step per epoch, --full-epochs) and on sampled blocks (``ss.loader.NeighborLoader``,
--fanouts, --batch-size, --epochs). Test accuracy of both comes from full-neighbourhood
inference (``ss.loader.layerwise_inference``), after every epoch; the JSON keeps the curves, the
best-validation test accuracy of each, the times and this process's peak memory.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE))

import seastar as ss  # noqa: E402  (before torch: the OpenMP spin setting)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from _paths import portable  # noqa: E402


def model(f_in, hidden, classes, seed):
    torch.manual_seed(seed)
    return torch.nn.ModuleList([ss.nn.SAGEConv(f_in, hidden), ss.nn.SAGEConv(hidden, classes)])


def accuracy(convs, ds):
    convs.eval()
    out = ss.loader.layerwise_inference(convs, ds.graph, ds.x, 65536, between=lambda i, h: F.relu(h))
    pred = out.argmax(-1)
    return {k: (pred[m] == ds.y[m]).float().mean().item() for k, m in (("val", ds.val_mask), ("test", ds.test_mask))}


def train(ds, args, minibatch):
    convs = model(ds.x.shape[1], args.hidden, ds.num_classes, args.seed)
    opt = torch.optim.Adam(convs.parameters(), lr=args.lr)
    loader = ss.loader.NeighborLoader(ds, num_neighbors=args.fanouts, batch_size=args.batch_size,
                                      input_nodes=ds.train_mask, seed=args.seed)
    curve, train_s = [], 0.0
    epochs = args.epochs if minibatch else args.full_epochs
    for epoch in range(1, epochs + 1):
        convs.train()
        t0 = time.perf_counter()
        if minibatch:
            for b in ss.progress.bar(loader, desc=f"mini-batch epoch {epoch}", disable=args.no_progress):
                opt.zero_grad()
                h = F.dropout(F.relu(convs[0](b.blocks[0], b.x)), 0.5, True)
                F.cross_entropy(convs[1](b.blocks[1], h), b.y).backward()
                opt.step()
        else:
            opt.zero_grad()
            h = F.dropout(F.relu(convs[0](ds.graph, ds.x)), 0.5, True)
            out = convs[1](ds.graph, h)
            F.cross_entropy(out[ds.train_mask], ds.y[ds.train_mask]).backward()
            opt.step()
        train_s += time.perf_counter() - t0
        if minibatch or epoch % args.eval_every == 0 or epoch == epochs:
            acc = accuracy(convs, ds)
            curve.append(dict(epoch=epoch, train_s=train_s, **acc))
            print(f"{'mini-batch' if minibatch else 'full-graph'} epoch {epoch}: val {acc['val']:.4f} "
                  f"test {acc['test']:.4f} ({train_s:.1f} s training so far)", flush=True)
    best = max(curve, key=lambda r: r["val"])
    return dict(curve=curve, best=best, train_s=train_s)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-nodes", type=int, default=1_000_000)
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--feature-noise", type=float, default=10.0)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--fanouts", default="15,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--epochs", type=int, default=3, help="mini-batch epochs")
    p.add_argument("--full-epochs", type=int, default=200, help="full-graph epochs (one step each)")
    p.add_argument("--eval-every", type=int, default=20, help="full-graph: evaluate every this many epochs")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--out", default="benchmarks/results/minibatch_convergence.json")
    args = p.parse_args()
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    ds = ss.datasets.synthetic_node_classification(args.num_nodes, avg_degree=args.avg_degree,
                                                   num_features=args.features, feature_noise=args.feature_noise,
                                                   seed=args.seed)
    build_s = time.perf_counter() - t0
    print(f"{ds.graph.num_nodes} vertices, {ds.graph.num_edges} edges, built in {build_s:.1f} s", flush=True)
    result = dict(args=vars(args), build_s=build_s, threads=torch.get_num_threads(),
                  minibatch=train(ds, args, True), full_graph=train(ds, args, False))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gap = result["minibatch"]["best"]["test"] - result["full_graph"]["best"]["test"]
    result["test_gap_minibatch_minus_full"] = gap
    print(f"best-validation test accuracy: mini-batch {result['minibatch']['best']['test']:.4f} "
          f"({result['minibatch']['train_s']:.0f} s), full graph {result['full_graph']['best']['test']:.4f} "
          f"({result['full_graph']['train_s']:.0f} s); difference {gap * 100:+.2f} points; "
          f"peak RSS {result['peak_rss_mb']:.0f} MB")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(portable(result), indent=2))


if __name__ == "__main__":
    main()
