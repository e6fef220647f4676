"""Fixture pairs: ``tests/fixtures/pairs/**/NAME.in.py`` -> ``NAME.out.py`` + ``NAME.findings.txt``.

An optional first line ``# cuda2neuron-test: key=value ...`` sets the run (target, unsafe,
amp_dtype, min_torch). ``pytest --update-fixtures`` rewrites the expected files; their diff is
reviewed like code. Each pair is also checked for idempotence and for compiling.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cuda2neuron.core import Config, Settings
from cuda2neuron.workspace import fix_source

PAIRS = Path(__file__).parent / "fixtures" / "pairs"
IN_FILES = sorted(PAIRS.rglob("*.in.py"))


def _config(source: str) -> Config:
    first = source.splitlines()[0] if source else ""
    options: dict[str, str] = {}
    if first.startswith("# cuda2neuron-test:"):
        for item in first.split(":", 1)[1].split():
            key, _, value = item.partition("=")
            options[key] = value
    settings = Settings()
    if "target" in options:
        settings = replace(settings, target=options["target"])
    if "amp_dtype" in options:
        settings = replace(settings, amp_dtype=options["amp_dtype"])
    if "min_torch" in options:
        major, minor = options["min_torch"].split(".")
        settings = replace(settings, min_torch=(int(major), int(minor)))
    return Config(unsafe_fixes=options.get("unsafe") == "true", settings=settings)


def _render_findings(findings) -> str:
    lines = []
    for f in findings:
        state = "applied" if f.applied else ("fixable" if f.fix else "manual")
        lines.append(f"{f.span.start_line}:{f.span.start_col} {f.code} {f.name} [{state}] {f.message}")
    return "\n".join(lines) + ("\n" if lines else "")


@pytest.mark.parametrize("in_path", IN_FILES, ids=[str(p.relative_to(PAIRS)) for p in IN_FILES])
def test_fixture_pair(in_path: Path, request):
    source = in_path.read_text(encoding="utf-8")
    config = _config(source)
    out_path = in_path.with_name(in_path.name.replace(".in.py", ".out.py"))
    findings_path = in_path.with_name(in_path.name.replace(".in.py", ".findings.txt"))
    fixed, findings = fix_source(source, in_path.name, config)
    rendered = _render_findings(findings)
    if request.config.getoption("--update-fixtures"):
        out_path.write_text(fixed, encoding="utf-8")
        findings_path.write_text(rendered, encoding="utf-8")
    assert fixed == out_path.read_text(encoding="utf-8")
    assert rendered == findings_path.read_text(encoding="utf-8")
    compile(fixed, str(out_path), "exec")
    again, _ = fix_source(fixed, in_path.name, config)
    assert again == fixed, "second run changed the output"
