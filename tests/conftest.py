from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# check / migrate keep per-file results in a cache; the suite's runs get one of their own (per
# test process, so xdist workers never share), never the developer's ~/.cache.
os.environ.setdefault("CUDA2NEURON_RESULTS_CACHE", tempfile.mkdtemp(prefix="c2n-test-results-"))


def pytest_addoption(parser):
    parser.addoption(
        "--update-fixtures",
        action="store_true",
        default=False,
        help="rewrite expected fixture outputs (*.out.py, *.findings.txt) from the current engine; "
        "review the diff like code",
    )


@pytest.fixture
def run_cli(capfd, monkeypatch):
    """Run the CLI in-process from a folder; returns (exit code, stdout, stderr)."""
    from cuda2neuron.cli import main

    def _run(*args: str, cwd: Path | None = None):
        if cwd is not None:
            monkeypatch.chdir(cwd)
        code = main(list(args))
        out, err = capfd.readouterr()
        return code, out, err

    return _run
