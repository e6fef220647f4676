"""`cuda2neuron suppress`: comments for today's findings, idempotent, formatting kept."""

from __future__ import annotations

import pytest

CASES = [
    pytest.param(
        "a.py",
        "import torch\nx = torch.zeros(3).cuda()\n",
        "import torch\nx = torch.zeros(3).cuda()  # cuda2neuron: ignore[CN101]\n",
        id="python-line-end",
    ),
    pytest.param(
        "a.py",
        "x = y.cuda()\r\nz = 1\r\n",
        "x = y.cuda()  # cuda2neuron: ignore[CN101]\r\nz = 1\r\n",
        id="crlf-kept",
    ),
    pytest.param(
        "a.py",
        "x = y.cuda()  # noqa: E501\n",
        "x = y.cuda()  # noqa: E501  # cuda2neuron: ignore[CN101]\n",
        id="after-another-comment",
    ),
    pytest.param(
        "a.py",
        "x = y.cuda()  # cuda2neuron: ignore[CN3]\n",
        "x = y.cuda()  # cuda2neuron: ignore[CN3, CN101]\n",
        id="merged-into-existing",
    ),
    pytest.param(
        "a.py",
        "y = f(a, \\\n  b.cuda())\n",
        "y = f(a, \\\n  b.cuda())  # cuda2neuron: ignore[CN101]\n",
        id="after-backslash-continuation",
    ),
    pytest.param(
        "a.py",
        "x = y.cuda()\nif x.is_cuda:\n    pass\n",
        "x = y.cuda()  # cuda2neuron: ignore[CN101]\nif x.is_cuda:  # cuda2neuron: ignore[CN104]\n    pass\n",
        id="several-lines",
    ),
    pytest.param(
        "run.sh",
        "export CUDA_VISIBLE_DEVICES=0\npython train.py\n",
        "export CUDA_VISIBLE_DEVICES=0  # cuda2neuron: ignore[CN701]\npython train.py\n",
        id="shell-script",
    ),
    # After a trailing backslash the comment swallowed the continuation: the command lost its
    # arguments and the next line ran on its own (issue 44). It goes on the command's last line.
    pytest.param(
        "run.sh",
        "torchrun train.py \\\n  --backend nccl \\\n  --epochs 3\necho done\n",
        "torchrun train.py \\\n  --backend nccl \\\n  --epochs 3  # cuda2neuron: ignore[CN709]\necho done\n",
        id="shell-continuation",
    ),
    pytest.param(
        "Makefile",
        "all:\n\tpython train.py \\\n\t  --device cuda \\\n\t  --epochs 3\n",
        "all:\n\tpython train.py \\\n\t  --device cuda \\\n\t  --epochs 3  # cuda2neuron: ignore[CN902]\n",
        id="makefile-continuation",
    ),
    pytest.param("a.py", "x = 1\n", "x = 1\n", id="clean-file-untouched"),
]


@pytest.mark.parametrize(("name", "source", "expected"), CASES)
def test_suppress_adds_comments_and_is_idempotent(tmp_path, run, name, source, expected):
    f = tmp_path / name
    f.write_bytes(source.encode())
    code, _, err = run("suppress", name, cwd=tmp_path)
    assert code == 0, err
    assert f.read_bytes().decode() == expected
    # Nothing is left for check, and a second run changes nothing.
    assert run("check", name, cwd=tmp_path)[0] == 0
    assert run("suppress", name, cwd=tmp_path)[2].startswith("added 0 suppression comment(s)")
    assert f.read_bytes().decode() == expected


@pytest.mark.parametrize(
    ("name", "source", "reason"),
    [
        pytest.param("Dockerfile", "FROM nvidia/cuda:12.1.0-runtime-ubuntu22.04\n", "Dockerfile", id="dockerfile"),
        pytest.param("k.cu", "__global__ void k() {}\n", "CUDA sources", id="cuda-source"),
    ],
)
def test_suppress_refuses_kinds_without_line_comments(tmp_path, run, name, source, reason):
    f = tmp_path / name
    f.write_text(source)
    code, _, err = run("suppress", name, cwd=tmp_path)
    assert code == 2
    assert f"error: {name}: not suppressed: " in err and reason in err
    assert f.read_text() == source


def test_suppress_diff_writes_nothing(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()\n")
    code, out, err = run("suppress", "--diff", "a.py", cwd=tmp_path)
    assert code == 1
    assert "+x = y.cuda()  # cuda2neuron: ignore[CN101]" in out and "would add 1" in err
    assert f.read_text() == "x = y.cuda()\n"


def test_suppress_respects_selection(tmp_path, run):
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()\nif x.is_cuda:\n    pass\n")
    assert run("suppress", "--select", "CN104", "a.py", cwd=tmp_path)[0] == 0
    assert f.read_text() == "x = y.cuda()\nif x.is_cuda:  # cuda2neuron: ignore[CN104]\n    pass\n"
