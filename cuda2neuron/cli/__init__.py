"""The `cuda2neuron` command line. Only this package prints."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from cuda2neuron import __version__

from ._common import EXIT_ERROR, err_console

__all__ = ["cli", "entry", "main"]

# Commands that need torch are imported only when invoked, so `migrate`/`check` stay torch-free.
_LAZY = {
    "validate": ("cuda2neuron.validate._command", "validate_command"),
    "emulate": ("cuda2neuron.backend._emulate", "emulate_command"),
    "build-backend": ("cuda2neuron.backend._cli", "build_backend_command"),
}
_EAGER = {
    "migrate": ("cuda2neuron.cli._migrate", "migrate_command"),
    "check": ("cuda2neuron.cli._check", "check_command"),
    "rules": ("cuda2neuron.cli._rules", "rules_command"),
}


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class _Group(click.Group):
    def list_commands(self, ctx):
        names = list(_EAGER) + [n for n, (mod, _) in _LAZY.items() if _available(mod)]
        return names

    def get_command(self, ctx, name):
        spec = _EAGER.get(name) or _LAZY.get(name)
        if spec is None or not _available(spec[0]):
            return None
        return getattr(importlib.import_module(spec[0]), spec[1])


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cuda2neuron")
def cli():
    """Port CUDA-specific PyTorch code to AWS Trainium (TorchNeuron), and prove the port."""


def main(argv: list[str] | None = None) -> int:
    try:
        rv = cli.main(args=argv, prog_name="cuda2neuron", standalone_mode=False)
    except click.exceptions.Abort:
        err_console.print("aborted")
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return rv if isinstance(rv, int) else 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
