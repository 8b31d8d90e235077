"""``custom_op``: Seastar's ``torch.library`` ops, called from compiled code without the round
trip through torch's autograd kernel.

``torch.library.custom_op`` registers an op's autograd as a Python kernel at the Autograd key.
Compiled code calls its ops with gradients off, and that kernel then enters the dispatcher again
(``redispatch``) to reach the op's body: two crossings between C++ and Python and a context
manager per call, more than a small op's own Python costs, several times per training step.

``custom_op`` here registers the op as torch's does (schema, fake and autograd registrations
unchanged), then puts an Autograd kernel in front of torch's: when no gradient is recorded and
the first key below autograd is a device's own (CPU or CUDA: no fake tensor, functional tensor
or dispatch mode to serve), it calls the body directly. Every other call (autograd recording,
tracing under fake or functional tensors, modes) goes to torch's own kernel, unchanged.
"""
from __future__ import annotations

import logging
import warnings
from typing import Callable

import torch
from torch._C import DispatchKey

log = logging.getLogger(__name__)

_BELOW_AUTOGRAD = torch._C._after_autograd_keyset
_DEVICE_KEYS = (DispatchKey.CPU, DispatchKey.CUDA)

DIRECT: set = set()  # the qualified names of the ops that have the direct kernel


def custom_op(name: str) -> Callable:
    """``@torch.library.custom_op(name, mutates_args=())`` with the direct call from compiled
    code; the op and its ``register_fake`` / ``register_autograd`` are torch's."""
    def wrap(fn: Callable):
        op = torch.library.custom_op(name, mutates_args=())(fn)
        _call_directly(op)
        return op
    return wrap


def _call_directly(op) -> None:
    try:
        overload, body, guarded = op._opoverload, op._init_fn, op._backend_fns[None]
        torch_kernel = torch._library.autograd.make_autograd_impl(overload, op)
        callback = torch._C._dynamo.eval_frame.get_eval_frame_callback
    except (AttributeError, KeyError) as e:  # another torch: keep its kernel, which is correct
        log.debug("seastar: %s keeps torch's autograd kernel (%s)", op, e)
        return

    def kernel(keyset, *args):
        if ((keyset & _BELOW_AUTOGRAD).highestPriorityTypeId() in _DEVICE_KEYS
                and not (torch.is_grad_enabled() and torch._C._any_requires_grad(*args))):
            # torch's body is wrapped so that Dynamo never traces it; that costs a frame
            # callback swap, needed only while Dynamo's callback is set
            return body(*args) if callback() is None else guarded(*args)
        return torch_kernel(keyset, *args)

    with warnings.catch_warnings():  # replacing torch's kernel is the point: no warning for it
        warnings.simplefilter("ignore")
        op._lib.impl(op._name, kernel, "Autograd", with_keyset=True, allow_override=True)
    DIRECT.add(op._qualname)
