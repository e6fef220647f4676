"""The engine's outputs on the fixture trees, byte for byte, against a recorded golden.

Speed work rewrites how the engine finds and applies edits (which files are parsed, how a fix
lands in the text, how a finding is located); none of it may change a byte a user sees. So the
whole of ``tests/fixtures/projects`` and ``tests/fixtures/pairs`` go through ``migrate --diff
--report x.json`` as a user runs it (the project sweep, every kind, the residual pass, the pool
for the pairs), and what comes out is compared with ``tests/fixtures/golden/``:

    RUN.diff        the unified diff (stdout), whole: a changed edit shows as a diff of diffs
    RUN.spans.txt   every finding's path, start-end span, code, status and fix safety, one a line
    outputs.sha256  a digest of the JSON report and of the text report on stderr (messages,
                    guidance, tables, summary): a megabyte of text that the two files above
                    already localize, kept as a digest only

The .md / .sarif / .html reports render the same report model as the JSON one, so the JSON's
identity stands for theirs. ``pytest tests/test_output_identity.py --update-fixtures`` records
a new golden: do that only for a change that means to alter output, and review the diff.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cuda2neuron.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOLDEN = FIXTURES / "golden"
DIGESTS = GOLDEN / "outputs.sha256"

# (run id, tree, extra options). The pairs tree runs with two workers (the pool and its IPC on
# the path), the projects one process; the second projects run covers the unsafe fixes and the
# accelerator target's other replacements. ~10 CPU-s for the three.
RUNS = [
    ("projects", "projects", ("--jobs", "1")),
    ("projects-unsafe-accelerator", "projects", ("--jobs", "1", "--unsafe-fixes", "--target", "accelerator")),
    ("pairs", "pairs", ("--jobs", "2")),
]


def _spans(report: dict) -> str:
    lines = []
    for group in ("edits", "fixable", "manual_actions"):
        for f in report[group]:
            safety = (f.get("fix") or {}).get("safety", "-")
            lines.append(f"{f['path']}:{f['line']}:{f['col']}-{f['end_line']}:{f['end_col']} {f['code']} "
                         f"{group} {f['status']} {safety}")
    return "\n".join(lines) + "\n"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_digests() -> dict[str, str]:
    if not DIGESTS.is_file():
        return {}
    return dict(line.rsplit(" ", 1) for line in DIGESTS.read_text().splitlines() if line.strip())


def _write_digest(key: str, value: str) -> None:
    digests = _read_digests()
    digests[key] = value
    DIGESTS.write_text("".join(f"{k} {v}\n" for k, v in sorted(digests.items())))


@pytest.mark.parametrize(("run", "tree", "extra"), RUNS, ids=[r[0] for r in RUNS])
def test_outputs_match_the_golden(run, tree, extra, tmp_path, monkeypatch, capfd, request):
    monkeypatch.chdir(FIXTURES)
    monkeypatch.setenv("COLUMNS", "100")  # the text report's tables wrap at the terminal's width
    # rich reads COLUMNS when its console is made, once per process: a console an earlier test
    # of this worker made keeps that test's width (80 in CI), so this run gets fresh ones.
    from cuda2neuron.cli._common import err_console, out_console

    for console in (err_console, out_console):
        monkeypatch.setattr(console, "_rich", None)
    report_path = tmp_path / "report.json"
    capfd.readouterr()
    code = main(["migrate", tree, "--diff", "--no-cache", "--report", str(report_path), *extra])
    out, err = capfd.readouterr()
    assert code == 1  # --diff: there are changes
    report_bytes = report_path.read_bytes()
    report = json.loads(report_bytes)
    assert report["failures"] == []
    actual = {
        f"{run}.diff": out,
        f"{run}.spans.txt": _spans(report),
    }
    digests = {f"{run} report.json": _digest(report_bytes), f"{run} stderr": _digest(err.encode())}
    if request.config.getoption("--update-fixtures"):
        GOLDEN.mkdir(exist_ok=True)
        for name, text in actual.items():
            (GOLDEN / name).write_bytes(text.encode("utf-8"))
        for key, value in digests.items():
            _write_digest(key, value)
        return
    for name, text in actual.items():
        expected = (GOLDEN / name).read_bytes().decode("utf-8")
        if text != expected:
            (tmp_path / name).write_bytes(text.encode("utf-8"))
            pytest.fail(f"{name} differs from the golden: diff {GOLDEN / name} {tmp_path / name}")
    recorded = _read_digests()
    for key, value in digests.items():
        if recorded.get(key) != value:
            kept = tmp_path / key.replace(" ", ".")
            kept.write_bytes(report_bytes if key.endswith("json") else err.encode())
            pytest.fail(f"{key} differs from the golden digest (the output is kept in {kept}; run this test on "
                        "the code before the change with --update-fixtures to see the old one)")
