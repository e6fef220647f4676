"""Launch scripts, requirements and notebooks through the real CLI: discovered, checked, migrated."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cuda2neuron.cli import main

NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {}, "outputs": [],
         "source": ["%matplotlib inline\n", "import torch\n", "!nvidia-smi\n", "x = torch.zeros(2).cuda()"]},
    ],
    "metadata": {"language_info": {"name": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                   check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "launch.sh").write_text("#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 python t.py\n")
    (root / "requirements.txt").write_text("torch>=2.6\nflash-attn>=2.5\n")
    (root / "explore.ipynb").write_text(json.dumps(NOTEBOOK, indent=1, sort_keys=True) + "\n")
    (root / "notes.txt").write_text("CUDA_VISIBLE_DEVICES=0,1\n")  # not a file kind we read
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "init")
    return root


def _run(capfd, monkeypatch, cwd: Path, *args: str):
    monkeypatch.chdir(cwd)
    code = main(list(args))
    out, err = capfd.readouterr()
    return code, out, err


def test_check_reports_every_kind(repo, capfd, monkeypatch):
    code, out, _ = _run(capfd, monkeypatch, repo, "check", "--output-format", "json", ".")
    assert code == 1
    data = json.loads(out)
    found = {(Path(f["path"]).name, f["code"]) for f in data["manual_actions"] + data["fixable"]}
    assert {("launch.sh", "CN701"), ("requirements.txt", "CN711"), ("explore.ipynb", "CN101"),
            ("explore.ipynb", "CN702")} <= found
    assert not any(name == "notes.txt" for name, _ in found)


def test_migrate_rewrites_scripts_and_notebooks_in_place(repo, capfd, monkeypatch):
    code, _, err = _run(capfd, monkeypatch, repo, "migrate", ".")
    assert code in (0, 1), err
    assert (repo / "launch.sh").read_text() == "#!/bin/bash\nNEURON_RT_VISIBLE_CORES=0-1 python t.py\n"
    cell = json.loads((repo / "explore.ipynb").read_text())["cells"][0]
    assert cell["source"] == ["%matplotlib inline\n", "import torch\n", "!nvidia-smi\n", 'x = torch.zeros(2).to("neuron")']
    assert (repo / "requirements.txt").read_text() == "torch>=2.6\nflash-attn>=2.5\n"
    _git(repo, "commit", "-qam", "migrated")
    before = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()}
    _run(capfd, monkeypatch, repo, "migrate", ".")
    assert {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()} == before, "second run changed files"
