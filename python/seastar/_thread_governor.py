"""How many threads torch's CPU ops get while other processes take cores: off unless asked for.

torch's CPU ops split their work statically among ``torch.get_num_threads()`` threads, so when
another CPU-bound process shares a core with one of them every op waits for that thread, and two
threads end up slower than one. Before each CPU kernel launch (at most every 0.2 s) seastar
measures how many cores other processes kept busy (``/proc/stat`` less this process's CPU time,
over the CPUs this process may use). While that is half a core or more it lowers torch's thread
count to the cores left (at least 1), and gives the user's count back when they leave; two
measurements in a row must agree before it changes anything. So ``torch.get_num_threads()`` can
read lower than what was set while the machine is busy. The user's count is whatever
``torch.set_num_threads`` set last (setting the very count the governor chose is taken as its
own). Only the main thread is governed, and nothing changes while
``torch.use_deterministic_algorithms(True)`` is on (results should not depend on the load).
Seastar's own kernels keep the user's count either way: their work is claimed dynamically, so a
busy core slows them by its share only.

Because it changes torch's global thread count, which torch.compile guards on (a compiled model
is compiled again for each count it sees), the governor is off unless the user switches it on:
``SEASTAR_THREAD_GOVERNOR=1`` or ``set_thread_governor(True)``. It pays for eager training on a
machine shared with other CPU-bound processes (``benchmarks/bench_threads.py`` measures it on and
off, busy and quiet). See ``runtime/cpu/thread_governor.h``.
"""
from __future__ import annotations

from . import _C


def thread_governor_stats() -> dict:
    """The governor's state: ``enabled``, ``available`` (the load can be read here),
    ``requested`` (the user's count), ``threads`` (the count it gives now), ``other_cores`` (the
    other processes' load it acts on), and how many ``samples`` it took and times it ``lowered``
    and ``restored`` torch's count."""
    return dict(_C.thread_governor_stats())


def set_thread_governor(enabled: bool) -> None:
    """Switches the governor on or off; off gives torch back the user's thread count at once."""
    _C.set_thread_governor(bool(enabled))


def describe() -> str:
    s = thread_governor_stats()
    if not s["enabled"]:
        return "off (SEASTAR_THREAD_GOVERNOR=1 or set_thread_governor(True) to lower torch's threads under load)"
    if not s["available"]:
        return "on, but the load cannot be read here (/proc/stat)"
    return "on (torch's thread count lowered while other processes keep cores busy; torch.compile recompiles for each count)"
