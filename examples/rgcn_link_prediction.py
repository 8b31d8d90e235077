#!/usr/bin/env python
"""Link prediction on WN18RR: an R-GCN encoder (2 layers, basis decomposition) with a DistMult
decoder (Schlichtkrull et al., ESWC 2018), trained with negative sampling, evaluated with filtered
MRR and Hits@1/3/10 on the test triples.

    python examples/rgcn_link_prediction.py                       # WN18RR, defaults below
    python examples/rgcn_link_prediction.py --epochs 2 --eval-subset 500 --json out.json
    python examples/rgcn_link_prediction.py --dataset synthetic --epochs 2   # no data needed

Model: entity embeddings ``E`` [N, dim] -> RGCNConv(dim, dim, 2R, bases) -> ReLU -> dropout ->
RGCNConv(dim, dim, 2R, bases) = ``Z``; the training graph has every training triple head -> tail
with its relation and tail -> head with the relation's inverse (type ``r + R``, so 2R edge types);
``score(h, r, t) = <Z_h, w_r, Z_t>`` (DistMult, ``w`` [R, dim]).

Training: full-graph encoder per step (every step re-encodes all entities). A step takes a batch
of training triples and holds them out of the message-passing graph for that step (both
directions), so the encoder never sees the edge it is asked to predict (at test time the test
edges are not in the graph either). Each positive is scored against its true tail and
``--negatives`` uniformly sampled entities (shared by the batch) plus the query's own entity
(``(h, r, h)``, which DistMult favours), and likewise for its head; the loss is the cross-entropy
of the true entity among them (sampled softmax), plus an L2 penalty on the relation vectors and
the batch's embeddings.

Evaluation: for every test triple, both ``(h, r, ?)`` and ``(?, r, t)`` are ranked against all
entities, other known true triples (train + valid + test, ``filter_index()``) removed, ties
counting half. ``--eval-subset K`` ranks a seeded random subset of K test triples.
"""
from __future__ import annotations

import argparse
import logging
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

try:
    import seastar as ss
except ImportError:  # run from a checkout: python examples/rgcn_link_prediction.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    import seastar as ss
import seastar.nn as snn  # noqa: E402
from seastar import FallbackLog  # noqa: E402
from _common import check_arguments, start_run, write_json  # noqa: E402  (examples/, the script's folder)
from seastar.datasets import KnowledgeGraphDataset  # noqa: E402

log = logging.getLogger("seastar.examples.rgcn_link_prediction")


class RGCNLinkPredictor(nn.Module):
    def __init__(self, num_entities, num_relations, dim, num_bases, dropout, mode):
        super().__init__()
        self.emb = nn.Parameter(torch.empty(num_entities, dim))
        nn.init.normal_(self.emb, std=dim ** -0.5)
        self.conv1 = snn.RGCNConv(dim, dim, 2 * num_relations, num_bases=num_bases, mode=mode)
        self.conv2 = snn.RGCNConv(dim, dim, 2 * num_relations, num_bases=num_bases, mode=mode)
        self.rel = nn.Parameter(torch.empty(num_relations, dim))
        nn.init.normal_(self.rel, mean=1.0, std=0.1)  # DistMult starts near a plain dot product
        self.dropout = dropout

    def encode(self, g):
        h = F.relu(self.conv1(g, self.emb))
        h = F.dropout(h, self.dropout, self.training)
        return self.conv2(g, h)

    def query(self, z, entity, relation):
        """``z_e * w_r`` [B, dim]: dotted with every candidate's z it scores (e, r, candidate).
        DistMult is symmetric, so (?, r, t) uses the same vector with e = t."""
        return z[entity] * self.rel[relation]


def synthetic_kg(num_entities=400, num_relations=4, num_triples=3000, seed=0) -> KnowledgeGraphDataset:
    """A small random KG (no data files needed): typed_graph's edges as (head, relation, tail),
    split 80/10/10. Nothing to learn beyond degree statistics; for smoke tests."""
    sg = ss.datasets.typed_graph(num_entities, num_triples, 1, num_relations, seed=seed, build_graph=False)
    triples = torch.stack([sg.edge_index[0], sg.edge_type, sg.edge_index[1]], 1)
    triples = torch.unique(triples, dim=0)
    triples = triples[torch.randperm(len(triples), generator=torch.Generator().manual_seed(seed))]
    n_tr, n_va = int(0.8 * len(triples)), int(0.1 * len(triples))
    return KnowledgeGraphDataset(
        name="synthetic_kg", num_entities=num_entities, num_relations=num_relations,
        relation_names=[f"r{i}" for i in range(num_relations)],
        entity_names=[f"e{i}" for i in range(num_entities)],
        train=triples[:n_tr], valid=triples[n_tr:n_tr + n_va], test=triples[n_tr + n_va:])


def entity_subset(kg: KnowledgeGraphDataset, max_entities: int) -> KnowledgeGraphDataset:
    """The triples among entities ``0..max_entities-1`` (a quick WN18RR subset)."""
    def keep(t):
        return t[(t[:, 0] < max_entities) & (t[:, 2] < max_entities)]
    return KnowledgeGraphDataset(
        name=f"{kg.name}[:{max_entities}]", num_entities=max_entities, num_relations=kg.num_relations,
        relation_names=kg.relation_names, entity_names=kg.entity_names[:max_entities],
        train=keep(kg.train), valid=keep(kg.valid), test=keep(kg.test))


def graph_without(kg: KnowledgeGraphDataset, train_edges, held_out: torch.Tensor):
    """The training graph (with inverses) minus the triples ``held_out`` (indices into train)."""
    edge_index, edge_type, num_types = train_edges
    t = kg.train.shape[0]
    keep = torch.ones(2 * t, dtype=torch.bool)
    keep[held_out] = False
    keep[held_out + t] = False
    return ss.Graph.from_edge_index(edge_index[:, keep], num_nodes=kg.num_entities, edge_type=edge_type[keep],
                                    num_edge_types=num_types)


def sampled_softmax_loss(q, z, query_entity, target, negatives):
    """Cross-entropy of ``target`` among itself, the query's own entity and the shared
    ``negatives`` ([B], [B] and [K] ids). The query entity is a negative of its own: DistMult
    scores ``(e, r, e)`` high (``sum_k w_rk z_ek^2``), and uniform sampling almost never draws it."""
    pos = (q * z[target]).sum(-1, keepdim=True)                 # [B, 1]
    own = (q * z[query_entity]).sum(-1, keepdim=True)           # [B, 1]
    own = own.masked_fill((query_entity == target).unsqueeze(1), float("-inf"))
    neg = q @ z[negatives].t()                                   # [B, K]
    neg = neg.masked_fill(negatives.unsqueeze(0) == target.unsqueeze(1), float("-inf"))  # a sampled true one
    logits = torch.cat([pos, own, neg], 1)
    return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long))


@torch.no_grad()
def evaluate(model, g, kg: KnowledgeGraphDataset, triples, batch_size=256):
    """Filtered ranks of both directions of ``triples`` -> MRR, Hits@1/3/10."""
    model.eval()
    z = model.encode(g)
    filt = kg.filter_index()
    ranks = []
    for lo in range(0, len(triples), batch_size):
        h, r, t = triples[lo:lo + batch_size].unbind(1)
        for ent, rel, target in ((h, r, t), (t, r + kg.num_relations, h)):
            scores = model.query(z, ent, rel % kg.num_relations) @ z.t()
            ranks.append(filt.rank(scores, ent, rel, target))
    ranks = torch.cat(ranks).double()
    return dict(mrr=(1.0 / ranks).mean().item(), hits1=(ranks <= 1).double().mean().item(),
                hits3=(ranks <= 3).double().mean().item(), hits10=(ranks <= 10).double().mean().item(),
                num_ranked=int(ranks.numel()))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", choices=["wn18rr", "synthetic"], default="wn18rr")
    p.add_argument("--root", default=None, help="WN18RR folder (default: $SEASTAR_WN18RR_DIR or ../shared/data/wn18rr)")
    p.add_argument("--max-entities", type=int, default=None, help="keep only triples among the first K entities")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--dim", type=int, default=64, help="embedding / hidden size")
    p.add_argument("--bases", type=int, default=4, help="R-GCN basis matrices per layer")
    p.add_argument("--batch-size", type=int, default=8192, help="training triples per step")
    p.add_argument("--negatives", type=int, default=512, help="sampled negative entities per step (shared)")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--reg", type=float, default=1e-3, help="L2 penalty on the batch's embeddings and relations")
    p.add_argument("--mode", choices=list(snn.rgcn_conv.RGCN_MODES), default="auto", help="RGCNConv path")
    p.add_argument("--backend", choices=["auto", "fused", "reference"], default="auto")
    p.add_argument("--eval-subset", type=int, default=None, help="rank a random subset of K test triples")
    p.add_argument("--eval-batch", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", metavar="PATH", default=None)
    p.add_argument("--quiet", action="store_true")
    return check_arguments(p, p.parse_args(argv), dict(epochs=0, dim=1, bases=1, batch_size=1, negatives=1,
                                                       eval_batch=1, eval_subset=1, max_entities=2, threads=1))


def main(argv=None):
    args = parse_args(argv)
    fallbacks = FallbackLog()
    start_run(args, fallbacks)

    t_start = time.perf_counter()
    if args.dataset == "wn18rr":
        kg = ss.datasets.load_wn18rr(args.root) if args.root else ss.datasets.load("wn18rr")
    else:
        kg = synthetic_kg(seed=args.seed)
    if args.max_entities:
        kg = entity_subset(kg, args.max_entities)
    train_edges = kg.train_edges(add_inverse=True)
    full_graph = kg.train_graph(add_inverse=True)
    test = kg.test
    if args.eval_subset and args.eval_subset < len(test):
        pick = torch.randperm(len(test), generator=torch.Generator().manual_seed(args.seed))[:args.eval_subset]
        test = test[pick]
    log.info("%s: %d entities, %d relations (%d edge types with inverses), %d train triples, %d test triples "
             "ranked", kg.name, kg.num_entities, kg.num_relations, 2 * kg.num_relations, len(kg.train), len(test))

    model = RGCNLinkPredictor(kg.num_entities, kg.num_relations, args.dim, args.bases, args.dropout, args.mode)
    snn.set_backend(model, args.backend)
    log.info("RGCNConv path on the training graph: %s", model.conv1.choose_mode(full_graph))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    history, epoch_s = [], []
    n_train = len(kg.train)
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        perm = torch.randperm(n_train)
        total, steps = 0.0, 0
        for lo in range(0, n_train, args.batch_size):
            idx = perm[lo:lo + args.batch_size]
            g = graph_without(kg, train_edges, idx)
            h, r, t = kg.train[idx].unbind(1)
            z = model.encode(g)
            negatives = torch.randint(0, kg.num_entities, (args.negatives,))
            q_tail, q_head = model.query(z, h, r), model.query(z, t, r)
            loss = 0.5 * (sampled_softmax_loss(q_tail, z, h, t, negatives) +
                          sampled_softmax_loss(q_head, z, t, h, negatives))
            reg = z[h].pow(2).mean() + z[t].pow(2).mean() + model.rel.pow(2).mean()
            opt.zero_grad()
            (loss + args.reg * reg).backward()
            opt.step()
            total += loss.item()
            steps += 1
        secs = time.perf_counter() - t0
        epoch_s.append(secs)
        history.append(dict(epoch=epoch, loss=total / steps, seconds=secs))
        if not args.quiet:
            print(f"epoch {epoch:3d}  loss {total / steps:.4f}  steps {steps}  time {secs:7.2f} s", flush=True)

    t0 = time.perf_counter()
    metrics = evaluate(model, full_graph, kg, test, args.eval_batch)
    eval_s = time.perf_counter() - t0
    total_s = time.perf_counter() - t_start
    rest = epoch_s[1:]
    result = dict(
        dataset=kg.name, **metrics, epochs=args.epochs, dim=args.dim, bases=args.bases,
        test_triples_ranked=len(test), mean_epoch_s=(sum(rest) / len(rest)) if rest else (epoch_s[0] if epoch_s else float("nan")),
        first_epoch_s=epoch_s[0] if epoch_s else float("nan"), eval_s=eval_s, total_s=total_s,
        rgcn_path=model.conv1.choose_mode(full_graph), reference_fallbacks=fallbacks.messages,
        fused=not fallbacks.messages and args.backend != "reference", history=history, args=vars(args),
        torch_threads=torch.get_num_threads(), torch_version=torch.__version__, host=platform.node(),
    )
    print(f"test (filtered, {len(test)} triples x 2 directions): MRR {metrics['mrr']:.4f}  "
          f"Hits@1 {metrics['hits1']:.4f}  Hits@3 {metrics['hits3']:.4f}  Hits@10 {metrics['hits10']:.4f}; "
          f"mean epoch {result['mean_epoch_s']:.2f} s, eval {eval_s:.1f} s, total {total_s:.1f} s; "
          f"vertex programs {'fused' if result['fused'] else 'partly on the reference backend'}", flush=True)
    write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
