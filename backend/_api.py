"""The public surface of ``torch.neuron``: exactly the TorchNeuron names (nothing CUDA-only).

Kept free of torch imports: the rule catalog's tests read it to check that every
``torch.neuron.X`` a rule can emit exists on the device module.
"""

from __future__ import annotations

__all__ = ["NEURON_MODULE_API"]

NEURON_MODULE_API: tuple[str, ...] = (
    "is_available",
    "is_initialized",
    "init",
    "device_count",
    "current_device",
    "set_device",
    "device",
    "synchronize",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "Stream",
    "Event",
    "stream",
    "current_stream",
    "default_stream",
    "set_stream",
    "memory_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "memory_summary",
    "empty_cache",
    "is_bf16_supported",
    "get_device_name",
    "get_device_properties",
    "get_amp_supported_dtype",
)
