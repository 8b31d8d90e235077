"""The test command's closing report: the slowest tests and files, and the kernels they compiled.

    python scripts/test_report.py REPORT_DIR [--top 20] [--files 5] [--json OUT]

REPORT_DIR holds what tests/conftest.py wrote (one JSON file per pytest process) and the phase
times scripts/test.sh wrote (phases.tsv: a name and seconds a line). Prints the phases, the
`--top` slowest tests, the `--files` slowest test files (seconds summed over their tests, kernels
compiled, the compiler's seconds) and the totals. `--json` writes the same, every file included,
for benchmarks/results/ci/ (compare a change's run with the committed one).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import subprocess
from collections import defaultdict


def load(report_dir):
    tests = {}
    for path in sorted(glob.glob(os.path.join(report_dir, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        for nodeid, entry in data.get("tests", {}).items():
            if "seconds" in entry:
                tests[nodeid] = dict(entry, worker=data.get("worker", "main"))
    phases = []
    tsv = os.path.join(report_dir, "phases.tsv")
    if os.path.exists(tsv):
        with open(tsv) as f:
            for line in f:
                name, _, seconds = line.rstrip("\n").rpartition("\t")
                if name:
                    phases.append({"phase": name, "seconds": float(seconds)})
    return tests, phases


def by_file(tests):
    files = defaultdict(lambda: {"tests": 0, "seconds": 0.0, "compiled": 0, "compile_seconds": 0.0})
    for nodeid, t in tests.items():
        f = files[nodeid.split("::", 1)[0]]
        f["tests"] += 1
        f["seconds"] += t["seconds"]
        f["compiled"] += t.get("compiled", 0)
        f["compile_seconds"] += t.get("compile_seconds", 0.0)
    return sorted(({"file": k, **v} for k, v in files.items()), key=lambda r: -r["seconds"])


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report_dir")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--files", type=int, default=5)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args(argv)

    tests, phases = load(args.report_dir)
    files = by_file(tests)
    slowest = sorted(({"test": k, **v} for k, v in tests.items()), key=lambda r: -r["seconds"])
    total_compiled = sum(t.get("compiled", 0) for t in tests.values())
    total_compile_s = sum(t.get("compile_seconds", 0.0) for t in tests.values())

    print("== test report")
    for p in phases:
        print(f"phase {p['phase']:<28} {p['seconds']:8.1f} s")
    print(f"\n{args.top} slowest tests (seconds with set-up and tear-down; kernels compiled):")
    for r in slowest[:args.top]:
        print(f"{r['seconds']:8.2f} s {r.get('compiled', 0):5d}  {r['test']}")
    print(f"\n{args.files} slowest test files (seconds summed over their tests; kernels compiled; "
          "the compiler's seconds):")
    for r in files[:args.files]:
        print(f"{r['seconds']:8.1f} s {r['compiled']:5d} {r['compile_seconds']:7.1f} s  {r['file']} ({r['tests']} tests)")
    print(f"\n{len(tests)} tests in {len(files)} files; {total_compiled} kernels compiled in "
          f"{total_compile_s:.0f} compiler-seconds")
    outcomes = defaultdict(int)
    for t in tests.values():
        outcomes[t.get("outcome", "passed")] += 1
    # the plain closing line ("N passed, N failed"), both passes together
    print(f"pytest: {outcomes['passed']} passed, {outcomes['failed']} failed, {outcomes['skipped']} skipped")

    if args.json_out:
        out = {"commit": commit(), "machine": {"cpus": os.cpu_count(), "processor": platform.processor()},
               "phases": phases, "tests": len(tests), "kernels_compiled": total_compiled,
               "compile_seconds": round(total_compile_s, 1),
               "slowest_tests": [{**r, "seconds": round(r["seconds"], 2)} for r in slowest[:args.top]],
               "files": [{**r, "seconds": round(r["seconds"], 1), "compile_seconds": round(r["compile_seconds"], 1)}
                         for r in files]}
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=1)
        print(f"written {args.json_out}")


if __name__ == "__main__":
    main()
