"""Factories with device=, copies both ways, dtype conversions, neuron:1, nn.Module.to."""

from __future__ import annotations

import pytest
import torch

FACTORIES = {
    "zeros": lambda d: torch.zeros(2, 3, device=d),
    "ones": lambda d: torch.ones(2, 3, device=d, dtype=torch.int32),
    "full": lambda d: torch.full((2, 3), 7.5, device=d),
    "arange": lambda d: torch.arange(10, device=d),
    "linspace": lambda d: torch.linspace(0, 1, 5, device=d),
    "eye": lambda d: torch.eye(3, device=d),
    "tensor": lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
    "empty_like+fill": lambda d: torch.empty_like(torch.ones(2, device=d)).fill_(3),
    "zeros_like": lambda d: torch.zeros_like(torch.ones(4, device=d)),
    "tril_indices": lambda d: torch.tril_indices(3, 3, device=d),
    "scalar_tensor": lambda d: torch.scalar_tensor(2.5, device=d),
    "bool": lambda d: torch.ones(3, dtype=torch.bool, device=d),
}


@pytest.mark.parametrize("name", list(FACTORIES))
def test_factory_matches_cpu(name):
    out = FACTORIES[name]("neuron")
    ref = FACTORIES[name]("cpu")
    assert out.device == torch.device("neuron", 0)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    torch.testing.assert_close(out.cpu(), ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.bool])
def test_round_trip_keeps_values(dtype):
    ref = (torch.randn(5, 4) * 10).to(dtype)
    dev = ref.to("neuron")
    assert dev.is_neuron and dev.dtype == dtype
    torch.testing.assert_close(dev.to("cpu"), ref)


@pytest.mark.parametrize("src,dst", [(torch.float32, torch.bfloat16), (torch.int32, torch.float32),
                                     (torch.float16, torch.float32)], ids=["f32-bf16", "i32-f32", "f16-f32"])
def test_dtype_conversion_on_device(src, dst):
    ref = (torch.randn(6) * 4).to(src)
    torch.testing.assert_close(ref.to("neuron").to(dst).cpu(), ref.to(dst))


def test_copy_between_devices_and_non_contiguous():
    a = torch.randn(4, 6)
    on0 = a.to("neuron:0")
    on1 = on0.to("neuron:1")
    assert on1.device == torch.device("neuron", 1)
    t = on1.t()
    assert not t.is_contiguous()
    torch.testing.assert_close(t.cpu(), a.t())
    dst = torch.empty(6, 4)
    dst.copy_(t)
    torch.testing.assert_close(dst, a.t())
    back = torch.empty(6, 4, device="neuron")
    back.copy_(a.t())
    torch.testing.assert_close(back.cpu(), a.t())


def test_copy_is_a_real_copy_not_an_alias():
    a = torch.zeros(3)
    d = a.to("neuron")
    d.add_(1)
    assert a.sum().item() == 0 and d.sum().item() == 3


def test_module_to_moves_parameters_and_buffers():
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    m.to("neuron")
    assert all(p.device.type == "neuron" for p in m.parameters())
    assert all(b.device.type == "neuron" for b in m.buffers())
    out = m(torch.randn(5, 3, device="neuron"))
    assert out.device.type == "neuron" and out.shape == (5, 4)


@pytest.mark.parametrize("target", ["neuron", "neuron:1"])
def test_module_to_keeps_tied_weights(target):
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = torch.nn.Sequential(emb, head).to(target)
    assert model[1].weight is model[0].weight
    assert model[0].weight.device == torch.device(target if ":" in target else "neuron:0")
    model.to("cpu")
    assert model[1].weight is model[0].weight and model[0].weight.device.type == "cpu"


def test_item_and_tolist():
    d = torch.tensor([1.5, 2.5], device="neuron")
    assert d.sum().item() == 4.0
    assert d.tolist() == [1.5, 2.5]
