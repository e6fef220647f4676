"""Views share memory; in-place ops, including metadata changes, land on the device tensor."""

from __future__ import annotations

import pytest
import torch


def test_view_writes_reach_the_base():
    base = torch.zeros(4, 4, device="neuron")
    base[1:3, 2] = 5
    v = base.view(16)
    v[0] = 1
    t = base.t()
    t[3, 0] = 9
    ref = torch.zeros(4, 4)
    ref[1:3, 2] = 5
    ref.view(16)[0] = 1
    ref.t()[3, 0] = 9
    torch.testing.assert_close(base.cpu(), ref)
    assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


METADATA_OPS = {
    "resize_grow": lambda t: t.resize_(5, 4),
    "resize_shrink": lambda t: t.resize_(2),
    "transpose_": lambda t: t.transpose_(0, 1),
    "t_": lambda t: t.t_(),
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "squeeze_": lambda t: t.unsqueeze_(1).squeeze_(1),
    "as_strided_": lambda t: t.as_strided_((3, 2), (1, 3)),
    "as_strided": lambda t: t.as_strided((2, 2), (1, 2), 1),
    "set_tensor": lambda t: t.set_(torch.arange(4.0).to(t.device)),
    "set_empty": lambda t: t.set_(),
    "swapdims_": lambda t: t.swapdims_(0, 1),
}


@pytest.mark.parametrize("name", list(METADATA_OPS))
def test_metadata_change_matches_cpu(name):
    ref = torch.arange(6.0).reshape(2, 3)
    dev = ref.clone().to("neuron")
    out_ref = METADATA_OPS[name](ref)
    out_dev = METADATA_OPS[name](dev)
    assert out_dev.shape == out_ref.shape and out_dev.stride() == out_ref.stride()
    if name not in ("resize_grow",):  # the grown tail is uninitialised memory
        torch.testing.assert_close(out_dev.cpu(), out_ref)
    if name in ("resize_grow", "resize_shrink", "transpose_", "t_", "unsqueeze_", "as_strided_", "set_tensor",
                "set_empty", "swapdims_"):
        assert out_dev is dev
        assert dev.shape == ref.shape


def test_out_argument_is_resized_on_device():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    out = torch.empty(0, device="neuron")
    torch.add(a.to("neuron"), b.to("neuron"), out=out)
    assert out.shape == (3, 4) and out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), a + b)


@pytest.mark.parametrize("op", ["add_", "mul_", "clamp_", "zero_", "copy_"])
def test_inplace_keeps_identity_and_storage(op):
    d = torch.randn(8, device="neuron")
    ptr = d.data_ptr()
    if op == "clamp_":
        r = d.clamp_(min=0)
    elif op == "zero_":
        r = d.zero_()
    elif op == "copy_":
        r = d.copy_(torch.ones(8))
    else:
        r = getattr(d, op)(2)
    assert r is d and d.data_ptr() == ptr


def test_index_put_and_scatter():
    ref = torch.zeros(5)
    dev = ref.to("neuron")
    idx = torch.tensor([0, 3])
    ref[idx] = torch.tensor([1.0, 2.0])
    dev[idx.to("neuron")] = torch.tensor([1.0, 2.0], device="neuron")
    dev[torch.tensor([4])] = 7.0  # CPU indices on a device tensor are accepted, as on CUDA
    ref[torch.tensor([4])] = 7.0
    torch.testing.assert_close(dev.cpu(), ref)
    s = torch.zeros(3, device="neuron").scatter_add_(0, torch.tensor([0, 0, 2], device="neuron"),
                                                     torch.ones(3, device="neuron"))
    torch.testing.assert_close(s.cpu(), torch.tensor([2.0, 0.0, 1.0]))
