"""`cuda2neuron emulate -- PROGRAM ARGS`: run any program with the emulated neuron device loaded.

The work is the backend's (``cuda2neuron.backend._emulate``: the environment, the loadability
check, running the program); this module holds the command, its messages and its exit codes.
The exit code is the program's, except for our own failures below.
"""

from __future__ import annotations

import os
import shutil
import sys

import click

from ._common import err_console

__all__ = ["EXIT_BUILD_FAILED", "EXIT_NOT_EXECUTABLE", "EXIT_NOT_FOUND", "EXIT_UNAVAILABLE", "BackendCommandError",
           "emulate_command", "print_progress"]

# Exit codes of our own failures; the program's own exit code passes through unchanged otherwise.
EXIT_BUILD_FAILED = 1
EXIT_UNAVAILABLE = 2
EXIT_NOT_FOUND = 127  # the shells' code for "command not found"
EXIT_NOT_EXECUTABLE = 126


class BackendCommandError(click.ClickException):
    """A failure of ours (not of the program), shown as one clear stderr line."""

    def __init__(self, command: str, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.command = command
        self.exit_code = exit_code

    def show(self, file=None) -> None:  # noqa: ANN001, ARG002 - click's signature
        # One error style for every command: `error: <what>: <problem>`.
        err_console.say(("error:", "bold red"), f" {self.command}: {self.message}", soft_wrap=True)


def print_progress(line: str) -> None:
    """A build's progress line, on stderr (the backend reports it, the CLI prints it)."""
    err_console.say(f"cuda2neuron: {line}", soft_wrap=True)
    sys.stderr.flush()


def ensure_loadable(command: str) -> None:
    """Build the extension if needed (in a subprocess) or fail with the reason it cannot load."""
    from cuda2neuron.backend import BackendUnavailable
    from cuda2neuron.backend._build import BackendBuildError
    from cuda2neuron.backend._emulate import ensure_loadable as _ensure_loadable

    try:
        _ensure_loadable(progress=print_progress)
    except BackendUnavailable as exc:
        raise BackendCommandError(command, str(exc), EXIT_UNAVAILABLE) from exc
    except BackendBuildError as exc:
        raise BackendCommandError(command, str(exc), EXIT_BUILD_FAILED) from exc


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
    from cuda2neuron.backend._emulate import emulation_env, run

    if shutil.which(program[0]) is None and os.sep not in program[0]:
        raise BackendCommandError("emulate", f"{program[0]}: command not found", EXIT_NOT_FOUND)
    ensure_loadable("emulate")
    try:
        code = run(program, emulation_env(strict=strict, devices=devices))
    except FileNotFoundError as exc:
        raise BackendCommandError("emulate", f"{program[0]}: command not found", EXIT_NOT_FOUND) from exc
    except PermissionError as exc:
        raise BackendCommandError("emulate", f"{program[0]}: permission denied", EXIT_NOT_EXECUTABLE) from exc
    raise click.exceptions.Exit(code)
