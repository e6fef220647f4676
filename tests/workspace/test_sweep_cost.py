"""The project sweep's cheaper searches answer as the patterns they replace, and it parses each
file once (issue 42: the sweep's cost outside the files' threads)."""

from __future__ import annotations

import ast
import collections
import gc
import re

import pytest

from cuda2neuron.workspace import _library_sinks, _project, discover, project_facts
from cuda2neuron.workspace._line_search import findall_at_lines
from workspace_helpers import write_tree

# The patterns the sweep searches from a word: its import lines, the library chains' import
# lines, an assignment of a name bound to a CUDA-only package (``_with_fallback``).
_ASSIGNED_TE = re.compile(rb"^[ \t]*te[ \t]*(?::[^=\n]*)?=[ \t]*(\w+)[ \t]*(?:#.*)?$", re.MULTILINE)
PATTERNS = [
    pytest.param(_project._IMPORT, b"import", id="project-import-lines"),
    pytest.param(_library_sinks._IMPORT, b"import", id="library-import-lines"),
    pytest.param(_ASSIGNED_TE, b"te", id="assignment-of-a-short-name"),
]
TEXTS = [
    pytest.param(b"import os\nfrom a.b import c as d, e\n", id="plain-and-from"),
    pytest.param(b"from .ops import (\n    norm,\n    import_me,\n)\nimport x\n", id="name-list-over-lines-holding-the-word"),
    pytest.param(b"from a import (b,\n c) ; import d\nimport e", id="statement-after-a-closing-bracket-no-final-newline"),
    pytest.param(b"x = 1  # import os\n    import y\n\timport z\n", id="word-in-a-comment-and-indented-imports"),
    pytest.param(b"s = '''\nimport fake\n'''\nreimported = 1\n", id="word-inside-another-word"),
    pytest.param(b"import a\r\nfrom b import c\r\n", id="crlf-lines"),
    pytest.param(b"te = None\nstate = te\n  te: object = local_te  # fallback\nte=x\n", id="assignments-of-te"),
    pytest.param(b"", id="empty"),
    pytest.param(b"import", id="the-word-alone"),
    pytest.param("from caf\u00e9 import cr\u00e8me\nte = \u00e9t\u00e9\n".encode(), id="non-ascii"),
]


@pytest.mark.parametrize(("pattern", "word"), PATTERNS)
@pytest.mark.parametrize("text", TEXTS)
def test_searching_from_a_word_finds_what_findall_finds(pattern, word, text):
    assert findall_at_lines(pattern, text, word) == pattern.findall(text)


def _the_one_pattern(names: list[str]) -> re.Pattern[bytes]:
    """The pattern ``_CalledOrSubclassed`` stands for (``_library_chains`` before it)."""
    alternatives = b"|".join(sorted(re.escape(n.encode()) for n in names))
    return re.compile(rb"\b(?:" + alternatives + rb")(?:\.\w+)*[ \t]*\(|^[ \t]*class[ \t][^\n]*\b(?:" + alternatives + rb")\b", re.MULTILINE)


CALLS = [
    pytest.param(["fused"], b"y = fused(x)\n", id="called"),
    pytest.param(["fused"], b"y = fused.apply (x)\n", id="called-through-its-attribute"),
    pytest.param(["fused"], b"y = unfused(x)\n", id="inside-another-word"),
    pytest.param(["fused", "g"], b"y = zfused.g(x)\n", id="a-later-name-inside-the-first-chain"),
    pytest.param(["fused"], b"p = fused\nif isinstance(m, fused): pass\n", id="named-not-called"),
    pytest.param(["Proc"], b"class A(Proc):\n    pass\n", id="a-base"),
    pytest.param(["Proc"], b"    class A(mod.Proc, B):\n", id="an-indented-class-line"),
    pytest.param(["Proc"], b"subclass A(Proc)\n", id="class-inside-a-word"),
    pytest.param(["Proc"], b"class A(Procs):\n", id="a-longer-base"),
    pytest.param(["Proc"], b"class Proc", id="the-class-itself-at-the-end"),
    pytest.param(["Proc"], b"x = 1 # class A(Proc)\n", id="class-after-code-on-the-line"),
    pytest.param(["Proc"], b"class A:\n    x = Proc\n", id="named-on-the-next-line"),
    pytest.param(["Proc"], b"class A(B):\r\n    Proc ()\r\n", id="crlf-and-a-space-before-the-bracket"),
    pytest.param(["\u00e9t\u00e9"], "x = \u00e9t\u00e9(1)\ny = a\u00e9t\u00e9(1)\n".encode(), id="non-ascii-name"),
    pytest.param(["\u00e9t\u00e9"], "y = a\u00e9t\u00e9(1)\n".encode(), id="non-ascii-name-after-a-word-byte"),
]


@pytest.mark.parametrize(("names", "text"), CALLS)
def test_called_or_subclassed_answers_as_the_one_pattern(names, text):
    assert _project._CalledOrSubclassed(names)(text) == bool(_the_one_pattern(names).search(text))


# A module the kernel chains read (it imports the Triton module) and the library chains read too
# (it calls a function that builds bitsandbytes layers): each part parsed it on its own.
TWO_CHAINS = {
    "pkg/__init__.py": "",
    "pkg/kern.py": "import triton\n\n@triton.jit\ndef k(x):\n    pass\n\ndef launch(x):\n    k[(1,)](x)\n",
    "pkg/quant.py": "import bitsandbytes as bnb\n\ndef make():\n    return bnb.nn.Linear8bitLt(1, 1)\n",
    "pkg/model.py": "from pkg.kern import launch\nfrom pkg.quant import make\n\ndef f(x):\n    launch(x)\n    return make()\n",
}


def test_the_sweep_parses_each_file_once(tmp_path, monkeypatch):
    parsed: collections.Counter[str] = collections.Counter()
    parse = ast.parse

    def counted(source, filename="<unknown>", *args, **kwargs):  # noqa: ANN001, ANN202
        parsed[filename] += 1
        return parse(source, filename, *args, **kwargs)

    monkeypatch.setattr(_project.ast, "parse", counted)
    facts = project_facts(discover([write_tree(tmp_path / "proj", TWO_CHAINS)]).files)
    # Both chains reached the model (so both parts read it); every file was parsed once at
    # most ("<unknown>": the library starts' statements, parsed alone).
    assert facts.sink("pkg.model.f") is not None
    files = {name: n for name, n in parsed.items() if name != "<unknown>"}
    assert any(name.endswith("model.py") for name in files) and set(files.values()) == {1}, parsed


@pytest.mark.parametrize("enabled", [pytest.param(True, id="collector-on-before"), pytest.param(False, id="collector-off-before")])
def test_the_sweep_runs_with_the_cyclic_collector_paused(tmp_path, monkeypatch, enabled):
    seen: list[bool] = []
    read = _project.NamePool.read

    def noted(self, data):  # noqa: ANN001, ANN202
        seen.append(gc.isenabled())
        return read(self, data)

    monkeypatch.setattr(_project.NamePool, "read", noted)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        project_facts(discover([write_tree(tmp_path / "proj", TWO_CHAINS)]).files)
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen and not any(seen), seen  # off while it parsed every file
    assert after is enabled  # and as it was once it is done
