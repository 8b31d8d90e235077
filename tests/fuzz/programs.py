"""Random vertex programs over the public op set, and an independent plain-torch evaluation.

A program is a tree of tuples; ``source(program)`` renders it as the Python text of a
``seastar`` vertex program (also what a failure report prints), ``evaluate(...)`` computes
the same function with plain torch over the edge list, written here without seastar's
reference executor, so the two share no code. The tie rules are the documented ones
(docs/ARCHITECTURE.md): a feature-axis max splits the gradient among ties (torch.amax),
maximum/minimum give half to each operand of a tie (torch.maximum), an aggregation max/min
splits it evenly among the tied edges (torch.scatter_reduce from a start that never ties).

Node forms (space V: the centre vertex, E: an edge of the enclosing aggregation's list; shapes
S = [H, F], P = [H, 1]):
  ("vin", name)  v.<name>        ("src", name)  the neighbour's <name> (e.src, or e.dst on out-edges)
  ("edge", name)  e.<name>       ("un", op, x, *params)         ("bin", op, x, y)   ("const", c)
  ("red", op, x)   x.<op>(-1, keepdim=True)
  ("agg", op, x)   ss.<op>(x for e in v.in_edges());  ("agg", op, x, "out"): over v.out_edges()
  ("smax", s, m)   sum of softmax(s) * m over the in-edges
  ("tmv", x)       x @ W[e.type]  (W [R, F, F], a typed parameter; x an S value of the edge)
  ("mv", x)        x @ W0         (W0 [F, F], a parameter; x an S value of the centre)
  ("ctr", name)  the centre's <name> read through the edge (e.dst on in-edges, e.src on out-edges)
  ("sm", s)      ss.softmax(s): s normalised over the enclosing edge list (an E value)
  ("deg",)       v.in_degree
  ("smax", s, m, "out"): the same over v.out_edges()
The tree is drawn first (one random stream), then a second stream from the same seed turns some
aggregations into out-edge ones and wraps some S leaves in the parameter products.

Profiles (``random_program(seed, profile)``):
  default  the shapes above at their base rates
  hard     nested aggregations (a centre aggregation inside an edge expression), softmax scores
           that depend only on the centre (``e.dst.s``, times ``v.in_degree``), softmax over
           out-edges, softmax as an edge value inside any expression, typed parameters more often
  ties     the hard shapes on integer-valued inputs and parameters, so maxima, minima, kinks
           (relu, abs, clamp) and maximum/minimum tie exactly; only ops whose result is one
           correctly rounded operation (no exp, tanh, sqrt, softmax), so both sides see the
           same ties
"""
from __future__ import annotations

import random
from typing import Dict, List, Tuple

import torch

VERTEX_INPUTS = {"a": "S", "b": "S", "s": "P"}
EDGE_INPUTS = {"w": "S", "q": "P"}
UNARY = ["neg", "relu", "leaky_relu", "elu", "sigmoid", "tanh", "abs", "square", "softplus_ish", "log1p_sq",
         "exp_clamped", "clamp", "scale"]
BINARY = ["add", "sub", "mul", "safe_div", "maximum", "minimum"]
# the ties profile's: each result is one correctly rounded operation of its operands, so both
# sides compute the same value and tie where the other does (exp, tanh, sqrt... and softmax may
# round differently in the last bit, and a tie in one would be none in the other)
EXACT_UNARY = ["neg", "relu", "leaky_relu", "abs", "square", "clamp", "scale"]
REDUCE = ["sum", "mean", "max"]
AGGREGATE = ["sum", "mean", "max", "min"]
NUM_EDGE_TYPES = 3  # of the typed graph a program reading W[e.type] runs on
PROFILES = ("default", "hard", "ties")


# -- generation --------------------------------------------------------------------------------
class _Gen:
    def __init__(self, rng: random.Random, hard: bool = False, exact: bool = False):
        self.rng = rng
        self.hard = hard
        self.exact = exact  # no transcendental op and no softmax (the ties profile)

    def pick(self, xs):
        return self.rng.choice(xs)

    def tree(self, space: str, shape: str, depth: int, root: bool = False):
        r = self.rng.random()
        if root:  # an output is never a bare input: start from an aggregation or an op
            r = 0.3 + 0.7 * r
        if depth <= 0 or r < 0.1:
            return self.leaf(space, shape)
        if shape == "P" and r < 0.3:
            return ("red", self.pick(REDUCE), self.tree(space, self.pick("SP"), depth - 1))
        if space == "V" and r < 0.55:
            if self.rng.random() < (0.4 if self.hard else 0.25) and depth >= 2 and not self.exact:
                return ("smax", self.score(depth - 2), self.tree("E", shape, depth - 1))
            return ("agg", self.pick(AGGREGATE), self.tree("E", shape, depth - 1))
        if self.hard and space == "E" and r < 0.4:
            if self.rng.random() < 0.5 or self.exact:  # nested: the centre's own aggregation, read on its edges
                return ("bin", self.pick(["mul", "add", "sub"]), self.tree("E", shape, depth - 1),
                        ("agg", self.pick(AGGREGATE), self.tree("E", shape, depth - 1)))
            return ("sm", self.tree("E", shape, depth - 1))
        if r < 0.65:
            op = self.pick(EXACT_UNARY if self.exact else UNARY)
            params = {"leaky_relu": (0.2,), "elu": (1.0,), "clamp": (-0.5, 0.7), "scale": (-1.5,)}.get(op, ())
            return ("un", op, self.tree(space, shape, depth - 1), *params)
        if r < 0.72:
            return ("bin", self.pick(["mul", "add", "maximum", "minimum"]), self.tree(space, shape, depth - 1),
                    ("const", self.pick([0.0, 0.5, -1.0, 2.0])))
        # binary: an S result needs one S operand; an E result needs one E operand
        op = self.pick(BINARY)
        shapes = [shape, shape] if shape == "P" else self.pick([["S", "S"], ["S", "P"], ["P", "S"]])
        spaces = ["V", "V"] if space == "V" else self.pick([["E", "E"], ["E", "V"], ["V", "E"]])
        return ("bin", op, self.tree(spaces[0], shapes[0], depth - 1), self.tree(spaces[1], shapes[1], depth - 1))

    def score(self, depth: int):
        """A softmax score: in the hard profile often one that depends only on the centre."""
        if self.hard and self.rng.random() < 0.4:
            score = ("ctr", "s")
            if self.rng.random() < 0.5:
                score = ("bin", "mul", score, ("deg",))
            if self.rng.random() < 0.5:
                score = ("un", "tanh", score)
            return score
        return self.tree("E", "P", depth)

    def leaf(self, space: str, shape: str):
        vnames = [n for n, s in VERTEX_INPUTS.items() if s == shape]
        if space == "V":
            return ("vin", self.pick(vnames))
        enames = [n for n, s in EDGE_INPUTS.items() if s == shape]
        leaves = [("src", self.pick(vnames)), ("src", self.pick(vnames)), ("edge", self.pick(enames))]
        if self.hard:
            leaves.append(("ctr", self.pick(vnames)))
        return self.pick(leaves)


def _vary(node, rng: random.Random, hard: bool = False):
    """The second pass: some aggregations over out-edges, some S leaves through a parameter."""
    kind = node[0]
    if kind in ("src", "ctr") and VERTEX_INPUTS[node[1]] == "S" or kind == "edge" and EDGE_INPUTS[node[1]] == "S":
        return ("tmv", node) if rng.random() < (0.25 if hard else 0.12) else node
    if kind == "vin" and VERTEX_INPUTS[node[1]] == "S":
        return ("mv", node) if rng.random() < 0.08 else node
    if kind in ("src", "ctr", "edge", "vin", "const", "deg"):
        return node
    out = tuple(_vary(c, rng, hard) if isinstance(c, tuple) else c for c in node)
    if (kind == "agg" or hard and kind == "smax") and rng.random() < (0.3 if hard else 0.2):
        out = out + ("out",)
    return out


def random_program(seed: int, profile: str = "default") -> Dict:
    """A program (1 to 3 outputs) and the sizes it runs at, all from `seed` and `profile`."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {PROFILES}")
    hard = profile != "default"
    rng = random.Random(seed if not hard else f"{profile}-{seed}")
    g = _Gen(rng, hard, exact=profile == "ties")
    outs = [g.tree("V", rng.choice("SP"), rng.randint(2, 5), root=True) for _ in range(rng.randint(1, 3))]
    program = {"seed": seed, "profile": profile, "outputs": outs, "H": rng.choice([1, 2]), "F": rng.choice([1, 3, 4])}
    vary = random.Random(seed * 7919 + 17)
    program["outputs"] = [_vary(o, vary, hard) for o in outs]
    return program


# -- rendering as a seastar program --------------------------------------------------------------
_UN_SRC = {
    "neg": "(-{x})", "relu": "ss.relu({x})", "leaky_relu": "ss.leaky_relu({x}, {p0})", "elu": "ss.elu({x}, {p0})",
    "sigmoid": "ss.sigmoid({x})", "tanh": "ss.tanh({x})", "abs": "ss.abs({x})", "square": "({x} ** 2.0)",
    "softplus_ish": "ss.sqrt({x} * {x} + 1.0)", "log1p_sq": "ss.log({x} * {x} + 1.0)",
    "exp_clamped": "ss.exp(ss.clamp({x}, -3.0, 3.0))", "clamp": "ss.clamp({x}, {p0}, {p1})",
    "scale": "({x} * {p0})",
}
_BIN_SRC = {"add": "({x} + {y})", "sub": "({x} - {y})", "mul": "({x} * {y})", "safe_div": "({x} / ({y} * {y} + 1.0))",
            "maximum": "ss.maximum({x}, {y})", "minimum": "ss.minimum({x}, {y})"}


def _src(node, e: str, depth: int, nbr: str = "src") -> str:
    """`e` names the enclosing edge variable, `nbr` its neighbour endpoint (src on in-edges)."""
    kind = node[0]
    if kind == "vin":
        return f"v.{node[1]}"
    if kind == "src":
        return f"{e}.{nbr}.{node[1]}"
    if kind == "ctr":
        return f"{e}.{'dst' if nbr == 'src' else 'src'}.{node[1]}"
    if kind == "deg":
        return "v.in_degree"
    if kind == "sm":
        return f"ss.softmax({_src(node[1], e, depth, nbr)})"
    if kind == "tmv":
        return f"({_src(node[1], e, depth, nbr)} @ W[{e}.type])"
    if kind == "mv":
        return f"({_src(node[1], e, depth, nbr)} @ W0)"
    if kind == "edge":
        return f"{e}.{node[1]}"
    if kind == "const":
        return repr(float(node[1]))
    if kind == "un":
        params = {f"p{i}": repr(float(p)) for i, p in enumerate(node[3:])}
        return _UN_SRC[node[1]].format(x=_src(node[2], e, depth, nbr), **params)
    if kind == "bin":
        return _BIN_SRC[node[1]].format(x=_src(node[2], e, depth, nbr), y=_src(node[3], e, depth, nbr))
    if kind == "red":
        return f"{_src(node[2], e, depth, nbr)}.{node[1]}(-1, keepdim=True)"
    inner = f"e{depth + 1}"
    if kind == "agg":
        out = node[3:] == ("out",)
        edges = "v.out_edges()" if out else "v.in_edges()"
        return f"ss.{node[1]}({_src(node[2], inner, depth + 1, 'dst' if out else 'src')} for {inner} in {edges})"
    if kind == "smax":
        out = node[3:] == ("out",)
        edges, nb = ("v.out_edges()", "dst") if out else ("v.in_edges()", "src")
        scores = f"ss.softmax([{_src(node[1], inner, depth + 1, nb)} for {inner} in {edges}])"
        return f"ss.sum(alpha * {_src(node[2], inner, depth + 1, nb)} for alpha, {inner} in zip({scores}, {edges}))"
    raise ValueError(f"unknown node {node!r}")


def source(program: Dict) -> str:
    """The vertex program as Python text (def prog(v[, W][, W0]): return ...)."""
    outs = ", ".join(_src(o, "e0", 0) for o in program["outputs"])
    params = "".join(f", {p}" for p in ("W", "W0") if p in input_names(program))
    return f"def prog(v{params}):\n    return {outs}\n"


def is_typed(program: Dict) -> bool:
    """Whether the program reads edge types (its graph must have them)."""
    return "W" in input_names(program)


def build(program: Dict):
    """The vertex program's function (exec of source(); `ss` is seastar)."""
    import seastar as ss

    scope = {"ss": ss}
    exec(compile(source(program), f"<fuzz program {program['seed']}>", "exec"), scope)
    return scope["prog"]


def input_names(program: Dict) -> List[str]:
    names = set()

    def walk(node):
        if node[0] in ("vin", "src", "ctr", "edge"):
            names.add(node[1])
        if node[0] in ("tmv", "mv"):
            names.add("W" if node[0] == "tmv" else "W0")
        for child in node[1:]:
            if isinstance(child, tuple):
                walk(child)

    for o in program["outputs"]:
        walk(o)
    return sorted(names)


def make_inputs(program: Dict, num_nodes: int, num_edges: int, seed: int) -> Dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    H, F = program["H"], program["F"]
    shapes = {"S": (H, F), "P": (H, 1)}
    ties = program.get("profile") == "ties"

    def draw(shape, low=-1, high=3):
        if ties:  # small integers: exact ties, exact sums and products
            return torch.randint(low, high, shape, generator=gen).to(torch.float64)
        return torch.randn(shape, generator=gen, dtype=torch.float64)

    out = {}
    for name in input_names(program):
        if name in ("W", "W0"):  # parameters, scaled to keep products of order one (integers: -1, 0, 1)
            shape = (NUM_EDGE_TYPES, F, F) if name == "W" else (F, F)
            out[name] = draw(shape, -1, 2) if ties else draw(shape) / F ** 0.5
            continue
        rows = num_nodes if name in VERTEX_INPUTS else num_edges
        shape = shapes[{**VERTEX_INPUTS, **EDGE_INPUTS}[name]]
        out[name] = draw((rows,) + shape)
    return out


# -- the plain-torch evaluation ---------------------------------------------------------------------
_UN_TORCH = {
    "neg": lambda x, p: -x, "relu": lambda x, p: torch.relu(x),
    "leaky_relu": lambda x, p: torch.nn.functional.leaky_relu(x, p[0]),
    "elu": lambda x, p: torch.nn.functional.elu(x, p[0]), "sigmoid": lambda x, p: torch.sigmoid(x),
    "tanh": lambda x, p: torch.tanh(x), "abs": lambda x, p: torch.abs(x), "square": lambda x, p: x * x,
    "softplus_ish": lambda x, p: torch.sqrt(x * x + 1), "log1p_sq": lambda x, p: torch.log(x * x + 1),
    "exp_clamped": lambda x, p: torch.exp(torch.clamp(x, -3.0, 3.0)),
    "clamp": lambda x, p: torch.clamp(x, p[0], p[1]), "scale": lambda x, p: x * p[0],
}
_BIN_TORCH = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "safe_div": lambda x, y: x / (y * y + 1),
              "maximum": torch.maximum, "minimum": torch.minimum}


class _Edges:
    """An edge list seen from its centres (`dst` the centre of each edge, `src` the neighbour),
    with the edge types; `lists` maps "in" to the graph's in-edges and "out" to its out-edges
    (the same edges reversed, the same ids)."""

    def __init__(self, edge_index: torch.Tensor, num_nodes: int, edge_type=None, reverse_of=None):
        self.src, self.dst = edge_index[0].long(), edge_index[1].long()
        self.N, self.E = num_nodes, edge_index.shape[1]
        self.type = edge_type
        if reverse_of is None:
            self.lists = {"in": self}
            self.lists["out"] = _Edges(edge_index.flip(0), num_nodes, edge_type, reverse_of=self)
        else:
            self.lists = reverse_of.lists


def _per_vertex(x: torch.Tensor, g: _Edges, reduce: str) -> torch.Tensor:
    idx = g.dst.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    return x.new_zeros((g.N,) + x.shape[1:]).scatter_reduce(0, idx, x, reduce=reduce, include_self=False)


def _extreme(x: torch.Tensor, g: _Edges, reduce: str) -> torch.Tensor:
    """max/min over in-edges (0 with no edges) whose gradient the tied edges share evenly.

    scatter_reduce starts from +-inf, so its start never ties with an edge (from zeros, torch
    would count a start equal to the extreme as one more tie: PyG's rule, ``ties="pyg"``)."""
    start = float("-inf") if reduce == "amax" else float("inf")
    idx = g.dst.view((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    out = x.new_full((g.N,) + x.shape[1:], start).scatter_reduce(0, idx, x, reduce=reduce, include_self=False)
    return torch.where(torch.isinf(out), torch.zeros_like(out), out)


def _softmax(s: torch.Tensor, g: _Edges) -> torch.Tensor:
    """s normalised over each centre's edges (max-subtracted, the max held constant)."""
    top = _per_vertex(s.detach(), g, "amax")
    ex = torch.exp(s - top[g.dst])
    z = ex.new_zeros((g.N,) + ex.shape[1:]).index_add(0, g.dst, ex)
    return ex / z[g.dst]


def _eval(node, g: _Edges, x: Dict[str, torch.Tensor]) -> Tuple[str, torch.Tensor]:
    """(space, value): V values have N rows, E values E rows; constants are Python floats."""
    kind = node[0]
    if kind == "vin":
        return "V", x[node[1]]
    if kind == "src":
        return "E", x[node[1]][g.src]
    if kind == "ctr":
        return "E", x[node[1]][g.dst]
    if kind == "deg":  # in-degree of every vertex, broadcast over the features
        deg = torch.bincount(g.lists["in"].dst, minlength=g.N).to(torch.float64)
        return "V", deg.view(-1, 1, 1)
    if kind == "sm":
        _, s = _eval(node[1], g, x)
        return "E", _softmax(s, g)
    if kind == "edge":
        return "E", x[node[1]]
    if kind == "const":
        return "C", node[1]
    if kind == "tmv":  # each edge's row through its type's matrix
        sp, a = _eval(node[1], g, x)
        return sp, torch.einsum("ehf,efg->ehg", a, x["W"][g.type])
    if kind == "mv":
        sp, a = _eval(node[1], g, x)
        return sp, a @ x["W0"]
    if kind == "un":
        sp, a = _eval(node[2], g, x)
        return sp, _UN_TORCH[node[1]](a, node[3:])
    if kind == "bin":
        (sa, a), (sb, b) = _eval(node[2], g, x), _eval(node[3], g, x)
        if sb == "C":
            b = torch.tensor(b, dtype=torch.float64)
            sb = sa
        if sa != sb:  # a centre value read along every in-edge
            a, b = (a[g.dst] if sa == "V" else a), (b[g.dst] if sb == "V" else b)
        return ("E" if "E" in (sa, sb) else "V"), _BIN_TORCH[node[1]](a, b)
    if kind == "red":
        sp, a = _eval(node[2], g, x)
        if node[1] == "max":
            return sp, a.amax(-1, keepdim=True)
        return sp, getattr(a, node[1])(-1, keepdim=True)
    if kind == "agg":
        g = g.lists["out" if node[3:] == ("out",) else "in"]
        _, a = _eval(node[2], g, x)
        if node[1] in ("max", "min"):
            return "V", _extreme(a, g, "amax" if node[1] == "max" else "amin")
        total = a.new_zeros((g.N,) + a.shape[1:]).index_add(0, g.dst, a)
        if node[1] == "mean":
            deg = torch.bincount(g.dst, minlength=g.N).clamp(min=1).to(a.dtype)
            total = total / deg.view((-1,) + (1,) * (a.dim() - 1))
        return "V", total
    if kind == "smax":
        g = g.lists["out" if node[3:] == ("out",) else "in"]
        (ss_, s), (sm_, m) = _eval(node[1], g, x), _eval(node[2], g, x)
        s, m = (s[g.dst] if ss_ == "V" else s), (m[g.dst] if sm_ == "V" else m)
        y = _softmax(s, g) * m
        return "V", y.new_zeros((g.N,) + y.shape[1:]).index_add(0, g.dst, y)
    raise ValueError(f"unknown node {node!r}")


def evaluate(program: Dict, edge_index: torch.Tensor, num_nodes: int, inputs: Dict[str, torch.Tensor],
             edge_type=None):
    """The program's outputs ([N, ...] each) computed with plain torch."""
    g = _Edges(edge_index, num_nodes, edge_type)
    outs = []
    for o in program["outputs"]:
        sp, val = _eval(o, g, inputs)
        assert sp == "V", f"an output must be a vertex value, got {sp}"
        outs.append(val)
    return outs
