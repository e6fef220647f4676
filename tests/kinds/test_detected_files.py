"""A file no edit can touch, whose woken rules all have detectors, is never parsed by libcst.

Its findings come from the detectors on CPython's ``ast`` (kinds/_python.py's ``_detected``) and
are the ones the libcst path returns; a file where a fix would land, or a woken rule has no
detector, still goes to libcst. tests/rules/test_detectors.py holds the detectors to their
visitors; this holds the engine to the choice.
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import _python
from cuda2neuron.kinds._python import process_python_findings

REPORT_ONLY = b"import torch\nfrom torch import float64\nlayer = torch.nn.Linear(4, 4, dtype=float64)\n"  # CN801, no fix
UNSAFE_FIX = b"import torch\nx = torch.zeros(3, dtype=torch.float64, device=device)\ny = y.double()\n"
NO_FINDING = b"import torch\nbetas = torch.linspace(1e-4, 2e-2, 1000, dtype=torch.float64).numpy()\n"
# CN627 reported with no fix; CN111 and CN627 where their visitors attach a (safe) fix.
SETTING_REPORTED = b"from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', deepspeed='ds.json')\n"
ORDINAL = b'm = AutoModel.from_pretrained("x", device_map={"": 0})\n'
PORTED = b"m = load('x', attn_implementation='flash_attention_2')\n"
# Decided by gates (issue 42, h42t): CN619's word on other objects, the compile family's word
# with no call that compiles a model.
FLOAT8_FIELDS = b"import torch\nif cfg.float8_enabled:\n    w = w.to(cfg.float8_dtype)\n"
COMPILE_WORD = b"import torch\nimport regex\np = regex.compile(pat)\nok = torch.compiler.is_compiling()\n"
# CN801 and a rule with no detector (CN201: torch.cuda calls) woken together.
MIXED = b"import torch\nx = x.to(torch.float64)\ntorch.cuda.synchronize()\n"


@pytest.fixture
def parses(monkeypatch):
    """The files the libcst path parses, by content."""
    seen: list[bytes] = []
    real = _python._parsed_file

    def spy(path, data, *args, **kwargs):
        seen.append(data)
        return real(path, data, *args, **kwargs)

    monkeypatch.setattr(_python, "_parsed_file", spy)
    return seen


def _through_libcst(monkeypatch, data: bytes, options: RunOptions):
    with monkeypatch.context() as m:
        m.setattr(_python, "_detected", lambda *args: None)
        return process_python_findings("m.py", data, Config(), options)


@pytest.mark.parametrize(
    ("data", "options"),
    [
        pytest.param(REPORT_ONLY, RunOptions(), id="check-report-only"),
        pytest.param(UNSAFE_FIX, RunOptions(), id="check-unsafe-fix-shown"),
        pytest.param(UNSAFE_FIX, RunOptions(fix=True), id="migrate-unsafe-fix-not-applied"),
        pytest.param(REPORT_ONLY, RunOptions(fix=True, unsafe=True), id="migrate-unsafe-nothing-to-apply"),
        pytest.param(NO_FINDING, RunOptions(fix=True), id="migrate-no-finding"),
        pytest.param(SETTING_REPORTED, RunOptions(fix=True), id="migrate-cn627-report-only"),
        pytest.param(FLOAT8_FIELDS, RunOptions(fix=True), id="migrate-cn619-gate"),
        pytest.param(COMPILE_WORD, RunOptions(fix=True), id="migrate-compile-family-gate"),
    ],
)
def test_no_edit_skips_libcst(monkeypatch, parses, data, options):
    new, findings = process_python_findings("m.py", data, Config(), options)
    assert parses == []
    assert (new, findings) == _through_libcst(monkeypatch, data, options)


@pytest.mark.parametrize(
    ("data", "options"),
    [
        pytest.param(UNSAFE_FIX, RunOptions(fix=True, unsafe=True), id="unsafe-fix-lands"),
        pytest.param(MIXED, RunOptions(), id="a-rule-without-detector"),
        pytest.param(b"import torch\nmsg = f'{x.to(torch.float64)}'\n", RunOptions(), id="detector-unsure"),
        pytest.param(ORDINAL, RunOptions(fix=True), id="cn111-safe-fix-lands"),
        pytest.param(PORTED, RunOptions(), id="cn627-fix-text-left-to-libcst"),
    ],
)
def test_libcst_where_needed(monkeypatch, parses, data, options):
    new, findings = process_python_findings("m.py", data, Config(), options)
    assert parses == [data]
    assert findings
    assert (new, findings) == _through_libcst(monkeypatch, data, options)
