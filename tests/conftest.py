"""The test command's report: every test's time and the kernels it compiled; and the order in
which the test files are handed to the parallel pass's workers.

With ``SEASTAR_TEST_REPORT_DIR`` set (``scripts/test.sh`` sets it), each pytest process writes one
JSON file there at the end of its session: per test, its node id, the seconds of its set-up, call
and tear-down together, and what the host JIT did meanwhile (``seastar._C.jit_stats()``: kernels
compiled and the compiler's seconds). ``scripts/test_report.py`` merges the files of both passes
and of every worker. Without the variable nothing is recorded.

The files run slowest first, by the seconds the committed run measured
(``benchmarks/results/ci/fresh_clone.json``; the test command passes ``--no-loadscope-reorder``
so pytest-xdist keeps this order): a worker that draws a long file late would leave the other
idle at the end. Files the measurement does not know keep their place after those it does.
"""
from __future__ import annotations

import json
import os
import sys
import time

import pytest

_DIR = os.environ.get("SEASTAR_TEST_REPORT_DIR")
_tests: dict = {}
_MEASURED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "results", "ci",
                         "fresh_clone.json")


def _file_seconds() -> dict:
    try:
        with open(_MEASURED) as f:
            return {entry["file"]: entry["seconds"] for entry in json.load(f).get("files", [])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def pytest_collection_modifyitems(session, config, items):
    seconds = _file_seconds()
    if seconds:  # stable: a file's tests keep their order, and so do the files measured alike
        items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))


def _jit_stats():
    # only once a test has loaded the extension: the report never imports it for a test that does not
    mod = sys.modules.get("seastar._C")
    return mod.jit_stats() if mod is not None and hasattr(mod, "jit_stats") else None


if _DIR:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        entry = _tests[item.nodeid] = {"outcome": "passed"}
        before = _jit_stats()
        started = time.perf_counter()
        yield
        after = _jit_stats()
        entry.update(seconds=time.perf_counter() - started, compiled=0, compile_seconds=0.0)
        if after is not None:
            entry["compiled"] = after["compiled"] - (before["compiled"] if before else 0)
            entry["compile_seconds"] = after["compile_seconds"] - (before["compile_seconds"] if before else 0.0)

    def pytest_runtest_logreport(report):
        # this process's own tests only (an xdist controller sees its workers' reports too)
        entry = _tests.get(report.nodeid)
        if entry is not None and (report.failed or (report.skipped and report.when != "teardown")):
            entry["outcome"] = report.outcome

    def pytest_sessionfinish(session):
        if not _tests:
            return
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        os.makedirs(_DIR, exist_ok=True)
        path = os.path.join(_DIR, f"{os.getpid()}-{worker}.json")
        with open(path, "w") as f:
            json.dump({"worker": worker, "tests": _tests}, f)
