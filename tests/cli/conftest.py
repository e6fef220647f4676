from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def gitcmd():
    return git


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small committed git project with CUDA code, plain code and a bad file."""
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "train.py").write_text("import torch\nmodel = Net().cuda()\n")
    (root / "pkg" / "plain.py").write_text("x = 1\n")
    (root / "pkg" / "broken.py").write_text("import torch\nx = y.cuda()\ndef (:\n    pass\n")
    (root / "notes.txt").write_text("cuda notes\n")
    git(root, "init", "-q")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return root


@pytest.fixture
def run(run_cli):
    """The suite's in-process CLI runner (tests/conftest.py), under the name these tests use."""
    return run_cli
