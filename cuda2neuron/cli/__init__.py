"""The `cuda2neuron` command line. Only this package prints."""

from __future__ import annotations

import importlib
import sys

import click

from cuda2neuron import __version__
from cuda2neuron.core import ConfigError

from ._common import EXIT_ERROR, UsageError, err_console

__all__ = ["cli", "entry", "main"]

# Commands that need torch are imported only when invoked, so `migrate`/`check` stay torch-free.
_LAZY = {
    "validate": ("cuda2neuron.cli._validate", "validate_command"),
    "emulate": ("cuda2neuron.cli._emulate", "emulate_command"),
    "build-backend": ("cuda2neuron.cli._build_backend", "build_backend_command"),
}
# Shown by --help without importing the command (which would import torch).
_LAZY_HELP = {
    "validate": "Prove a port: run original and port side by side and compare (runs your code).",
    "emulate": "Run a program with the emulated neuron device loaded (e.g. -- python train.py).",
    "build-backend": "Compile the emulated neuron device now (it is cached per torch version).",
}
_EXAMPLES = """
\b
Examples:
  cuda2neuron check .                      what is CUDA-specific here (exit 1 if anything)
  cuda2neuron migrate --diff .             what a port would change
  cuda2neuron migrate .                    port in place (a clean git tree)
  cuda2neuron validate . --entry m:build   prove the port against the original (runs your code)
  cuda2neuron rules CN1                    the device rules
  cuda2neuron COMMAND --help               each command's options and examples
"""
_EAGER = {
    "migrate": ("cuda2neuron.cli._migrate", "migrate_command"),
    "check": ("cuda2neuron.cli._check", "check_command"),
    "rules": ("cuda2neuron.cli._rules", "rules_command"),
    "suppress": ("cuda2neuron.cli._suppress", "suppress_command"),
}


def _needs_torch(name: str, missing: str) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    def command() -> None:
        from cuda2neuron.backend import INSTALL_HINT

        raise UsageError(f"`cuda2neuron {name}` needs {missing}, which is not installed here; install it: {INSTALL_HINT}")

    command.help = f"(needs {missing}: pip install 'cuda2neuron[validate]')"
    return command


class _Group(click.Group):
    def list_commands(self, ctx):
        return [*_EAGER, *_LAZY]

    def format_commands(self, ctx, formatter) -> None:
        # The whole first sentence: click cuts short help at 45 characters by default.
        rows = [(name, self.get_command(ctx, name).get_short_help_str(limit=200)) for name in _EAGER]
        rows += [(name, _LAZY_HELP[name]) for name in _LAZY]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx, name):
        spec = _EAGER.get(name) or _LAZY.get(name)
        if spec is None:
            return None
        try:
            module = importlib.import_module(spec[0])
        except ModuleNotFoundError as exc:
            # Only a missing optional dependency is turned into advice; our own bugs propagate.
            if exc.name is None or exc.name.split(".")[0] == "cuda2neuron":
                raise
            return _needs_torch(name, exc.name.split(".")[0])
        return getattr(module, spec[1])


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cuda2neuron")
def cli():
    """Port CUDA-specific PyTorch code to AWS Trainium (TorchNeuron), and prove the port."""


cli.help = (cli.help or "") + "\n" + _EXAMPLES


def main(argv: list[str] | None = None) -> int:
    try:
        rv = cli.main(args=argv, prog_name="cuda2neuron", standalone_mode=False)
    except click.exceptions.Abort as exc:
        from cuda2neuron.workspace import InterruptedWriting

        cause = exc.__cause__
        if isinstance(cause, InterruptedWriting):
            err_console.say(f"aborted: {cause.written} of {cause.total} file(s) already written (each whole), "
                            "the rest left as they were")
        else:
            err_console.say("aborted")
        return 130
    except click.exceptions.UsageError as exc:
        # click's own usage errors (unknown option, bad value) in our one style, with where
        # to look: `error: <problem>` and the command's --help.
        where = exc.ctx.command_path if exc.ctx is not None else "cuda2neuron"
        err_console.say(("error:", "bold red"), f" {exc.format_message()} (see `{where} --help`)", soft_wrap=True)
        return EXIT_ERROR
    except click.ClickException as exc:
        if isinstance(exc, UsageError):
            exc.show()
        else:
            err_console.say(("error:", "bold red"), f" {exc.format_message()}", soft_wrap=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:  # a bad value in the environment (CUDA2NEURON_FILE_TIMEOUT=x)
        err_console.say(("error:", "bold red"), f" {exc}", soft_wrap=True)
        return EXIT_ERROR
    except OSError as exc:
        # The last net under every command: a disk that fills or turns read-only between our
        # checks and a write is one line naming the path, never a traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        err_console.say(("error:", "bold red"), f" {where}{exc.strerror or exc}", soft_wrap=True)
        return EXIT_ERROR
    return rv if isinstance(rv, int) else 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
