"""The CLI's streams: plain text into a pipe without importing rich, styled text on a terminal,
and messages never read as markup either way."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from cuda2neuron.cli._console import Console


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        pytest.param(("0 finding(s) in 1 file(s)",), "0 finding(s) in 1 file(s)\n", id="plain"),
        pytest.param((("error", "red"), " a.py: parse: bad"), "error a.py: parse: bad\n", id="styled-part"),
        pytest.param(("x[0] = [bold]y[/bold]",), "x[0] = [bold]y[/bold]\n", id="brackets-kept"),
    ],
)
def test_pipe_gets_plain_text(monkeypatch, parts, expected):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    Console().say(*parts)
    assert out.getvalue() == expected


def test_terminal_gets_styles_and_literal_brackets(monkeypatch):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    Console(stderr=True).say(("error", "red"), " x[1] [bold]y")
    text = tty.getvalue()
    assert "\x1b[" in text
    assert "x[1] [bold]y" in text


_PROBE = """
import sys
from cuda2neuron.cli import main
main(["check", sys.argv[1]])
print("RICH:" + ",".join(sorted(m for m in sys.modules if m == "rich" or m.startswith("rich."))))
"""


def test_check_into_a_pipe_does_not_import_rich(tmp_path):
    f = tmp_path / "train.py"
    f.write_text("import torch\nmodel = Net().cuda()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(f)], capture_output=True, text=True, check=False, env=env
    )
    assert "CN101" in out.stdout, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "RICH:", out.stdout
