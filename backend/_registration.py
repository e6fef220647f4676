"""activate(): register the emulated neuron device with torch, once per process."""

from __future__ import annotations

import atexit
import gc
import importlib.metadata
import json
import importlib.util
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ._errors import BackendUnavailable

__all__ = ["activate", "extension", "is_active", "is_available", "prebuild"]

#: Set to 1: every new host allocation (device memory included) is filled with NaN bytes (see
#: activate's ``poison``).
POISON_ENV = "CUDA2NEURON_POISON"

_lock = threading.RLock()
_ext: ModuleType | None = None
_module: ModuleType | None = None


def _parse_version(v: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def is_emulated(module: object) -> bool:
    """Is ``module`` the emulator's own ``torch_neuronx`` surface (``_torch_neuronx.install()``)?"""
    return bool(getattr(module, "__cuda2neuron_emulated__", False))


def real_torch_neuronx() -> bool:
    """Is the real TorchNeuron importable here (not the emulator's own ``torch_neuronx`` surface)?"""
    have = sys.modules.get("torch_neuronx")
    if have is not None:
        return not is_emulated(have)
    return importlib.util.find_spec("torch_neuronx") is not None


def _check_refusals() -> None:
    # The real TorchNeuron autoloads on `import torch` and registers PrivateUse1 itself: the
    # emulator must never compete with it (two backends cannot share PrivateUse1).
    if real_torch_neuronx():
        raise BackendUnavailable(
            "the real TorchNeuron backend (torch_neuronx) is installed in this environment; the emulated "
            "neuron device refuses to load next to it. Run on the real device, or use an environment "
            "without torch_neuronx for emulated validation.")
    from . import SUPPORTED_TORCH

    import torch

    lo, hi = SUPPORTED_TORCH
    have = _parse_version(torch.__version__)
    if not (lo <= have < hi):
        raise BackendUnavailable(unsupported_torch(torch.__version__))
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "neuron"):
        raise BackendUnavailable(
            f"another PrivateUse1 backend ({name!r}) is already registered in this process; the emulated "
            "neuron device cannot be registered next to it")
    if name == "neuron" and getattr(torch, "neuron", None) is not None:
        raise BackendUnavailable(
            "a 'neuron' device module that is not the emulator is already registered (the real "
            "TorchNeuron?); the emulated neuron device refuses to replace it")


def unsupported_torch(version: str) -> str:
    """The refusal for a torch outside SUPPORTED_TORCH: the range, what was tested, and which torch
    TorchNeuron ships for (a newer torch has none yet: 2.15 came out after Neuron 2.34)."""
    from . import SUPPORTED_TORCH, TESTED_TORCHES, TORCHNEURON_TORCH

    (lo, hi), (nlo, nhi) = SUPPORTED_TORCH, TORCHNEURON_TORCH
    newer = _parse_version(version) >= hi
    return (
        f"the emulated neuron device supports torch >= {lo[0]}.{lo[1]} and < {hi[0]}.{hi[1]} "
        f"(tested: {', '.join(TESTED_TORCHES)}); this environment has torch {version}. "
        + (f"No TorchNeuron release supports torch {'.'.join(map(str, _parse_version(version)))} yet "
           if newer else "")
        + f"(torch-neuronx ships for torch {nlo[0]}.{nlo[1]} and {nhi[0]}.{nhi[1] - 1}): install torch "
        f"{nhi[0]}.{nhi[1] - 1} or {nlo[0]}.{nlo[1]} for validate"
    )


def extension() -> ModuleType:
    """The loaded C++ extension (activates the device first)."""
    activate()
    assert _ext is not None
    return _ext


def is_active() -> bool:
    return _module is not None


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def activate(*, strict: bool | None = None, poison: bool | None = None) -> ModuleType:
    global _ext, _module
    with _lock:
        if _module is None:
            _check_refusals()
            import torch

            from ._build import build

            ext = build()
            ext._register_runtime()
            torch.utils.rename_privateuse1_backend("neuron")
            from . import _device_module

            _device_module._bind(ext)
            torch._register_device_module("neuron", _device_module)
            torch.utils.generate_methods_for_privateuse1_backend(
                for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
            from . import _compile, _printing

            from .distributed import register as _register_process_group

            _compile.register()
            _printing.install()
            from . import op_support

            op_support.install()  # TorchNeuron's N and CPU_FALLBACK ops (op_support.toml)
            # init_process_group("neuron") must work after a plain activate(), not only under
            # `cuda2neuron emulate`.
            _register_process_group()
            atexit.register(_free_cycles_before_finalization)
            _ext = ext
            _module = _device_module
            if strict is None:
                strict = _env_flag("CUDA2NEURON_STRICT")
            if poison is None and _env_flag(POISON_ENV):
                poison = True
        if strict is not None:
            _ext.set_strict(bool(strict))  # type: ignore[union-attr]
        if poison is not None:
            problem = _ext.set_poison(bool(poison))  # type: ignore[union-attr]
            if problem:
                raise RuntimeError(f"neuron: cannot poison new device memory ({POISON_ENV}): {problem}")
        return _module


def _free_cycles_before_finalization() -> None:
    """Free objects held only by reference cycles while the interpreter still runs.

    FSDP2 keeps its hooks and autograd Functions in cycles. Left to the interpreter's teardown,
    the autograd engine's neuron device thread ends up taking the GIL after finalization has
    begun (a backtrace of the abort shows Engine::thread_main -> PyEval_AcquireThread ->
    pthread_exit); the forced unwind crosses a noexcept C++ frame and the process aborts
    ("terminate called without an active exception", SIGABRT) after the program's last line.
    atexit handlers run before finalization, so the collection here frees them on a live
    interpreter (torchrun DDP+FSDP2 fixture: 4 of 4 runs aborted without it, 0 of 10 with it).

    Then, where autograd's device threads run, one empty backward through them and a 50 ms
    pause with the GIL released: the last graph task a device thread ran holds the Python state
    of the program's last backward until the thread lets go of it, and after the collection
    alone the abort still came in 14 of 41 runs of that fixture (DDP and FSDP2 under torchrun,
    `tests/backend/test_distributed.py`). With an exit backward: 0 of 8, 0 of 11 with a print to
    stderr after it, 3 of 4 with neither print nor pause (and the thread check), 4 of 5 inside
    ``torch.enable_grad()``; with the pause: 1 of 10 — a timing mitigation of torch's race
    (pytorch/pytorch#180701), not a cure. Starting the device threads at exit in a program that
    never ran backward (the collectives fixture) brought the abort there: only where they run.
    """
    gc.collect()
    if not _autograd_threads_started():
        return  # a program that never ran backward: starting the threads now would bring the abort
    import torch

    try:
        leaf = torch.zeros(1, device="neuron", requires_grad=True)
        (leaf * 1).sum().backward()
    except Exception:  # noqa: BLE001 - best effort at exit (grad mode off, device gone): never fail a clean exit
        return
    # The device thread lets go of the task a moment after backward() returns: give it that
    # moment with the interpreter alive (the GIL released while sleeping).
    time.sleep(0.05)


def _autograd_threads_started() -> bool:
    """Whether autograd's device threads run in this process (torch names them pt_autograd_N)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as fh:
                if fh.read().startswith("pt_autograd_"):
                    return True
        except OSError:
            continue
    return False


def is_available() -> bool:
    """Can the device be built or loaded here? No import of torch, no registration."""
    if real_torch_neuronx():
        return False
    if importlib.util.find_spec("torch") is None:
        return False
    from . import SUPPORTED_TORCH

    have = _parse_version(importlib.metadata.version("torch"))
    if not (SUPPORTED_TORCH[0] <= have < SUPPORTED_TORCH[1]):
        return False
    from ._build import can_build, cached_library

    return cached_library() is not None or can_build()


# The child's stdout protocol: progress lines and, on failure, the error (one line each, JSON).
_CHILD_BUILD = """
import json, os
from cuda2neuron.backend._build import BackendBuildError, build
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # the compiler's own output (verbose) goes to stderr, not into the protocol
def say(kind, text):
    out.write(json.dumps([kind, text]) + "\\n")
    out.flush()
try:
    build(verbose={verbose}, progress=lambda line: say("progress", line))
except BackendBuildError as exc:
    say("error", str(exc))
    raise SystemExit(1)
"""


def prebuild(*, verbose: bool = False, progress: Callable[[str], None] | None = None) -> Path:
    """Build the extension in a fresh interpreter (loading it registers kernels) and return its path.

    ``progress`` receives the build's progress lines as they come; nothing when it is cached.
    """
    from . import SUPPORTED_TORCH
    from ._build import BackendBuildError, cached_library

    # Before compiling anything: torch 2.15 would build, then fail to register with a less
    # helpful error (or a crash) in every run.
    version = importlib.metadata.version("torch")
    if not (SUPPORTED_TORCH[0] <= _parse_version(version) < SUPPORTED_TORCH[1]):
        raise BackendUnavailable(unsupported_torch(version))
    lib = cached_library()
    if lib is not None:
        return lib
    say = progress or (lambda _line: None)
    error = None
    with subprocess.Popen([sys.executable, "-c", _CHILD_BUILD.format(verbose=bool(verbose))],
                          stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            try:
                kind, text = json.loads(line)
            except ValueError:
                continue
            if kind == "progress":
                say(text)
            else:
                error = text
    lib = cached_library()
    if child.returncode != 0 or lib is None:
        raise BackendBuildError(error or f"building the neuron emulator failed (exit code {child.returncode})")
    return lib
    cmd = [sys.executable, "-m", "cuda2neuron.backend", "build"] + (["--verbose"] if verbose else [])
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    lib = cached_library()
    if proc.returncode != 0 or lib is None:
        raise BackendBuildError("building the neuron emulator failed (see the messages above)")
    return lib
