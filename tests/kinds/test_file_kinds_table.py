"""Every file kind is discovered, prefiltered and cached like ``.py`` files: one row per kind of
the KINDS table (a kind without a row fails), each with a file name, a text that wakes a rule and
a text without any of the kind's coarse words."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import COARSE_WORDS, KINDS, kind_of, may_trigger
from cuda2neuron.workspace import ResultCache, discover, process_files
from cuda2neuron.workspace import _runner

_NOTEBOOK = {
    "cells": [{"cell_type": "code", "execution_count": 1, "id": "a", "metadata": {}, "outputs": [], "source": ["{code}"]}],
    "metadata": {"language_info": {"name": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _notebook(code: str) -> str:
    return json.dumps(_NOTEBOOK).replace("{code}", code)


# kind -> (file name, a text a rule reports, a text without any coarse word of the kind)
ROWS: dict[str, tuple[str, str, str]] = {
    "python": ("train.py", "import torch\nx = torch.zeros(3).cuda()\n", "import os\nprint(os.sep)\n"),
    "shell": ("job.slurm", "#SBATCH --gpus-per-node=8\nsrun python t.py\n", "#!/bin/bash\necho hello\n"),
    "requirements": ("requirements/extras.toml", '[project]\nname = "x"\ndependencies = ["flash-attn"]\n', '[project]\nname = "x"\n'),
    "notebook": ("nb.ipynb", _notebook("x = y.cuda()"), _notebook("x = 1")),
    "config": ("conf/run.yaml", '{"distributed_backend": "nccl"}\n', "lr: 0.1\nsteps: 10\n"),
    "json": ("conf/tune.json", '{"device": "cuda"}\n', '{"lr": 0.1}\n'),
    "toml": ("conf/run.toml", '[dist]\nbackend = "nccl"\n', "[run]\nlr = 0.1\n"),
    "ini": ("setup.cfg", "[train]\ndevice = cuda\n", "[metadata]\nname = x\n"),
    "build": ("Makefile", "k.so: k.cu\n\tnvcc -o $@ $<\n", "all:\n\techo ok\n"),
    "cuda-source": ("k.cu", "__global__ void k() {}\n", "int main() { return 0; }\n"),
    "dockerfile": ("Dockerfile", "FROM nvidia/cuda:12.1.0-base-ubuntu22.04\n", "FROM python:3.11-slim\nRUN echo ok\n"),
}


def test_every_kind_has_a_row():
    assert set(ROWS) == {k.name for k in KINDS}, "add a row for the new kind"


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_discovered(tmp_path, kind):
    name, text, _plain = ROWS[kind]
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    found = discover([tmp_path])
    assert [(f.path.name, f.kind) for f in found.files] == [(path.name, kind)]


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_prefiltered(kind):
    _name, text, plain = ROWS[kind]
    # The catalog's coarse words (rules other tests define join `may_trigger`'s words).
    assert may_trigger(text, kind)
    assert not any(w.lower() in plain.lower() for w in COARSE_WORDS[kind])


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_reported_and_cached(tmp_path, kind, monkeypatch):
    name, text, _plain = ROWS[kind]
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    [source] = discover([tmp_path]).files
    cache = ResultCache(tmp_path / ".cache")
    cold = process_files([source], Config(), RunOptions(), jobs=1, cache=cache)
    assert cold[0].findings, f"no rule reported the {kind} example"
    monkeypatch.setattr(_runner, "process_kind", lambda *a: pytest.fail("a cached file was processed again"))
    assert process_files([source], Config(), RunOptions(), jobs=1, cache=cache) == cold


_PROBE = """
import sys
from cuda2neuron.cli import main
main(["check", "--no-cache", sys.argv[1]])
loaded = sorted(m for m in sys.modules if m in ("libcst", "ruamel.yaml") or m.startswith("cuda2neuron.rules"))
print("LOADED:" + ",".join(loaded))
"""


def test_files_without_coarse_words_load_no_parser(tmp_path):
    # One tree holding a plain file of every kind: `check` reads them all and loads nothing.
    for name, _text, plain in ROWS.values():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(plain)
    out = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, check=False)
    lines = out.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("LOADED:"), out.stderr
    assert lines[-1] == "LOADED:", lines[-1]
    # Every file was read (the summary counts them: "... (11 checked)").
    assert f"{len(ROWS)} checked" in out.stderr or f"in {len(ROWS)} file(s)" in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        pytest.param("run.sbatch", "shell", id="sbatch"),
        pytest.param("job.pbs", "shell", id="pbs"),
        pytest.param("job.lsf", "shell", id="lsf"),
        pytest.param(".env", "shell", id="dotenv"),
        pytest.param("train.env", "shell", id="env-file"),
        pytest.param("pyproject.toml", "requirements", id="pyproject"),
        pytest.param("pyproject-moe.toml", "requirements", id="pyproject-variant"),
        pytest.param("config.toml", "toml", id="toml-config"),
        pytest.param("tox.ini", "ini", id="ini"),
        pytest.param("CMakeLists.txt", "build", id="cmake"),
        pytest.param("kernels.mk", "build", id="make-include"),
        pytest.param("GNUmakefile", "build", id="gnumakefile"),
        pytest.param("Singularity", "dockerfile", id="singularity"),
        pytest.param("Apptainer.gpu", "dockerfile", id="apptainer-variant"),
        pytest.param("devcontainer.jsonc", "json", id="jsonc"),
        pytest.param("requirements-dev.txt", "requirements", id="requirements"),
        pytest.param("notes.txt", None, id="other-text"),
    ],
)
def test_kind_of_by_name(tmp_path, name, kind):
    from pathlib import Path

    assert kind_of(Path(name)) == kind


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        pytest.param("Bootstrap: docker\nFrom: ubuntu:22.04\n", "dockerfile", id="apptainer-definition"),
        pytest.param("LIBRARY mylib\nEXPORTS\n  f\n", None, id="windows-module-definition"),
    ],
)
def test_a_def_file_is_read_only_when_it_is_a_container_definition(tmp_path, head, kind):
    path = tmp_path / "env.def"
    path.write_text(head)
    assert kind_of(path) == kind
