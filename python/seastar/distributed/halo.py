"""The halo exchange of partition-parallel training: each rank receives the rows of its halo
vertices from their owners, and in the backward pass sends the gradients of those rows back.

    ex = HaloExchange(part)                  # once: who needs which of my rows
    h_src = ex(h_owned)                      # [num_owned + num_halo, F], differentiable

One collective per direction: ``all_to_all_single`` with uneven splits (gloo implements it; the
list form ``all_to_all`` it does not). Only boundary rows travel: rank ``q`` sends rank ``r``
exactly the rows of ``r``'s halo that ``q`` owns, each once however many edges use it, and the
received block of each owner lands in place because a part's halo is sorted by owner.
Gradient rows sent back are summed into the owned rows they came from (a row in several
ranks' halos receives all their gradients).
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .partition import Partition


class HaloExchange:
    """The send and receive plan of one part; ``stats`` counts the bytes this rank sent and
    the seconds it spent in the exchange's collectives (forward and backward)."""

    def __init__(self, part: Partition, group=None):
        if not dist.is_initialized():
            raise RuntimeError("HaloExchange needs torch.distributed to be initialised (init_process_group)")
        self.group = group
        self.world = dist.get_world_size(group)
        rank = dist.get_rank(group)
        if part.num_parts != self.world:
            raise ValueError(f"the partition has {part.num_parts} parts but the world size is {self.world}")
        if part.part_id != rank:
            raise ValueError(f"rank {rank} loaded part {part.part_id}: each rank must load the part of its rank")
        self.num_owned, self.num_halo = part.num_owned, part.num_halo
        self.recv_counts = torch.bincount(part.halo_owner, minlength=self.world).tolist()
        if self.recv_counts[rank]:
            raise ValueError(f"part {rank}'s halo contains vertices it owns: the partition is corrupt")
        send_counts = torch.empty(self.world, dtype=torch.int64)
        dist.all_to_all_single(send_counts, torch.tensor(self.recv_counts, dtype=torch.int64), group=group)
        self.send_counts = send_counts.tolist()
        wanted = torch.empty(sum(self.send_counts), dtype=torch.int64)
        dist.all_to_all_single(wanted, part.halo.contiguous(), self.send_counts, self.recv_counts, group=group)
        pos = torch.searchsorted(part.owned, wanted)
        if wanted.numel() and (pos.max() >= part.num_owned or (part.owned[pos.clamp(max=part.num_owned - 1)]
                                                                  != wanted).any()):
            raise ValueError(f"rank {rank} was asked for rows of vertices it does not own: the parts come from "
                             f"different partitions")
        self.send_index = pos
        self.stats = {"bytes_sent": 0, "comm_s": 0.0, "exchanges": 0}

    def _all_to_all(self, send: torch.Tensor, out_rows: int, out_splits, in_splits) -> torch.Tensor:
        send = send.contiguous()
        recv = send.new_empty((out_rows,) + tuple(send.shape[1:]))
        t0 = time.perf_counter()
        dist.all_to_all_single(recv, send, out_splits, in_splits, group=self.group)
        self.stats["comm_s"] += time.perf_counter() - t0
        self.stats["bytes_sent"] += send.numel() * send.element_size()
        self.stats["exchanges"] += 1
        return recv

    def fetch(self, h_owned: torch.Tensor) -> torch.Tensor:
        """The halo rows [num_halo, ...] of ``h_owned`` [num_owned, ...], without autograd."""
        if h_owned.shape[0] != self.num_owned:
            raise ValueError(f"the halo exchange needs one row per owned vertex ({self.num_owned}), got "
                             f"{h_owned.shape[0]}")
        return self._all_to_all(h_owned.index_select(0, self._index_on(h_owned.device)), self.num_halo,
                                self.recv_counts, self.send_counts)

    def _index_on(self, device) -> torch.Tensor:
        if self.send_index.device != torch.device(device):
            self.send_index = self.send_index.to(device)
        return self.send_index

    def send_back(self, grad_halo: torch.Tensor) -> torch.Tensor:
        """The gradient [num_owned, ...] of the owned rows from the gradient of every rank's halo."""
        back = self._all_to_all(grad_halo, int(self.send_index.numel()), self.send_counts, self.recv_counts)
        out = grad_halo.new_zeros((self.num_owned,) + tuple(grad_halo.shape[1:]))
        return out.index_add_(0, self._index_on(back.device), back)

    def __call__(self, h_owned: torch.Tensor) -> torch.Tensor:
        """``cat([h_owned, halo rows])``: the source rows of the part's local graph."""
        return _Exchange.apply(h_owned, self)


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h_owned, ex: HaloExchange):
        ctx.ex = ex
        return torch.cat([h_owned, ex.fetch(h_owned)])

    @staticmethod
    def backward(ctx, grad):
        ex = ctx.ex
        g = grad[:ex.num_owned] + ex.send_back(grad[ex.num_owned:])
        return g, None
