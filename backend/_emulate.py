"""Run a program with the emulated ``neuron`` device loaded, with no change to the program.

The library part of ``cuda2neuron emulate`` (the command itself, its messages and exit codes are
in ``cuda2neuron/cli/_emulate.py``): :func:`emulation_env` puts ``_sitecustomize/`` at the front
of PYTHONPATH and sets ``CUDA2NEURON_EMULATE=1``, so every Python process of the run (the
program, ``torchrun`` and its workers, multiprocessing "spawn" children, DataLoader workers)
registers the device and the ``neuron`` process group when it imports torch; :func:`run` runs the
program to completion and returns its exit code.

The parent never imports torch on the happy path: :func:`ensure_loadable` only makes sure the
extension is built (in a subprocess), so a long run does not carry a second torch in memory. When
the device cannot load here, it asks ``activate()`` for the reason and raises it.

Limits: ``python -I`` / ``-E`` / ``-S`` ignore PYTHONPATH or site, so such interpreters see no device.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType

from ._errors import BackendUnavailable

__all__ = ["EMULATE_ENV", "SITECUSTOMIZE_DIR", "check_loadable", "emulation_env", "ensure_loadable", "reason_unavailable",
           "run"]

#: Set to "1" in the program's environment: the sitecustomize activates the device on torch import.
EMULATE_ENV = "CUDA2NEURON_EMULATE"
#: The folder put first on PYTHONPATH (holds only ``sitecustomize.py``).
SITECUSTOMIZE_DIR = Path(__file__).resolve().with_name("_sitecustomize")


def emulation_env(base: Mapping[str, str] | None = None, *, strict: bool | None = None,
                  devices: int | None = None) -> dict[str, str]:
    """The environment that makes every Python process started with it load the emulated device."""
    env = dict(os.environ if base is None else base)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != SITECUSTOMIZE_DIR]
    env["PYTHONPATH"] = os.pathsep.join([str(SITECUSTOMIZE_DIR), *paths])
    env[EMULATE_ENV] = "1"
    if strict is not None:
        env["CUDA2NEURON_STRICT"] = "1" if strict else "0"
    if devices is not None:
        env["CUDA2NEURON_DEVICE_COUNT"] = str(devices)
    return env


def reason_unavailable() -> str | None:
    """Why the device cannot load here, in activate()'s own words; None if it can (imports torch)."""
    from . import activate
    from ._build import BackendBuildError

    try:
        activate()
    except ModuleNotFoundError as exc:
        from . import INSTALL_HINT

        return f"the emulated neuron device needs {exc.name}, which is not installed here; install it: {INSTALL_HINT}"
    except (BackendUnavailable, BackendBuildError) as exc:
        return str(exc)
    return None


def check_loadable() -> None:
    """Raise BackendUnavailable (with the reason) when the device cannot be used here; no build."""
    from . import is_available

    if not is_available():
        reason = reason_unavailable()
        if reason is not None:
            raise BackendUnavailable(reason)


def ensure_loadable(*, verbose: bool = False, progress: Callable[[str], None] | None = None) -> Path:
    """Make sure the device can load here and its library is built (building it in a subprocess
    if needed); returns the library's path.

    Raises BackendUnavailable when the device cannot be used here (the torch_neuronx package, an
    unsupported torch, no compiler) and BackendBuildError when the build fails.
    """
    check_loadable()
    from . import build

    return build(verbose=verbose, progress=progress)


def run(program: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``program`` to completion and return its exit code (128+N when killed by signal N).

    Raises FileNotFoundError / PermissionError when the program cannot be started.
    """
    child = subprocess.Popen(list(program), env=dict(env))

    # Ctrl-C reaches the child directly (same process group): the parent only waits for it to end.
    # A SIGTERM sent to the parent alone is forwarded, so a job scheduler can stop the run.
    def forward(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        child.send_signal(signum)

    previous = {s: signal.signal(s, h) for s, h in ((signal.SIGINT, signal.SIG_IGN), (signal.SIGTERM, forward))}
    try:
        code = child.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return 128 - code if code < 0 else code
