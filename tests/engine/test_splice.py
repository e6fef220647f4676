"""A rewritten module's code spliced from the file as read equals libcst's whole code generation,
and the statements no fix touched are not generated again."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from cuda2neuron.core import Config
from cuda2neuron.kinds import rules_for
from cuda2neuron.python import fix_module, parse_bytes
from cuda2neuron.python._splice import Splicer

PAIRS = Path(__file__).resolve().parents[1] / "fixtures" / "pairs"


def _fixed(source: str) -> tuple[cst.Module, cst.Module]:
    module = parse_bytes(source.encode())
    rules = tuple(r for r in rules_for(Config(), "x.py") if "python" in r.file_kinds)
    outcome = fix_module(module, rules, "x.py", Config().settings, unsafe=True, source=source)
    return module, outcome.module


CASES = [
    pytest.param("import torch\nx = x.cuda()\n", True, id="one-line"),
    pytest.param("# header\n\nimport torch\n\n\n# about f\n@dec\n@dec2(\n    1)\ndef f(x):\n    return x.cuda()\n\n\ny = 1\n", True, id="header-decorators-leading-comments"),
    pytest.param("import torch; x = x.cuda(); y = 2\nz = torch.device('cuda')\n", True, id="semicolons"),
    pytest.param("import torch\nclass A:\n    def f(self, x):\n        return x.cuda()\n        # block footer\n\n# module footer\n", True, id="block-and-module-footer"),
    pytest.param("import torch\nif x:\n    y = x.cuda()\nelse:\n    y = x\nz = '''\nx.cuda()\n'''\n", True, id="multi-line-string"),
    pytest.param("x = x.cuda()\ntorch.cuda.synchronize()\n", True, id="import-added"),
    pytest.param("import torch\nx = x.cuda()", False, id="no-trailing-newline"),
    pytest.param("import torch\r\nx = x.cuda()\r\n", False, id="crlf"),
    pytest.param("import torch\nx = \\\n    x.cuda()\n", True, id="continuation"),
    pytest.param("# only a comment\n", True, id="no-statement"),
    pytest.param("", False, id="empty"),
    # Edits inside blocks: the statements around them are written from their parsed text.
    pytest.param("import torch\ndef main():\n    a = 1\n\n    # about b\n    b = 2; c = 3\n"
                 "    x = x.cuda()\n    d = 4\n", True, id="nested-edit-between-statements"),
    pytest.param("import torch\nclass A:\n    @staticmethod\n    def f(x):\n        if x:\n"
                 "            y = 1\n            y = x.cuda()\n        elif y:\n            pass\n"
                 "            # elif footer\n        else:\n            z = 2\n            z = x.cuda()\n"
                 "        return y\n    g = 1\n", True, id="nested-class-if-elif-else"),
    pytest.param("import torch\ndef f(x):\n    try:\n        a = 1\n        a = x.cuda()\n    except E:\n"
                 "        b = 1\n        b = x.cuda()\n    else:\n        c = 1\n    finally:\n        d = 1\n"
                 "        d = x.cuda()\n    for i in r:\n        e = 1\n        e = x.cuda()\n    else:\n"
                 "        f = 1\n    while w:\n        g = 1\n        g = x.cuda()\n    with m:\n        h = 1\n"
                 "        h = x.cuda()\n    return 0\n", True, id="nested-try-for-while-with"),
    pytest.param("import torch\nasync def f(x):\n\tasync with m:\n\t\tk = 1\n\t\tk = x.cuda()\n"
                 "\tasync for i in r:\n\t\tj = 1\n\t\tj = x.cuda()\n\treturn 0\n", True, id="nested-async-tabs"),
    pytest.param("import torch\ndef f(x):\n    if a: b = 1\n    y = x.cuda()\n    if c: d = x.cuda()\n"
                 "    return y\n", True, id="nested-one-line-suites"),
]


# (source, spliced): False where the module is generated whole (lone CRs and CRLF, a last line
# without newline, nothing to cut).
@pytest.mark.parametrize(("source", "spliced"), CASES)
def test_spliced_code_is_the_generated_code(source, spliced):
    first, final = _fixed(source)
    splicer = Splicer(first, source)
    assert splicer.code(final) == final.code
    assert (splicer._statement_texts() is not None) is spliced


def _pair_inputs():
    for path in sorted(PAIRS.rglob("*.in.py")):
        yield pytest.param(path, id=path.relative_to(PAIRS).as_posix())


@pytest.mark.parametrize("path", list(_pair_inputs()))
def test_spliced_code_of_every_fixture_pair(path):
    source = path.read_bytes().decode()
    first, final = _fixed(source)
    assert Splicer(first, source).code(final) == final.code


@pytest.fixture
def generated(monkeypatch) -> list[str]:
    """The names of the functions libcst generates code for while the test runs."""
    names: list[str] = []
    real = cst.FunctionDef._codegen_impl

    def counted(self, state, *args, **kwargs):
        names.append(self.name.value)
        return real(self, state, *args, **kwargs)

    monkeypatch.setattr(cst.FunctionDef, "_codegen_impl", counted)
    return names


def test_untouched_statements_are_not_generated(generated):
    source = "import torch\n" + "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20)) + "y = y.cuda()\n"
    first, final = _fixed(source)
    generated.clear()  # the fix rounds generate code of their own: only the splice is counted
    code = Splicer(first, source).code(final)
    assert code.endswith('y = y.to("neuron")\n')
    assert generated == []


def test_untouched_statements_inside_an_edited_statement_are_not_generated(generated):
    # A training script's loop is one function: an edit in it generated the whole function.
    body = "".join(f"    def g{i}(x):\n        return x + {i}\n\n" for i in range(20))
    source = f"import torch\ndef main(x):\n{body}    y = x.cuda()\n    return y\n"
    first, final = _fixed(source)
    whole = final.code
    generated.clear()
    code = Splicer(first, source).code(final)
    assert generated == ["main"]
    assert code == whole
    assert code.endswith('    y = x.to("neuron")\n    return y\n')


@pytest.mark.parametrize(("source", "spliced"), [c for c in CASES if c.values[1]])
def test_spans_within_statements_are_the_spans_in_the_file(source, spliced):
    from cuda2neuron.python import lint_module
    from cuda2neuron.python._positions import spans_in_statements, spans_of

    module = parse_bytes(source.encode())
    lines = Splicer(module, source).statement_lines()
    assert lines is not None
    # Every node of every statement, located both ways.
    located = []
    for statement in module.body:
        stack = [statement]
        while stack:
            node = stack.pop()
            located.append((node, statement))
            stack.extend(node.children)
    assert spans_in_statements(module, located, lines) == spans_of(module, [n for n, _ in located])
    rules = tuple(r for r in rules_for(Config(), "x.py") if "python" in r.file_kinds)
    assert lint_module(parse_bytes(source.encode()), rules, "x.py", Config().settings, source) == lint_module(
        parse_bytes(source.encode()), rules, "x.py", Config().settings)


def test_a_finding_is_located_without_generating_the_statements_above_it(generated):
    from cuda2neuron.python import lint_module

    source = "import torch\n" + "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(20)) + "y = y.cuda()\n"
    rules = tuple(r for r in rules_for(Config(), "x.py") if "python" in r.file_kinds)
    module = parse_bytes(source.encode())
    [finding] = [f for f in lint_module(module, rules, "x.py", Config().settings, source) if f.code == "CN101"]
    assert (finding.span.start_line, finding.span.start_col) == (62, 4)
    assert generated == []


def test_a_finding_deep_in_a_function_is_located_without_generating_the_function_above_it(generated):
    from cuda2neuron.python import lint_module

    body = "".join(f"    def g{i}(x):\n        return x + {i}\n\n" for i in range(20))
    source = f"import torch\ndef main(y):\n{body}    y = y.cuda()\n    return y\n"
    rules = tuple(r for r in rules_for(Config(), "x.py") if "python" in r.file_kinds)
    module = parse_bytes(source.encode())
    [finding] = [f for f in lint_module(module, rules, "x.py", Config().settings, source) if f.code == "CN101"]
    assert (finding.span.start_line, finding.span.start_col) == (63, 8)
    assert generated == []
