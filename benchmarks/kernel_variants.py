"""Times the generated forward kernels of the GCN aggregation and of GAT against hand-written
variants (``kernel_variants.cpp``) on one power-law graph, to see what limits them.

    python benchmarks/kernel_variants.py [--nodes 100000] [--width 64] [--threads 1] [--out DIR]

The generated kernels are taken from ``SEASTAR_DUMP_DIR`` (a scratch folder set here) and
compiled again with the runtime's flags, so generated and hand-written code are called the same
way (ctypes, same index and feature buffers). Each variant's output is checked against
seastar's. Bandwidth = useful bytes (``_child.roofline_bytes``) / time, against the copy
bandwidth measured in the same process.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FLAGS = "-O3 -march=native -fopenmp-simd -shared -fPIC -std=c++17 -fno-math-errno".split()  # runtime/jit/compiler.cpp


def compile_so(src: str, so: str, extra=()):
    cxx = os.environ.get("SEASTAR_CXX", "g++")
    r = subprocess.run([cxx, *FLAGS, *extra, src, "-o", so], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"compiling {src} failed:\n{r.stderr}")
    return ctypes.CDLL(so)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--degree", type=float, default=20)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7, help="rounds over all variants")
    ap.add_argument("--out", help="folder for kernel_variants.json / .md")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="seastar-variants-")
    os.environ["SEASTAR_DUMP_DIR"] = os.path.join(work, "dump")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.makedirs(os.environ["SEASTAR_DUMP_DIR"])
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, HERE)
    import torch
    import seastar as ss
    from seastar.nn.gat_conv import gat_program
    from seastar.nn.gcn_conv import weighted_sum
    from _child import copy_bandwidth, roofline_bytes

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    F, H = args.width, args.heads
    g = ss.datasets.power_law_graph(args.nodes, args.degree, seed=0).graph
    N, E = g.num_nodes, g.num_edges
    t = g.tensors("cpu")
    assert t["in_ptr"].dtype == torch.int32, "variants are written for int32 indices"
    idx = [t["in_ptr"], t["in_nbr"], t["in_eid"], t["in_order"]]

    h = torch.randn(N, F)
    w = torch.rand(E, 1)
    hh = h.view(N, H, F // H)
    el, er = torch.randn(N, H, 1), torch.randn(N, H, 1)
    with torch.no_grad():
        ref_gcn = weighted_sum(g, backend="fused", h=h, w=w)
        ref_gat = gat_program(0.2, False)(g, backend="fused", h=hh, el=el, er=er)
    dump = os.environ["SEASTAR_DUMP_DIR"]
    gen_gcn = os.path.join(dump, "gcn_weighted_sum.forward.f32_i32.cpp")
    gen_gat = os.path.join(dump, "gat.forward.f32_i32.cpp")
    # the generated GAT source with each of its three traversals callable on its own
    split = os.path.join(work, "gat_split.cpp")
    with open(gen_gat) as fh:
        gat_src = fh.read()
    n_kernels = len(re.findall(r"static void kernel_\d+\(", gat_src))
    with open(split, "w") as out:
        out.write(gat_src)
        for k in range(n_kernels):
            out.write(f'\nextern "C" void only_kernel_{k}(const int64_t* s, void* const* G, void* const* B) '
                      f'{{ kernel_{k}(s[0], s[1], G, B); }}\n')
    lib_gcn = compile_so(gen_gcn, os.path.join(work, "gen_gcn.so"))
    lib_gat = compile_so(split, os.path.join(work, "gen_gat.so"))
    lib_var = compile_so(os.path.join(HERE, "kernel_variants.cpp"), os.path.join(work, "variants.so"),
                         [f"-DFW={F}", f"-DHEADS={H}"])

    sizes = (ctypes.c_int64 * 3)(N, E, N)  # destinations, edges, sources

    def ptrs(ts):
        return (ctypes.c_void_p * len(ts))(*[x.data_ptr() for x in ts])

    G = ptrs(idx)
    out = torch.empty(N, F)
    w_csc = w.view(-1)[t["in_eid"].long()].contiguous()
    gcn_B = ptrs([h, w, out, w_csc])
    gat_out, M, Z = torch.empty(N, F), torch.empty(N, H), torch.empty(N, H)
    gat_B = ptrs([el, er, hh, gat_out, M, Z])

    copy = copy_bandwidth(args.threads)["torch_copy_gbps"]
    cases = []  # (program, name, fn, B, ref, what)

    def add(program, name, fn, B, ref, what):
        cases.append((program, name, fn, B, ref, what))

    print(f"graph: power law, {N} vertices, {E} edges; F={F}, heads={H}; {args.threads} thread(s); "
          f"copy bandwidth {copy:.1f} GB/s")
    add("gcn_agg", "generated", lib_gcn.seastar_entry, gcn_B, ref_gcn, "as emitted (w read through edge ids)")
    add("gcn_agg", "csc_weights", lib_var.gcn_csc_weights, gcn_B, ref_gcn, "w permuted to CSC order once")
    add("gcn_agg", "prefetch", lib_var.gcn_prefetch, gcn_B, ref_gcn, "generated + prefetch 8 edges ahead")
    passes = len(re.findall(r"for \(int64_t j = beg; j < end; \+\+j\)", gat_src))
    add("gat", "generated", lib_gat.seastar_entry, gat_B, ref_gat,
        f"as emitted: {n_kernels} kernel(s), {passes} traversal(s) of the in-edges")
    if n_kernels > 1:  # run back to back on the same buffers, so each kernel's inputs are valid
        for k in range(n_kernels):
            add("gat", f"generated_kernel_{k}", getattr(lib_gat, f"only_kernel_{k}"), gat_B, None,
                f"kernel {k} of the generated code alone")
    add("gat", "three_pass_per_head", lib_var.gat_per_head, gat_B, ref_gat,
        "3 traversals (max, sum, weighted sum), per-head loops, 1/z per vertex")
    add("gat", "online_per_head", lib_var.gat_online, gat_B, ref_gat,
        "1 traversal, online softmax, rescale only when the max grows, per-head loops")

    # correctness first, then rounds over all variants (interleaved, so that load on a shared
    # machine hits every variant alike); median and best of the rounds
    ok = {}
    for program, name, fn, B, ref, _ in cases:
        out_t = out if program == "gcn_agg" else gat_out
        out_t.zero_()
        fn(sizes, G, B)
        ok[name, program] = None if ref is None else bool(
            torch.allclose(out_t.view_as(ref), ref, rtol=1e-4, atol=1e-5))
    times = {(c[1], c[0]): [] for c in cases}
    for _ in range(args.repeats):
        for program, name, fn, B, _, _ in cases:
            t0 = time.perf_counter()
            fn(sizes, G, B)
            times[name, program].append(time.perf_counter() - t0)
    rows = []
    for program, name, fn, B, ref, what in cases:
        sec, best = statistics.median(times[name, program]), min(times[name, program])
        useful, _ = roofline_bytes(program, N, E, F, H=H)
        good = ok[name, program]
        rows.append(dict(program=program, variant=name, what=what, ms=1e3 * sec, best_ms=1e3 * best,
                         gbps_useful=useful / sec / 1e9, pct_copy=100 * useful / sec / 1e9 / copy,
                         matches_seastar=good))
        print(f"{program:7s} {name:22s} {1e3 * sec:9.2f} ms (best {1e3 * best:8.2f})  "
              f"{useful / sec / 1e9:6.2f} GB/s useful ({rows[-1]['pct_copy']:5.1f}% of copy)  "
              f"{'' if good is None else 'ok' if good else 'MISMATCH'}", flush=True)

    res = dict(N=N, E=E, width=F, heads=H, threads=args.threads, copy_gbps=copy, rows=rows)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "kernel_variants.json"), "w") as fh:
            json.dump(res, fh, indent=1)
        lines = [f"# Kernel variants: power law {N} vertices, {E} edges, F={F}, {H} heads, "
                 f"{args.threads} thread(s), copy {copy:.1f} GB/s\n",
                 "| program | variant | what | median ms | best ms | useful GB/s | % of copy | matches seastar |",
                 "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
        for r in rows:
            m = "-" if r["matches_seastar"] is None else "yes" if r["matches_seastar"] else "NO"
            lines.append(f"| {r['program']} | {r['variant']} | {r['what']} | {r['ms']:.1f} | {r['best_ms']:.1f} | "
                         f"{r['gbps_useful']:.2f} | {r['pct_copy']:.0f}% | {m} |")
        with open(os.path.join(args.out, "kernel_variants.md"), "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
