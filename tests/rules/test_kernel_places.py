"""A finding that names the file's own CUDA-only code says where it is (``file:line``), in the
file as read: the kernel index is built during the walk, and once a fix has added or dropped an
import the later rounds' lines have moved (RuleContext.mark, resolved by the engine)."""

from __future__ import annotations

import pytest

from cuda2neuron.workspace import fix_source

# Two CUDA imports the fixes drop and one they add: every line below them moves by one.
_HEAD = '"""Ops."""\nfrom torch.cuda.amp import GradScaler\nfrom torch.cuda.amp import autocast\nimport triton\n'
_STEP = "\n\ndef step(p):\n    scaler = GradScaler()\n    with autocast():\n        launch(p)\n    return scaler\n"

CASES = [
    pytest.param(
        "\n\n@triton.jit\ndef _k(x_ptr):\n    pass\n\n\n"
        "def launch(x):\n    assert x.device.type == 'cuda', 'CUDA tensors only'\n    _k[(1,)](x)\n",
        "the triton kernel `_k` at ops.py:8",
        id="a-kernel-of-the-file",
    ),
    pytest.param(
        "\n\n@triton.jit\ndef _k(x_ptr):\n    pass\n\n\ndef fused(x):\n    _k[(1,)](x)\n\n\n"
        "def launch(x):\n    assert x.device.type == 'cuda', 'CUDA tensors only'\n    fused(x)\n",
        "`fused` at ops.py:12, which calls the triton kernel `_k` at ops.py:8",
        id="a-function-that-calls-it",
    ),
]


@pytest.mark.parametrize(("body", "named"), CASES)
def test_a_held_finding_names_the_sink_by_its_line_in_the_file_as_read(body: str, named: str) -> None:
    source = _HEAD + body + _STEP
    out, findings = fix_source(source, "pkg/ops.py")
    assert out.count("\n") != source.count("\n")  # the fixes moved the lines
    (gate,) = [f for f in findings if f.code == "CN103"]
    assert gate.message.endswith(named), gate.message
    line = int(named.rpartition(":")[2])
    assert source.splitlines()[line - 1].startswith("def "), "the place is the def of the named code"
