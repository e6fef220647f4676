"""Every realistic fixture project through `migrate --out`: outputs compile, a second run
changes nothing, files without edits stay byte-identical, nothing crashes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda2neuron.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_PROJECTS = ROOT / "tests" / "fixtures" / "projects"
# A migrate project carries an EXPECTED.md; validate's original/port pairs sit beside them.
PROJECTS = sorted(p for p in FIXTURE_PROJECTS.iterdir() if (p / "EXPECTED.md").is_file())
PROJECTS.append(ROOT / "examples" / "cnn_cuda")
IDS = [p.name for p in PROJECTS]


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _migrate(src: Path, out: Path, *extra: str) -> dict:
    report = out.parent / f"{out.name}.json"
    code = main(["migrate", str(src), "--out", str(out), "--report", str(report), "-q", *extra])
    data = json.loads(report.read_text())
    assert code == 0, data["failures"]
    return data


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("project", PROJECTS, ids=IDS)
def test_project_migrates_cleanly(project, unsafe, tmp_path):
    extra = ("--unsafe-fixes",) if unsafe else ()
    first = _migrate(project, tmp_path / "port", *extra)
    before, after = _files(project), _files(tmp_path / "port")
    assert after.pop(".cuda2neuron-port.json")
    assert set(before) == set(after)
    changed = {f["path"] for f in first["files"] if f["status"] == "changed"}
    for name, data in before.items():
        if not any(c.endswith(name) for c in changed):
            assert after[name] == data, f"{name} has no edits but changed"
    for name, data in after.items():
        if name.endswith(".py"):
            compile(data, name, "exec")
    second = _migrate(tmp_path / "port", tmp_path / "port2", *extra)
    assert second["summary"]["files_changed"] == 0, [f["path"] for f in second["files"] if f["status"] == "changed"]


def test_non_device_strings_come_out_byte_identical(tmp_path):
    project = FIXTURE_PROJECTS / "not_device_strings"
    for extra in ((), ("--unsafe-fixes",)):
        out = tmp_path / f"port{len(extra)}"
        data = _migrate(project, out, *extra)
        assert data["summary"]["edits"] == 0, data["edits"]
        copy = _files(out)
        copy.pop(".cuda2neuron-port.json")
        assert copy == _files(project)


def test_every_fixture_project_is_a_migrate_project_or_a_validate_pair():
    """A folder without EXPECTED.md is left out above; it must then be validate's pair."""
    for folder in sorted(p for p in FIXTURE_PROJECTS.iterdir() if p.is_dir()):
        migrate = (folder / "EXPECTED.md").is_file()
        pair = (folder / "original").is_dir() and (folder / "port").is_dir()
        assert migrate != pair, f"{folder.name}: needs an EXPECTED.md (migrate) or original/ + port/ (validate)"
