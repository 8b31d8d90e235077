"""The partitioner: every edge in exactly one part's in-edges, halos exactly the remote
in-neighbours, parts that put back together give the original graph, balanced training
vertices, and clear errors."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch

import seastar as ss
from seastar.distributed import assemble, load_partition, partition_graph
from seastar.distributed.partition import main as partition_main

HAVE_METIS = importlib.util.find_spec("pymetis") is not None
METHODS = ["random", pytest.param("metis", marks=pytest.mark.skipif(
    not HAVE_METIS, reason="pymetis is not installed (scripts/test.sh installs it; pip install pymetis)"))]


class Data:
    """A dataset-like object: what partition_graph reads from a dataset."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def messy_dataset(n=80, seed=0, typed=True):
    """Isolated vertices (the last 5), self loops, multi-edges, a hub (vertex 0: many in- and
    out-edges), random edges; edge types; features, labels and masks."""
    g = torch.Generator().manual_seed(seed)
    m = n - 5
    src = torch.randint(0, m, (4 * m,), generator=g)
    dst = torch.randint(0, m, (4 * m,), generator=g)
    hub_in = torch.randint(1, m, (m // 2,), generator=g)
    loops = torch.arange(0, m, 7)
    src = torch.cat([src, hub_in, torch.zeros(m // 2, dtype=torch.long), loops, src[:10]])
    dst = torch.cat([dst, torch.zeros(m // 2, dtype=torch.long), hub_in, loops, dst[:10]])  # last: multi-edges
    ei = torch.stack([src, dst])
    et = torch.randint(0, 3, (ei.shape[1],), generator=g) if typed else None
    graph = ss.Graph.from_edge_index(ei, num_nodes=n, edge_type=et, num_edge_types=3 if typed else None)
    train = torch.rand(n, generator=g) < 0.3
    return Data(graph=graph, x=torch.randn(n, 6, generator=g, dtype=torch.float64),
                y=torch.randint(0, 4, (n,), generator=g), train_mask=train, val_mask=~train,
                test_mask=torch.zeros(n, dtype=torch.bool)), ei, et


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("num_parts", [1, 3, 4])
def test_parts_cover_the_graph_exactly(tmp_path, method, num_parts):
    ds, ei, et = messy_dataset()
    n, e = ds.graph.num_nodes, ei.shape[1]
    report = partition_graph(ds, num_parts, tmp_path, method=method)
    assignment = torch.load(tmp_path / "assignment.pt")
    assert assignment.shape == (n,) and assignment.min() >= 0 and assignment.max() < num_parts
    seen_edges, seen_owned = [], []
    for p in range(num_parts):
        part = load_partition(tmp_path, p, world_size=num_parts)
        assert torch.equal(part.owned, (assignment == p).nonzero().view(-1))
        seen_owned.append(part.owned)
        # in-edges: exactly the edges whose destination the part owns, in the original order
        mine = (assignment[ei[1]] == p).nonzero().view(-1)
        assert torch.equal(part.edge_ids, mine)
        seen_edges.append(part.edge_ids)
        local_to_global = torch.cat([part.owned, part.halo])
        assert torch.equal(local_to_global[part.edge_index[0]], ei[0, mine])
        assert torch.equal(part.owned[part.edge_index[1]], ei[1, mine])
        assert torch.equal(part.edge_type, et[mine])
        # halo: exactly the sources of those edges owned elsewhere, sorted by owner then id
        srcs = ei[0, mine]
        remote = sorted(set(srcs[assignment[srcs] != p].tolist()), key=lambda v: (int(assignment[v]), v))
        assert part.halo.tolist() == remote
        assert torch.equal(part.halo_owner, assignment[part.halo])
        # the global-to-local map
        assert torch.equal(part.global_to_local(local_to_global), torch.arange(local_to_global.numel()))
        others = torch.tensor(sorted(set(range(n)) - set(local_to_global.tolist())), dtype=torch.long)
        assert (part.global_to_local(others) == -1).all()
        g = part.local_graph()
        assert (g.num_src, g.num_dst, g.num_edges) == (part.num_owned + part.num_halo, part.num_owned, mine.numel())
        assert torch.equal(part.node_data["x"], ds.x[part.owned])
    assert torch.equal(torch.sort(torch.cat(seen_edges)).values, torch.arange(e))
    assert torch.equal(torch.sort(torch.cat(seen_owned)).values, torch.arange(n))
    assert report["edge_cut"] == int((assignment[ei[0]] != assignment[ei[1]]).sum())
    assert report["boundary_rows"] == sum(load_partition(tmp_path, p).num_halo for p in range(num_parts))
    train = [int(ds.train_mask[assignment == p].sum()) for p in range(num_parts)]
    assert max(train) - min(train) <= 1, train
    assert json.loads((tmp_path / "partition.json").read_text())["num_parts"] == num_parts


@pytest.mark.parametrize("method", METHODS)
def test_round_trip(tmp_path, method):
    ds, ei, et = messy_dataset(seed=1)
    partition_graph(ds, 3, tmp_path, method=method)
    back = assemble(tmp_path)
    assert torch.equal(back["edge_index"], ei)
    assert torch.equal(back["edge_type"], et)
    for k in ("x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(back[k], getattr(ds, k)), k
    rebuilt = ss.Graph.from_edge_index(back["edge_index"], num_nodes=ds.graph.num_nodes)
    assert torch.equal(rebuilt.in_degrees(), ds.graph.in_degrees())


def test_graph_without_features(tmp_path):
    ds, ei, _ = messy_dataset(typed=False)
    partition_graph(ds.graph, 2, tmp_path, method="random")
    back = assemble(tmp_path)
    assert torch.equal(back["edge_index"], ei) and back["edge_type"] is None


@pytest.mark.skipif(not HAVE_METIS, reason="pymetis is not installed")
def test_metis_cuts_fewer_edges_than_random(tmp_path):
    ds = ss.datasets.load("cora")
    cut = {m: partition_graph(ds, 4, tmp_path / m, method=m)["edge_cut"] for m in ("metis", "random")}
    assert cut["metis"] < 0.3 * cut["random"], cut


def test_errors(tmp_path):
    ds, _, _ = messy_dataset()
    with pytest.raises(ValueError, match="more parts than vertices"):
        partition_graph(ds, ds.graph.num_nodes + 1, tmp_path)
    with pytest.raises(ValueError, match="num_parts must be >= 1"):
        partition_graph(ds, 0, tmp_path)
    with pytest.raises(ValueError, match="method must be"):
        partition_graph(ds, 2, tmp_path, method="spectral")
    with pytest.raises(TypeError, match="seastar.Graph or a dataset"):
        partition_graph(torch.zeros(3), 2, tmp_path)
    with pytest.raises(FileNotFoundError, match="no partition at"):
        load_partition(tmp_path / "missing", 0)
    partition_graph(ds, 2, tmp_path / "p", method="random")
    with pytest.raises(ValueError, match="has 2 parts but the world size is 3"):
        load_partition(tmp_path / "p", 0, world_size=3)
    with pytest.raises(ValueError, match="part 2 does not exist"):
        load_partition(tmp_path / "p", 2)
    (tmp_path / "p" / "part-1" / "node_data.pt").unlink()
    with pytest.raises(FileNotFoundError, match="incomplete"):
        load_partition(tmp_path / "p", 1)


def test_command_line(tmp_path, capsys):
    report = partition_main(["--dataset", "synthetic", "--num-nodes", "3000", "--avg-degree", "5", "--parts", "4",
                             "--out", str(tmp_path), "--method", "random"])
    assert "edge cut" in capsys.readouterr().out
    assert report["num_parts"] == 4 and (tmp_path / "part-3" / "graph.pt").is_file()
    assert sum(r["owned"] for r in report["parts"]) == 3000
    with pytest.raises(SystemExit):
        partition_main(["--dataset", "synthetic", "--num-nodes", "3", "--num-classes", "2", "--parts", "4",
                        "--out", str(tmp_path / "x"), "--method", "random"])
