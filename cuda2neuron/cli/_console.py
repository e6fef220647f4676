"""The CLI's two output streams, with rich loaded only when it has something to do.

rich costs tens of milliseconds to import, a large share of a one-file `check`. pre-commit,
editors and CI read our output through pipes, where rich would only strip its own styling, so
plain lines (``say``) are written straight to the stream unless it is a terminal. Tables,
Markdown and progress bars (``print``, ``rich``) always go through rich.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from cuda2neuron.core import printable

__all__ = ["Console", "Part"]

# A piece of a line: plain text, or (text, rich style) such as ("error", "red").
Part = str | tuple[str, str]


class Console:
    # --color: "auto" styles a terminal's output (NO_COLOR turns it off, FORCE_COLOR on); "always"
    # and "never" decide for every stream, a pipe included. Progress bars still need a terminal.
    colour: str = "auto"

    def __init__(self, *, stderr: bool = False, file: IO[str] | None = None, **options: Any) -> None:
        # ``file``: a fixed stream (--output-file) instead of stdout / stderr.
        self._fixed = file
        self._stderr = stderr
        self._options = options
        self._rich: Any = None
        self._rich_colour = Console.colour

    @property
    def file(self) -> IO[str]:
        # Looked up on every use, as rich does: tests and callers swap sys.stdout / sys.stderr.
        if self._fixed is not None:
            return self._fixed
        return sys.stderr if self._stderr else sys.stdout

    @property
    def rich(self) -> Any:
        """The rich Console behind this stream (imported on first use)."""
        if self._rich is None or self._rich_colour != Console.colour:  # --color set after first use
            from rich.console import Console as RichConsole

            self._rich_colour = Console.colour

            options = dict(self._options)
            if Console.colour == "always":
                options.setdefault("force_terminal", True)
            elif Console.colour == "never":
                options.setdefault("no_color", True)
            if self._fixed is not None:
                self._rich = RichConsole(file=self._fixed, highlight=False, **options)
            else:
                self._rich = RichConsole(stderr=self._stderr, highlight=False, **options)
        return self._rich

    @property
    def styled(self) -> bool:
        """Whether what this stream prints is coloured (--color, NO_COLOR, a terminal)."""
        if Console.colour != "auto":
            return Console.colour == "always"
        return not os.environ.get("NO_COLOR", "") and self.is_terminal

    @property
    def is_terminal(self) -> bool:
        # rich's answer whenever the environment may override the tty check (FORCE_COLOR and
        # friends); a plain pipe needs no rich to tell.
        if self._rich is not None or any(v in os.environ for v in ("FORCE_COLOR", "TTY_COMPATIBLE")):
            return self.rich.is_terminal
        isatty = getattr(self.file, "isatty", None)
        return bool(isatty and isatty())

    def say(self, *parts: Part, soft_wrap: bool | None = None) -> None:
        """Write one line; styles apply on a terminal only. Text is never read as markup, and
        control characters (a file name may hold ESC) are shown escaped, never sent raw."""
        parts = tuple(printable(p) if isinstance(p, str) else (printable(p[0]), p[1]) for p in parts)
        if not self.styled:
            self.file.write("".join(p if isinstance(p, str) else p[0] for p in parts) + "\n")
            return
        from rich.text import Text

        self.rich.print(Text.assemble(*parts), soft_wrap=soft_wrap)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """rich's print: markup, tables, Markdown (plain strings shown with their control
        characters escaped, as ``say`` does; tables escape their cells where they are built)."""
        self.rich.print(*(printable(o) if isinstance(o, str) else o for o in objects), **kwargs)
