"""Memory statistics count real bytes, through torch.neuron and torch.accelerator."""

from __future__ import annotations

import gc

import pytest
import torch


@pytest.mark.parametrize("numel,dtype", [(1024, torch.float32), (3000, torch.bfloat16), (77, torch.int64)])
def test_allocation_and_free_are_counted(neuron, numel, dtype):
    gc.collect()
    base = neuron.memory_allocated()
    t = torch.empty(numel, dtype=dtype, device="neuron")
    nbytes = numel * t.element_size()
    assert neuron.memory_allocated() - base == nbytes
    assert torch.accelerator.memory_allocated() == neuron.memory_allocated()
    del t
    gc.collect()
    assert neuron.memory_allocated() == base


def test_results_of_cpu_kernels_are_counted(neuron):
    a = torch.randn(256, 256, device="neuron")
    base = neuron.memory_allocated()
    b = a @ a  # computed by the CPU kernel, adopted as device memory without a copy
    assert neuron.memory_allocated() - base == b.numel() * 4
    del b


def test_peak_and_reset(neuron):
    neuron.reset_peak_memory_stats()
    base = neuron.max_memory_allocated()
    t = torch.empty(10_000, device="neuron")
    del t
    assert neuron.max_memory_allocated() - base >= 40_000
    neuron.reset_peak_memory_stats()
    assert neuron.max_memory_allocated() == neuron.memory_allocated()
    assert torch.accelerator.max_memory_allocated() == neuron.max_memory_allocated()


def test_per_device_accounting(neuron):
    before0, before1 = neuron.memory_allocated(0), neuron.memory_allocated(1)
    t = torch.empty(1000, device="neuron:1")
    assert neuron.memory_allocated(1) - before1 == 4000
    assert neuron.memory_allocated(0) == before0
    del t


def test_stats_summary_and_reserved(neuron):
    stats = neuron.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                "allocation.all.current", "num_device_alloc"):
        assert key in stats
    assert neuron.memory_reserved() == neuron.memory_allocated()
    assert neuron.max_memory_reserved() >= neuron.memory_reserved()
    neuron.reset_accumulated_memory_stats()
    assert neuron.memory_stats()["num_device_alloc"] == 0
    neuron.empty_cache()
    assert "neuron:0 memory summary" in neuron.memory_summary()
