"""Trigger words are looked for in code only: comments and statement-level strings are blanked."""

from __future__ import annotations

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.kinds import process_bytes
from cuda2neuron.kinds._code_text import code_text


@pytest.mark.parametrize(
    ("source", "kept"),
    [
        pytest.param(b'"""Move the model to cuda."""\nimport torch\n', False, id="module-docstring"),
        pytest.param(b'def f():\n    """cuda doc"""\n    return 1\n', False, id="function-docstring"),
        pytest.param(b"'''\ncuda\n'''\n", False, id="bare-triple-quoted-statement"),
        pytest.param(b"# cuda here\nx = 1\n", False, id="comment"),
        pytest.param(b"y = 1  # to cuda\n", False, id="trailing-comment"),
        pytest.param(b'x = "cuda"\n', True, id="device-string"),
        pytest.param(b'f(\n    "cuda"\n)\n', True, id="string-argument-on-its-own-line"),
        pytest.param(b'x = \\\n    "cuda"\n', True, id="backslash-continuation"),
        pytest.param(b'"cuda".join(a)\n', True, id="string-used-in-an-expression"),
        pytest.param(b"s = '''\ncuda\n'''\n", False, id="assigned-multi-line-text"),
        pytest.param(b'EXAMPLE: str = r"""\n>>> pipe.to("cuda")\n"""\n', False, id="annotated-raw-example-constant"),
        pytest.param(b'class P:\n    doc = """\n    m.cuda()\n    """\n', False, id="class-attribute-text"),
        pytest.param(b"s = '''cuda'''\n", True, id="assigned-one-line-triple-quoted"),
        pytest.param(b's = """\ncuda\n""".format(x)\n', True, id="assigned-text-used-in-an-expression"),
        pytest.param(b's = """\ncuda\n""" "x"\n', True, id="assigned-text-concatenated"),
        pytest.param(b'f(s="""\ncuda\n""")\n', True, id="multi-line-keyword-argument"),
        pytest.param(b's = \\\n    t = """\ncuda\n"""\n', True, id="assigned-text-on-a-continuation-line"),
        pytest.param(b's == """\ncuda\n"""\n', True, id="compared-not-assigned"),
        pytest.param(b's = f"""\n{t.cuda()}\n"""\n', True, id="assigned-fstring-is-code"),
        pytest.param(b'f"""{t.cuda()}"""\n', True, id="bare-fstring-is-code"),
        pytest.param(b"x = 'f'  # cuda\n", False, id="string-starting-with-f-then-comment"),
        pytest.param(b'x = "it\'s # not a comment cuda"\n', True, id="hash-inside-a-string"),
        pytest.param(b'print("#"); t.cuda()\n', True, id="code-after-a-string-with-a-hash"),
        pytest.param(b'x = f"{a}#"  # cuda\nm.cuda()\n', True, id="fstring-then-comment"),
        pytest.param(b"t.cuda()\n", True, id="plain-code"),
        pytest.param(b'rb"""\ncuda\n"""\n', False, id="prefixed-bare-string"),
        pytest.param(b'if x in"cuda":\n    pass\n', True, id="string-right-after-a-keyword"),
        pytest.param(b'x = "a\\"b"  # cuda\n', False, id="escaped-quote-then-comment"),
        pytest.param(b'"""a "" b \\""" cuda"""\n', False, id="quotes-and-escapes-in-a-docstring"),
        pytest.param(b'"""a""""\ncuda\n', True, id="four-quotes-end-the-docstring-early"),
        pytest.param(b'f((\n"""\ncuda\n"""))\n', True, id="string-inside-nested-brackets"),
        pytest.param(b'f(a)[0]\n"""\ncuda\n"""\n', False, id="brackets-closed-before-a-docstring"),
    ],
)
def test_code_text(source, kept):
    out = code_text(source)
    assert len(out) == len(source)  # offsets are kept
    assert (b"cuda" in out) is kept


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('"""Runs on CUDA devices via torch.cuda."""\nimport torch\n', id="docstring-only"),
        pytest.param("import torch\n# x = x.cuda()\nprint(1)\n", id="commented-out-code"),
    ],
)
def test_files_whose_words_are_only_prose_are_not_parsed(source, monkeypatch):
    import cuda2neuron.python as python

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed a file whose CUDA words are only in prose")

    monkeypatch.setattr(python, "parse_bytes", no_parse)
    result = process_bytes("m.py", source.encode(), Config(), RunOptions(fix=True))
    assert result.error is None and result.findings == ()
