"""``torch.neuron``: the device module of the emulated neuron device.

Exactly the TorchNeuron surface (see ``_api.NEURON_MODULE_API``); nothing CUDA-only, so code that
passes on the emulator does not call APIs real TorchNeuron lacks. Execution is synchronous:
streams are bookkeeping and events record host time.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

__all__ = [
    "Event",
    "Stream",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_stream",
    "stream",
    "synchronize",
]

_C: Any = None  # the C++ extension, bound by activate()


def _bind(ext: ModuleType) -> None:
    global _C
    _C = ext


def _index(dev: Any = None) -> int:
    """Device index of ``dev`` (None → current device); refuses other device types."""
    if dev is None:
        return int(_C.current_device())
    if isinstance(dev, int):
        idx = dev
    else:
        d = torch.device(dev)
        if d.type != "neuron":
            raise ValueError(f"expected a neuron device, got {d}")
        idx = d.index if d.index is not None else int(_C.current_device())
    if not 0 <= idx < device_count():
        raise RuntimeError(f"Invalid device index {idx}: the neuron emulator has {device_count()} devices "
                           "(set CUDA2NEURON_DEVICE_COUNT to change)")
    return idx


# ---- device -------------------------------------------------------------------------------------

def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return _C is not None


def init() -> None:
    """Initialise the device (already done by activation; kept for API parity)."""


def device_count() -> int:
    return int(_C.device_count())


def current_device() -> int:
    return int(_C.current_device())


def set_device(device: Any) -> None:
    _C.set_device(_index(device))


class device:  # noqa: N801  (same spelling as torch.cuda.device)
    """Context manager that changes the current neuron device."""

    def __init__(self, device: Any) -> None:
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = current_device()
        if self.idx >= 0:
            _C.set_device(self.idx)

    def __exit__(self, *exc: object) -> bool:
        if self.idx >= 0:
            _C.set_device(self.prev_idx)
        return False


def synchronize(device: Any = None) -> None:
    """Wait for all work on ``device``: the emulator executes synchronously, so this only validates."""
    _index(device)


def _is_in_bad_fork() -> bool:
    # torch.manual_seed looks for this hook on custom device modules. Host memory survives fork.
    return False


# ---- RNG ----------------------------------------------------------------------------------------

def _gen(device: Any = None) -> torch.Generator:
    return _C.default_generator(_index(device))


def manual_seed(seed: int) -> None:
    _gen().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C.default_generator(i).manual_seed(int(seed))


def seed() -> None:
    _gen().seed()


def seed_all() -> None:
    s = random.getrandbits(64)
    for i in range(device_count()):
        _C.default_generator(i).manual_seed(s)


def initial_seed() -> int:
    return int(_gen().initial_seed())


def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    return _gen(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    _gen(device).set_state(new_state.cpu() if new_state.device.type != "cpu" else new_state)


# ---- streams and events -------------------------------------------------------------------------

class Stream(torch.Stream):
    """A neuron stream. Work runs synchronously, so a stream only orders bookkeeping."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> Stream:
        return super().__new__(cls, device=torch.device("neuron", _index(device)), priority=priority, **kwargs)


class Event:
    """A neuron event; ``record`` takes the host time, so ``elapsed_time`` measures real time.

    Constructing one returns a ``torch.Event`` on the current neuron device: torch's event methods
    (elapsed_time, wait, ...) accept only exact ``torch.Event`` objects, not subclasses.
    """

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,  # type: ignore[misc]
                interprocess: bool = False) -> torch.Event:
        return torch.Event(device=torch.device("neuron", current_device()), enable_timing=enable_timing,
                           blocking=blocking, interprocess=interprocess)


def current_stream(device: Any = None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def default_stream(device: Any = None) -> torch.Stream:
    # Stream id 0 is the default stream of a device (the C++ guard's convention).
    return torch.Stream(stream_id=0, device_index=_index(device), device_type=_PRIVATEUSE1)  # type: ignore[call-arg]


_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1


def set_stream(stream: torch.Stream) -> None:
    if stream is None:
        return
    torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(stream: torch.Stream | None) -> Iterator[None]:
    """Make ``stream`` current inside the block (no-op for None)."""
    if stream is None:
        yield
        return
    prev = torch.accelerator.current_stream(stream.device_index)
    torch.accelerator.set_stream(stream)
    try:
        yield
    finally:
        torch.accelerator.set_stream(prev)


# ---- memory -------------------------------------------------------------------------------------

def memory_stats(device: Any = None) -> dict[str, int]:
    """Flat statistics in torch.cuda.memory_stats' naming ("allocated_bytes.all.current", ...)."""
    raw = _C.device_stats(_index(device))
    out: dict[str, int] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            for field, n in value.items():
                out[f"{key}.all.{field}"] = int(n)
        else:
            out[key] = int(value)
    return dict(sorted(out.items()))


def memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: Any = None) -> int:
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: Any = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Any = None) -> None:
    _C.reset_peak_stats(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _C.reset_accumulated_stats(_index(device))


def empty_cache() -> None:
    """Release cached memory: the emulator caches nothing (reserved == allocated)."""


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    idx = _index(device)
    s = memory_stats(idx)
    rows = [("Allocated memory", "allocated_bytes"), ("Reserved memory", "reserved_bytes"),
            ("Requested memory", "requested_bytes"), ("Allocations", "allocation")]
    lines = [f"neuron:{idx} memory summary (emulated device, host memory)",
             f"{'metric':<20}{'current':>14}{'peak':>14}{'allocated':>14}{'freed':>14}"]
    for label, key in rows:
        lines.append(f"{label:<20}" + "".join(f"{s[f'{key}.all.{f}']:>14}" for f in
                                               ("current", "peak", "allocated", "freed")))
    return "\n".join(lines)


# ---- properties ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class _DeviceProperties:
    """What TorchNeuron's get_device_properties offers: a name and the memory size (no .major/.minor)."""

    name: str
    total_memory: int


def get_device_name(device: Any = None) -> str:
    return f"neuron:{_index(device)}"


def get_device_properties(device: Any = None) -> _DeviceProperties:
    idx = _index(device)
    return _DeviceProperties(name=f"neuron:{idx}", total_memory=int(_C.total_memory()))


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]
