"""Pinned host memory: pin_memory()/is_pinned(), DataLoader(pin_memory=True), non_blocking copies."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset


def test_pin_memory_and_is_pinned():
    t = torch.randn(100)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and not t.is_pinned()
    torch.testing.assert_close(p, t)


def test_non_blocking_copies_both_ways():
    p = torch.arange(10.0).pin_memory()
    d = p.to("neuron", non_blocking=True)
    torch.neuron.synchronize()
    back = torch.empty(10).pin_memory()
    back.copy_(d, non_blocking=True)
    torch.testing.assert_close(back, torch.arange(10.0))


def test_dataloader_pins_batches():
    ds = TensorDataset(torch.randn(8, 3), torch.arange(8))
    loader = DataLoader(ds, batch_size=4, pin_memory=True)
    batches = list(loader)
    assert len(batches) == 2
    for x, y in batches:
        assert x.is_pinned() and y.is_pinned()
        assert x.to("neuron", non_blocking=True).device.type == "neuron"


def test_empty_pinned_factory():
    t = torch.empty(5, pin_memory=True)
    assert t.is_pinned()
