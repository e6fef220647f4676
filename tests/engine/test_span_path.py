"""The span path (kinds/_span_path.py): a file whose woken rules all have detectors that decide
it gets its fixes spliced into the text, round after round, with no libcst tree; what it returns
must be what the libcst path returns, byte for byte (output and findings), and anything it cannot
reproduce goes to libcst from the original bytes.

Each case runs ``process_python_findings`` twice: as the engine runs it, and with the span path
switched off (libcst's fixed point). Only CN101 is selected, so that the rule with a fix-producing
detector is the only one woken (the other rules a ``.cuda()`` file wakes have no detector yet).
"""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import _python
from cuda2neuron.kinds._python import process_python_findings, span_path_files
from cuda2neuron.kinds import catalog

_ONLY_CN101 = Config(select=("CN101",))
_FIX = RunOptions(fix=True)


def _both(monkeypatch, source: str, options: RunOptions = _FIX, path: str = "m.py"):
    data = source.encode("utf-8")
    before = span_path_files()
    spanned = process_python_findings(path, data, _ONLY_CN101, options)
    taken = span_path_files() - before
    with monkeypatch.context() as m:
        m.setattr(_python, "fixed_by_spans", lambda *args, **kwargs: None)
        parsed = process_python_findings(path, data, _ONLY_CN101, options)
    return taken, spanned, parsed


# (source): each taken by the span path, and equal to libcst's output and findings.
TAKEN = [
    pytest.param("model.cuda()\n", id="one-fix"),
    pytest.param("x = x.cuda(non_blocking=True)\ny = y.cuda()\n", id="two-lines"),
    pytest.param("a = f(x.cuda(), y.cuda())\n", id="two-on-one-line"),
    pytest.param("y = (x.cuda())\nz = ((w.cuda()))\n", id="own-parentheses"),
    pytest.param("s = 'héllo'; m = m.cuda(); t = 'ü'\nn = n.cuda()\n", id="non-ascii-around"),
    pytest.param("m = m.cuda()\r\nn = n.cuda()\r\n", id="crlf"),
    pytest.param("m = m.cuda()\rn = n.cuda()\r", id="lone-cr"),
    pytest.param("m = m.cuda()  # cuda2neuron: ignore[CN101]\nn = n.cuda()\n", id="suppressed-one"),
    # Round 2 wakes CN101 again (the override keeps the word) and reports the override: its span
    # is placed in the file as read, behind a fix that changed the line lengths above it.
    pytest.param("m = m.cuda(); k = z.cuda()\nclass M:\n    def cuda(self):\n        pass\n", id="second-round-finding-located"),
    pytest.param("class M:\n    def cuda(self):\n        return super().cuda(*a)\nm = m.cuda()\n", id="left-findings-below-and-above"),
]


@pytest.mark.parametrize("source", TAKEN)
def test_span_path_equals_libcst(monkeypatch, source):
    taken, spanned, parsed = _both(monkeypatch, source)
    assert taken == 1, "the span path did not take the file"
    assert spanned == parsed
    assert spanned[0] is not None and any(f.applied for f in spanned[1])


# (source): left to libcst, which returns what it always did.
FALLBACK = [
    # The inner call's fix lies inside the outer one's: libcst applies the outer first.
    pytest.param("x = a.cuda().cuda()\n", id="overlapping-fixes"),
    # The detector is unsure of a device argument: nothing is spliced, not even the other fix.
    pytest.param("m = m.cuda()\nn = n.cuda(rank)\n", id="one-fix-unsure"),
    pytest.param("m = m.cuda(\n    non_blocking=True)\n", id="across-lines"),
]


@pytest.mark.parametrize("source", FALLBACK)
def test_span_path_falls_back(monkeypatch, source):
    taken, spanned, parsed = _both(monkeypatch, source)
    assert taken == 0
    assert spanned == parsed
    assert spanned[0] is not None


def test_unsure_in_a_later_round_falls_back_from_the_original_bytes(monkeypatch):
    """Round 1 decides and splices; round 2's detector is unsure: the file goes to libcst as
    read, and the result is libcst's, not a half-spliced text."""
    rule = catalog()["CN101"]
    real = rule.detect.__func__
    calls = []

    def second_unsure(cls, file, settings):
        calls.append(file.text)
        return real(cls, file, settings) if len(calls) == 1 else None

    source = "m = m.cuda()\nclass M:\n    def cuda(self):\n        pass\n"
    monkeypatch.setattr(rule, "detect", classmethod(second_unsure))
    taken, spanned, parsed = _both(monkeypatch, source)
    # Round 1 on the file as read, round 2 on the spliced text (then the libcst run's own look).
    assert calls[:2] == [source, source.replace("m.cuda()", 'm.to("neuron")')]
    assert taken == 0
    assert spanned == parsed
    assert spanned[0] == b'm = m.to("neuron")\nclass M:\n    def cuda(self):\n        pass\n'


def test_check_is_unchanged_by_the_span_path(monkeypatch):
    """Without --fix nothing is spliced: the detectors' findings, as before."""
    taken, spanned, parsed = _both(monkeypatch, "model.cuda()\n", RunOptions())
    assert taken == 0
    assert spanned == parsed == (None, spanned[1])
    assert spanned[1] and spanned[1][0].fix is not None


# h42d: another accelerator's branch (CN112) fences CN101 out on the span path, every round:
# the `.cuda()` outside moves, the one inside stays, as libcst's fixed point leaves it.
FENCED = [
    pytest.param("if x.device.type == 'mps':\n    y = x.cuda()\nz = w.cuda()\n", id="block-fenced"),
    pytest.param("y = x.cuda() if torch.version.hip else x.cpu()\nz = w.cuda()\n", id="if-expression-fenced"),
    pytest.param("if d.type == 'xpu':\n    y = 1\nz = w.cuda()\n", id="quiet-fence-silent"),
]


@pytest.mark.parametrize("source", FENCED)
def test_span_path_keeps_fences(monkeypatch, source):
    data = ("import torch\n" + source).encode("utf-8")
    config = Config(select=("CN101", "CN112"))
    before = span_path_files()
    spanned = process_python_findings("m.py", data, config, _FIX)
    taken = span_path_files() - before
    with monkeypatch.context() as m:
        m.setattr(_python, "fixed_by_spans", lambda *args, **kwargs: None)
        parsed = process_python_findings("m.py", data, config, _FIX)
    assert taken == 1, "the span path did not take the file"
    assert spanned == parsed


# h42c: CN201's moves, spliced where CN201 alone is selected (its detector records its edits).
_ONLY_CN201 = Config(select=("CN201",))

TAKEN_CN201 = [
    pytest.param("import torch\ntorch.cuda.synchronize()\ntorch.cuda.empty_cache()\n", id="statements"),
    pytest.param("import torch\nif torch.cuda.is_available():\n    torch.cuda.empty_cache()\n", id="test-before-moves"),
    pytest.param("import torch as th\ns = 'é'; (th . cuda . synchronize)()\n", id="alias-spaced-parenthesized"),
    pytest.param("import torch\ntorch.cuda.reset_max_memory_allocated()\nn = 0\nn += torch.cuda.memory_cached(0)\n", id="deprecated-aliases"),
]


@pytest.mark.parametrize("source", TAKEN_CN201)
def test_span_path_equals_libcst_cn201(monkeypatch, source):
    data = source.encode("utf-8")
    before = span_path_files()
    spanned = process_python_findings("m.py", data, _ONLY_CN201, _FIX)
    taken = span_path_files() - before
    with monkeypatch.context() as m:
        m.setattr(_python, "fixed_by_spans", lambda *args, **kwargs: None)
        parsed = process_python_findings("m.py", data, _ONLY_CN201, _FIX)
    assert taken == 1, "the span path did not take the file"
    assert spanned == parsed
    assert spanned[0] is not None and any(f.applied for f in spanned[1])


# CN302's fixes (h42f): the device literal made "neuron" and a dtype inserted after it, spliced;
# the three autocast rules selected, as a file that says "autocast" and "cuda" wakes them.
_AMP = Config(select=("CN301", "CN302", "CN303"))
AMP_TAKEN = [
    pytest.param("import torch\nwith torch.autocast('cuda'):\n    y = m(x)\n", id="CN302-dtype-inserted"),
    pytest.param('import torch as t\n\n@t.amp.autocast("cuda", enabled=False)\ndef f(x):\n    return x\n', id="CN302-decorator-alias"),
    pytest.param("import torch\nwith torch.autocast(device_type=(\"cuda\"), dtype=torch.float16):\n    pass\nc = torch.autocast(kind)\n", id="CN302-dtype-kept-parentheses"),
]


@pytest.mark.parametrize("source", AMP_TAKEN)
def test_span_path_amp_equals_libcst(monkeypatch, source):
    data = source.encode("utf-8")
    before = span_path_files()
    spanned = process_python_findings("m.py", data, _AMP, _FIX)
    taken = span_path_files() - before
    with monkeypatch.context() as m:
        m.setattr(_python, "fixed_by_spans", lambda *args, **kwargs: None)
        parsed = process_python_findings("m.py", data, _AMP, _FIX)
    assert taken == 1, "the span path did not take the file"
    assert spanned == parsed
    assert spanned[0] is not None and any(f.applied for f in spanned[1])


def test_span_path_old_autocast_equals_libcst(monkeypatch):
    """CN301's fix beside CN302's in one file: both spliced in one round."""
    source = "import torch\nwith torch.cuda.amp.autocast():\n    y = m(x)\nwith torch.autocast('cuda'):\n    z = m(x)\n"
    data = source.encode("utf-8")
    before = span_path_files()
    spanned = process_python_findings("m.py", data, _AMP, _FIX)
    taken = span_path_files() - before
    with monkeypatch.context() as m:
        m.setattr(_python, "fixed_by_spans", lambda *args, **kwargs: None)
        parsed = process_python_findings("m.py", data, _AMP, _FIX)
    assert taken == 1
    assert spanned == parsed
    assert spanned[0] is not None and b"cuda" not in spanned[0]
