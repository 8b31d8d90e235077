"""Starting processes and process groups: under ``torchrun`` (one machine or many) or, for
tests and single-machine scripts, with ``spawn`` on localhost.

``init_from_env`` reads what torchrun sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``, ``MASTER_PORT``) and picks gloo on CPUs, NCCL when every rank has a GPU. A
collective waits at most ``timeout_s``: a rank that dies makes the others fail (gloo notices
a closed connection at once; a hung peer is noticed after the timeout) instead of hanging.
"""
from __future__ import annotations

import datetime
import logging
import multiprocessing
import os
import socket
import time
from typing import Callable, Optional, Sequence

import torch
import torch.distributed as dist

log = logging.getLogger("seastar.distributed")

DEFAULT_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port free on localhost now (for a process group of processes on this machine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_logging(level=logging.INFO) -> None:
    """Log lines carry the rank: ``[rank 1/2] INFO name: message``."""
    rank = os.environ.get("RANK", "0")
    world = os.environ.get("WORLD_SIZE", "1")
    logging.basicConfig(level=level, format=f"[rank {rank}/{world}] %(levelname)s %(name)s: %(message)s",
                        force=True)


def init_process_group(rank: int, world_size: int, master_addr: str = "127.0.0.1", master_port: int = 29500,
                       backend: Optional[str] = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """``torch.distributed.init_process_group`` over TCP with a bounded timeout."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in a world of {world_size} processes")
    backend = _backend(backend)
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(world_size))
    dist.init_process_group(backend, init_method=f"tcp://{master_addr}:{master_port}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=timeout_s))


def _backend(backend: Optional[str]) -> str:
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > 0 and \
            os.environ.get("SEASTAR_DIST_BACKEND", "") != "gloo" else "gloo"
        backend = os.environ.get("SEASTAR_DIST_BACKEND", backend)
    return backend


def init_from_env(backend: Optional[str] = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple:
    """Joins the process group torchrun described in the environment; returns (rank, world)."""
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise RuntimeError(f"not started by torchrun: {', '.join(missing)} unset (run with torchrun "
                           f"--nproc_per_node=N, or set them for every process)")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        # torchrun's agent hosts the store at MASTER_PORT and keeps it across restarts: the
        # workers of a restarted try would read the addresses the dead workers left under the
        # same keys and fail to connect, so each try keys its group under its own prefix
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False,
                              timeout=timeout)
        store = dist.PrefixStore(f"seastar/try-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}-of-{world}", store)
        dist.init_process_group(_backend(backend), store=store, rank=rank, world_size=world, timeout=timeout)
    else:
        init_process_group(rank, world, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), backend, timeout_s)
    return rank, world


# gloo's worker threads let go of a finished collective, and of the tensors it holds, just after
# its caller has stopped waiting for it, and letting go of a tensor Python can see takes the GIL.
# A process whose interpreter is already shutting down by then aborts in that thread ("terminate
# called without an active exception"), so a process leaving its group hands them the GIL first.
_SETTLE_S = 0.05


def _leave() -> None:
    time.sleep(_SETTLE_S)  # the GIL is released while sleeping
    dist.destroy_process_group()


def shutdown() -> None:
    """Leaves the process group once every rank has arrived here. Without the barrier a rank that
    finishes first tears its gloo pairs down while another still uses them; without the pause
    after it, gloo's worker thread may release the barrier's tensors while the interpreter exits.
    Either way the process aborts at exit ("terminate called without an active exception")."""
    dist.barrier()
    _leave()


def _entry(fn, rank, world, port, backend, timeout_s, args):
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
    # spawned from a torchrun worker, the processes form a group of their own: with torchrun's
    # flag inherited, torch would make each of them a client of a store that nobody hosts
    os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    init_process_group(rank, world, "127.0.0.1", port, backend, timeout_s)
    try:
        fn(rank, world, *args)
    finally:
        _leave()


def spawn(fn: Callable, world_size: int, args: Sequence = (), timeout_s: float = 300.0,
          backend: str = "gloo", collective_timeout_s: float = 60.0, start_method: str = "forkserver") -> None:
    """Runs ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes joined in a process
    group on localhost. Raises if a process fails (naming its rank and exit code) or if they
    are not all done after ``timeout_s`` (then kills them): a failure never hangs the caller.

    ``forkserver`` (default): processes fork from a server that imported seastar once (and
    never ran a parallel region, so OpenMP is safe in the children), instead of each importing
    torch again as ``spawn`` does."""
    ctx = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(["seastar", "torch.distributed"])
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, world_size, port, backend, collective_timeout_s, tuple(args)),
                         name=f"seastar-rank-{r}", daemon=False) for r in range(world_size)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    failed = None
    try:
        while any(p.is_alive() for p in procs):
            for r, p in enumerate(procs):
                if not p.is_alive() and p.exitcode != 0 and failed is None:
                    failed = (r, p.exitcode)
            if failed is not None:
                # the others fail soon on their own (closed connections); give them a moment
                end = time.monotonic() + 10.0
                while any(p.is_alive() for p in procs) and time.monotonic() < end:
                    time.sleep(0.05)
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{world_size} processes did not finish within {timeout_s:.0f} s")
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(5)
    bad = [f"rank {r} exited with code {p.exitcode}" for r, p in enumerate(procs) if p.exitcode != 0]
    if bad:
        raise RuntimeError(f"{len(bad)} of {world_size} processes failed: {', '.join(bad)} (their errors are "
                           f"logged above; a rank that loses a peer fails too)")
