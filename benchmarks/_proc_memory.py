"""This process's memory as Linux reports it (/proc/self/status, getrusage), shared by the
benchmark children (``_child.py``, ``bench_rgcn.py``)."""
from __future__ import annotations

import resource
from typing import Dict, Iterable


def status_kb(fields: Iterable[str]) -> Dict[str, int]:
    """The named fields of /proc/self/status (``VmRSS``, ``RssAnon``, ...), in kB."""
    wanted = tuple(f + ":" for f in fields)
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(wanted):
                key, val = line.split(":", 1)
                out[key] = int(val.split()[0])
    return out


def rss_mb() -> float:
    kb = status_kb(["VmRSS"]).get("VmRSS")
    return float("nan") if kb is None else kb / 1024.0


def rss_parts_mb() -> dict:
    """Current RssAnon / RssFile / RssShmem of this process, MB."""
    return {k: v / 1024.0 for k, v in status_kb(["RssAnon", "RssFile", "RssShmem"]).items()}


def vm_bytes() -> int:
    return status_kb(["VmSize"]).get("VmSize", 0) * 1024


def maxrss_mb() -> float:
    """``getrusage(RUSAGE_SELF).ru_maxrss``. Not used for the peak itself: Linux carries the
    parent's high-water mark into the child across fork + exec (``signal->maxrss``), and the
    /proc reset below does not clear it, so a parent holding a large graph raises every child's
    value to its own RSS. Recorded for reference."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def hwm_mb() -> float:
    """VmHWM: this process's own RSS high-water mark (the one ``reset_peak`` resets)."""
    kb = status_kb(["VmHWM"]).get("VmHWM")
    return maxrss_mb() if kb is None else kb / 1024.0


def reset_peak() -> bool:
    """Resets the process's RSS high-water mark (Linux >= 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
