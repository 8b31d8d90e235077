"""Tests of seastar.datasets: the shipped Planetoid graphs, WN18RR (when the shared copy
exists), validation errors on corrupted files and the synthetic generators."""

import logging
import shutil
import time
from pathlib import Path

import pytest
import torch

import seastar.datasets as D
from seastar.datasets import planetoid as planetoid_mod

PLANETOID_DIR = Path(D.__file__).resolve().parent / "data" / "planetoid"
WN18RR_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "wn18rr"


def _graph_available():
    try:
        from seastar.graph import Graph  # noqa: F401
        return True
    except Exception:
        return False


# Without the compiled extension the tensor-level checks still run.
HAVE_GRAPH = _graph_available()
needs_graph = pytest.mark.skipif(not HAVE_GRAPH, reason="seastar.Graph not importable")

PLANETOID = {
    "cora": dict(nodes=2708, edges=10556, features=1433, classes=7, split=(140, 500, 1000)),
    "citeseer": dict(nodes=3327, edges=9104, features=3703, classes=6, split=(120, 500, 1000)),
}


# ---------------------------------------------------------------- Planetoid


@pytest.mark.parametrize("name", sorted(PLANETOID))
def test_planetoid_sizes_and_invariants(name):
    exp = PLANETOID[name]
    ds = D.load(name.upper(), build_graph=HAVE_GRAPH)
    assert isinstance(ds, D.NodeClassificationDataset)
    assert ds.name == name
    assert ds.x.shape == (exp["nodes"], exp["features"]) and ds.x.dtype == torch.float32
    assert ds.num_features == exp["features"] and ds.num_classes == exp["classes"]
    assert ds.edge_index.shape == (2, exp["edges"]) and ds.edge_index.dtype == torch.int64
    assert int(ds.edge_index.min()) >= 0 and int(ds.edge_index.max()) < exp["nodes"]
    assert ds.y.shape == (exp["nodes"],) and ds.y.dtype == torch.int64
    assert int(ds.y.min()) >= 0 and int(ds.y.max()) == exp["classes"] - 1
    masks = (ds.train_mask, ds.val_mask, ds.test_mask)
    assert tuple(int(m.sum()) for m in masks) == exp["split"]
    assert all(m.dtype == torch.bool for m in masks)
    assert int((ds.train_mask.long() + ds.val_mask.long() + ds.test_mask.long()).max()) == 1
    row_sum = ds.x.sum(1)
    assert torch.all(((row_sum - 1).abs() < 1e-5) | (row_sum == 0))
    # Every undirected edge is present in both directions.
    e = ds.edge_index
    fwd = set(zip(e[0].tolist(), e[1].tolist()))
    assert fwd == set(zip(e[1].tolist(), e[0].tolist()))
    if HAVE_GRAPH:
        assert ds.graph.num_nodes == exp["nodes"] and ds.graph.num_edges == exp["edges"]
    else:
        assert ds.graph is None


def test_citeseer_zero_feature_nodes():
    # The 15 nodes missing from the original release's test index have no features (they
    # do have edges) and belong to no split; normalisation must leave their rows at 0.
    ds = D.load("citeseer", build_graph=False)
    zero = torch.nonzero(ds.x.sum(1) == 0).flatten()
    assert zero.numel() == 15 and bool(torch.isfinite(ds.x).all())
    in_split = ds.train_mask | ds.val_mask | ds.test_mask
    assert not bool(in_split[zero].any())
    degree = torch.bincount(ds.edge_index.flatten(), minlength=ds.num_nodes)
    assert int((degree == 0).sum()) == 48  # as in PyTorch Geometric's CiteSeer


@pytest.mark.serial  # a wall-clock bound
def test_cora_is_fast_and_cached_loads_are_fresh():
    planetoid_mod._parse_cached.cache_clear()
    start = time.perf_counter()
    ds = D.load("cora", build_graph=False)
    assert time.perf_counter() - start < 1.0
    ds.x.zero_()
    ds.train_mask.fill_(True)
    again = D.load("cora", build_graph=False)
    assert int(again.train_mask.sum()) == 140
    assert torch.allclose(again.x.sum(1), torch.ones(2708))


def test_dtype_root_logging_and_to(tmp_path, caplog):
    shutil.copytree(PLANETOID_DIR / "cora", tmp_path / "cora")
    with caplog.at_level(logging.INFO, logger="seastar.datasets"):
        ds = D.load("cora", root=tmp_path, dtype=torch.float64, build_graph=False)
    assert ds.x.dtype == torch.float64
    assert any("cora" in r.getMessage() and "2708" in r.getMessage() for r in caplog.records)
    # root may also be the dataset folder itself.
    assert D.load("cora", root=tmp_path / "cora", build_graph=False).num_nodes == 2708
    moved = ds.to("cpu")
    assert moved is not ds and torch.equal(moved.x, ds.x)


@needs_graph
def test_planetoid_graph_built():
    ds = D.load("cora")
    assert ds.graph.num_nodes == 2708 and ds.graph.num_edges == 10556


# ---------------------------------------------------------------- validation errors


def _corrupt_copy(tmp_path, file, edit):
    folder = tmp_path / "cora"
    shutil.copytree(PLANETOID_DIR / "cora", folder)
    path = folder / file
    path.write_text(edit(path.read_text()))
    return folder


def test_unknown_dataset_name():
    with pytest.raises(ValueError, match="cora.*citeseer.*wn18rr"):
        D.load("pubmed")


def test_edge_node_out_of_range(tmp_path):
    folder = _corrupt_copy(tmp_path, "edges.txt", lambda t: t.replace("0 633\n", "0 2708\n", 1))
    with pytest.raises(ValueError, match=r"edges\.txt: line 1: destination node 2708 out of range"):
        D.load("cora", root=folder, build_graph=False)


def test_edge_count_mismatch_vs_meta(tmp_path):
    folder = _corrupt_copy(tmp_path, "edges.txt", lambda t: t.split("\n", 1)[1])
    with pytest.raises(ValueError, match=r"edges\.txt: 10555 edges, but meta\.txt says 10556"):
        D.load("cora", root=folder, build_graph=False)


def test_split_size_mismatch_vs_meta(tmp_path):
    folder = _corrupt_copy(tmp_path, "meta.txt", lambda t: t.replace("train 140", "train 141"))
    with pytest.raises(ValueError, match=r"split\.txt: 140 train nodes, but meta\.txt says 141"):
        D.load("cora", root=folder, build_graph=False)


def test_malformed_lines_are_named(tmp_path):
    folder = _corrupt_copy(tmp_path, "labels.txt", lambda t: t.replace("3\n", "3 x\n", 1))
    with pytest.raises(ValueError, match=r"labels\.txt: line 1: expected 'class', got '3 x'"):
        D.load("cora", root=folder, build_graph=False)
    # Same token count as the original, so only a per-line check catches it.
    folder = _corrupt_copy(tmp_path / "b", "edges.txt",
                           lambda t: t.replace("0 633\n0 1862\n", "0 633 0\n1862\n", 1))
    with pytest.raises(ValueError, match=r"edges\.txt: line 1: expected 'src dst'"):
        D.load("cora", root=folder, build_graph=False)
    folder = _corrupt_copy(tmp_path / "c", "features.txt",
                           lambda t: "\n" + t.replace("0 81 1\n", "0 81 one\n", 1))
    with pytest.raises(ValueError, match=r"features\.txt: line 3: not floats"):
        D.load("cora", root=folder, build_graph=False)


def test_label_out_of_range_and_overlapping_split(tmp_path):
    folder = _corrupt_copy(tmp_path, "labels.txt", lambda t: "7\n" + t.split("\n", 1)[1])
    with pytest.raises(ValueError, match=r"labels\.txt: line 1: class 7 out of range"):
        D.load("cora", root=folder, build_graph=False)
    folder = _corrupt_copy(tmp_path / "b", "split.txt",
                           lambda t: t.replace("val 140\n", "val 0\n", 1))
    with pytest.raises(ValueError, match=r"split\.txt: .*more than one split"):
        D.load("cora", root=folder, build_graph=False)


def test_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="meta.txt"):
        D.load("cora", root=tmp_path)


# ---------------------------------------------------------------- WN18RR

needs_wn18rr = pytest.mark.skipif(not WN18RR_DIR.is_dir(), reason=f"{WN18RR_DIR} absent")


@pytest.fixture(scope="module")
def wn18rr():
    if not WN18RR_DIR.is_dir():
        pytest.skip(f"{WN18RR_DIR} absent")
    return D.load("wn18rr", root=WN18RR_DIR)


def test_wn18rr_sizes(wn18rr):
    kg = wn18rr
    assert kg.num_entities == 40943 and kg.num_relations == 11
    assert len(kg.relation_names) == 11 and "_hypernym" in kg.relation_names
    assert [len(kg.train), len(kg.valid), len(kg.test)] == [86835, 3034, 3134]
    for split in (kg.train, kg.valid, kg.test):
        assert split.dtype == torch.int64 and split.shape[1] == 3
        assert int(split[:, [0, 2]].max()) < 40943 and int(split[:, 1].max()) < 11
    assert set(kg.train[:, 1].tolist()) == set(range(11))


@needs_wn18rr
def test_wn18rr_default_root(monkeypatch, tmp_path):
    monkeypatch.delenv("SEASTAR_WN18RR_DIR", raising=False)
    assert len(D.load("wn18rr").train) == 86835
    monkeypatch.setenv("SEASTAR_WN18RR_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        D.load("wn18rr")


def test_wn18rr_train_edges(wn18rr):
    edge_index, edge_type, num_types = wn18rr.train_edges(add_inverse=True)
    assert edge_index.shape == (2, 2 * 86835) and num_types == 22
    assert int(edge_type.max()) == 21
    h, r, t = wn18rr.train[0].tolist()
    assert edge_index[:, 86835].tolist() == [t, h] and int(edge_type[86835]) == r + 11
    edge_index, edge_type, num_types = wn18rr.train_edges(add_inverse=False)
    assert edge_index.shape == (2, 86835) and num_types == 11


@needs_graph
def test_wn18rr_train_graph(wn18rr):
    g = wn18rr.train_graph()
    assert g.num_nodes == 40943 and g.num_edges == 2 * 86835 and g.num_edge_types == 22
    assert wn18rr.train_graph(add_inverse=False).num_edge_types == 11


def test_wn18rr_filter_index(wn18rr):
    index = wn18rr.filter_index()
    h, r, t = wn18rr.test[:64].unbind(1)
    mask = index.mask(h, r)
    assert mask.shape == (64, 40943) and bool(mask[torch.arange(64), t].all())
    assert bool(index.mask(t, r + 11)[torch.arange(64), h].all())
    # A constant scorer ranks the target in the middle of the unfiltered candidates.
    ranks = index.rank(torch.zeros(64, 40943), h, r, t)
    assert torch.allclose(ranks, 1 + 0.5 * (40943 - mask.sum(1)).float())


def test_filter_index_matches_brute_force():
    triples = torch.tensor([[0, 0, 1], [0, 0, 2], [3, 1, 1], [0, 0, 1], [2, 1, 0]])
    empty = D.FilterIndex.build(triples[:0], num_entities=4, num_relations=2)
    assert not bool(empty.mask(torch.tensor([0]), torch.tensor([0])).any())
    index = D.FilterIndex.build(triples, num_entities=4, num_relations=2)
    truth = {}
    for h, r, t in triples.tolist():
        truth.setdefault((h, r), set()).add(t)
        truth.setdefault((t, r + 2), set()).add(h)
    assert index.as_dict() == truth
    queries = [(e, q) for e in range(4) for q in range(4)]
    ent, rel = torch.tensor(queries).unbind(1)
    mask = index.mask(ent, rel)
    for i, key in enumerate(queries):
        assert set(torch.nonzero(mask[i]).flatten().tolist()) == truth.get(key, set())
    assert index.true_answers(0, 0).tolist() == [1, 2]
    scores = torch.tensor([[0.0, 5.0, 9.0, 1.0]])
    # Target 1 scores below 2, which is also true and so filtered out: rank 1.
    assert index.rank(scores, torch.tensor([0]), torch.tensor([0]), torch.tensor([1])).item() == 1


def test_wn18rr_unknown_names(tmp_path):
    if not WN18RR_DIR.is_dir():
        pytest.skip(f"{WN18RR_DIR} absent")
    shutil.copytree(WN18RR_DIR, tmp_path / "kg")
    for p in (tmp_path / "kg").iterdir():
        p.chmod(0o644)
    valid = tmp_path / "kg" / "valid.txt"
    lines = valid.read_text().splitlines()
    good = lines[2]
    lines[2] = good.replace("\t_", "\t_no_such_relation_", 1)
    valid.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"valid\.txt: line 3: unknown relation"):
        D.load_wn18rr(tmp_path / "kg")
    lines[2] = "99999999\t" + good.split("\t", 1)[1]
    valid.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"valid\.txt: line 3: unknown entity '99999999'"):
        D.load_wn18rr(tmp_path / "kg")


# ---------------------------------------------------------------- synthetic


def _same(a, b):
    return torch.equal(a.edge_index, b.edge_index)


def test_uniform_graph():
    g = D.uniform_graph(500, 3000, seed=3, build_graph=HAVE_GRAPH)
    assert g.edge_index.shape == (2, 3000) and g.edge_index.dtype == torch.int64
    assert int(g.edge_index.max()) < 500 and g.num_nodes == 500
    assert _same(g, D.uniform_graph(500, 3000, seed=3, build_graph=False))
    assert not _same(g, D.uniform_graph(500, 3000, seed=4, build_graph=False))
    if HAVE_GRAPH:
        assert g.graph.num_nodes == 500 and g.graph.num_edges == 3000


@pytest.mark.parametrize("num_nodes", [4096, 3000])
def test_power_law_graph(num_nodes):
    g = D.power_law_graph(num_nodes, 16, seed=1, build_graph=False)
    assert g.edge_index.shape == (2, num_nodes * 16) and g.edge_index.dtype == torch.int64
    assert int(g.edge_index.min()) >= 0 and int(g.edge_index.max()) < num_nodes
    in_degree = torch.bincount(g.edge_index[1], minlength=num_nodes)
    assert int(in_degree.max()) > 10 * 16
    # Ids are permuted: the hub is not simply node 0.
    assert int(in_degree.argmax()) != 0 or int(in_degree[1:].max()) > 10 * 16
    assert _same(g, D.power_law_graph(num_nodes, 16, seed=1, build_graph=False))
    assert not _same(g, D.power_law_graph(num_nodes, 16, seed=2, build_graph=False))


@pytest.mark.serial  # a wall-clock bound
def test_power_law_graph_large_is_fast():
    start = time.perf_counter()
    g = D.power_law_graph(200_000, 20, seed=0, build_graph=False)
    assert g.num_edges == 4_000_000 and time.perf_counter() - start < 5.0


def test_typed_graph_and_relation_skew():
    g = D.typed_graph(1000, 100_000, 3, 4, seed=5, relation_skew=[0.9, 0.05, 0.03, 0.02],
                      build_graph=HAVE_GRAPH)
    assert g.node_type.shape == (1000,) and g.edge_type.shape == (100_000,)
    assert g.node_type.dtype == torch.int64 and g.edge_type.dtype == torch.int64
    assert set(g.node_type.unique().tolist()) == {0, 1, 2}
    share = torch.bincount(g.edge_type, minlength=4).double() / 100_000
    assert torch.allclose(share, torch.tensor([0.9, 0.05, 0.03, 0.02], dtype=torch.float64),
                          atol=0.01)
    same = D.typed_graph(1000, 100_000, 3, 4, seed=5, relation_skew=[0.9, 0.05, 0.03, 0.02],
                         build_graph=False)
    assert torch.equal(g.edge_type, same.edge_type) and _same(g, same)
    uniform = D.typed_graph(1000, 100_000, 3, 4, seed=6, build_graph=False)
    assert bool((torch.bincount(uniform.edge_type).double() / 100_000 - 0.25).abs().max() < 0.01)
    with pytest.raises(ValueError, match="relation_skew"):
        D.typed_graph(10, 10, 1, 2, relation_skew=[1.0])
    if HAVE_GRAPH:
        assert g.graph.num_edges == 100_000 and g.graph.num_edge_types == 4


def test_planted_typed_classification_is_learnable_from_relations():
    n, r, c = 2000, 5, 4
    ds = D.planted_typed_classification(n, 10 * n, 3, r, c, 16, seed=7, build_graph=HAVE_GRAPH)
    assert ds.x.shape == (n, 16) and ds.edge_type.shape == (10 * n,)
    assert ds.num_edge_types == r and ds.num_node_types == 3 and ds.num_classes == c
    masks = ds.train_mask.long() + ds.val_mask.long() + ds.test_mask.long()
    assert bool((masks == 1).all())
    # Class-conditional relation histograms of in-edges, fitted on train, classify test nodes.
    counts = torch.zeros(n, r)
    counts.index_put_((ds.edge_index[1], ds.edge_type), torch.ones(ds.edge_type.numel()),
                      accumulate=True)
    tr, te = ds.train_mask, ds.test_mask
    probs = torch.stack([counts[tr & (ds.y == k)].sum(0) + 1 for k in range(c)])
    probs /= probs.sum(1, keepdim=True)
    pred = (counts[te] @ probs.log().T).argmax(1)
    assert (pred == ds.y[te]).float().mean() > 0.8
    # Features alone are only weakly informative.
    centroids = torch.stack([ds.x[tr & (ds.y == k)].mean(0) for k in range(c)])
    feat_pred = torch.cdist(ds.x[te], centroids).argmin(1)
    assert (feat_pred == ds.y[te]).float().mean() < 0.6
    again = D.planted_typed_classification(n, 10 * n, 3, r, c, 16, seed=7, build_graph=False)
    assert torch.equal(ds.x, again.x) and torch.equal(ds.edge_type, again.edge_type)
    with pytest.raises(ValueError, match="num_classes"):
        D.planted_typed_classification(10, 100, 1, 2, 5, 4)
