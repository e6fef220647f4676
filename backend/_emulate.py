"""``cuda2neuron emulate -- PROGRAM ARGS`` and ``cuda2neuron build-backend``.

``emulate`` runs any program with the emulated ``neuron`` device loaded first, with no change to
the program: it puts ``_sitecustomize/`` at the front of PYTHONPATH and sets
``CUDA2NEURON_EMULATE=1``, so every Python process of the run (the program, ``torchrun`` and its
workers, multiprocessing "spawn" children, DataLoader workers) registers the device and the
``neuron`` process group when it imports torch. The exit code is the program's.

The parent never imports torch on the happy path: it only makes sure the extension is built (a
build prints one line on stderr), so a long run does not carry a second torch in memory. When the
device cannot load here, it asks ``activate()`` for the reason and prints that.

Limits: ``python -I`` / ``-E`` / ``-S`` ignore PYTHONPATH or site, so such interpreters see no device.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

import click

__all__ = [
    "EMULATE_ENV",
    "SITECUSTOMIZE_DIR",
    "build_backend_command",
    "emulate_command",
    "emulation_env",
]

#: Set to "1" in the program's environment: the sitecustomize activates the device on torch import.
EMULATE_ENV = "CUDA2NEURON_EMULATE"
#: The folder put first on PYTHONPATH (holds only ``sitecustomize.py``).
SITECUSTOMIZE_DIR = Path(__file__).resolve().with_name("_sitecustomize")

# Exit codes of our own failures; the program's own exit code passes through unchanged otherwise.
EXIT_BUILD_FAILED = 1
EXIT_UNAVAILABLE = 2
EXIT_NOT_FOUND = 127  # the shells' code for "command not found"
EXIT_NOT_EXECUTABLE = 126


class _CommandError(click.ClickException):
    """A failure of ours (not of the program), shown as one clear stderr line."""

    def __init__(self, command: str, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.command = command
        self.exit_code = exit_code

    def show(self, file=None) -> None:  # noqa: ANN001, ARG002 - click's signature
        click.echo(f"cuda2neuron {self.command}: error: {self.message}", err=True)


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


def _reason_unavailable() -> str | None:
    """Why the device cannot load here, in activate()'s own words; None if it can."""
    from . import BackendUnavailable, activate
    from ._build import BackendBuildError

    try:
        activate()
    except ModuleNotFoundError as exc:
        return f"the emulated neuron device needs {exc.name} ({exc}); install it: pip install 'cuda2neuron[validate]'"
    except (BackendUnavailable, BackendBuildError) as exc:
        return str(exc)
    return None


def _ensure_loadable(command: str) -> None:
    """Build the extension if needed (in a subprocess) or fail with the reason it cannot load."""
    from . import is_available

    if not is_available():
        reason = _reason_unavailable()
        if reason is not None:
            raise _CommandError(command, reason, EXIT_UNAVAILABLE)
    from . import build
    from ._build import BackendBuildError

    try:
        build()
    except BackendBuildError as exc:
        raise _CommandError(command, str(exc), EXIT_BUILD_FAILED) from exc


def _run(program: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``program`` to completion and return its exit code (128+N when killed by signal N)."""
    try:
        child = subprocess.Popen(list(program), env=dict(env))
    except FileNotFoundError as exc:
        raise _CommandError("emulate", f"{program[0]}: command not found", EXIT_NOT_FOUND) from exc
    except PermissionError as exc:
        raise _CommandError("emulate", f"{program[0]}: permission denied", EXIT_NOT_EXECUTABLE) from exc

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


@click.command(
    "emulate",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Run a program with the emulated neuron device loaded (e.g. -- python train.py).",
)
@click.option("--strict/--no-strict", default=None,
              help="Make float64 and complex tensors on the device an error (default: CUDA2NEURON_STRICT).")
@click.option("--devices", type=click.IntRange(1, 64), default=None,
              help="Number of emulated neuron devices (default: CUDA2NEURON_DEVICE_COUNT, else the emulator's).")
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED)
def emulate_command(strict: bool | None, devices: int | None, program: tuple[str, ...]) -> None:
    """Run PROGRAM with the emulated `neuron` device registered in every Python process it starts.

    \b
    Examples:
      cuda2neuron emulate -- python train.py --epochs 1
      cuda2neuron emulate -- torchrun --nproc_per_node=2 train.py

    The program needs no import of cuda2neuron: `torch.neuron`, `.to("neuron")` and
    `init_process_group("neuron")` work as soon as it imports torch. The exit code is the program's.
    """
    if shutil.which(program[0]) is None and os.sep not in program[0]:
        raise _CommandError("emulate", f"{program[0]}: command not found", EXIT_NOT_FOUND)
    _ensure_loadable("emulate")
    raise click.exceptions.Exit(_run(program, emulation_env(strict=strict, devices=devices)))


@click.command("build-backend", short_help="Compile the emulated neuron device now (cached per torch version).")
@click.option("--verbose", is_flag=True, help="Show the compiler's commands and output.")
def build_backend_command(verbose: bool) -> None:
    """Compile the emulated `neuron` device for the installed torch and print the library's path.

    The build is cached per torch version, Python and source, so this is instant once done.
    Exit codes: 0 built (or already built), 1 the build failed, 2 the device cannot be used here.
    """
    from . import build, is_available
    from ._build import BackendBuildError, cached_library

    if not is_available():
        reason = _reason_unavailable()
        if reason is not None:
            raise _CommandError("build-backend", reason, EXIT_UNAVAILABLE)
    already = cached_library()
    try:
        lib = build(verbose=verbose)
    except BackendBuildError as exc:
        raise _CommandError("build-backend", str(exc), EXIT_BUILD_FAILED) from exc
    state = "already built" if already is not None else "built"
    click.echo(f"cuda2neuron build-backend: neuron emulator {state}: {lib}", err=True)
    click.echo(str(lib))
    raise click.exceptions.Exit(0)
