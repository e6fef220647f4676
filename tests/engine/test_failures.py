"""Failures belong to one file, keep their traceback, and never leave a torn file behind."""

from __future__ import annotations

import os
from pathlib import Path

import libcst as cst
import pytest

from cuda2neuron.core import Config, FileStatus, Rule, RunOptions, Safety, atomic_write
from cuda2neuron.workspace import SourceFile, process_files
from cuda2neuron.kinds import _python


class _Crash(Rule):
    """Test rule that raises on a marked call."""

    abstract = True
    code, name, triggers = "CN993", "crash", ("boom",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "boom":
            raise ValueError("rule bug")


def test_a_crashing_rule_fails_only_its_file(tmp_path, monkeypatch):
    real = _python.rules_for
    monkeypatch.setattr(_python, "rules_for", lambda config, path=None: (*real(config, path), _Crash))
    bad = tmp_path / "bad.py"
    bad.write_text("boom()\nx = y.cuda()\n")
    good = tmp_path / "good.py"
    good.write_text("x = y.cuda()\n")
    results = {Path(r.path).name: r for r in process_files([SourceFile.at(bad), SourceFile.at(good)], Config(), RunOptions(fix=True), jobs=1)}
    assert results["bad.py"].status is FileStatus.FAILED
    assert results["bad.py"].error.kind == "internal"
    assert "rule bug" in results["bad.py"].error.traceback
    assert results["good.py"].status is FileStatus.CHANGED


def test_unreadable_file_is_a_typed_failure(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_text("x = y.cuda()\n")
    original = Path.read_bytes

    def deny(self):
        if self == f:
            raise PermissionError(13, "Permission denied")
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", deny)
    [result] = process_files([SourceFile.at(f)], Config(), RunOptions(fix=True), jobs=1)
    assert result.status is FileStatus.FAILED
    assert result.error.kind == "io" and "Permission denied" in result.error.message


def test_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch):
    f = tmp_path / "a.py"
    f.write_bytes(b"old\n")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(f, b"new\n")
    assert f.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]  # no temp file left


def test_parallel_run_returns_the_same_results(tmp_path):
    files = []
    for i in range(40):
        f = tmp_path / f"m{i}.py"
        f.write_text("x = y.cuda()\n" if i % 2 else "x = 1\n")
        files.append(SourceFile.at(f))
    serial = process_files(files, Config(), RunOptions(fix=True), jobs=1)
    parallel = process_files(files, Config(), RunOptions(fix=True), jobs=2)
    assert [(r.path, r.status, r.new_bytes) for r in serial] == [(r.path, r.status, r.new_bytes) for r in parallel]


class _Rewrite(Rule):
    """Test rule that replaces a marked call with the given statement text (a broken rewrite)."""

    abstract = True
    code, name, triggers = "CN992", "rewrite", ("mark",)
    fixes = frozenset({Safety.SAFE})
    replacement = ""

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "mark":
            if self.replacement == "walrus":
                # An unparenthesized walrus where Python wants parentheses: libcst builds and
                # writes it, neither CPython nor libcst reads it back.
                new = cst.NamedExpr(target=cst.Name("a"), value=cst.Integer("1"))
            else:
                new = cst.parse_expression(self.replacement)
            self.report(node, "marked", replacement=new, safety=Safety.SAFE)


@pytest.mark.parametrize(
    ("source", "replacement", "status"),
    [
        # A rewrite that neither CPython nor libcst reads is never handed back.
        pytest.param("x = mark()\n", "walrus", FileStatus.FAILED, id="bare-walrus"),
        # A file CPython's compiler refuses as a whole ('return' outside a function, as in a
        # template) is handed back where libcst reads the rewrite.
        pytest.param("x = mark()\nreturn x\n", "done", FileStatus.CHANGED, id="compiler-only-error-kept"),
        pytest.param("x = mark()\n", "(yield)", FileStatus.CHANGED, id="yield-outside-a-function"),
        # The compiler's warnings about the user's code are not failures.
        pytest.param("x = mark()\nif x is 'a':\n    pass\n", "done", FileStatus.CHANGED, id="syntax-warning"),
    ],
)
def test_rewrites_are_compile_checked(tmp_path, monkeypatch, recwarn, source, replacement, status):
    rule = type("_R", (_Rewrite,), {"replacement": replacement, "abstract": True})
    monkeypatch.setattr(_python, "rules_for", lambda config, path=None: (rule,))
    f = tmp_path / "a.py"
    f.write_text(source)
    [result] = process_files([SourceFile.at(f)], Config(), RunOptions(fix=True), jobs=1)
    assert result.status is status
    if status is FileStatus.FAILED:
        assert "the rewrite does not parse" in result.error.message
    assert not [w for w in recwarn if issubclass(w.category, SyntaxWarning)]
