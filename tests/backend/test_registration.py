"""Registration: torch.neuron, generated methods, torch.accelerator, device count, no side effects."""

from __future__ import annotations

import pytest
import torch

import cuda2neuron.backend as backend
from cuda2neuron.backend import NEURON_MODULE_API

from neuron_testutil import run_python

CUDA_ONLY = ["get_device_capability", "mem_get_info", "ipc_collect", "nvtx", "CUDAGraph", "graph",
             "make_graphed_callables", "get_arch_list", "amp", "caching_allocator_alloc"]


def test_activate_is_idempotent_and_returns_torch_neuron(neuron):
    assert backend.activate() is neuron
    assert torch.neuron is neuron
    assert backend.is_active()


def test_module_exposes_exactly_the_torchneuron_surface(neuron):
    assert sorted(neuron.__all__) == sorted(NEURON_MODULE_API)
    missing = [name for name in NEURON_MODULE_API if not hasattr(neuron, name)]
    assert missing == []


@pytest.mark.parametrize("name", CUDA_ONLY)
def test_no_cuda_only_api(neuron, name):
    assert not hasattr(neuron, name)


@pytest.mark.parametrize("obj", ["tensor", "module", "storage"])
def test_generated_methods(obj):
    if obj == "tensor":
        t = torch.ones(2).neuron()
        assert t.is_neuron and t.device == torch.device("neuron", 0)
    elif obj == "module":
        m = torch.nn.Linear(2, 2).neuron()
        assert all(p.is_neuron for p in m.parameters())
    else:
        s = torch.ones(2).untyped_storage().neuron()
        assert s.is_neuron and s.device.type == "neuron"


def test_accelerator_resolves_to_neuron(neuron):
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == neuron.device_count() == 2
    torch.accelerator.set_device_index(1)
    try:
        assert neuron.current_device() == 1
        assert torch.empty(1, device="neuron").device == torch.device("neuron", 1)
    finally:
        torch.accelerator.set_device_index(0)


@pytest.mark.parametrize("index", [0, 1])
def test_device_name_and_properties(neuron, index):
    assert neuron.get_device_name(index) == f"neuron:{index}"
    props = neuron.get_device_properties(index)
    assert props.name == f"neuron:{index}" and props.total_memory > 0
    assert not hasattr(props, "major")


def test_device_context_manager(neuron):
    with neuron.device(1):
        assert neuron.current_device() == 1
        assert torch.zeros(1, device="neuron").device.index == 1
    assert neuron.current_device() == 0


def test_invalid_device_index_is_a_clear_error(neuron):
    with pytest.raises(RuntimeError, match="neuron emulator has 2 devices"):
        neuron.set_device(5)


def test_device_count_from_environment():
    proc = run_python("""
        import torch, cuda2neuron.backend as b
        b.activate(); print(torch.neuron.device_count(), torch.ones(1, device='neuron:3').device)
    """, env={"CUDA2NEURON_DEVICE_COUNT": "4"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["4", "neuron:3"]


def test_import_has_no_side_effects():
    proc = run_python("""
        import sys, cuda2neuron.backend as b
        print('torch' in sys.modules, b.is_available(), 'torch' in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "False"]


def test_never_autoloads():
    proc = run_python("import torch; print(torch._C._get_privateuse1_backend_name(), hasattr(torch, 'neuron'))")
    assert proc.stdout.split() == ["privateuseone", "False"]
