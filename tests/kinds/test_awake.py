"""The Python kind's wake step: which rules run on a file, asked once per word and per shared test.

``_awake`` must answer exactly what asking every rule on its own answers (its trigger words in
the code, then its ``wakes``), while running a ``wakes`` function shared by several rules only
once per file when it cannot tell those rules apart (it never reads ``cls``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from cuda2neuron.core import Config, ProjectFacts, Rule, RuleDefinitionError, RunOptions, has_trigger, key_folded
from cuda2neuron.kinds import _python
from cuda2neuron.kinds._catalog import rules_for
from cuda2neuron.kinds._code_text import code_text
from cuda2neuron.kinds._python import _awake, python_triggers

CALLS: list[str] = []


def _shared(cls: type[Rule], code: bytes) -> bool:  # noqa: ARG001 - a classmethod's cls, unused on purpose
    CALLS.append("shared")
    return b"yes" in code


def _by_class(cls: type[Rule], code: bytes) -> bool:
    CALLS.append(cls.code)
    return cls.code.encode() in code


class _SharedA(Rule):
    """Test rule: a wake test shared with _SharedB that does not read cls."""

    abstract = True
    code, name, triggers = "CN981", "shared-a", ("alpha",)
    wakes = classmethod(_shared)


class _SharedB(Rule):
    """Test rule: the same wake test as _SharedA."""

    abstract = True
    code, name, triggers = "CN982", "shared-b", ("alpha", "beta")
    wakes = classmethod(_shared)


class _ClassA(Rule):
    """Test rule: a shared wake function that reads cls, so it answers per rule."""

    abstract = True
    code, name, triggers = "CN983", "class-a", ("alpha",)
    wakes = classmethod(_by_class)


class _ClassB(Rule):
    """Test rule: the same cls-reading wake function as _ClassA."""

    abstract = True
    code, name, triggers = "CN984", "class-b", ("alpha",)
    wakes = classmethod(_by_class)


class _Default(Rule):
    """Test rule: the default wake test (always yes)."""

    abstract = True
    code, name, triggers = "CN985", "default", ("gamma",)


class _Named(Rule):
    """Test rule: reports only references to pkg.sub.Widget (``Rule.reports_names``)."""

    abstract = True
    code, name, triggers = "CN988", "named", ("Widget",)
    reports_names = ("pkg.sub.Widget",)


RULES = (_SharedA, _SharedB, _ClassA, _ClassB, _Default, _Named)


def _spelled(rule: type[Rule], code: bytes) -> bool:
    """The gate of ``Rule.reports_names`` spelled plainly: a last part as a whole word."""
    parts = {n.rpartition(".")[2] for n in rule.reports_names}
    return not parts or any(re.search(rb"(?<![A-Za-z0-9_])" + p.encode() + rb"(?![A-Za-z0-9_])", code) for p in parts)


def _one_by_one(code: bytes) -> tuple[type[Rule], ...]:
    return tuple(r for r in RULES if has_trigger(code, python_triggers((r,))) and _spelled(r, code) and r.wakes(code))


@pytest.mark.parametrize(
    ("code", "awake", "calls"),
    [
        pytest.param(b"nothing here", (), [], id="no-word-no-test"),
        pytest.param(b"alpha yes", ("CN981", "CN982"), ["shared", "CN983", "CN984"], id="shared-test-runs-once"),
        pytest.param(b"beta yes", ("CN982",), ["shared"], id="second-word-of-a-rule"),
        pytest.param(b"alpha no", (), ["shared", "CN983", "CN984"], id="shared-test-says-no-for-both"),
        pytest.param(b"alpha CN984 gamma", ("CN984", "CN985"), ["shared", "CN983", "CN984"], id="cls-reading-test-runs-per-rule"),
        pytest.param(b"w = BigWidget()", (), [], id="reported-name-inside-a-longer-name"),
        pytest.param(b"w = pkg.sub.Widget()", ("CN988",), [], id="reported-name-at-its-use"),
        pytest.param(b"from pkg.sub import Widget as W\nw = W()", ("CN988",), [], id="reported-name-in-its-import"),
        pytest.param(b"Widgets = 1\nw = Widget_()", (), [], id="reported-name-with-more-letters"),
    ],
)
def test_awake_matches_asking_each_rule(code: bytes, awake: tuple[str, ...], calls: list[str]) -> None:
    CALLS.clear()
    got = _awake(RULES, code, ())
    assert [r.code for r in got] == list(awake)
    assert CALLS == calls
    assert got == _one_by_one(code)


def test_project_words_wake_rules_that_use_the_sweep() -> None:
    class _Project(Rule):
        """Test rule: woken by the project sweep's words."""

        abstract = True
        code, name, triggers = "CN986", "project", ("delta",)
        project_triggers = True

    assert _awake((_Project,), b"from .ops import fused_norm", (b"fused_norm",)) == (_Project,)
    assert _awake((_Project,), b"from .ops import other", (b"fused_norm",)) == ()


# A trigger word of letters, digits and _ is searched in the file's distinct runs of such
# characters, the others in the whole code: the rules woken must be those a plain search wakes.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCES = sorted(p for p in FIXTURES.rglob("*.py"))


def _has_word(rule: type[Rule], code: bytes) -> bool:
    """A trigger word of ``rule`` in ``code``, spelled plainly: as written, or both folded as
    setting keys compare for a rule that compares them (``Rule.triggers_as_keys``)."""
    if rule.triggers_as_keys:
        return any(key_folded(t.encode()) in key_folded(code) for t in rule.triggers)
    return any(t.encode() in code for t in rule.triggers)


def _plain(rule_types, code: bytes):
    return tuple(r for r in rule_types if _has_word(r, code) and _spelled(r, code) and r.wakes(code))


def test_fixtures_are_there():
    assert len(SOURCES) > 100


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(b"x = y.is_cuda\n", id="word-inside-an-identifier"),
        pytest.param(b"import torch.cuda as tc\n", id="word-after-a-dot"),
        pytest.param(b"m.to(device)\n", id="word-with-punctuation"),
        pytest.param(b"x = 'cu' + 'da'\n", id="word-split-by-punctuation"),
        pytest.param("name = 'δcudaδ'\n".encode(), id="word-between-non-ascii-bytes"),
        pytest.param(b"from torch.nn.parallel import DistributedDataParallel as DDP\n", id="reported-name-inside-a-name"),
        pytest.param(b"import torch.nn as nn\nm = nn.DataParallel(m)\n", id="reported-name-whole"),
        pytest.param(b"p.add_argument('--Use-Flash-Attn', default=True)\n", id="setting-key-in-another-spelling"),
        # Words with punctuation are searched in the code only once their longest run of word
        # bytes is among the file's runs: present, absent, and present only apart.
        pytest.param(b"import torch.backends.cudnn\n", id="punctuated-word-present"),
        pytest.param(b"x = torch.backends.mps\n", id="punctuated-word-its-longest-run-absent"),
        pytest.param(b"s = 'torch' + '.backends' + '.cudnn'\nt = cuda_ok\n", id="punctuated-word-its-runs-apart"),
        pytest.param(b"d = 'cuda:0'\n", id="punctuated-word-quoted"),
    ],
)
def test_small_cases_match_a_plain_search(code):
    rule_types = tuple(r for r in rules_for(Config(), "t.py") if "python" in r.file_kinds)
    assert _python._awake(rule_types, code, ()) == _plain(rule_types, code)


def test_every_fixture_wakes_the_same_rules():
    rule_types = tuple(r for r in rules_for(Config(), "t.py") if "python" in r.file_kinds)
    differ = []
    for path in SOURCES:
        code = code_text(path.read_bytes())
        if _python._awake(rule_types, code, ()) != _plain(rule_types, code):
            differ.append(str(path.relative_to(FIXTURES)))
    assert differ == []


# `Rule.applies`: a rule that says it cannot fire under a run's settings is never instantiated,
# and `rules_for` selects the same rules for every file of a config without per-file ignores.
class _OnlyWithKernels(Rule):
    """Test rule: fires only where the project sweep found kernel modules."""

    abstract = True
    code, name, triggers = "CN987", "only-with-kernels", ("omicron",)
    instances = 0

    @classmethod
    def applies(cls, settings) -> bool:  # noqa: ANN001
        return bool(settings.project.kernel_modules)

    def __init__(self, context) -> None:  # noqa: ANN001
        super().__init__(context)
        type(self).instances += 1


@pytest.mark.parametrize(
    ("kernels", "instances"),
    [pytest.param(frozenset(), 0, id="no-sweep-facts-never-instantiated"), pytest.param(frozenset({"pkg.ops"}), 1, id="facts-instantiate-it")],
)
def test_applies_decides_before_the_parse(monkeypatch, kernels, instances):
    monkeypatch.setattr(_python, "rules_for", lambda config, path: (_OnlyWithKernels,))
    _python._python_rules.cache_clear()
    _OnlyWithKernels.instances = 0
    config = Config()
    config = replace(config, settings=replace(config.settings, project=ProjectFacts(kernel_modules=kernels)))
    _python.process_python_findings("t.py", b"omicron = 1\n", config, RunOptions())
    assert _OnlyWithKernels.instances == instances


def test_rules_for_is_the_same_for_every_file_without_per_file_ignores():
    config = Config()
    assert rules_for(config, "a/b.py") == rules_for(config, "c.py") == rules_for(config)
    assert rules_for(config, "a/b.py") is rules_for(config, "c.py")  # worked out once


# The runs of word bytes come from a translation and a split, not a regular expression: the
# same distinct runs as ``\w+`` on a bytes pattern, on every fixture and on the edge bytes.
@pytest.mark.parametrize(
    "code",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"a_b1 c\td\x0be\x0cf\rg\nh", id="ascii-whitespace-separates"),
        pytest.param("é cuda_é δx".encode(), id="non-ascii-bytes-separate"),
        pytest.param(b"x.to(cuda:0)[1]{2}", id="punctuation"),
        pytest.param(b"__init__ 0x1F 1e5 _", id="digits-and-underscores"),
        pytest.param(bytes(range(256)), id="every-byte"),
    ],
)
def test_word_runs_are_the_word_regex_runs(code):
    assert set(_python.word_runs(code).split(b"\n")) - {b""} == set(re.findall(rb"\w+", code))


def test_word_runs_on_every_fixture():
    for path in SOURCES:
        code = code_text(path.read_bytes())
        assert set(_python.word_runs(code).split(b"\n")) - {b""} == set(re.findall(rb"\w+", code)), path


def test_reports_names_must_be_dotted_names():
    with pytest.raises(RuleDefinitionError, match="reports_names"):

        class _Bad(Rule):  # noqa: F841 - defining it is the test
            """Test rule: a name that is not a dotted name.

            ## What it does
            Nothing.

            ## Why is this bad?
            It is not.

            ## Example
            None.

            ## Fix safety
            No fix.
            """

            code, name, triggers = "CN989", "bad-names", ("x",)
            reports_names = ("torch.nn.DataParallel(",)
