"""One random stream for every run: random ops on a device tensor draw from the CPU generator.

Why: the reference under the CUDA-on-CPU shim has a single (CPU) generator, while the port on the
neuron device (and a reference on real CUDA) has a separate device generator that model
initialisation on the CPU never advanced — so dropout masks would differ for reasons that have
nothing to do with the port. In the device runs this dispatch mode executes every random ATen op
on CPU copies with the CPU default generator and moves the result back. Same seed, same draws, in
the same order, in every run; the neuron emulator's CPU kernels make the numbers bit-identical.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

__all__ = ["CpuRandomMode", "RANDOM_OPS"]

_aten = torch.ops.aten
RANDOM_OPS = frozenset(
    getattr(_aten, name)
    for name in (
        "bernoulli", "bernoulli_", "native_dropout", "normal", "normal_", "uniform_", "random_",
        "exponential_", "geometric_", "cauchy_", "log_normal_", "rand", "randn", "randint", "randperm",
        "multinomial", "poisson", "rand_like", "randn_like", "randint_like", "rrelu_with_noise",
        "_standard_gamma", "binomial",
    )
    if hasattr(_aten, name)
)
_CPU = torch.device("cpu")


def _device_of(args: Any, kwargs: dict[str, Any]) -> torch.device | None:
    found: list[torch.device] = []

    def visit(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            found.append(x.device)
        return x

    tree_map(visit, (args, kwargs))
    if found:
        return found[0]
    dev = kwargs.get("device")
    if dev is not None and torch.device(dev).type != "cpu":
        return torch.device(dev)
    return None


class CpuRandomMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket not in RANDOM_OPS:
            return func(*args, **kwargs)
        device = _device_of(args, kwargs)
        if device is None or device.type == "meta":
            # Meta tensors hold no data, so they draw nothing (`with torch.device("meta"):` model
            # construction before FSDP2's to_empty + reset_parameters); no CPU twin to make.
            return func(*args, **kwargs)
        from cuda2neuron.validate._accounting import paused

        # validate's own CPU work: not the port's residency
        with paused():
            return self._on_cpu(func, device, args, kwargs)

    def _on_cpu(self, func: Any, device: torch.device, args: Any, kwargs: dict[str, Any]) -> Any:
        cpu_args = tree_map(lambda t: t.to(_CPU) if isinstance(t, torch.Tensor) else t, args)
        cpu_kwargs = tree_map(lambda t: t.to(_CPU) if isinstance(t, torch.Tensor) else t, kwargs)
        if "device" in cpu_kwargs:
            cpu_kwargs["device"] = _CPU
        gen = cpu_kwargs.get("generator")
        if gen is not None and gen.device.type != "cpu":
            # A device generator: carry its state through a CPU twin and copy it back.
            twin = torch.Generator()
            twin.set_state(gen.get_state())
            cpu_kwargs["generator"] = twin
        out = func(*cpu_args, **cpu_kwargs)
        if gen is not None and gen.device.type != "cpu":
            gen.set_state(cpu_kwargs["generator"].get_state())
        if func._schema.is_mutable:
            # In-place random op (x.uniform_(), bernoulli_): write the CPU draws into the original.
            args[0].copy_(cpu_args[0])
            return args[0]
        return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, out)


def local_dtensor_draws() -> None:
    """DTensor random ops (FSDP2's `reset_parameters()` on sharded parameters) draw each rank's
    local shard from the CPU generator, as they do in the CPU reference.

    Trap: on a device mesh whose device module has `set_rng_state`, DTensor switches to its
    offset-based RNG tracker, which reads the device generator's state as a 16-byte Philox
    seed/offset pair; the emulated device keeps a CPU generator's state there, and the tracker
    fails (`AssertionError` in `_random.py` `offset`). The CPU mesh of the reference never uses
    the tracker, and validate draws every random number from the one CPU generator anyway.
    Patched where DTensor's dispatcher looks it up. Only for distributed launches (importing
    DTensor costs time every other run would pay for nothing).
    """
    from torch.distributed.tensor import _dispatch

    _dispatch.is_rng_supported_mesh = lambda mesh: False
