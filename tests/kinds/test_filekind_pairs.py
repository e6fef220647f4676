"""Fixture pairs for non-Python files: ``tests/fixtures/filekinds/NAME.in.EXT`` -> ``NAME.out.EXT``
plus ``NAME.findings.txt``, migrated as the file ``NAME.EXT`` (so ``requirements-gpu.in.txt`` is
read as ``requirements-gpu.txt``). ``pytest --update-fixtures`` rewrites the expected files;
review their diff like code. Every pair is also checked for idempotence and for still being a
valid file of its kind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuda2neuron.core import Config
from cuda2neuron.workspace import fix_source

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FIXTURES = Path(__file__).parents[1] / "fixtures" / "filekinds"
IN_FILES = sorted(FIXTURES.glob("*.in.*"))
# Pinned to CN101 (the engine's exemplar) and this family so that other rule families landing do
# not churn these outputs; notebooks under the whole catalog are covered by
# test_kernels_ecosystem.py.
CONFIG = Config(select=("CN101", "CN7"))


def _render(findings) -> str:
    lines = []
    for f in findings:
        state = "applied" if f.applied else ("fixable" if f.fix else "manual")
        lines.append(f"{f.span.start_line}:{f.span.start_col} {f.code} {f.name} [{state}] {f.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def _still_valid(out: bytes, name: str) -> None:
    if name.endswith(".ipynb"):
        json.loads(out)
    elif name.endswith(".toml"):
        tomllib.loads(out.decode("utf-8"))
    elif name.endswith(".sh") and shutil.which("bash"):
        check = subprocess.run(["bash", "-n"], input=out, capture_output=True)
        assert check.returncode == 0, check.stderr.decode()


@pytest.mark.parametrize("in_path", IN_FILES, ids=[p.name for p in IN_FILES])
def test_filekind_pair(in_path: Path, request):
    stem, _, ext = in_path.name.partition(".in.")
    logical = f"{stem}.{ext}"
    out_path = in_path.with_name(f"{stem}.out.{ext}")
    findings_path = in_path.with_name(f"{stem}.findings.txt")
    source = in_path.read_bytes()
    fixed, findings = fix_source(source, logical, CONFIG)
    rendered = _render(findings)
    if request.config.getoption("--update-fixtures"):
        out_path.write_bytes(fixed)
        findings_path.write_text(rendered, encoding="utf-8")
    assert fixed == out_path.read_bytes()
    assert rendered == findings_path.read_text(encoding="utf-8")
    _still_valid(fixed, logical)
    again, _ = fix_source(fixed, logical, CONFIG)
    assert again == fixed, "second run changed the output"
