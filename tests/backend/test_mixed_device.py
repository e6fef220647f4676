"""Mixing neuron and CPU tensors fails as on a real device — in the fallback and in every
hand-written kernel (a kernel that skipped the check would silently compute on CPU data)."""

from __future__ import annotations

import pytest
import torch

MISMATCH = "Expected all tensors to be on the same device"


def _dev(*shape):
    return torch.randn(*shape, device="neuron")


FALLBACK_CASES = {
    "add": lambda: _dev(3) + torch.randn(3),
    "matmul": lambda: _dev(2, 3) @ torch.randn(3, 2),
    "linear": lambda: torch.nn.functional.linear(_dev(2, 3), torch.randn(4, 3)),
    "cat": lambda: torch.cat([_dev(2), torch.randn(2)]),
    "where": lambda: torch.where(_dev(3) > 0, _dev(3), torch.randn(3)),
    "neuron0_vs_neuron1": lambda: _dev(3) + torch.randn(3, device="neuron:1"),
    "inplace_add_": lambda: _dev(3).add_(torch.randn(3)),
    "index_select": lambda: _dev(4).index_select(0, torch.tensor([0, 1]).reshape(2)),
}

# One case per hand-written kernel (kernels.cpp).
KERNEL_CASES = {
    "convolution_overrideable": lambda: torch.nn.functional.conv2d(_dev(1, 1, 4, 4), torch.randn(1, 1, 3, 3)),
    "convolution_overrideable_bias": lambda: torch.ops.aten.convolution_overrideable(
        _dev(1, 1, 4, 4), _dev(1, 1, 3, 3), torch.randn(1), [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    "convolution_backward_overrideable": lambda: torch.ops.aten.convolution_backward_overrideable(
        _dev(1, 1, 2, 2), torch.randn(1, 1, 4, 4), _dev(1, 1, 3, 3), [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
        [True, True, True]),
    "set_.source_Tensor": lambda: _dev(3).set_(torch.randn(3)),
    "set_.source_Storage": lambda: _dev(3).set_(torch.randn(3).untyped_storage()),
    "set_.source_Storage_storage_offset": lambda: _dev(3).set_(torch.randn(3).untyped_storage(), 0, (3,), (1,)),
    "_thnn_fused_lstm_cell": lambda: torch.ops.aten._thnn_fused_lstm_cell(_dev(2, 8), torch.randn(2, 8), _dev(2, 2)),
    "_thnn_fused_lstm_cell_backward_impl": lambda: torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
        _dev(2, 2), None, _dev(2, 2), torch.randn(2, 2), _dev(2, 8), True),
    "_thnn_fused_gru_cell": lambda: torch.ops.aten._thnn_fused_gru_cell(_dev(2, 6), _dev(2, 6), torch.randn(2, 2)),
    "_thnn_fused_gru_cell_backward": lambda: torch.ops.aten._thnn_fused_gru_cell_backward(
        torch.randn(2, 2), _dev(2, 10), True),
}


@pytest.mark.parametrize("name", list(FALLBACK_CASES))
def test_fallback_rejects_mixed_devices(name):
    with pytest.raises(RuntimeError, match=MISMATCH):
        FALLBACK_CASES[name]()


@pytest.mark.parametrize("name", list(KERNEL_CASES))
def test_hand_written_kernel_rejects_mixed_devices(name):
    with pytest.raises(RuntimeError, match=MISMATCH):
        KERNEL_CASES[name]()


@pytest.mark.parametrize("scalar", [torch.tensor(2.0), torch.tensor(3)], ids=["float", "int"])
def test_zero_dim_cpu_tensors_are_allowed(scalar):
    d = torch.ones(3, device="neuron")
    out = d * scalar
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), torch.ones(3) * scalar)


def test_error_names_both_devices():
    with pytest.raises(RuntimeError) as info:
        _dev(3) + torch.randn(3)
    assert "neuron:0" in str(info.value) and "cpu" in str(info.value)
