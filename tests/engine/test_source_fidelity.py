"""Everything outside an edit survives byte for byte; bad sources fail alone, typed."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, FileStatus, RunOptions
from cuda2neuron.kinds import process_bytes
from cuda2neuron.python import parse_bytes

CASES = [
    ("lf", b"import torch\nx = y.cuda()\n", b'import torch\nx = y.to("neuron")\n'),
    ("crlf", b"import torch\r\nx = y.cuda()  # keep\r\n", b'import torch\r\nx = y.to("neuron")  # keep\r\n'),
    ("mixed-endings", b"import torch\r\nx = y.cuda()\nz = 1\r\n", b'import torch\r\nx = y.to("neuron")\nz = 1\r\n'),
    ("bom", b"\xef\xbb\xbfimport torch\nx = y.cuda()\n", b'\xef\xbb\xbfimport torch\nx = y.to("neuron")\n'),
    (
        "latin1-cookie",
        "# -*- coding: latin-1 -*-\n# café\nx = y.cuda()\n".encode("latin-1"),
        '# -*- coding: latin-1 -*-\n# café\nx = y.to("neuron")\n'.encode("latin-1"),
    ),
    ("no-final-newline", b"x = y.cuda()", b'x = y.to("neuron")'),
    ("tabs-and-comments", b"if a:\n\tx = y.cuda()  # gpu\n", b'if a:\n\tx = y.to("neuron")  # gpu\n'),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rewrite_keeps_bytes(data, expected):
    result = process_bytes("f.py", data, Config(), RunOptions(fix=True))
    assert result.status is FileStatus.CHANGED
    assert result.new_bytes == expected
    again = process_bytes("f.py", result.new_bytes, Config(), RunOptions(fix=True))
    assert again.status is FileStatus.UNCHANGED


NOOP = [
    ("empty", b""),
    ("no-trigger-is-not-parsed", b"def (:\n"),  # a syntax error without trigger words is never parsed
    ("comment-only-mention", b"# runs on cuda\nx = 1\n"),
]


@pytest.mark.parametrize("data", [c[1] for c in NOOP], ids=[c[0] for c in NOOP])
def test_untouched_sources(data):
    result = process_bytes("f.py", data, Config(), RunOptions(fix=True))
    assert result.status is FileStatus.UNCHANGED
    assert result.new_bytes is None


FAILURES = [
    ("syntax-error", b"import torch\nx = y.cuda()\ndef (:\n    pass\n", "parse", 3),
    ("binary", b"\x00\x01cuda\x02", "decode", None),
    ("bad-utf8", b"x = '\xff\xfe'.cuda()\n", "decode", None),
    ("unknown-cookie", b"# -*- coding: klingon -*-\nx = y.cuda()\n", "decode", None),
]


@pytest.mark.parametrize(("data", "kind", "line"), [c[1:] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_bad_sources_fail_typed(data, kind, line):
    result = process_bytes("bad.py", data, Config(), RunOptions(fix=True))
    assert result.status is FileStatus.FAILED
    assert result.error is not None and result.error.kind == kind
    assert result.new_bytes is None
    if line is not None:
        assert result.error.line == line


@pytest.mark.parametrize("data", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_rules_see_the_module_code_without_a_code_generation(data):
    # process_python hands rules the file as read (RuleContext.source) instead of regenerating
    # module.code; that is only right if decoding gives exactly the generated text.
    module = parse_bytes(data)
    assert data.decode(module.encoding) == module.code
