"""Shared CLI plumbing: consoles, config loading, exit codes."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cuda2neuron.core import Config, ConfigError, find_config, load_config

from ._console import Console

__all__ = ["EXIT_CLEAN", "EXIT_ERROR", "EXIT_FINDINGS", "UsageError", "err_console", "load_run_config", "out_console"]

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

# Machine output (diffs, JSON, findings) goes to stdout; messages for people go to stderr.
out_console = Console(soft_wrap=True)
err_console = Console(stderr=True)


class UsageError(click.ClickException):
    exit_code = EXIT_ERROR

    def show(self, file=None) -> None:  # noqa: ARG002 - click's signature
        err_console.say(("error:", "bold red"), f" {self.message}", soft_wrap=True)


def load_run_config(paths: list[Path], config_file: Path | None) -> Config:
    try:
        if config_file is not None:
            if not config_file.is_file():
                raise UsageError(f"{config_file}: config file does not exist")
            return load_config(config_file)
        start = paths[0] if paths else Path.cwd()
        return load_config(find_config(start if start.exists() else Path.cwd()))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def stdin_bytes() -> bytes:
    return sys.stdin.buffer.read()
