"""``seastar.direct_ops.custom_op``: a call that records no gradient on plain device tensors goes
straight to the op's body; every other call (autograd recording, fake and functional tensors,
dispatch modes) still takes torch's own autograd kernel, with torch's results."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import seastar.nn  # noqa: F401  (registers the ops)
from seastar.nn._column_sum import column_sum

OP = torch.ops.seastar.column_sum.default


@pytest.fixture
def redispatches(monkeypatch):
    """How many times an op re-entered the dispatcher below autograd (torch's kernel does)."""
    calls = []
    real = torch._ops.OpOverload.redispatch

    def counting(self, keyset, *args, **kwargs):
        calls.append(str(self))
        return real(self, keyset, *args, **kwargs)
    monkeypatch.setattr(torch._ops.OpOverload, "redispatch", counting)
    return calls


def test_a_call_recording_no_gradient_skips_the_autograd_kernel(redispatches):
    x = torch.randn(5, 3, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(OP(x), x.sum(0), rtol=0, atol=1e-12)
    torch.testing.assert_close(OP(x), x.sum(0), rtol=0, atol=1e-12)  # no input requires grad
    assert redispatches == []


def test_a_recorded_call_takes_torchs_kernel_and_its_gradient(redispatches):
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    out = OP(x)
    assert out.grad_fn is not None and redispatches
    assert torch.autograd.gradcheck(column_sum, (x,))
    assert torch.autograd.gradgradcheck(column_sum, (x,))


def test_fake_tensors_reach_the_fake_implementation_not_the_body(redispatches):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.randn(7, 4))
        out = OP(x)
    assert type(out).__name__ == "FakeTensor" and tuple(out.shape) == (4,)
    with pytest.raises(ValueError, match="seastar::column_sum"):  # the fake's own check runs
        with FakeTensorMode() as mode:
            OP(mode.from_tensor(torch.randn(())))


def test_a_dispatch_mode_sees_the_op():
    seen = []

    class Recording(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))
    x = torch.randn(4, 2)
    with torch.no_grad(), Recording():
        out = OP(x)
    assert "seastar.column_sum.default" in seen
    torch.testing.assert_close(out, x.sum(0))


def test_functionalized_and_compiled_calls_equal_torch():
    x = torch.randn(6, 3, dtype=torch.float64)
    torch.testing.assert_close(torch.func.functionalize(lambda t: OP(t))(x), x.sum(0), rtol=0, atol=1e-12)
    f = torch.compile(lambda t: OP(t * 2) + 1, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(x), (x * 2).sum(0) + 1, rtol=0, atol=1e-12)


def test_every_seastar_op_has_the_direct_kernel():
    from torch._library.custom_ops import OPDEFS
    import seastar.torch_ops  # noqa: F401
    from seastar.direct_ops import DIRECT
    ops = {q for q in OPDEFS if q.startswith("seastar::")}
    assert len(ops) >= 10 and ops <= DIRECT, sorted(ops - DIRECT)


def test_bad_input_still_raises_the_ops_error():
    with torch.no_grad(), pytest.raises(ValueError, match="seastar::column_sum"):
        OP(torch.tensor(1.0))
