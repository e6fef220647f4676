"""Dependency files: CUDA-only packages and CUDA wheel indexes, and --min-torch from requirements."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.core import Config
from cuda2neuron.workspace import SourceFailure, lint_source
from cuda2neuron.kinds import kind_of
from cuda2neuron.documents.min_torch import min_torch_from_requirements
from cuda2neuron.documents.min_torch import min_torch_neuronx_from_requirements, neuronx_lower_bound, torch_lower_bound
from cuda2neuron.documents.requirements import parse_requirements


@pytest.mark.parametrize(
    ("line", "name"),
    [
        pytest.param("flash-attn>=2.5.0", "flash-attn", id="specifier"),
        pytest.param("Flash_Attn[extra]==2.5 ; python_version>'3.8'", "flash-attn", id="normalised-extras-marker"),
        pytest.param("apex @ git+https://github.com/NVIDIA/apex", "apex", id="direct-reference"),
        pytest.param("git+https://github.com/NVIDIA/apex.git@master", "apex", id="bare-git-url"),
        pytest.param("-e git+https://github.com/Dao-AILab/flash-attention#egg=flash_attn", "flash-attn", id="egg"),
        pytest.param("https://x.org/xformers-0.0.26-cp311-linux_x86_64.whl", "xformers", id="wheel-url"),
        pytest.param("bitsandbytes==0.43 \\", "bitsandbytes", id="continuation"),
    ],
)
def test_requirement_names(line, name):
    (dep,) = parse_requirements(line + "\n").dependencies
    assert dep.name == name
    assert line.startswith(dep.spec)


def test_options_and_comments_are_not_requirements():
    doc = parse_requirements("# apex\n-r base.txt\n--extra-index-url https://download.pytorch.org/whl/cu121\n\ntorch\n")
    assert [d.name for d in doc.dependencies] == ["torch"]
    assert [i.url for i in doc.indexes] == ["https://download.pytorch.org/whl/cu121"]


REQUIREMENTS = (
    "# runtime (CUDA 12.x wheels)\n"
    "--extra-index-url https://download.pytorch.org/whl/cu121\n"
    "torch==2.3.1+cu121\n"
    "numpy\n"
    "triton>=2.3  # fused kernel\n"
    "nvidia-ml-py>=12.535\n"
    "cupy-cuda12x; sys_platform == 'linux'\n"
)


def test_requirements_findings():
    found = [(f.code, f.line, f.span.start_col) for f in lint_source(REQUIREMENTS, "requirements.txt", Config())]
    assert found == [
        ("CN712", 2, 18),
        ("CN712", 3, 0),
        ("CN711", 5, 0),
        ("CN711", 6, 0),
        ("CN711", 7, 0),
    ]


PYPROJECT = """\
[project]
name = "demo"
dependencies = [
    "torch>=2.6",  # "apex" in a comment is not a dependency
    'xformers>=0.0.26',
]

[project.optional-dependencies]
fast = ["flash-attn>=2.5", "numpy"]

[dependency-groups]
dev = ["pynvml"]

[tool.cuda2neuron]
select = ["CN"]

[[tool.uv.index]]
url = "https://download.pytorch.org/whl/cu124"
"""


def test_pyproject_findings_point_at_the_strings():
    findings = lint_source(PYPROJECT, "pyproject.toml", Config())
    lines = PYPROJECT.splitlines()
    got = [(f.code, lines[f.line - 1][f.span.start_col : f.span.end_col]) for f in findings]
    assert got == [
        ("CN711", "xformers>=0.0.26"),
        ("CN711", "flash-attn>=2.5"),
        ("CN711", "pynvml"),
        ("CN712", "https://download.pytorch.org/whl/cu124"),
    ]


def test_invalid_pyproject_is_a_typed_error():
    with pytest.raises(SourceFailure) as err:
        lint_source("[project\nname=1\n", "pyproject.toml", Config())
    assert err.value.error.kind == "parse" and "invalid TOML" in err.value.error.message


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        pytest.param("requirements.txt", "requirements", id="requirements"),
        pytest.param("requirements-dev.txt", "requirements", id="requirements-dash"),
        pytest.param("dev-requirements.txt", "requirements", id="suffix-requirements"),
        pytest.param("requirements/train.txt", "requirements", id="requirements-folder"),
        pytest.param("pyproject.toml", "requirements", id="pyproject"),
        pytest.param("notes.txt", None, id="other-txt"),
        pytest.param("launch.sh", "shell", id="sh"),
        pytest.param("run.bash", "shell", id="bash"),
        pytest.param("explore.ipynb", "notebook", id="notebook"),
        pytest.param("setup.cfg", "ini", id="setup-cfg"),
        pytest.param("train.py", "python", id="python"),
    ],
)
def test_kind_of(name, kind):
    assert kind_of(Path(name)) == kind


@pytest.mark.parametrize(
    ("spec", "bound"),
    [
        pytest.param("torch>=2.7", (2, 7), id="ge"),
        pytest.param("torch >= 2.6.0, <3", (2, 6), id="ge-with-upper"),
        pytest.param("torch==2.8.*", (2, 8), id="eq-wildcard"),
        pytest.param("torch~=2.9.1", (2, 9), id="compatible"),
        pytest.param("torch==2.3.1+cu121", (2, 3), id="local-version"),
        pytest.param("torch", None, id="unpinned"),
        pytest.param("torch<3", None, id="upper-only"),
        pytest.param("torchvision>=0.20", None, id="other-package"),
        pytest.param("torch>=2.6; python_version>='3.10'", (2, 6), id="marker-ignored"),
    ],
)
def test_torch_lower_bound(spec, bound):
    assert torch_lower_bound(spec) == bound


def test_min_torch_takes_the_strictest_declared_bound(tmp_path):
    assert min_torch_from_requirements(tmp_path) is None
    (tmp_path / "requirements.txt").write_text("numpy\ntorch>=2.6  # LTS\n", encoding="utf-8")
    assert min_torch_from_requirements(tmp_path) == (2, 6)
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\ndependencies=["torch>=2.7"]\n', encoding="utf-8")
    assert min_torch_from_requirements(tmp_path) == (2, 7)
    (tmp_path / "pyproject.toml").write_text("[project\n", encoding="utf-8")  # broken: ignored here
    assert min_torch_from_requirements(tmp_path) == (2, 6)


@pytest.mark.parametrize(
    ("spec", "bound"),
    [
        pytest.param("torch-neuronx>=2.14.3.1", (2, 14, 3, 1), id="ge"),
        pytest.param("torch-neuronx==2.14.*", (2, 14), id="family-wildcard"),
        pytest.param("torch_neuronx~=2.13.3.0", (2, 13, 3, 0), id="underscore-compatible"),
        pytest.param("torch>=2.14", None, id="torch-is-not-neuronx"),
        pytest.param("torch-neuronx", None, id="unpinned"),
    ],
)
def test_neuronx_lower_bound(spec, bound):
    assert neuronx_lower_bound(spec) == bound


def test_min_torch_neuronx_from_requirements(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch>=2.14\ntorch-neuronx>=2.14.3.1\n", encoding="utf-8")
    assert min_torch_neuronx_from_requirements(tmp_path) == (2, 14, 3, 1)
    assert min_torch_from_requirements(tmp_path) == (2, 14)


def test_poetry_tables_are_read():
    text = (
        '[tool.poetry]\nname = "x"\n\n[tool.poetry.dependencies]\npython = "^3.10"\ntorch = "^2.6"\n'
        '"bitsandbytes" = "^0.43"\n\n[tool.poetry.group.dev.dependencies]\npynvml = "*"\n'
    )
    lines = text.splitlines()
    found = [lines[f.line - 1][f.span.start_col : f.span.end_col] for f in lint_source(text, "pyproject.toml", Config())]
    assert found == ["bitsandbytes", "pynvml"]


@pytest.mark.parametrize(
    ("first_line", "shell"),
    [
        pytest.param("#!/bin/bash", True, id="bin-bash"),
        pytest.param("#!/bin/sh -e", True, id="bin-sh-with-flag"),
        pytest.param("#!/usr/bin/env bash", True, id="env-bash"),
        pytest.param("#!/usr/bin/env -S bash -x", True, id="env-with-option"),
        pytest.param("#! /bin/bash\r", True, id="space-and-crlf"),
        pytest.param("#!/usr/bin/env zsh", False, id="zsh"),
        pytest.param("#!/usr/bin/env python3", False, id="python"),
        pytest.param("#!/bin/dash", False, id="dash-is-not-sh"),
        pytest.param("echo hi", False, id="no-shebang"),
    ],
)
def test_extensionless_scripts_are_recognised_by_shebang(tmp_path, first_line, shell):
    script = tmp_path / "launch"
    script.write_text(first_line + "\nnvidia-smi\n", encoding="utf-8")
    assert (kind_of(script) == "shell") == shell
    (tmp_path / "LICENSE.txt").write_text("#!/bin/bash\n")
    assert kind_of(tmp_path / "LICENSE.txt") is None  # a suffix decides without opening
    assert kind_of(tmp_path / "missing") is None
