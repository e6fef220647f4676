"""Dockerfile discovery and the shell view the launch-script rules read."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.documents.dockerfile import parse_dockerfile, shell_view
from cuda2neuron.kinds._text_files import is_dockerfile

NAMES = [
    ("Dockerfile", True),
    ("Containerfile", True),
    ("Dockerfile.gpu", True),
    ("train.Dockerfile", True),
    ("dockerfile", True),
    ("Dockerfile.md", False),
    ("docker-compose.yml", False),
    ("Dockerfiles", False),
    # variants named with a dash or an underscore (projects with several images), and templates
    ("Dockerfile-uv-base", True),
    ("Dockerfile_gpu", True),
    ("Containerfile-cuda", True),
    ("Dockerfile-uv.jinja", True),
    ("Dockerfile-notes.md", False),
    ("dockerfile-lint.sh", False),
]


@pytest.mark.parametrize(("name", "expected"), NAMES, ids=[n for n, _ in NAMES])
def test_dockerfile_names(name, expected):
    assert is_dockerfile(Path("proj") / name) is expected


# (id, Dockerfile, what the shell rules see) — `~` marks a blanked character in the expectation.
VIEWS = [
    ("run-body-kept", "RUN pip install x\n", "~~~~pip install x\n"),
    ("from-blanked", "FROM nvidia/cuda:12.1\n", "~" * 21 + "\n"),
    ("env-becomes-assignment", "ENV A=1 B=2\n", "~~~~A=1 B=2\n"),
    ("continuation-kept", "RUN a && \\\n    b\n", "~~~~a && \\\n    b\n"),
    ("exec-form-blanked", 'CMD ["python", "t.py"]\n', "~" * 22 + "\n"),
    ("shell-form-cmd-kept", "CMD python t.py\n", "~~~~python t.py\n"),
    ("comment-kept", "# nvidia-smi below\nRUN nvidia-smi\n", "# nvidia-smi below\n~~~~nvidia-smi\n"),
    ("lowercase-keyword", "run echo hi\n", "~~~~echo hi\n"),
]


@pytest.mark.parametrize(("text", "expected"), [v[1:] for v in VIEWS], ids=[v[0] for v in VIEWS])
def test_shell_view_blanks_what_is_not_shell_and_keeps_offsets(text, expected):
    view = shell_view(text)
    assert len(view) == len(text)
    assert view == expected.replace("~", " ")


def test_from_instructions_are_read_from_the_file_itself():
    doc = parse_dockerfile("FROM a AS b\nRUN x\nFROM c\n")
    assert [doc.raw[s:e] for s, e in doc.instructions("FROM")] == ["a AS b", "c"]
