"""`cuda2neuron build-backend`: compile the emulated neuron device now (the one build entry point)."""

from __future__ import annotations

import click

from ._common import err_console, out_console
from ._emulate import EXIT_BUILD_FAILED, EXIT_UNAVAILABLE, BackendCommandError, print_progress

__all__ = ["build_backend_command"]


@click.command("build-backend", short_help="Compile the emulated neuron device now (cached per torch version).")
@click.option("--verbose", is_flag=True, help="Show the compiler's commands and output.")
def build_backend_command(verbose: bool) -> None:
    """Compile the emulated `neuron` device for the installed torch and print the library's path.

    The build is cached per torch version, Python and source, so this is instant once done.
    Exit codes: 0 built (or already built), 1 the build failed, 2 the device cannot be used here.

    \b
    Examples:
      cuda2neuron build-backend              build (or find) the emulator, print its path
      cuda2neuron build-backend --verbose    show the compiler's commands
    """
    from cuda2neuron.backend import BackendUnavailable
    from cuda2neuron.backend._build import BackendBuildError, cached_library
    from cuda2neuron.backend._emulate import check_loadable, ensure_loadable

    try:
        check_loadable()
    except BackendUnavailable as exc:
        raise BackendCommandError("build-backend", str(exc), EXIT_UNAVAILABLE) from exc
    already = cached_library()
    try:
        lib = ensure_loadable(verbose=verbose, progress=print_progress)
    except BackendUnavailable as exc:
        raise BackendCommandError("build-backend", str(exc), EXIT_UNAVAILABLE) from exc
    except BackendBuildError as exc:
        raise BackendCommandError("build-backend", str(exc), EXIT_BUILD_FAILED) from exc
    state = "already built" if already is not None else "built"
    err_console.say(f"cuda2neuron build-backend: neuron emulator {state}: {lib}", soft_wrap=True)
    out_console.say(str(lib), soft_wrap=True)
    raise click.exceptions.Exit(0)
